"""trace-tui's thread filter and size histogram (issue 22), at 80x24 and
60x20: `T` lists the process's threads with their names and allocation
counts, Space picks, Enter narrows the status line, the main pane, the chart
and the peak to them (the status line names the filter, the title gives
their own peak, `p` goes there, the chart has only their blocks); `h` shows the allocation sizes of the
view, of the blocks live at the cursor or of a window's allocations, by
powers of two with the most frequent sizes; picking none shows all threads
again; the help lists both keys. Every line fits the width, the status
line whole.

The fixture is tuitest's, with the steady phase's allocations (stack
SMALL_STEADY, and no other) made by a second thread, "steady-worker".
"""
import os
import re
import sqlite3

import hrtest
import tuitest as tt
from tuitest import S, MIB

D = hrtest.tmpdir("tui-threads")
DB = os.path.join(D, "thr.db")
tt.build_fixture(DB)
WORKER = tt.PID + 1
c = sqlite3.connect(DB)
c.execute("UPDATE allocations SET tid = ? WHERE stack_id = ?", (WORKER, tt.SMALL_STEADY))
c.execute("INSERT INTO threads(pid, tid, name, t_first, t_last) VALUES(?,?,?,?,?)",
          (tt.PID, WORKER, "steady-worker", 5 * S, 7500 * S // 1000))
c.commit()
c.close()
STEADY = {tt.SMALL_STEADY}
T65 = 6500 * S // 1000       # the worker's own peak: 2 MiB + 1000 B live


def fits(scr, w):
    lines = scr.splitlines()
    assert all(len(l) <= w for l in lines), scr
    status = lines[tt.STATUS_ROW(scr)]
    assert status.rstrip().endswith("]"), status     # whole, not cut
    return lines


def chart_before_4s(scr, w):
    """The chart's bar columns before 4 s (screen.c: 10 columns of labels),
    every row joined: the worker allocated nothing before 5 s."""
    rows = scr.splitlines()[1:tt.STATUS_ROW(scr) - 2]
    return "".join(l[10:10 + 4 * (w - 10) // 10 - 1] for l in rows)


def hist_rows(scr):
    """The histogram's rows: {"lo..hi": (objects, bytes as shown)}, and its
    line of most frequent sizes."""
    rows, top = {}, None
    for l in scr.splitlines():
        m = re.match(r"\s*(\d+\.\.\d+)\s+(\d+)\s+([\d.]+ \S+)\s+#+$", l)
        if m:
            rows[m.group(1)] = (int(m.group(2)), m.group(3))
        elif l.startswith("most frequent:"):
            top = l
    return rows, top


def sizes(tm, w, what, want_rows, want_top):
    """Waits for the histogram of `what` (a regex) and checks it."""
    _, scr = tm.wait(what)
    fits(scr, w)
    rows, top = hist_rows(scr)
    assert rows == want_rows, scr
    assert want_top is None or top == want_top, top
    return scr


def check(w, h):
    with tt.Tmux([hrtest.TRACE_TUI, "--at", "6s", DB], width=w, height=h) as tm:
        _, scr = tt.wait_status(tm, lambda st: st[0] == "6")
        assert "\u2588" in chart_before_4s(scr, w), scr
        tm.keys("T")
        _, scr = tm.wait(r"^threads \(Space: pick, Enter: show; none: all\)")
        lines = fits(scr, w)
        top = next(i for i, l in enumerate(lines) if l.startswith("threads (Space"))
        assert lines[top + 1:top + 3] == [
            "[ ]     4242         7 allocs from 1s       phases",
            "[ ]     4243         6 allocs from 5s       steady-worker"], lines[top:top + 3]
        tm.keys("Down", " ")
        tm.wait(r"^\[x\]     4243 ")
        tm.keys("Enter")
        st, scr = tt.wait_status(tm, lambda st: "T4243" in st[4] or "thread 4243" in st[4])
        assert st[0] == "6" and st[1:4] == tt.live_at(6 * S, STEADY), st
        lines = fits(scr, w)
        assert "peak 2.00 MiB at 6.5s" in lines[0], lines[0]
        assert chart_before_4s(scr, w).strip() == "", scr
        assert "1 thread of 2" in lines[-1], lines[-1]
        assert tt.names(scr)[0] == "alloc_small", scr
        tm.keys("p")
        st, scr = tt.wait_status(tm, lambda st: st[0] == "6.5")
        assert st[1:4] == tt.live_at(T65, STEADY), st

        # an export proposes a name saying whose blocks it holds
        tm.keys("e")
        tm.wait(r"^export \(\.heap \.pb\.gz \.folded \.txt\): thr-6\.5s-tid4243\.heap\s*$")
        tm.keys("Escape")
        # the sizes of the blocks live at the cursor, of the worker only
        tm.keys("h")
        sizes(tm, w, r"sizes live at 6\.5s",
              {"512..1023": (1, "1000 B"), "2097152..4194303": (1, "2.00 MiB")},
              "most frequent: 1000 B x1, 2.00 MiB x1")
        # a window: the sizes of the allocations made in it
        tm.keys("Home", "[", "End", "]")
        sizes(tm, w, r"sizes made in 0s\.\.10s",
              {"512..1023": (5, "4.88 KiB"), "2097152..4194303": (1, "2.00 MiB")},
              "most frequent: 1000 B x5, 2.00 MiB x1")

        # none picked: every thread again, the histogram of all of them
        tm.keys("c", "T", " ", "Enter")
        st, scr = tt.wait_status(tm, lambda st: "T4243" not in st[4] and "thread" not in st[4]
                                 and st[0] == "10")
        assert st[1:4] == tt.live_at(10 * S), st
        assert "all threads" in scr.splitlines()[-1], scr
        scr = sizes(tm, w, r"sizes live at 10s",
                    {"64..127": (3, "300 B"), "512..1023": (1, "1000 B"),
                     "1048576..2097151": (2, "2.00 MiB")}, None)
        assert "peak 6.00 MiB at 6s" in scr.splitlines()[0], scr
        # the help lists both keys
        tm.keys("?", "NPage")
        _, scr = tm.wait(r"^  h\s+the view's allocation sizes$")
        assert re.search(r"^  T\s+threads: Space picks, Enter shows$", scr, re.M), scr


check(80, 24)
print("80x24 ok")
check(60, 20)
print("60x20 ok")
