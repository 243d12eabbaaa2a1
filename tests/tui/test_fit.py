"""trace-tui at 80x24 and 60x20 (issue 22): every line fits, the title and
the status line shorten word by word instead of being cut, the status line
names the mark at or before the cursor, the key hints are whole, short
function names are whole and long C++ names scroll sideways (< and >) until
their end shows, with an ellipsis where they go on. `l` lists the marks with
their times and goes to one; `a` goes to a time typed in trace-snap's
grammar; the recorder's stop and start marks are on the chart.
"""
import os
import sqlite3

import hrtest
import tuitest as tt
from tuitest import S

D = hrtest.tmpdir("tui-fit")
DB = os.path.join(D, "long.db")
STOP_MARKS = [(2200 * S // 1000, "heapreel.stop"), (3200 * S // 1000, "heapreel.start")]
tt.build_fixture(DB, marks=STOP_MARKS)
VEC = ("std::vector<std::basic_string<char>, std::allocator<std::basic_string<char> > >"
       "::_M_realloc_insert(iterator, const std::string&)")
HASH = ("std::_Hashtable<unsigned long, std::pair<unsigned long const, Widget>>"
        "::_M_emplace(std::true_type, Args&&...)")
c = sqlite3.connect(DB)
c.execute("UPDATE frames SET function = ? WHERE id = 4", (VEC,))   # alloc_big
c.execute("UPDATE frames SET function = ? WHERE id = 5", (HASH,))  # alloc_small
c.commit()
c.close()
TUI = hrtest.TRACE_TUI
STEP = 16                 # main.c: characters per < / >
MORE = "\u2026"

SIZES = {
    (80, 24): {
        "title": "trace-tui long.db  duration 10s  peak 6.00 MiB at 6s  (? for help)",
        "status": " t=6s live 6291756 B 8 obj 10 allocs ! stop @steady [snap flat bytes]",
        "late": " t=8.5s live 4195604 B 8 obj 13 allocs ! stop @late [snap flat bytes]",
        "hints": "?:help q:quit arrows:step a:go to m:mark l:marks p:peak [ ]:window t:tree",
        "tree": "allocs  call tree (Enter expands)",
    },
    (60, 20): {
        "title": "trace-tui long.db  duration 10s  peak 6.00 MiB at 6s",
        "status": " t=6s 6291756 B 8 obj 10 allocs ! stop @steady [snap flat]",
        "late": " t=8.5s 4195604 B 8 obj 13 allocs ! stop @late [snap flat]",
        "hints": "?:help q:quit arrows:step a:go to m:mark l:marks p:peak",
        "tree": "allocs  call tree",
    },
}


def name_rows(scr):
    """(name column x, the names shown) of the flat table."""
    lines = scr.splitlines()
    head = next(i for i, l in enumerate(lines) if l.rstrip().endswith("allocs  function"))
    x = lines[head].index("function")
    rows = []
    for l in lines[head + 1:]:
        if not l.strip():
            break
        rows.append(l[x:])
    return x, rows


def shown(name, off, room, more=MORE):
    """What the name column shows of name scrolled by off (screen.c put_name)."""
    off = min(off, max(len(name) - room + 1, 0))
    seg = name[off:off + room]
    if off:
        seg = more + seg[1:]
    if len(name) - off > room:
        seg = seg[:-1] + more
    return seg


def check_size(w, h, want, db, cwd):
    with tt.Tmux([TUI, "--at", "6s", db], width=w, height=h, cwd=cwd) as tm:
        st, scr = tt.wait_status(tm, lambda st: st[0] == "6")
        lines = scr.splitlines()
        assert all(len(l) <= w for l in lines), scr
        assert lines[0] == want["title"], (lines[0], want["title"])
        assert lines[tt.STATUS_ROW(scr)] == want["status"], lines[tt.STATUS_ROW(scr)]
        assert st[1:4] == tt.live_at(6 * S) and st[6] == "steady", st
        assert lines[h - 1] == want["hints"], lines[h - 1]
        # The chart's axis: ( and ) where recording stopped and started, M, cursor.
        axis = lines[tt.STATUS_ROW(scr) - 2]
        assert [ch for ch in axis if ch in "()M^P"] == ["(", ")", "M", "^", "M"], axis

        # The tree's header gives up its hint rather than cut it (grow_phase
        # opened: its leaves' 7-digit bytes widen the self column).
        tm.keys("t", "Down", "Down", "Enter")
        _, scr = tm.wait(r"^4194304 ")
        head = next(l for l in scr.splitlines() if "allocs  call tree" in l)
        assert head.endswith(want["tree"]), (head, want["tree"])
        tm.keys("Enter", "t")
        _, scr = tm.wait(r"allocs  function")

        # Names: the short ones whole; the long ones scroll until their end shows.
        x, rows = name_rows(scr)
        room = w - x
        assert room >= 20, (x, scr)
        assert rows == [shown(VEC, 0, room), shown(HASH, 0, room), "main", "_start",
                        "grow_phase", "steady_phase"], rows
        longest = max(len(VEC), len(HASH))
        seen = {VEC: {}, HASH: {}}
        k = 0
        while STEP * k <= longest - room + 1:
            k += 1
            tm.keys(">")
            off = min(STEP * k, longest - room + 1)
            want_rows = [shown(VEC, off, room), shown(HASH, off, room), "main", "_start"]
            _, scr = tm.wait(lambda scr: name_rows(scr)[1][:4] == want_rows)
            for name in (VEC, HASH):
                o = min(off, len(name) - room + 1)
                seen[name][o] = shown(name, off, room)
        assert shown(VEC, longest, room).endswith("const std::string&)"), room
        tm.keys(">")                  # past the end: nothing moves
        _, scr = tm.wait(lambda scr: name_rows(scr)[1][:2] == want_rows[:2])
        # The segments seen, ellipses dropped, make the whole names.
        for name, segs in seen.items():
            whole = list(shown(name, 0, room)[:-1])
            for o, seg in sorted(segs.items()):
                body = seg[1:-1] if seg.endswith(MORE) else seg[1:]
                whole[o + 1:o + 1 + len(body)] = body
            assert "".join(whole) == name, ("".join(whole), name)
        tm.keys(*["<"] * (k + 1))
        tm.wait(lambda scr: name_rows(scr)[1][:2] == [shown(VEC, 0, room), shown(HASH, 0, room)])

        # The marks with their times; Enter goes to the one selected.
        tm.keys("l")
        _, scr = tm.wait(r"^marks \(Enter: go, Esc: close\)")
        lines = scr.splitlines()
        top = next(i for i, l in enumerate(lines) if l.startswith("marks (Enter"))
        assert lines[top + 1:top + 5] == ["        2.2s  heapreel.stop",
                                          "        3.2s  heapreel.start",
                                          "        4.8s  steady", "        8.5s  late"], lines
        tm.keys("Down", "Enter")      # from steady (at or before the cursor) to late
        st, scr = tt.wait_status(tm, lambda st: st[0] == "8.5")
        assert scr.splitlines()[tt.STATUS_ROW(scr)] == want["late"], scr
        assert st[1:4] == tt.live_at(8500 * S // 1000), st

        # Go to a time, in trace-snap's grammar.
        for spec, t_str, t_ns in (("7.1s", "7.1", 7100 * S // 1000), ("45%", "4.5", 4500 * S // 1000),
                                  ("mark:heapreel.start", "3.2", 3200 * S // 1000), ("end", "10", 10 * S)):
            tm.keys("a")
            tm.wait(r"^go to \(30s, 45%, mark:L, end\):\s*$")
            tm.text(spec)
            tm.keys("Enter")
            st, _ = tt.wait_status(tm, lambda st: st[0] == t_str)
            assert st[1:4] == tt.live_at(t_ns), (spec, st)
        tm.keys("a")
        tm.text("mark:nosuch")
        tm.keys("Enter")
        _, scr = tm.wait(r"^go to mark:nosuch: ")
        assert tt.status(scr)[0] == "10", scr

        # The help fits the width and scrolls to its end.
        tm.keys("?")
        _, scr = tm.wait(r"^trace-tui keys")
        assert all(len(l) < w for l in scr.splitlines()), scr
        for _ in range(4):
            tm.keys("NPage")
        _, scr = tm.wait(r'^"! since attach", "! unrouted calls" \(trace-snap\(1\)\)\.$')
        assert all(len(l) < w for l in scr.splitlines()), scr


check_size(80, 24, SIZES[(80, 24)], "long.db", D)
print("80x24 ok")
check_size(60, 20, SIZES[(60, 20)], DB, None)     # a long path: the title keeps its base name
print("60x20 ok")
# Without UTF-8 the ellipsis is '$', as in less.
with tt.Tmux([TUI, "--at", "6s", DB], width=80, height=24, env={"LANG": "C", "LC_ALL": "C"}) as tm:
    _, scr = tt.wait_status(tm, lambda st: st[0] == "6")
    x, rows = name_rows(scr)
    assert rows[:2] == [shown(VEC, 0, 80 - x, "$"), shown(HASH, 0, 80 - x, "$")], rows
    tm.keys(">")
    _, scr = tm.wait(lambda scr: name_rows(scr)[1][0] == shown(VEC, STEP, 80 - x, "$"))
print("ascii ok")
