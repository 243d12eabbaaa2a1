"""trace-tui on the fixture database (tuitest.py): what a person sees.

The chart is drawn, the cursor keys, `p` and `m`/`M` land on the known
instants, the numbers at the cursor and the table rows are exact, the tree
and the stack pane name the known functions with file:line, `[`/`]` show the
growth and the steady window, `s` sorts, `/` finds, `?` helps, a resize and
an 80x24 terminal work, colours follow NO_COLOR, a terminal without UTF-8
gets ASCII bars, --bench-steps reports its figures, and the title names
the process shown when the database holds several, which P cycles through.
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import hrtest
import tuitest as tt
from tuitest import MIB, S

D = hrtest.tmpdir("tui-view")
DB = os.path.join(D, "phases.db")
tt.build_fixture(DB)
TUI = hrtest.TRACE_TUI


def at(tm, t_str, t_ns):
    """Waits until the cursor is at t_str and checks the exact numbers there."""
    st, scr = tt.wait_status(tm, lambda st: st[0] == t_str)
    assert st[1:4] == tt.live_at(t_ns), (t_str, st, tt.live_at(t_ns))
    return st, scr


def chart_rows(scr):
    lines = scr.splitlines()
    end = next(i for i, l in enumerate(lines) if tt.STATUS.search(l))
    return lines[1:end]


def test_snapshot_and_moves():
    with tt.Tmux([TUI, "--at", "3s", DB]) as tm:
        st, scr = at(tm, "3", 3 * S)
        assert st[4] == "snapshot, flat, by bytes", st
        # The chart: bars, a y axis in binary units, an x axis in seconds.
        rows = chart_rows(scr)
        assert any("\u2588" in l for l in rows), scr
        assert rows[0].strip().startswith("8.00 MiB"), rows[0]
        assert "0 B" in "".join(rows), scr
        assert re.search(r"^\s+0s\b.*\b10s\s*$", rows[-1]), rows[-1]
        axis = rows[-2]
        assert axis.count("P") == 1 and axis.count("M") == 2 and axis.count("^") == 1, axis
        # The table: exact bytes, objects and allocations per function.
        assert tt.row(scr, "alloc_big") == (3 * MIB, 3 * MIB, 3, 3), scr
        assert tt.row(scr, "alloc_small") == (200, 200, 2, 2), scr
        assert tt.row(scr, "grow_phase") == (0, 3 * MIB + 200, 0, 0), scr
        assert tt.row(scr, "main") == (0, 3 * MIB + 200, 0, 0), scr

        tm.keys("p")
        st, scr = at(tm, "6", tt.PEAK_T)
        assert st[1] == tt.PEAK_BYTES and st[2] == tt.PEAK_OBJECTS, st
        axis = chart_rows(scr)[-2]
        assert "P" not in axis and axis.count("^") == 1, axis   # cursor drawn over the peak
        assert tt.row(scr, "alloc_small") == (2 * MIB + 300, 2 * MIB + 300, 4, 6), scr

        tm.keys("m")
        at(tm, "8.5", 8500 * S // 1000)
        tm.wait(r"mark late")
        tm.keys("M")
        at(tm, "4.8", 4800 * S // 1000)
        tm.wait(r"mark steady")
        tm.keys("M")
        tm.wait(r"no previous mark")
        tm.keys("Home")
        at(tm, "0", 0)
        tm.wait(r"nothing live")
        tm.keys("End")
        st, scr = at(tm, "10", tt.T_END)
        assert tt.row(scr, "alloc_big") == (2 * MIB, 2 * MIB, 2, 4), scr
        # Fine and coarse steps move the cursor back and the numbers follow.
        tm.keys("Left")
        st, _ = tt.wait_status(tm, lambda st: st[0] != "10")
        t1 = float(st[0])
        assert 9.8 < t1 < 10, st
        tm.keys("S-Left")
        st, _ = tt.wait_status(tm, lambda st: float(st[0]) < t1)
        t2 = float(st[0])
        assert 8.9 < t2 < 9.2, st
        assert st[1:4] == tt.live_at(round(t2 * S)), st
        tm.keys("PPage")
        st, _ = tt.wait_status(tm, lambda st: float(st[0]) < t2)
        assert 7.9 < float(st[0]) < 8.2, st
        tm.keys("NPage")
        tt.wait_status(tm, lambda st: float(st[0]) == t2)
        tm.keys("q")
        tm.wait(lambda scr: tm.dead())


def test_window_growth_and_steady():
    with tt.Tmux([TUI, "--at", "mark:steady", DB]) as tm:
        at(tm, "4.8", 4800 * S // 1000)
        tm.keys("[", "m", "]")
        st, scr = tt.wait_status(tm, lambda st: st[4].startswith("growth"))
        assert st[4] == "growth 4.8s..8.5s, flat, by bytes", st
        assert st[1:4] == tt.live_at(8500 * S // 1000), st      # the cursor's numbers
        assert tt.row(scr, "alloc_small") == (1000, 1000, 1, 6), scr
        assert tt.row(scr, "steady_phase") == (0, 1000, 0, 0), scr
        assert tt.row(scr, "alloc_big") is None, scr
        tm.keys("w")
        st, scr = tt.wait_status(tm, lambda st: st[4].startswith("steady"))
        assert tt.row(scr, "alloc_small") == (1000, 1000, 1, 6), scr
        # Growth from the start to the peak is the peak's live set.
        tm.keys("g", "c", "Home", "[", "p", "]")
        st, scr = tt.wait_status(tm, lambda st: st[4].startswith("growth 0s..6s"))
        assert tt.row(scr, "alloc_big") == (4 * MIB, 4 * MIB, 4, 4), scr
        assert tt.row(scr, "alloc_small") == (2 * MIB + 300, 2 * MIB + 300, 4, 6), scr
        axis = chart_rows(scr)[-2]
        assert "=" in axis, axis
        # The window stays put while the cursor moves.
        tm.keys("End")
        st, scr = at(tm, "10", tt.T_END)
        assert tt.row(scr, "alloc_big") == (4 * MIB, 4 * MIB, 4, 4), scr
        tm.keys("c")
        st, scr = tt.wait_status(tm, lambda st: st[4].startswith("snapshot"))
        assert tt.row(scr, "alloc_big") == (2 * MIB, 2 * MIB, 2, 4), scr


def test_tree_search_stack_sort():
    with tt.Tmux([TUI, "--at", "3s", DB]) as tm:
        at(tm, "3", 3 * S)
        tm.keys("t")
        st, scr = tt.wait_status(tm, lambda st: ", tree," in st[4])
        # _start -> main -> grow_phase open by themselves (only children).
        assert tt.row(scr, "_start") == (0, 3 * MIB + 200, 5, 5), scr
        assert tt.row(scr, "grow_phase") == (0, 3 * MIB + 200, 5, 5), scr
        assert tt.row(scr, "alloc_big") == (3 * MIB, 3 * MIB, 3, 3), scr
        names = tt.names(scr)
        assert names[:5] == ["_start", "main", "grow_phase", "alloc_big", "alloc_small"], names
        # Collapse grow_phase: its callees disappear; expand again.
        tm.keys("Down", "Down", "Enter")
        tm.wait(lambda scr: tt.row(scr, "alloc_big") is None)
        tm.keys("Enter")
        tm.wait(lambda scr: tt.row(scr, "alloc_big") is not None)
        # Search, then the stack of the selected row with file:line.
        tm.keys("/")
        tm.text("small")
        tm.keys("Enter")
        tm.wait(r'found "small"')
        tm.keys("f")
        _, scr = tm.wait(r"#0\s+alloc_small\s+phases\.c:14")
        assert re.search(r"#1\s+grow_phase\s+phases\.c:20", scr), scr
        assert re.search(r"#2\s+main\s+phases\.c:40", scr), scr
        assert re.search(r"#3\s+_start\s+0x401100", scr), scr
        # Later, in the steady phase, the tree has two branches under main.
        tm.keys("f", "t", "End")
        st, scr = at(tm, "10", tt.T_END)
        assert ", flat," in st[4], st
        # Sorting by objects puts alloc_small (4 objects) before alloc_big (2).
        names = tt.names(scr)
        assert names.index("alloc_big") < names.index("alloc_small"), names
        tm.keys("s")
        st, scr = tt.wait_status(tm, lambda st: st[4].endswith("by objects"))
        names = tt.names(scr)
        assert names.index("alloc_small") < names.index("alloc_big"), names
        tm.keys("s")
        tt.wait_status(tm, lambda st: st[4].endswith("by allocs"))
        tm.keys("s")
        tt.wait_status(tm, lambda st: st[4].endswith("by bytes"))


def test_opens_at_peak():
    with tt.Tmux([TUI, DB]) as tm:     # no --at: the peak, not the empty start
        st, scr = at(tm, "6", tt.PEAK_T)
        assert st[1:3] == (tt.PEAK_BYTES, tt.PEAK_OBJECTS), st


def test_help_resize_small_terminal():
    with tt.Tmux([TUI, "--at", "3s", DB], width=80, height=24) as tm:
        st, scr = at(tm, "3", 3 * S)
        assert len(scr.splitlines()) <= 24
        assert tt.row(scr, "alloc_big") == (3 * MIB, 3 * MIB, 3, 3), scr
        assert any("\u2588" in l for l in chart_rows(scr)), scr
        tm.keys("?")
        _, scr = tm.wait(r"trace-tui keys")
        for k in ("p  ", "[ / ]", "g / w", "t  ", "/ , n", "e  "):
            assert k in scr, (k, scr)
        assert "Up/Down: scroll" in scr.splitlines()[23], scr
        tm.keys("NPage", "NPage")     # the rest of the help, then its end
        _, scr = tm.wait(r"^  \?\s+this help\s+q   quit")
        assert scr.splitlines()[22] == '"! since attach", "! unrouted calls" (trace-snap(1)).', scr
        tm.keys("x")
        at(tm, "3", 3 * S)
        tm.resize(100, 30)
        _, scr = tm.wait(lambda scr: any(len(l) > 80 for l in scr.splitlines()) and tt.status(scr))
        assert tt.row(scr, "alloc_big") == (3 * MIB, 3 * MIB, 3, 3), scr
        tm.resize(30, 8)
        tm.wait(r"terminal too small")
        tm.resize(80, 24)
        tm.wait(lambda scr: max(len(l) for l in scr.splitlines()) <= 80 and tt.status(scr))


def coloured(tm):
    out = subprocess.run(tm.base + ["capture-pane", "-p", "-e"], env=tm.env,
                         capture_output=True, text=True).stdout
    return re.search(r"\x1b\[[0-9;]*3[1-6]m|\x1b\[[0-9;]*38;5;", out) is not None


def test_colours():
    with tt.Tmux([TUI, "--at", "3s", DB]) as tm:
        at(tm, "3", 3 * S)
        assert coloured(tm)
    with tt.Tmux([TUI, "--at", "3s", DB], env={"NO_COLOR": "1"}) as tm:
        at(tm, "3", 3 * S)
        assert not coloured(tm)


def test_ascii_terminal():
    """Without a UTF-8 locale the chart is drawn with ASCII characters."""
    with tt.Tmux([TUI, "--at", "3s", DB], env={"LANG": "C", "LC_ALL": "C"}) as tm:
        st, scr = at(tm, "3", 3 * S)
        rows = chart_rows(scr)
        assert any("#" in l for l in rows) and not any("\u2588" in l for l in rows), scr
        assert "^" in rows[-2] and "P" in rows[-2], rows[-2]


def test_bench_option():
    """--bench-steps moves the cursor across the trace and reports (no timing asserted)."""
    out = os.path.join(D, "bench.txt")
    with tt.Tmux(["sh", "-c", '"$0" --bench-steps 7 "$1" 2>"$2"', TUI, DB, out]) as tm:
        tm.wait(lambda scr: tm.dead())
    with open(out) as f:
        text = f.read()
    assert re.match(r"trace-tui: 7 steps \(query \+ redraw\): median [\d.]+ ms, max [\d.]+ ms\n$",
                    text), text


def test_process_in_title():
    """One process: the title names none. Several (a forked child added):
    it names the one shown, the run's program."""
    with tt.Tmux([TUI, DB]) as tm:
        _, scr = tt.wait_status(tm)
        assert scr.splitlines()[0].startswith("trace-tui %s  duration " % DB), scr
    two = os.path.join(D, "two.db")
    shutil.copy(DB, two)
    c = sqlite3.connect(two)
    c.execute("INSERT INTO processes(pid, ppid, exe, cmdline, trace_path, t_start, t_end,"
              " sample_period, peak_t, peak_bytes, peak_objects, proc)"
              " VALUES(?, ?, '/opt/fixture/helper', 'helper', 'run.1.trc', 1, 2, 0, 0, 0, 0, 1)",
              (tt.PID + 1, tt.PID))
    c.commit()
    c.close()
    with tt.Tmux([TUI, two]) as tm:
        _, scr = tt.wait_status(tm)
        assert scr.splitlines()[0].startswith(
            "trace-tui %s  phases [pid %d]  duration " % (two, tt.PID)), scr
        tm.keys("P")                  # the helper allocated nothing: no switch
        tm.wait(r"^no other process allocated anything")
    # A second process that allocated: P shows it, and P again the first.
    c = sqlite3.connect(two)
    c.execute("INSERT INTO threads(pid, tid, name, t_first, t_last) VALUES(?,?,'helper',1,2)",
              (tt.PID + 1, tt.PID + 1))
    c.execute("INSERT INTO allocations VALUES(100, 1, NULL, 777, ?, ?, ?, 0x90000, 0, 0, 0, 0)",
              (tt.BIG, tt.PID + 1, tt.PID + 1))
    c.execute("INSERT INTO timeline VALUES(?, 0, 777, 1, 777, 1, 0)", (tt.PID + 1,))
    c.commit()
    c.close()
    with tt.Tmux([TUI, "--at", "6s", two]) as tm:
        tt.wait_status(tm, lambda st: st[0] == "6")
        tm.keys("P")                  # its span is 1..2 ns: the cursor at its peak
        _, scr = tm.wait(r"^process %d" % (tt.PID + 1))
        st = tt.status(scr)
        assert st[0] == "0" and st[1:4] == (777, 1, 1), st
        assert scr.splitlines()[0].startswith(
            "trace-tui %s  helper [pid %d]  duration " % (two, tt.PID + 1)), scr
        assert tt.row(scr, "alloc_big") == (777, 777, 1, 1), scr
        tm.keys("P")                  # back: the cursor at the peak, not where it was
        _, scr = tm.wait(r"^process %d" % tt.PID)
        st = tt.status(scr)
        assert st[0] == "6" and st[1:4] == (tt.PEAK_BYTES, tt.PEAK_OBJECTS, 10), st
        assert scr.splitlines()[0].startswith(
            "trace-tui %s  phases [pid %d]  duration " % (two, tt.PID)), scr


for name, fn in list(globals().items()):
    if name.startswith("test_"):
        print(name, flush=True)
        fn()
print("ok")
sys.exit(0)
