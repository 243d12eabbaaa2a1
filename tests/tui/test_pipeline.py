"""trace-tui on a database from the real pipeline: tests/programs/entry
recorded with libheapreel.so and imported by trace-import. entry allocates 3
blocks from each of nine call sites (call_malloc: 1001 B, call_calloc: 2 x 501 B,
...) and then frees them all, so at the peak every block is live: `p` must
show call_malloc with 3003 bytes in 3 objects, the numbers at the cursor must be
trace-snap's, and google-pprof must read the exported .heap with the same
total and name call_calloc.
"""
import os
import re
import shutil
import subprocess

import hrtest
import tuitest as tt

PROG = hrtest.prog("entry")
for need in (hrtest.LIBREC, hrtest.TRACE_IMPORT, PROG):
    if not os.path.exists(need):
        hrtest.skip("%s is not built" % need)

D = hrtest.tmpdir("tui-pipe")
TRC = os.path.join(D, "entry.trc")
DB = os.path.join(D, "entry.db")
hrtest.record([PROG], TRC)
hrtest.run([hrtest.TRACE_IMPORT, TRC, DB])

snap_peak = os.path.join(D, "snap-peak.heap")
hrtest.run([hrtest.TRACE_SNAP, DB, "--peak", "-o", snap_peak])
with open(snap_peak) as f:
    m = re.match(r"heap profile:\s*(\d+):\s*(\d+)\s*\[\s*(\d+):", f.readline())
in_n, in_b, al_n = (int(m.group(i)) for i in (1, 2, 3))

exported = os.path.join(D, "tui-peak.heap")
with tt.Tmux([hrtest.TRACE_TUI, DB]) as tm:
    tt.wait_status(tm)
    tm.keys("p")
    st, scr = tt.wait_status(tm, lambda st: st[1] == in_b)
    assert (st[1], st[2], st[3]) == (in_b, in_n, al_n), (st, in_b, in_n, al_n)
    assert tt.row(scr, "call_malloc") == (3003, 3003, 3, 3), scr
    assert tt.row(scr, "call_calloc") == (3006, 3006, 3, 3), scr
    # Top-down: main calls every site; its cum is every block of them.
    tm.keys("t")
    _, scr = tm.wait(lambda scr: tt.row(scr, "call_malloc") and "call tree" in scr)
    assert tt.row(scr, "main")[1] >= 9319 * 3, scr
    assert tt.row(scr, "call_malloc") == (3003, 3003, 3, 3), scr
    tm.keys("t", "End")
    st, scr = tt.wait_status(tm, lambda st: st[1] != in_b)
    # All freed: the snapshot's flat view leaves out what has nothing live.
    assert tt.row(scr, "call_malloc") is None and tt.row(scr, "main"), scr
    tm.keys("p", "e", "C-u")
    tm.text(exported)
    tm.keys("Enter")
    tm.wait(r"wrote " + re.escape(exported))
print("peak on screen == trace-snap --peak:", in_b, "B", in_n, "objects")

pprof = shutil.which("google-pprof")
if not pprof:
    hrtest.skip("google-pprof is not installed")
p = subprocess.run([pprof, "--text", "--show_bytes", PROG, exported], capture_output=True, text=True)
assert p.returncode == 0, p.stderr
m = re.search(r"Total: (\d+) B", p.stdout)
assert m and int(m.group(1)) == in_b, p.stdout + p.stderr
for fn, nbytes in (("call_calloc", 3006), ("call_malloc", 3003)):
    assert re.search(r"^\s*%d\s.*\b%s$" % (nbytes, fn), p.stdout, re.M), p.stdout + p.stderr
print("google-pprof reads it: Total", in_b, "B, call_calloc 3006 B, call_malloc 3003 B")
print("ok")
