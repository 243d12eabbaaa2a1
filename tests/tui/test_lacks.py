"""trace-tui shows what the trace lacks: the title flags a damaged trace,
a loss and unknown inherited blocks; the status line says when the
snapshot at the cursor lies after the loss, the damage or the start of a
stopped span (heapreel.stop .. heapreel.start marks, which are shaded on
the chart: blocks allocated then may still be live) or of calls not yet
routed to the recorder (shaded too), or after a mapping a sampled trace did not record; the
numbers at the cursor stay exact. A trace that lacks
nothing shows none of it.
"""
import os

import hrtest
import tuitest as tt
from tuitest import S

D = hrtest.tmpdir("tui-lacks")
TUI = hrtest.TRACE_TUI
WIDTH, HEIGHT = 120, 40
X0 = 10                      # chart.c: the first column of the bars
NCOL = WIDTH - X0
STOP, START = 2200 * S // 1000, 3200 * S // 1000
STOP_MARKS = [(STOP, "heapreel.stop"), (START, "heapreel.start")]


def shaded_cols(t1, t2):
    """Chart columns meeting [t1, t2): column k covers [t_of(k), t_of(k+1))."""
    t_of = [-(-tt.T_END * k // NCOL) for k in range(NCOL + 1)]
    return [k for k in range(NCOL) if t1 < t_of[k + 1] and t2 > t_of[k]]


def top_row(scr):
    """The chart's top row of bars (above every bar of this fixture)."""
    return scr.splitlines()[1]


def at(tm, t_str, lacks):
    """Waits for the cursor at t_str; checks the numbers there and the note."""
    st, scr = tt.wait_status(tm, lambda st: st[0] == t_str)
    t_ns = int(float(t_str) * 1000) * S // 1000
    assert st[1:4] == tt.live_at(t_ns), (t_str, st, tt.live_at(t_ns))
    assert st[5] == lacks, (t_str, st)
    return scr


checks = 0
# Cut at 8 s, events lost from 6 s, recording stopped from 2.2 s to 3.2 s.
DB = os.path.join(D, "lacking.db")
tt.build_fixture(DB, lacks={"damaged": 1, "t_damaged": 8 * S, "t_loss": 6 * S,
                            "lost_events": 4}, marks=STOP_MARKS)
with tt.Tmux([TUI, "--at", "9s", DB], width=WIDTH, height=HEIGHT) as tm:
    scr = at(tm, "9", "after loss, after damage, after stop")
    title = scr.splitlines()[0]
    assert "  DAMAGED (read to 8s)  EVENTS LOST (from 6s)  duration 10s" in title, title
    row = top_row(scr)
    shade = [i - X0 for i, ch in enumerate(row) if ch == "\u2591"]
    assert shade == shaded_cols(STOP, START) and len(shade) == 12, (shade, row)
    # On the axis "(" and ")" enclose the stopped span (NCOL columns: 1 s is 11).
    axis = scr.splitlines()[tt.STATUS_ROW(scr) - 2]
    assert axis.index("(") - X0 == STOP * NCOL // tt.T_END, axis
    assert axis.index(")") - X0 == START * NCOL // tt.T_END, axis
    checks += 2
    tm.keys("Home")
    at(tm, "0", "")
    tm.keys("m")                     # the recorder's stop and start marks, then the user's
    at(tm, "2.2", "after stop")
    tm.keys("m")                     # blocks allocated while stopped may still be live
    at(tm, "3.2", "after stop")
    tm.keys("m")
    at(tm, "4.8", "after stop")
    tm.keys("End")
    at(tm, "10", "after loss, after damage, after stop")
    checks += 3
with tt.Tmux([TUI, "--at", "2.5s", DB], width=WIDTH, height=HEIGHT) as tm:
    at(tm, "2.5", "after stop")
    tm.keys("?")
    tm.wait(r"after damage / after stop")
    checks += 2
with tt.Tmux([TUI, "--at", "7s", DB], width=WIDTH, height=HEIGHT) as tm:
    at(tm, "7", "after loss, after stop")
    checks += 1
# Without UTF-8 the shade is ':'.
with tt.Tmux([TUI, "--at", "9s", DB], width=WIDTH, height=HEIGHT,
             env={"LANG": "C", "LC_ALL": "C"}) as tm:
    scr = at(tm, "9", "after loss, after damage, after stop")
    shade = [i - X0 for i, ch in enumerate(top_row(scr)) if ch == ":"]
    assert shade == shaded_cols(STOP, START), (shade, top_row(scr))
    checks += 1
# A forked child whose inherited blocks are unknown: every instant lacks them.
ORPHAN = os.path.join(D, "orphan.db")
tt.build_fixture(ORPHAN, lacks={"fork_t": 0, "inherited": 2})
with tt.Tmux([TUI, "--at", "3s", ORPHAN], width=WIDTH, height=HEIGHT) as tm:
    scr = at(tm, "3", "")
    assert "  INHERITED BLOCKS UNKNOWN  duration" in scr.splitlines()[0], scr
    checks += 1
# A sampled process that mapped memory at 2 s, unrecorded: from then on.
SAMPLED = os.path.join(D, "sampled.db")
tt.build_fixture(SAMPLED, lacks={"sample_period": 4096},
                 marks=[(2 * S, "heapreel.mmap-unrecorded")])
with tt.Tmux([TUI, "--at", "3s", SAMPLED], width=WIDTH, height=HEIGHT) as tm:
    st, _ = tt.wait_status(tm, lambda st: st[0] == "3")
    assert st[5] == "no mmap", st
    tm.keys("Home")
    st, _ = tt.wait_status(tm, lambda st: st[0] == "0")
    assert st[5] == "", st
    checks += 2
# Calls not routed to the recorder from 2.2 s to 3.2 s: from 2.2 s on
# (blocks allocated then may still be live), not before; the span is
# shaded, between "{" and "}" on the axis.
UNROUTED = os.path.join(D, "unrouted.db")
tt.build_fixture(UNROUTED, marks=[(STOP, "heapreel.unrouted"), (START, "heapreel.routed")])
with tt.Tmux([TUI, "--at", "9s", UNROUTED], width=WIDTH, height=HEIGHT) as tm:
    scr = at(tm, "9", "after unrouted calls")
    shade = [i - X0 for i, ch in enumerate(top_row(scr)) if ch == "\u2591"]
    assert shade == shaded_cols(STOP, START), (shade, top_row(scr))
    axis = scr.splitlines()[tt.STATUS_ROW(scr) - 2]
    assert axis.index("{") - X0 == STOP * NCOL // tt.T_END, axis
    assert axis.index("}") - X0 == START * NCOL // tt.T_END, axis
    tm.keys("Home")
    at(tm, "0", "")
    tm.keys("m")                     # the unrouted and routed marks are marks too
    at(tm, "2.2", "after unrouted calls")
    tm.keys("m")
    at(tm, "3.2", "after unrouted calls")
    checks += 4
# A trace that lacks nothing: no flag, no note, no shade.
CLEAN = os.path.join(D, "clean.db")
tt.build_fixture(CLEAN)
with tt.Tmux([TUI, "--at", "9s", CLEAN], width=WIDTH, height=HEIGHT) as tm:
    scr = at(tm, "9", "")
    assert "DAMAGED" not in scr and "LOST" not in scr and "\u2591" not in scr, scr
    checks += 1
print("ok: %d checks" % checks)
