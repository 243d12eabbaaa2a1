"""test_pprof - the .pb.gz writer: decoded here field by field (string
table, sample types, values, locations at ip-1 with inlined lines
innermost first, functions, mappings main binary first), then read by
`go tool pprof -top` when Go is installed, with names and exact numbers;
a sampled profile's values are unbiased and its period is the sampling
period."""
import gzip
import os
import shutil
import subprocess

import hrtest
import fixture

SNAP = hrtest.TRACE_SNAP
if not os.path.exists(SNAP):
    hrtest.skip("trace-snap not built")
tmp = hrtest.tmpdir("q-pb")
DB = os.path.join(tmp, "a.db")
fixture.standard(DB)
PB = os.path.join(tmp, "peak.pb.gz")
hrtest.run([SNAP, DB, "--peak", "-o", PB])
checks = 0


fields, packed, one = fixture.pb_fields, fixture.pb_packed, fixture.pb_one


with open(PB, "rb") as fh:
    prof = gzip.decompress(fh.read())
top = fields(prof)
strings = [v.decode() for f, v in top if f == 6]
assert strings[0] == "", strings[:3]
types = [(strings[one(v, 1)], strings[one(v, 2)]) for f, v in top if f == 1]
assert types == [("alloc_objects", "count"), ("alloc_space", "bytes"),
                 ("inuse_objects", "count"), ("inuse_space", "bytes")], types
assert strings[one(prof, 14)] == "inuse_space" and one(prof, 12) == 1
checks += 3
funcs = {one(v, 1): (strings[one(v, 2)], strings[one(v, 4)]) for f, v in top if f == 5}
locs = {}
for f, v in top:
    if f == 4:
        lines = [(funcs[one(l, 1)][0], one(l, 2)) for n, l in fields(v) if n == 4]
        locs[one(v, 1)] = (one(v, 3), one(v, 2), lines)
maps = [(one(v, 1), strings[one(v, 5)], one(v, 2), one(v, 7)) for f, v in top if f == 3]
assert maps == [(1, fixture.EXE, 0x400000, 1),
                (2, "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000, 1)], maps
samples = {}
for f, v in top:
    if f == 2:
        ids = packed(one(v, 1, b""))
        key = tuple(locs[i][2][0][0] if len(locs[i][2]) == 1 else
                    "+".join(n for n, _ in locs[i][2]) for i in ids)
        samples[key] = packed(one(v, 2))
        for i in ids:
            addr, mid, _ = locs[i]
            assert mid == 1 and 0x400000 <= addr + 1 < 0x402000, locs[i]
assert samples == {
    ("alloc_small", "main", "_start"): [10, 160, 5, 80],
    ("alloc_big", "main", "_start"): [3, 12288, 3, 12288],
    ("alloc_big", "mid", "main", "_start"): [2, 8192, 2, 8192],
    ("helper+outer", "main", "_start"): [4, 400, 4, 400]}, samples
# Location addresses are return address - 1; the inlined chain is one
# location with helper (innermost) first.
byaddr = {a: l for a, m, l in locs.values()}
assert byaddr[0x401300 - 1] == [("helper", 2), ("outer", 20)], byaddr
assert byaddr[0x401010 - 1] == [("alloc_small", 3)], byaddr
assert funcs and ("helper", "h.h") in funcs.values()
checks += 4

go = shutil.which("go")
if go:
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
               GOPATH=os.path.join(tmp, "gopath"), GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    for idx, unit, want in [("inuse_space", "-unit=B", {"alloc_big": ["20480B", "20480B"],
                                       "helper": ["400B", "400B"],
                                       "alloc_small": ["80B", "80B"], "mid": ["0", "8192B"],
                                       "main": ["0", "20960B"]}),
                      ("alloc_objects", "-unit=minimum", {"alloc_small": ["10", "10"], "alloc_big": ["5", "5"],
                                         "helper": ["4", "4"], "main": ["0", "19"]})]:
        p = subprocess.run([go, "tool", "pprof", "-top", "-nodefraction=0", unit,
                            "-sample_index=" + idx, PB],
                           capture_output=True, text=True, env=env, timeout=hrtest.limit(120))
        assert p.returncode == 0, p.stderr
        # flat flat% sum% cum cum% name [(inline)]
        rows = {l.split()[5]: [l.split()[0], l.split()[3]] for l in p.stdout.splitlines()
                if len(l.split()) >= 6 and l.split()[5] in want}
        assert rows == want, (idx, p.stdout)
        checks += 1
else:
    print("note: go not installed, pprof reading not checked")

# Sampled process: values unbiased per stack (§1.5), period = the sampling period.
P = 524288
SDB = os.path.join(tmp, "s.db")
g = fixture.Fixture(SDB)
g.process(1, sample_period=P)
s1 = g.stack((0x401000, "tiny"), (0x401100, "main"))
for i in range(5):
    g.alloc(1, fixture.S + i, 16, s1)
g.finish()
SPB = os.path.join(tmp, "s.pb.gz")
hrtest.run([SNAP, SDB, "--at", "end", "-o", SPB])
with open(SPB, "rb") as fh:
    prof = gzip.decompress(fh.read())
assert one(prof, 12) == P
vals = [packed(one(v, 2)) for f, v in fields(prof) if f == 2]
assert vals == [[163842, 2621480, 163842, 2621480]], vals     # heap-formats.md §1.5 check
checks += 2
print("ok: %d checks" % checks)
