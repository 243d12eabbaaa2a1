"""report-browser: the page trace-report writes for our rss_marks program
(known live heap at each mark: tests/programs/rss_marks.c), opened from
file:// in headless Chromium (browser.js, over the DevTools protocol):
no console error or failed request; the selection's exact bytes
(#selection-total's data-bytes) at the peak, at two marks, at 50 %, over a
growth and a steady window and for the leaks equal both the program's
known figures and trace-snap --format text's Total for the same question
and instant; the table's first row is the function that allocated;
hovering a flame graph frame shows its figures and a search for "main"
gives its share (all of it) and draws the matching frames in the search's
colour; a click on the timeline selects an instant
and a drag a growth window, each changing the fragment, with trace-snap's
figures for what the page then shows and the flame graph's frames its
own (none left from the drawing before); in forker's report (two processes),
the fragment's &pid= picks the child, with trace-snap --pid's figure.
Screenshots go to BUILD/tests/report/browser-shots/. Skips (77), saying
why, without trace-report, Chromium, node or puppeteer-core."""
import json
import os
import shutil
import subprocess

import hrtest

REPORT = os.path.join(hrtest.BUILD, "report", "trace-report")
PUPPETEER = os.path.join(hrtest.SRC, "report", "vendor", "node_modules")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser.js")
SHOTS = os.path.join(hrtest.BUILD, "tests", "report", "browser-shots")
MIB = 1 << 20
# rss_marks.c: BASE, BIG, and SMALL_COUNT x SMALL bytes
BASE, BIG, SMALLS = 16 * MIB, 64 * MIB, 32768 * 1024

if not os.path.exists(REPORT):
    hrtest.skip("trace-report not built (its libraries are missing: ./heapreel setup)")
chromium = shutil.which("chromium")
if not chromium:
    hrtest.skip("chromium is not installed (./heapreel setup installs it)")
node = shutil.which("node")
if not node or not os.path.isdir(os.path.join(PUPPETEER, "puppeteer-core")):
    hrtest.skip("node or puppeteer-core is missing (./heapreel setup installs them)")

tmp, _, db = hrtest.recorded_db(hrtest.prog("rss_marks"), "report-browser",
                                needs=(hrtest.TRACE_SNAP,))
page = os.path.join(tmp, "report.html")
hrtest.run([REPORT, db, "-o", page])


def snap(*args):
    return hrtest.snap_total(hrtest.run([hrtest.TRACE_SNAP, db, "--format", "text"] +
                                        list(args)).stdout)


# fragment -> (trace-snap's question, the known bytes or None)
CASES = {
    "#peak": (["--peak"], BASE + BIG + SMALLS),
    "#at=mark:rss-1": (["--at", "mark:rss-1"], BASE + BIG),
    "#at=mark:rss-3": (["--at", "mark:rss-3"], BASE + SMALLS),
    "#at=50%": (["--at", "50%"], None),
    "#growth=mark:rss-0..mark:rss-2": (["--growth", "mark:rss-0..mark:rss-2"], BIG + SMALLS),
    "#steady=mark:rss-1..mark:rss-3": (["--steady", "mark:rss-1..mark:rss-3"], SMALLS),
    "#leaks": (["--leaks"], None),
}
shutil.rmtree(SHOTS, ignore_errors=True)
os.makedirs(SHOTS)
r = hrtest.run([node, DRIVER, chromium, PUPPETEER, page, SHOTS] + list(CASES), timeout=hrtest.limit(240))
got = json.loads(r.stdout)
assert got["console"] == [], got["console"]

for frag, (question, known) in CASES.items():
    g = got["at"][frag]
    want = snap(*question)
    assert g["bytes"] == want, (frag, g, want)
    if known is not None:
        assert want == known, (frag, want, known)
    kind = frag[1:].split("=")[0]
    assert g["kind"] == kind, (frag, g)
    if kind == "at":                   # the page shows the very instant asked for
        assert snap("--at", "%dns" % g["t1"]) == want, (frag, g)
assert got["at"]["#peak"]["first_row"][0] == "main", got["at"]["#peak"]
assert int(got["at"]["#peak"]["first_row"][1]) == BASE + BIG + SMALLS, got["at"]["#peak"]

opened, click, drag = got["opened"], got["click"], got["drag"]
hs = got["hover_search"]           # rss_marks allocates from main only: all of it matches
assert hs["share"] == "matching: %d B (112.0 MiB), 100.00 %%" % (BASE + BIG + SMALLS), hs
assert " B (" in hs["details"] and " objects " in hs["details"], hs
# every frame is as wide as the run (a label each): those whose function
# holds "main" (main, libc's callers of it) are in the search's colour
assert len(hs["frames"]) > 1 and any(hit for _, hit in hs["frames"]), hs
assert all(hit == ("main" in label) for label, hit in hs["frames"]), hs
assert opened["kind"] == "peak" and opened["hash"] == "", opened    # opens with the peak
assert click["kind"] == "at" and click["hash"] == "#at=%dns" % click["t1"], click
assert click["bytes"] == snap("--at", "%dns" % click["t1"]), click
assert drag["kind"] == "growth" and drag["t1"] < drag["t2"], drag
assert drag["hash"] == "#growth=%dns..%dns" % (drag["t1"], drag["t2"]), drag
assert drag["bytes"] == snap("--growth", "%dns..%dns" % (drag["t1"], drag["t2"])), drag
# each drawing's frames, none left from the one before: after a switch to
# the allocators-first view (at the peak), whose call paths all differ, and
# after the click and the drag (whose growth may be empty: no frame)
assert opened["frame_ids"] and got["inverted"]["frame_ids"], (opened, got["inverted"])
for r in (opened, got["inverted"], click, drag):
    assert sorted(r["frame_ids"]) == list(range(len(r["frame_ids"]))), r
shots = sorted(os.listdir(SHOTS))
assert len(shots) == len(CASES) + 2, shots

# Several processes: forker's child, chosen by the fragment, as trace-snap --pid.
ftmp = hrtest.tmpdir("report-browser-fork")
traces, fdb = os.path.join(ftmp, "traces"), os.path.join(ftmp, "forker.db")
os.mkdir(traces)
hrtest.record([hrtest.prog("forker")], os.path.join(traces, "forker.trc"))
hrtest.run([hrtest.TRACE_IMPORT, "-q", traces, fdb])          # the parent and its child
c = hrtest.connect(fdb)
pids = [r[0] for r in c.execute("SELECT pid FROM processes ORDER BY t_start, pid")]
c.close()
assert len(pids) == 2, pids
fpage = os.path.join(ftmp, "report.html")
hrtest.run([REPORT, fdb, "-o", fpage])
frag = "#at=end&pid=%d" % pids[1]
fshots = os.path.join(SHOTS, "forker")
os.makedirs(fshots)
fgot = json.loads(hrtest.run([node, DRIVER, chromium, PUPPETEER, fpage, fshots, frag],
                             timeout=hrtest.limit(240)).stdout)
assert fgot["console"] == [], fgot["console"]
g = fgot["at"][frag]
assert g["pid"] == str(pids[1]) and g["hash"] == frag, g
assert g["bytes"] == hrtest.snap_total(hrtest.run([hrtest.TRACE_SNAP, fdb, "--pid", str(pids[1]),
                                                   "--at", "end", "--format", "text"]).stdout), g
print("ok: %d selections, a click and a drag equal trace-snap's, and a child process's; "
      "screenshots in %s" % (len(CASES), SHOTS))
