"""test_errors - trace-snap's time specs and its one-line errors with their
exit codes (README "Exit codes"): 1 database unusable (missing, not ours,
incomplete, newer schema, damaged), 2 bad command line or malformed time,
3 output not writable (exists without --force, is the database under any
name, missing directory, stdout full), 4 not in the database (pid, mark,
instant outside the trace). No answer ever replaces the database, nor an
existing file without --force, nor leaves a temporary file behind."""
import hashlib
import os
import pty
import resource
import shutil
import signal
import sqlite3
import subprocess

import hrtest
import fixture
from fixture import S

SNAP = hrtest.TRACE_SNAP
if not os.path.exists(SNAP):
    hrtest.skip("trace-snap not built")
tmp = hrtest.tmpdir("q-err")
DB = os.path.join(tmp, "a.db")
fixture.standard(DB)
checks = 0


def fails(args, code, text):
    global checks
    p = subprocess.run([SNAP] + args, capture_output=True, text=True)
    assert p.returncode == code, (args, p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trace-snap: ") and text in lines[0], \
        (args, p.stderr)
    assert p.stdout == "", (args, p.stdout)
    checks += 1


def total(args):
    out = hrtest.run([SNAP, DB] + args + ["--metric", "inuse_objects"]).stdout
    return int(out.splitlines()[0].split()[1])


# Time specs: exact decimal conversion, units, percent, marks, start/end.
for spec, objs in [("1s", 1), ("1.0s", 1), ("1.001s", 2), ("1001ms", 2), ("1001000us", 2),
                   ("1000999999ns", 1), ("1001000000ns", 2), ("0.5s", 0), ("10%", 1),
                   ("10.01%", 2), ("start", 0), ("end", 9), ("100%", 9),
                   ("mark:after-alloc", 12), ("mark:late", 9), ("3.0015s", 11),
                   # the one grammar: a bare number is seconds, m and h units
                   ("1.001", 2), ("1", 1), (".5", 0), ("3.0015", 11), ("0.0500250m", 11),
                   ("0.05m", total(["--at", "3s"])), ("0h", 0)]:
    got = total(["--at", spec])
    assert got == objs, (spec, got, objs)
    checks += 1

# Malformed times and windows: exit 2.
for spec in ["", "s", "1.s", "-1s", "+1s", "1.5sec", "1 s", "1e3s", "%", "5d", "1.2.3",
             "0x10s", "mark", "99999999999999999999s", "1.5%x"]:
    fails([DB, "--at", spec], 2, "malformed time")
fails([DB, "--growth", "2s"], 2, "malformed window")
fails([DB, "--growth", "2s..x"], 2, "malformed time 'x'")
fails([DB, "--steady", "5s..2s"], 2, "ends before it starts")
# Outside the trace, unknown mark or pid: exit 4.
fails([DB, "--at", "11s"], 4, "outside the trace of process 100 (0.000000000s..10.000000000s)")
fails([DB, "--at", "100.1%"], 4, "outside the trace")
fails([DB, "--at", "mark:nope"], 4, "no mark 'nope'")
fails([DB, "--at", "12h"], 4, "outside the trace")
fails([DB, "--at", "10.000000001"], 4, "outside the trace")
fails([DB, "--growth", "1s..20s"], 4, "outside the trace")
fails([DB, "--pid", "7", "--peak"], 4, "no process with pid 7")
# Bad flags: exit 2.
fails([DB], 2, "no question given")
fails([DB, "--at", "1s", "--peak"], 2, "only one question")
fails([DB, "--bogus"], 2, "unknown option '--bogus'")
fails([DB, "--at"], 2, "needs a value")
fails(["--peak"], 2, "no database given")
fails([DB, DB, "--peak"], 2, "exactly one database")
fails([DB, "--peak", "--by", "line"], 2, "--by takes function or stack")
fails([DB, "--peak", "--format", "png"], 2, "unknown format 'png'")
fails([DB, "--peak", "--metric", "bytes"], 2, "unknown metric 'bytes'")
fails([DB, "--peak", "--window", "1s..2s"], 2, "--window goes with --top")
fails([DB, "--peak", "--pid", "x1"], 2, "--pid takes a process id")
fails([DB, "--peak", "-o", os.path.join(tmp, "x.png")], 2, "cannot tell the format")
fails([DB, "--peak", "--force"], 2, "--force goes with -o FILE")
# Databases we must refuse: exit 1.
fails([os.path.join(tmp, "missing.db"), "--peak"], 1, "missing.db: No such file or directory")
junk = os.path.join(tmp, "junk.db")
with open(junk, "w") as fh:
    fh.write("this is not sqlite at all, just some text that is long enough " * 20)
fails([junk, "--peak"], 1, "junk.db: not a heapreel database")
other = os.path.join(tmp, "other.db")
c = sqlite3.connect(other)
c.execute("CREATE TABLE t(x)")
c.commit()
c.close()
fails([other, "--peak"], 1, "other.db: not a heapreel database")
for name, over, complete, text in [
        ("fmt.db", {"format": "other"}, True, "not a heapreel database"),
        ("new.db", {"schema_version": 5}, True, "written by a newer heapreel (schema version 5"),
        ("old.db", {"schema_version": 1}, True,
         "written by an older trace-import (schema version 1; this version reads 4): "
         "import the trace again"),
        ("half.db", {}, False, "incomplete database")]:
    path = os.path.join(tmp, name)
    f = fixture.Fixture(path)
    f.process(1)
    f.finish(meta_over=over, complete=complete)
    fails([path, "--peak"], 1, name + ": " + text)
# Damaged free_blocks: a cut varint, a varint over 64 bits (its tenth byte
# above 1), rows with more frees than meta says a row holds, a row missing
# (exit 1, reading failed, naming the row); no meta free_block (refused at
# open: exit 1 too).
cut = lambda d: d[:-1] + bytes([d[-1] | 0x80])
wide = lambda d: b"\x80" * 9 + b"\x02" + d[next(i for i, b in enumerate(d) if b < 0x80) + 1:]
for name, sql, code, text in [
        ("cut.db", "UPDATE free_blocks SET data = cut(data) WHERE id = 1", 1,
         "free_blocks row 1 is damaged"),
        ("wide.db", "UPDATE free_blocks SET data = wide(data) WHERE id = 1", 1,
         "free_blocks row 1 is damaged"),
        ("long.db", "UPDATE free_blocks SET data = data || data WHERE id = 1", 1,
         "free_blocks row 1 is damaged"),
        ("gap.db", "DELETE FROM free_blocks WHERE id = 1", 1, "free_blocks row 1 is damaged"),
        ("nometa.db", "DELETE FROM meta WHERE key = 'free_block'", 1,
         "damaged database (meta frees or free_block missing or wrong)")]:
    path = os.path.join(tmp, name)
    shutil.copy(DB, path)
    c = sqlite3.connect(path)
    c.create_function("cut", 1, cut)
    c.create_function("wide", 1, wide)
    c.execute(sql)
    c.commit()
    c.close()
    fails([path, "--at", "3002ms"], code, name + ": " + text)
# A failed write leaves nothing behind and says which file: exit 3.
fails([DB, "--peak", "-o", os.path.join(tmp, "no-such-dir", "x.heap")], 3,
      "no-such-dir/x.heap: No such file or directory")
with open("/dev/full", "w") as full:
    p = subprocess.run([SNAP, DB, "--peak"], stdout=full, stderr=subprocess.PIPE, text=True)
assert p.returncode == 3 and p.stderr == "trace-snap: writing to stdout failed\n", p
checks += 1


def digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


# An existing output is refused (exit 3, untouched) unless --force.
old = os.path.join(tmp, "old.heap")
with open(old, "w") as fh:
    fh.write("keep")
fails([DB, "--peak", "-o", old], 3, "old.heap: already exists; not overwritten")
with open(old) as fh:
    assert fh.read() == "keep"
hrtest.run([SNAP, DB, "--peak", "-o", old, "--force"])
with open(old) as fh:
    assert fh.readline().startswith("heap profile:")
assert os.stat(old).st_mode & 0o777 == 0o600
checks += 1
# The database itself, under any name, is refused even with --force.
same = digest(DB)
os.symlink(DB, os.path.join(tmp, "db-link.txt"))
os.link(DB, os.path.join(tmp, "db-hard.txt"))
os.mkdir(os.path.join(tmp, "sub"))
for out in [DB, os.path.join(tmp, "db-link.txt"), os.path.join(tmp, "db-hard.txt"),
            os.path.join(tmp, "sub", "..", "a.db")]:
    for force in [[], ["--force"]]:
        fails([DB, "--peak", "-o", out, "--format", "text"] + force, 3,
              "is the database being read")
    assert digest(DB) == same, out
    assert os.path.islink(os.path.join(tmp, "db-link.txt"))
# -o never writes through a planted symlink: refused without --force; with
# it, the link itself is replaced.
target = os.path.join(tmp, "victim")
with open(target, "w") as fh:
    fh.write("keep")
link = os.path.join(tmp, "link.heap")
os.symlink(target, link)
fails([DB, "--peak", "-o", link], 3, "link.heap: already exists")
hrtest.run([SNAP, DB, "--peak", "-o", link, "--force"])
with open(target) as fh:
    assert fh.read() == "keep"
assert not os.path.islink(link) and os.stat(link).st_mode & 0o777 == 0o600
assert not [n for n in os.listdir(tmp) if ".heap." in n or ".txt." in n], os.listdir(tmp)
checks += 1
# A file name of NAME_MAX (255) bytes is written: the temporary file's name
# beside it is cut to fit (it was FILE.XXXXXX, too long: exit 3).
longest = os.path.join(tmp, "x" * 251 + ".txt")
hrtest.run([SNAP, DB, "--peak", "-o", longest])
with open(longest) as fh:
    assert fh.read() == hrtest.run([SNAP, DB, "--peak"]).stdout
assert [n for n in os.listdir(tmp) if n.startswith("xxx")] == [os.path.basename(longest)], \
    os.listdir(tmp)
os.unlink(longest)
checks += 1
# The file size limit is a write error like a full disk: exit 3, one line,
# the existing file kept and no temporary file left (it was killed by
# SIGXFSZ, leaving PATH.XXXXXX).
for force in [[], ["--force"]]:
    out = os.path.join(tmp, "limited.txt")
    if force:
        with open(out, "w") as fh:
            fh.write("keep")
    p = subprocess.run([SNAP, DB, "--peak", "-o", out] + force, capture_output=True, text=True,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)))
    assert p.returncode == 3 and p.stderr == "trace-snap: %s: File too large\n" % out, p
    assert [n for n in os.listdir(tmp) if n.startswith("limited")] == \
        (["limited.txt"] if force else []), os.listdir(tmp)
    if force:
        with open(out) as fh:
            assert fh.read() == "keep"
        os.unlink(out)
    checks += 1
# SIGTERM while the temporary file exists (raised in fdopen, right after
# its creation, by a preloaded shim) takes effect once the answer is in
# place: nothing half-written, no temporary file (it used to stay).
SHIM = os.path.join(hrtest.REC_BUILD, "tests", "queries", "term_on_fdopen.so")
if hrtest.BUILD == hrtest.REC_BUILD and os.path.exists(SHIM):
    out = os.path.join(tmp, "termed.txt")
    p = subprocess.run([SNAP, DB, "--peak", "-o", out], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=SHIM))
    assert p.returncode == -signal.SIGTERM and p.stderr == "", p
    assert [n for n in os.listdir(tmp) if n.startswith("termed")] == ["termed.txt"], \
        os.listdir(tmp)
    with open(out) as fh:
        assert fh.read() == hrtest.run([SNAP, DB, "--peak"]).stdout
    checks += 1
else:
    print("note: no preloaded shim in a sanitizer build: SIGTERM case not run")
# pb.gz is binary: refused on a terminal (exit 2), written to a pipe.
master, slave = pty.openpty()
p = subprocess.run([SNAP, DB, "--peak", "--format", "pb.gz"], stdout=slave,
                   stderr=subprocess.PIPE, text=True)
os.close(slave)
os.close(master)
assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not written to a terminal" in \
    p.stderr, p
p = subprocess.run([SNAP, DB, "--peak", "--format", "pb.gz"], capture_output=True)
assert p.returncode == 0 and p.stdout[:2] == b"\x1f\x8b", p
checks += 1
print("ok: %d checks" % checks)
