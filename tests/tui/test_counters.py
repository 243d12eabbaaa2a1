"""trace-tui's counters (the recorder's REC_STATS_MS samples: README
"Counters") on the fixture database (tuitest.py) with known samples added:
the chart draws RSS as dots with a legend, on a y axis that holds it; `r`
lists every counter at the cursor, exact, with when it was read, and says
"no sample yet" before a counter's first one; the pane follows the cursor.
Without counters: no RSS line or legend, and `r` says the process has none.
"""
import os
import re
import sqlite3

import hrtest
import tuitest as tt
from tuitest import MIB, S

D = hrtest.tmpdir("tui-counters")
DB = os.path.join(D, "phases.db")
PLAIN = os.path.join(D, "plain.db")
TUI = hrtest.TRACE_TUI
# (t, name, value): RSS above the live heap (peak 6 MiB at 6 s)
SAMPLES = [(0, "rss_bytes", 1 * MIB), (2 * S, "rss_bytes", 9 * MIB),
           (5 * S, "rss_bytes", 12 * MIB), (8 * S, "rss_bytes", 5 * MIB),
           (4 * S, "glibc.in_use_bytes", 4 * MIB + 300)]
DOT = "\u2022"

tt.build_fixture(PLAIN)
tt.build_fixture(DB)
con = sqlite3.connect(DB)
con.executemany("INSERT INTO counters VALUES(?,?,?,?)",
                [(tt.PID, t, name, v) for t, name, v in SAMPLES])
con.commit()
con.close()


def chart_rows(scr):
    lines = scr.splitlines()
    return lines[1:tt.STATUS_ROW(scr)]


def pane(scr):
    """The counters pane: {name: (value, read at)} or {name: None}."""
    out = {}
    for line in scr.splitlines():
        m = re.match(r"(\S+)\s+(\d+)\s+[\d.]+ \S+\s+read at (\S+)$", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), m.group(3))
        elif re.match(r"\S+\s+no sample yet$", line):
            out[line.split()[0]] = None
    return out


with tt.Tmux([TUI, "--at", "3s", DB]) as tm:
    st, scr = tt.wait_status(tm, lambda st: st[0] == "3")
    rows = chart_rows(scr)
    # 12 MiB of RSS sets the axis (the live heap alone: 8.00 MiB)
    assert rows[0].strip().startswith("15.0 MiB"), rows[0]
    assert rows[0].rstrip().endswith("live %s RSS" % DOT), rows[0]
    assert sum(l.count(DOT) for l in rows) > tt.T_END // (10 * S), scr
    tm.keys("r")
    _, scr = tm.wait(lambda scr: "counters at 3s" in scr and pane(scr))
    got = pane(scr)
    assert got == {"rss_bytes": (9 * MIB, "2s"), "glibc.in_use_bytes": None}, got
    tm.keys("End")
    _, scr = tm.wait(lambda scr: "counters at 10s" in scr and pane(scr))
    got = pane(scr)
    assert got == {"rss_bytes": (5 * MIB, "8s"), "glibc.in_use_bytes": (4 * MIB + 300, "4s")}, got
    # the table is back once the pane closes
    tm.keys("r")
    tm.wait(lambda scr: "counters at" not in scr and tt.row(scr, "alloc_big"))
print("RSS line and legend on the chart, r lists the counters at the cursor: ok")

with tt.Tmux([TUI, "--at", "3s", PLAIN]) as tm:
    st, scr = tt.wait_status(tm, lambda st: st[0] == "3")
    rows = chart_rows(scr)
    assert rows[0].strip().startswith("8.00 MiB") and "RSS" not in rows[0], rows[0]
    assert not any(DOT in l for l in rows), scr
    tm.keys("r")
    tm.wait(r"has no counters")
print("without counters: no RSS line, r says so: ok")
