"""trace-tui's messages at 80x24 and 60x20 (issue 22): a message longer
than the width (an export that failed, naming a long path) takes as many
rows as it needs at the bottom, words whole, and reads whole: it was cut
at the width. The next key clears it and the key hints come back. So does
the prompt asking whether to replace a file with a long path (its start
was cut), and the message saying it was kept.
"""
import os

import hrtest
import tuitest as tt

D = hrtest.tmpdir("tui-msg")
DB = os.path.join(D, "m.db")
tt.build_fixture(DB)
MISSING = os.path.join(D, "a-directory-that-does-not-exist-with-a-long-name")
KEPT = os.path.join(D, "a-directory-that-exists-with-a-long-name-too")
os.mkdir(KEPT)


def bottom(tm, want, w, h):
    """Waits for the screen's last rows to be the rows `want`; asserts
    that every row is within the width. The screen."""
    def shows(scr):
        lines = scr.rstrip("\n").split("\n")
        return [l.rstrip() for l in lines[-len(want):]] == [r.rstrip() for r in want]
    _, scr = tm.wait(shows)
    lines = scr.rstrip("\n").split("\n")
    assert len(lines) == h and all(len(l) <= w for l in lines), scr
    return scr


def wrapped(msg, w):
    """The rows screen.c draws a message on: whole words where they fit, a
    word wider than the screen filling the row and going on in the next."""
    rows = []
    while msg:
        n = len(msg)
        if n > w:
            sp = msg.rfind(" ", 0, w + 1)
            n = sp if sp > 0 and len(msg[sp + 1:].split(" ")[0]) <= w else w
        rows.append(msg[:n])
        msg = msg[n:].lstrip(" ")
    return rows


for w, h in ((80, 24), (60, 20)):
    out = os.path.join(MISSING, "exported-at-six-seconds-%dx%d.heap" % (w, h))
    msg = "export failed: %s: No such file or directory" % out
    assert len(msg) > w, msg
    with tt.Tmux([hrtest.TRACE_TUI, "--at", "6s", DB], width=w, height=h) as tm:
        tt.wait_status(tm, lambda st: st[0] == "6")
        tm.keys("e")
        tm.wait(r"^export \(")
        tm.keys("C-u")
        tm.text(out)
        tm.keys("Enter")
        want = wrapped(msg, w)
        assert len(want) > 1 and " ".join(want).replace(" ", "") == msg.replace(" ", ""), want
        scr = bottom(tm, want, w, h)
        st = tt.status(scr)
        assert st and st[0] == "6", scr          # the status line stays
        tm.keys("Right")
        _, scr = tm.wait(lambda scr: scr.rstrip("\n").split("\n")[-1].startswith("?:help"))
        assert "export failed" not in scr, scr
        # A file to replace: the question, then the answer, whole.
        old = os.path.join(KEPT, "exported-before-%dx%d.heap" % (w, h))
        with open(old, "w") as fh:
            fh.write("keep")
        tm.keys("e")
        tm.wait(r"^export \(")
        tm.keys("C-u")
        tm.text(old)
        tm.keys("Enter")
        bottom(tm, wrapped("%s exists: replace it? (y/N) " % old, w), w, h)
        tm.keys("n")
        bottom(tm, wrapped("%s kept, nothing written" % old, w), w, h)
        with open(old) as fh:
            assert fh.read() == "keep"
    print("%dx%d: the message reads whole on %d rows" % (w, h, len(want)))
print("ok")
