"""trace-tui refuses what it cannot show before taking over the screen: a
missing file, a file that is not a heapreel database, an empty trace (and
whether it was cut before its first allocation), a bad flag or time. Each
gives one line on stderr naming the problem, the shared exit code (1
unusable input, 2 usage, 4 not in the data) and no terminal control
sequences. Needs no terminal (and no tmux).
"""
import os
import sqlite3
import subprocess

import hrtest
import tuitest as tt

D = hrtest.tmpdir("tui-err")
TUI = hrtest.TRACE_TUI
GOOD = os.path.join(D, "phases.db")
tt.build_fixture(GOOD)


def refused(argv, want, code=None):
    p = subprocess.run([TUI] + argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = p.stderr.splitlines()
    assert p.returncode != 0, (argv, p)
    if code is not None:
        assert p.returncode == code, (argv, p.returncode, p.stderr)
    assert len(lines) >= 1 and want in lines[0], (argv, want, p.stderr)
    assert "\x1b" not in p.stdout + p.stderr, (argv, p.stdout)
    return lines[0]


missing = os.path.join(D, "missing.db")
line = refused([missing], missing, 1)
print("missing:", line)

text = os.path.join(D, "notes.txt")
with open(text, "w") as f:
    f.write("not a database\n" * 100)
print("text file:", refused([text], text, 1))

other = os.path.join(D, "other.db")
db = sqlite3.connect(other)
db.execute("CREATE TABLE t(x)")
db.commit()
db.close()
print("foreign database:", refused([other], other, 1))

half = os.path.join(D, "half.db")
tt.build_fixture(half)
db = sqlite3.connect(half)
db.execute("DELETE FROM meta WHERE key = 'complete'")
db.commit()
db.close()
print("half-written:", refused([half], half, 1))

empty = os.path.join(D, "empty.db")
tt.build_fixture(empty, empty=True)
line = refused([empty], empty, 1)
assert "no allocations" in line and "damaged" not in line, line
print("empty:", line)
cut = os.path.join(D, "cut.db")
tt.build_fixture(cut, empty=True, lacks={"damaged": 1})
line = refused([cut], cut, 1)
assert line.endswith("no allocations (pid %d): it was cut (damaged) before any was read"
                     % tt.PID), line
print("empty and cut:", line)

# The shared exit codes: 2 usage (a malformed value), 4 not in the data.
print("time outside:", refused(["--at", "99s", GOOD], "--at 99s", 4))
print("unknown mark:", refused(["--at", "mark:nope", GOOD], "mark:nope", 4))
print("malformed time:", refused(["--at", "soon", GOOD], "--at soon", 2))
print("unknown pid:", refused(["--pid", "7", GOOD], "7", 4))
print("bad pid:", refused(["--pid", "x", GOOD], "--pid x", 2))
# The one time grammar: a bare number is seconds, m and h are units
# (well formed and inside the trace: only the missing terminal is refused).
for spec in ["0.5", "0m", "0h", ".5"]:
    refused(["--at", spec, GOOD], "terminal", 1)
print("other forms:", refused(["--at", "5d", GOOD], "5d", 2))
print("bad flag:", refused(["--frobnicate", GOOD], "--frobnicate", 2))
print("no db:", refused([], "usage", 2))
# A good database without a terminal: told so, not a garbled screen.
print("no terminal:", refused([GOOD], "terminal", 1))
print("ok")
