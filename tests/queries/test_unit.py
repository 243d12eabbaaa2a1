"""test_unit - trace-snap's exact numbers on the hand-checked fixture
(fixture.standard): snapshots before/at/after checkpoints and exactly at
event instants, peak, growth, steady, leaks, temporary, top, by stack and
by function, the .heap layout and MAPPED_LIBRARIES; the default process
of a database of several, and --processes."""
import os
import sys

import hrtest
import fixture
from fixture import S, MS

SNAP = hrtest.TRACE_SNAP
if not os.path.exists(SNAP):
    hrtest.skip("trace-snap not built")
tmp = hrtest.tmpdir("q-unit")
DB = os.path.join(tmp, "a.db")
f, ST, AD = fixture.standard(DB)
checks = 0


def heap(*args):
    out = os.path.join(tmp, "o.heap")
    hrtest.run([SNAP, DB] + list(args) + ["-o", out, "--force"])
    assert oct(os.stat(out).st_mode & 0o777) == "0o600"
    with open(out) as fh:
        return fixture.parse_heap(fh.read())


def expect(args, want):
    """want: {stack name: [in_n, in_b, al_n, al_b]} (absent = no line)."""
    global checks
    typ, rows, maps = heap(*args)
    assert typ == "heapprofile", typ
    got = {name: rows.get(AD[name]) for name in AD}
    exp = {name: want.get(name) for name in AD}
    assert got == exp, "%s:\n got %s\nwant %s" % (args, got, exp)
    checks += 1
    return rows, maps


# Snapshots: before anything, between events, at checkpoints, at instants.
expect(["--at", "0s"], {})
expect(["--at", "1s"], {"small": [1, 16, 1, 16]})            # alloc at t live at t
expect(["--at", "1.5s"], {"small": [10, 160, 10, 160]})
expect(["--at", "2s"], {"small": [10, 160, 10, 160], "big": [1, 4096, 1, 4096]})  # = ckpt
expect(["--at", "2001ms"], {"small": [10, 160, 10, 160], "big": [2, 8192, 2, 8192]})
expect(["--at", "3s"], {"small": [9, 144, 10, 160], "big": [3, 12288, 3, 12288]})  # free at t gone
expect(["--at", "3002ms"], {"small": [7, 112, 10, 160], "big": [3, 12288, 3, 12288]})
expect(["--at", "3999999999ns"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288]})
expect(["--at", "4s"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                        "mid": [1, 4096, 1, 4096]})
expect(["--at", "4000000001ns"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                                  "mid": [2, 8192, 2, 8192]})
expect(["--at", "5000000002ns"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                                  "mid": [2, 8192, 2, 8192], "inl": [3, 300, 3, 300]})
expect(["--at", "5.5s"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                          "mid": [2, 8192, 2, 8192], "inl": [3, 300, 4, 400]})
expect(["--at", "6s"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                        "mid": [1, 4096, 2, 8192], "inl": [0, 0, 4, 400]})
expect(["--at", "70%"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                         "mid": [1, 4096, 2, 8192], "inl": [0, 0, 4, 400]})
expect(["--at", "mark:after-alloc"], {"small": [9, 144, 10, 160], "big": [3, 12288, 3, 12288]})
expect(["--at", "end"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                         "mid": [1, 4096, 2, 8192], "inl": [0, 0, 4, 400]})
# Every instant of an event and 1 ns on each side against brute force.
instants = set()
for a in f.allocs:
    for t in (a["t_alloc"], a["t_free"]):
        if t is not None:
            instants.update((t - 1, t, t + 1))
name_of = {v: k for k, v in ST.items()}
for t in sorted(instants):
    want = {name_of[s]: v for s, v in f.state(100, t).items()}
    expect(["--at", "%dns" % t], want)

# Peak: 5 s + 3 ns, 20960 B in 14 objects.
rows, maps = expect(["--peak"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                                 "mid": [2, 8192, 2, 8192], "inl": [4, 400, 4, 400]})
assert maps == ("400000-402000 r-xp 00000000 00:00 0 /opt/app/bin/app\n"
                "7f0000000000-7f0000100000 r-xp 00026000 00:00 0 "
                "/usr/lib/x86_64-linux-gnu/libc.so.6\n"), repr(maps)
# Growth 2s..6s: pprof --base semantics, negative inuse cut to 0 in .heap.
expect(["--growth", "2s..6s"], {"big": [2, 8192, 2, 8192],
                                "mid": [1, 4096, 2, 8192], "inl": [0, 0, 4, 400]})
# ... and said on stderr: the stack that shrank (small, -80 B) is left out.
p = hrtest.run([SNAP, DB, "--growth", "2s..6s", "--format", "heap"])
assert p.stderr == ("trace-snap: warning: .heap has no negative values: 1 stack that shrank "
                    "by 80 bytes in all is left out (--format text or pb.gz shows them)\n"), \
    p.stderr
# ... and so does folded, in the unit of its metric.
p = hrtest.run([SNAP, DB, "--growth", "2s..6s", "--format", "folded", "--metric",
                "inuse_objects"])
assert p.stderr == ("trace-snap: warning: folded has no negative values: 1 stack that shrank "
                    "by 5 objects in all is left out (--format text or pb.gz shows them)\n"), \
    p.stderr
for q in [["--growth", "2s..6s", "--format", "text"], ["--growth", "1s..6s", "--format", "heap"],
          ["--peak", "--format", "heap"]]:
    p = hrtest.run([SNAP, DB] + q)
    assert p.stderr == "", (q, p.stderr)
checks += 1
# Steady 3s..7s: made in (3 s, 7 s] and live at 7 s.
expect(["--steady", "3s..7s"], {"mid": [1, 4096, 2, 8192], "inl": [0, 0, 4, 400]})
expect(["--steady", "2s..2001ms"], {"big": [1, 4096, 1, 4096]})   # (T1, T2]
expect(["--leaks"], {"small": [5, 80, 10, 160], "big": [3, 12288, 3, 12288],
                     "mid": [1, 4096, 2, 8192]})
expect(["--temporary"], {"inl": [4, 400, 4, 400]})
expect(["--top"], {"small": [10, 160, 10, 160], "big": [3, 12288, 3, 12288],
                   "mid": [2, 8192, 2, 8192], "inl": [4, 400, 4, 400]})
expect(["--top", "--window", "2s..4s"], {"big": [3, 12288, 3, 12288], "mid": [1, 4096, 1, 4096]})
expect(["--top", "--window", "2001ms..4s"], {"big": [2, 8192, 2, 8192], "mid": [1, 4096, 1, 4096]})

# Text table (pprof --text layout, a header row, human sizes beside the
# exact bytes) at the peak: the whole output, as wide as its values.
out = hrtest.run([SNAP, DB, "--peak"]).stdout
assert out == (
    "Total: 20960 B (20.5 KiB)\n"
    " flat    human flat%   sum%   cum    human   cum%  function\n"
    "20480 20.0 KiB 97.7%  97.7% 20480 20.0 KiB  97.7%  alloc_big\n"
    "  400    400 B  1.9%  99.6%   400    400 B   1.9%  helper\n"
    "   80     80 B  0.4% 100.0%    80     80 B   0.4%  alloc_small\n"
    "    0      0 B  0.0% 100.0% 20960 20.5 KiB 100.0%  _start\n"
    "    0      0 B  0.0% 100.0% 20960 20.5 KiB 100.0%  main\n"
    "    0      0 B  0.0% 100.0%  8192  8.0 KiB  39.1%  mid\n"
    "    0      0 B  0.0% 100.0%   400    400 B   1.9%  outer\n"), out
checks += 1
out = hrtest.run([SNAP, DB, "--peak", "--metric", "inuse_objects"]).stdout.splitlines()
assert out[:3] == ["Total: 14 objects", "flat flat%   sum% cum   cum%  function",
                   "   5 35.7%  35.7%   5  35.7%  alloc_big"], out
out = hrtest.run([SNAP, DB, "--top", "--by", "stack", "--metric", "alloc_objects"]).stdout
assert out.splitlines()[:3] == [
    "Total: 19 objects, 21040 B (20.5 KiB)",
    "objects objects% bytes    human  stack, leaf first",
    "     10    52.6%   160    160 B  alloc_small <- main <- _start"], out
assert "      3    15.8% 12288 12.0 KiB  alloc_big <- main <- _start\n" in out, out
out = hrtest.run([SNAP, DB, "--top", "--by", "stack"]).stdout
assert out.splitlines()[:3] == [
    "Total: 21040 B (20.5 KiB), 19 objects",
    "bytes    human bytes% objects  stack, leaf first",
    "12288 12.0 KiB  58.4%       3  alloc_big <- main <- _start"], out
checks += 1
# Growth in text keeps the negative stack, as pprof --base shows it.
out = hrtest.run([SNAP, DB, "--growth", "2s..6s"]).stdout.splitlines()
assert out[0] == "Total: 12208 B (11.9 KiB)", out
assert out[-1] == "  -80    -80 B  -0.7% 100.0%   -80    -80 B  -0.7%  alloc_small", out
checks += 1
# Folded: root first, inline frames as names, zero lines left out.
out = hrtest.run([SNAP, DB, "--at", "6s", "--format", "folded"]).stdout
assert sorted(out.splitlines()) == sorted([
    "_start;main;alloc_big 12288", "_start;main;mid;alloc_big 4096",
    "_start;main;alloc_small 80"]), out
out = hrtest.run([SNAP, DB, "--temporary", "--format", "folded"]).stdout
assert out == "_start;main;outer;helper 400\n", out
checks += 1
# -o with .txt / .folded extensions picks the format.
o = os.path.join(tmp, "x.folded")
hrtest.run([SNAP, DB, "--leaks", "-o", o])
with open(o) as fh:
    assert sum(int(l.rsplit(" ", 1)[1]) for l in fh) == 16464
o = os.path.join(tmp, "x.txt")
hrtest.run([SNAP, DB, "--leaks", "-o", o])
with open(o) as fh:
    assert fh.readline() == "Total: 16464 B (16.1 KiB)\n"
checks += 1
# Several processes: without --pid the questions are about the run's
# program, which the importer names in meta.peak_pid (here the app pid 100
# exec'd: key 10000100), not the first process (the wrapper) nor the other
# process with a larger peak; --processes lists them all and stars it.
multi = os.path.join(tmp, "m.db")
m = fixture.Fixture(multi)
m.process(100, exe="/opt/app/bin/wrapper")
m.process(10000100, exe="/opt/app/bin/app", t_start=S)
m.process(200, exe="/opt/app/bin/other", t_start=2 * S)
leaf = m.stack((0x401010, "alloc_small", "app.c", 3, 0))
for pid, size in ((100, 16), (10000100, 4096), (200, 100000)):
    m.alloc(pid, 3 * S, size, leaf)
m.finish(meta_over={"peak_pid": 10000100})
for args, total in (([], 4096), (["--pid", "100"], 16), (["--pid", "200"], 100000)):
    out = hrtest.run([SNAP, multi, "--peak"] + args).stdout
    assert out.startswith("Total: %d B (" % total), (args, out)
out = hrtest.run([SNAP, multi, "--processes"]).stdout
assert out == (
    "         pid       ppid    start (s)   peak (bytes)      human  executable\n"
    "         100          1     0.000000             16       16 B  /opt/app/bin/wrapper\n"
    "*   10000100          1     1.000000           4096    4.0 KiB  /opt/app/bin/app\n"
    "         200          1     2.000000         100000   97.7 KiB  /opt/app/bin/other\n"
    "* the run's program, which the other questions are about without --pid\n"), out
p = hrtest.run([SNAP, multi, "--processes", "--pid", "100"], check=False)
assert p.returncode == 2 and "no -o, --format or --pid" in p.stderr, p.stderr
checks += 1
# --lines: functions told apart by file:line in text and folded.
out = hrtest.run([SNAP, DB, "--peak", "--lines"]).stdout.splitlines()
assert [l.split("%", 4)[-1].strip() for l in out[2:]] == [
    "alloc_big app.c:5", "helper h.h:2", "alloc_small app.c:3", "_start start.S:1",
    "main app.c:10", "mid app.c:7", "outer app.c:20"], out
out = hrtest.run([SNAP, DB, "--peak", "--lines", "--format", "folded"]).stdout
assert out == ("_start start.S:1;main app.c:10;alloc_big app.c:5 12288\n"
               "_start start.S:1;main app.c:10;mid app.c:7;alloc_big app.c:5 8192\n"
               "_start start.S:1;main app.c:10;outer app.c:20;helper h.h:2 400\n"
               "_start start.S:1;main app.c:10;alloc_small app.c:3 80\n"), out
out = hrtest.run([SNAP, DB, "--peak", "--lines", "--by", "stack"]).stdout.splitlines()
assert out[5].endswith("  alloc_small app.c:3 <- main app.c:10 <- _start start.S:1"), out
p = hrtest.run([SNAP, DB, "--peak", "--lines", "--format", "heap"], check=False)
assert p.returncode == 2 and "--lines goes with the text, folded and svg" in p.stderr, p.stderr
checks += 1
# C++: stacks start at the caller of the global operator new / new[] (every
# variant, also new[] calling new, also inlined into it), as they do at
# malloc's caller; a class's own operator new is the program's and stays,
# and a stack of nothing but operator new keeps its frames.
cxx = os.path.join(tmp, "cxx.db")
c = fixture.Fixture(cxx)
c.process(100)
main = (0x401f00, "main", "app.cc", 30, 0)
NEW = "operator new(unsigned long)"
stacks = [
    ((0x7f10, NEW), (0x401010, "make_a()", "app.cc", 3, 0), main),
    ((0x7f10, NEW), (0x7f40, "operator new[](unsigned long)"),
     (0x401020, "make_b()", "app.cc", 5, 0), main),
    ((0x7f50, "operator new(unsigned long, std::nothrow_t const&)"),
     (0x401030, "make_c()", "app.cc", 7, 0), main),
    ((0x7f60, "operator new(unsigned long, std::align_val_t)"),
     (0x401040, "make_d()", "app.cc", 9, 0), main),
    ((0x7f70, "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)"),
     (0x401050, "make_e()", "app.cc", 11, 0), main),
    ((0x7f80, "std::__new_helper", "new_op.cc", 2, 1), (0x7f80, NEW, "new_op.cc", 9, 0),
     (0x401060, "make_f()", "app.cc", 13, 0), main),
    ((0x401070, "Foo::operator new(unsigned long)"), main),
    ((0x7f10, NEW),),
]
for i, st in enumerate(stacks):
    c.alloc(100, S + i, 1 << i, c.stack(*st))
c.finish()
out = hrtest.run([SNAP, cxx, "--peak", "--format", "folded"]).stdout
assert sorted(out.splitlines()) == [
    "main;Foo::operator new(unsigned long) 64", "main;make_a() 1", "main;make_b() 2",
    "main;make_c() 4", "main;make_d() 8", "main;make_e() 16", "main;make_f() 32",
    NEW + " 128"], out
p = hrtest.run([SNAP, cxx, "--peak", "--format", "heap"])
leaves = sorted(l.split("@")[1].split()[0] for l in p.stdout.splitlines()[1:] if "@" in l)
assert leaves == ["0x40100f", "0x40101f", "0x40102f", "0x40103f", "0x40104f", "0x40105f",
                  "0x40106f", "0x7f0f"], leaves
checks += 1
# Human sizes: binary units rounded to a tenth, the next unit once the
# rounded value reaches 1024 (1048575 B is 1023.999 KiB: 1.0 MiB); a long
# name is never cut, and a row of typical values fits 80 columns.
hum = os.path.join(tmp, "hum.db")
h = fixture.Fixture(hum)
h.process(100)
LONG = "std::vector<std::pair<std::string, int>>::_M_realloc_insert<int const&>"
sizes = {"b1023": 1023, "k1": 1024, "k1_5": 1536, "k1023_9": 1048524, "m1": 1048575,
         "g5_5": 11 << 29, LONG: 123456789}
for i, (name, size) in enumerate(sizes.items()):
    h.alloc(100, S + i, size, h.stack((0x401000 + 0x10 * i, name), (0x402000, "main")))
h.finish()
out = hrtest.run([SNAP, hum, "--peak", "--by", "stack"]).stdout
assert out == (
    "Total: 6031137503 B (5.6 GiB), 7 objects\n"
    "     bytes      human bytes% objects  stack, leaf first\n"
    "5905580032    5.5 GiB  97.9%       1  g5_5 <- main\n"
    " 123456789  117.7 MiB   2.0%       1  " + LONG + " <- main\n"
    "   1048575    1.0 MiB   0.0%       1  m1 <- main\n"
    "   1048524 1023.9 KiB   0.0%       1  k1023_9 <- main\n"
    "      1536    1.5 KiB   0.0%       1  k1_5 <- main\n"
    "      1024    1.0 KiB   0.0%       1  k1 <- main\n"
    "      1023     1023 B   0.0%       1  b1023 <- main\n"), out
out = hrtest.run([SNAP, hum, "--peak"]).stdout.splitlines()
assert out[1] == "      flat      human flat%   sum%        cum      human   cum%  function", out
assert all(len(l) <= 80 for l in out if LONG not in l), out
assert [l for l in out if l.endswith("  " + LONG)], out
checks += 1
print("ok: %d checks" % checks)
