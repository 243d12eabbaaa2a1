"""test_svg - trace-snap --format svg: the flame graph of our q_known
program (recorded, so every number is known), parsed with xml.etree: the
root's and the top level's widths equal --format folded's total, every box's
value (its data-v and its <title>) equals the sum of the folded stacks
through its path, exact per function at the peak and in objects, unbiased
as they are for a sampled process (fixture database); a growth
draws its growing stacks and says exactly what it leaves out; the header
carries the threads it is narrowed to and what the answer lacks; names
that XML cannot hold as they are (fixture database) are escaped; no
overwrite without --force, never to a terminal; in headless Chromium, if
installed, the inlined script zooms and searches."""
import os
import pty
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import hrtest
import fixture

SNAP = hrtest.TRACE_SNAP
NS = "{http://www.w3.org/2000/svg}"
PROG = os.path.join(hrtest.REC_BUILD, "tests", "queries", "q_known")
tmp, _, DB = hrtest.recorded_db(PROG, "q-svg", needs=(SNAP,))
checks = 0


def svg(args, name="s.svg"):
    """trace-snap DB ARGS -o NAME --force, parsed: (header lines, boxes), a
    box being (path tuple root first without "all", value, title lines)."""
    out = os.path.join(tmp, name)
    hrtest.run([SNAP] + args + ["-o", out, "--force"])
    assert oct(os.stat(out).st_mode & 0o777) == "0o600"
    root = ET.parse(out).getroot()
    head = [t.text for t in root.iter(NS + "text") if t.get("class") == "head"]
    boxes, open_ = [], []                  # open_: (depth, end offset, name) of ancestors
    for g in root.iter(NS + "g"):
        if g.get("class") != "f":
            continue
        o, v, d = int(g.get("data-o")), int(g.get("data-v")), int(g.get("data-d"))
        title = g.find(NS + "title").text.split("\n")
        open_ = [a for a in open_ if a[0] < d and o < a[1]]
        assert len(open_) == d, (g.attrib, open_)
        open_.append((d, o + v, title[0]))
        rect = g.find(NS + "rect")
        assert float(rect.get("width")) > 0, g.attrib
        boxes.append((tuple(a[2] for a in open_[1:]), v, title))
    return head, boxes


def folded(args):
    """--format folded as [(path tuple, value)]."""
    out = hrtest.run([SNAP] + args + ["--format", "folded"]).stdout
    return [(tuple(l.rsplit(" ", 1)[0].split(";")), int(l.rsplit(" ", 1)[1]))
            for l in out.splitlines()]


def agree(args, unit, db=DB):
    """The graph of ARGS against its folded stacks: returns (head, boxes)."""
    global checks
    head, boxes = svg([db] + args)
    stacks = folded([db] + args)
    total = sum(v for _, v in stacks)
    assert boxes[0][0] == () and boxes[0][1] == total, (boxes[0], total)
    assert sum(v for p, v, _ in boxes if len(p) == 1) == total, boxes
    want = {}
    for path, v in stacks:
        for k in range(1, len(path) + 1):
            want[path[:k]] = want.get(path[:k], 0) + v
    got = {p: v for p, v, _ in boxes if p}
    assert got == want, (args, got, want)
    for p, v, title in boxes:              # the figure of the title is the box's
        assert title[1].startswith("%d %s" % (v, unit)), (p, v, title)
    assert head[1].startswith("Total: %d %s" % (total, unit)), head
    checks += 1
    return head, boxes


def by_leaf(boxes, name):
    return sum(v for p, v, _ in boxes if p and p[-1] == name)


# The peak: 27229 B, exact per function (q_known's header).
head, boxes = agree(["--peak"], "B")
assert head[0].startswith("Flame graph of the live bytes of process ") and \
    "the live set at the peak" in head[0], head
assert not any(h.startswith(("Warning", "Left out")) for h in head), head
want = {"alloc_small": 120, "leak_some": 1332, "churn": 777, "mid": 10000, "main": 27229}
assert {n: by_leaf(boxes, n) for n in want} == want, boxes
assert by_leaf(boxes, "alloc_big") == 25000, boxes     # 15000 from main, 10000 from mid
checks += 1

# Objects: the same graph counted in blocks (15 at the peak).
head, boxes = agree(["--peak", "--metric", "inuse_objects"], "objects")
assert boxes[0][1] == 15 and by_leaf(boxes, "leak_some") == 4, boxes
checks += 1

# Leaks, and a growth whose shrinking stacks are left out and said so:
# from phase 3 to the end, main's 3 big blocks (-15000), one of mid's
# (-5000) and the small ones (-240) went; leak_some's 1332 B came.
agree(["--leaks"], "B")
c = hrtest.connect(DB)
T3 = hrtest.one(c, "SELECT max(t_alloc) FROM allocations WHERE size = 5000")
head, boxes = agree(["--growth", "%dns..end" % T3], "B")
assert boxes[0][1] == 1332 and by_leaf(boxes, "leak_some") == 1332, boxes
assert "Left out: 3 stacks that shrank by 20240 B (19.8 KiB) in all are not drawn " \
    "(a width cannot be negative; --format text shows them)" in head, head
checks += 1

# A sampled process: the graph's figures unbiased as the folded stacks'.
SAMPLED = os.path.join(tmp, "sampled.db")
fixture.standard(SAMPLED, sample_period=1000)
head, boxes = agree(["--at", "5s"], "B", SAMPLED)
assert boxes[0][1] > hrtest.one(hrtest.connect(SAMPLED), "SELECT sum(size) FROM allocations "
                                "WHERE t_alloc <= ? AND (t_free IS NULL OR t_free > ?)",
                                5 * fixture.S, 5 * fixture.S), boxes[0]   # scaled up
checks += 1

# No overwrite without --force; never to a terminal; a pipe is fine.
out = os.path.join(tmp, "s.svg")
p = hrtest.run([SNAP, DB, "--peak", "-o", out], check=False)
assert p.returncode == 3 and p.stderr.count("\n") == 1 and "already exists" in p.stderr, p
master, slave = pty.openpty()
p = subprocess.run([SNAP, DB, "--peak", "--format", "svg"], stdout=slave,
                   stderr=subprocess.PIPE, text=True)
os.close(slave)
os.close(master)
assert p.returncode == 2 and p.stderr.count("\n") == 1 and \
    "--format svg: not written to a terminal" in p.stderr, p
p = hrtest.run([SNAP, DB, "--peak", "--format", "svg"])
assert ET.fromstring(p.stdout).tag == NS + "svg", p.stdout[:200]
checks += 1

# Names XML cannot hold as they are, and what the answer lacks, in the header.
FX = os.path.join(tmp, "fx.db")
fx = fixture.Fixture(FX)
pr = fx.process(100)
pr.lost_events, pr.t_loss = 3, 5 * fixture.S
pr.threads = [(1, "main"), (2, "worker")]
st = fx.stack((0x10, "f<int> & \"g\""), (0x20, "bad\x01name"), (0x30, "main"))
fx.alloc(100, fixture.S, 100, st)
fx.alloc(100, fixture.S, 30, fx.stack((0x40, "work"), (0x30, "main")), tid=2)
fx.finish()
head, boxes = svg([FX, "--at", "6s", "--tid", "1"], "fx.svg")
assert [p for p, _, _ in boxes] == [(), ("main",), ("main", "bad?name"),
                                    ("main", "bad?name", "f<int> & \"g\"")], boxes
assert head[1:3] == ["Total: 100 B (100 B)", "Threads: 1 (main)"], head
assert [h for h in head if h.startswith("Warning: ")] == [
    "Warning: events of process 100 may be missing from 5.000000000s on (3 lost): the "
    "answer may lack blocks, or hold blocks whose free was lost"], head
with open(os.path.join(tmp, "fx.svg")) as fh:
    assert "f&lt;int&gt; &amp; &quot;g&quot;" in fh.read()
checks += 1

# In a browser (headless Chromium, skipped without it): the inlined script
# zooms into mid (its callers stretched across, the rest hidden) and its
# search gives the share of the functions it matches (a match inside
# another counted once), without an error.
HOOK = """<script type="text/ecmascript"><![CDATA[
window.addEventListener("load", function () {
  var out = [];
  try {
    var mid = boxes.filter(function (g) { return nameOf(g) === "mid"; })[0];
    zoom(mid);
    window.prompt = function () { return "^(mid|alloc_big)$"; };
    search();
    boxes.forEach(function (g) {
      out.push([nameOf(g), g.style.display, g.querySelector("rect").getAttribute("x"),
                g.querySelector("rect").getAttribute("width")].join("|"));
    });
    out.push(document.getElementById("matched").textContent);
  } catch (e) {
    out = ["error: " + e];
  }
  document.documentElement.setAttribute("data-test", out.join(";"));
});
]]></script>
</svg>
"""
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM:
    peak = os.path.join(tmp, "peak.svg")
    hrtest.run([SNAP, DB, "--peak", "-o", peak])
    with open(peak) as fh:
        page = fh.read()
    hooked = os.path.join(tmp, "hooked.svg")
    with open(hooked, "w") as fh:
        fh.write(page.replace("</svg>\n", HOOK))
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=" + os.path.join(tmp, "chromium"), "--dump-dom",
                        "file://" + hooked], capture_output=True, text=True, timeout=hrtest.limit(120))
    got = re.search(r'data-test="([^"]*)"', p.stdout)
    assert got, (p.stdout[-2000:], p.stderr[-2000:])
    seen = got.group(1).split(";")
    # main's alloc_big and mid (its alloc_big inside it counted once) of 27229
    assert seen[-1] == "Matched: 25000 (91.8%)", seen
    boxes = {}
    for b in seen[:-1]:
        name, shown, x, w = b.split("|")
        boxes.setdefault(name, []).append((shown, float(x), float(w)))
    assert boxes["main"] == [("", 10.0, 1180.0)] and boxes["mid"] == [("", 10.0, 1180.0)], boxes
    assert ("", 10.0, 1180.0) in boxes["alloc_big"] and ("none", 10.0, 650.04) in \
        boxes["alloc_big"], boxes                           # mid's shown, main's hidden
    assert boxes["leak_some"][0][0] == "none", boxes
    checks += 1
else:
    print("note: chromium not installed: the script was not run")
print("ok: %d checks" % checks)
