"""report-diff: trace-report NEW.db --base OLD.db, the page comparing two
runs, on two recordings of our q_known program (the base with its
defaults, the new run with `q_known 7 1`: 27229 B and 23228 B at their
peaks, as test_base.py knows them). Opened from file:// in headless
Chromium (browser.js --diff): no console error; #diff-total's data-bytes,
data-base and data-new equal trace-snap NEW --base OLD --format text's
Total line (the change, then each run's bytes) and the known figures; the
table's first row is trace-snap's first (alloc_big, -5000); a hovered
frame shows both runs' bytes and the change; a screenshot goes to
BUILD/tests/report/diff-shots/. The page's data at the leaks and over a
growth window (each run's own instants) has trace-snap --base's totals.
The command line: a question or --pid without --base, a bad --base, a
pid or instant not in either database, an output that exists or is the
base database are one line each and the README's exit code; the page is
created 0600. Skips (77), saying why, without trace-report, the
recorder, Chromium, node or puppeteer-core."""
import json
import os
import re
import shutil
import stat
import subprocess

import hrtest

REPORT = os.path.join(hrtest.BUILD, "report", "trace-report")
PUPPETEER = os.path.join(hrtest.SRC, "report", "vendor", "node_modules")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser.js")
SHOTS = os.path.join(hrtest.BUILD, "tests", "report", "diff-shots")
PROG = os.path.join(hrtest.REC_BUILD, "tests", "queries", "q_known")
BASE_PEAK, NEW_PEAK = 27229, 23228     # q_known, and q_known 7 1 (test_base.py)

if not os.path.exists(REPORT):
    hrtest.skip("trace-report not built (its libraries are missing: ./heapreel setup)")
tmp, _, OLD = hrtest.recorded_db(PROG, "report-diff", needs=(hrtest.TRACE_SNAP,))
NEW = os.path.join(tmp, "new.db")
hrtest.record([PROG, "7", "1"], os.path.join(tmp, "new.trc"))
hrtest.run([hrtest.TRACE_IMPORT, "-q", os.path.join(tmp, "new.trc"), NEW])


def snap(*question):
    """trace-snap --base's text: (change, base, new) from its Total line."""
    first = hrtest.run([hrtest.TRACE_SNAP, NEW, "--base", OLD, "--format", "text"] +
                       list(question)).stdout.splitlines()
    m = re.match(r"Total: ([-+]?\d+) B .*, from (\d+) B .* in the base to (\d+) B ", first[0])
    assert m, first
    return tuple(int(x) for x in m.groups()), first


def page_data(page):
    text = open(page, encoding="utf-8").read()
    m = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


def report(*args):
    page = os.path.join(tmp, "d.html")
    hrtest.run([REPORT, NEW, "--base", OLD, "-o", page, "--force"] + list(args))
    return page


def fails(args, code, text):
    p = subprocess.run([REPORT] + args, capture_output=True, text=True)
    lines = p.stderr.splitlines()
    assert p.returncode == code, (args, p.returncode, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("trace-report: ") and text in lines[0], \
        (args, p.stderr)


# The page's data, question by question, against trace-snap --base.
for question in (["--leaks"], ["--growth", "start..end"], ["--at", "50%"]):
    d = page_data(report(*question))["diff"]
    (change, b, n), _ = snap(*question)
    assert d["total"] == [b, n] and n - b == change, (question, d["total"], change)
    assert d["runs"][0]["db"] == OLD and d["runs"][1]["db"] == NEW, d["runs"]

# The command line.
page = os.path.join(tmp, "p.html")
fails([NEW, "--peak", "-o", page], 2, "a question goes with --base")
fails([NEW, "--pid", "1", "-o", page], 2, "--pid goes with --base")
fails([NEW, "--base", OLD, "--peak", "--leaks", "-o", page], 2, "one question at most")
fails([NEW, "--base", OLD, "--base-pid", "x", "-o", page], 2, "--base-pid takes a process id")
fails([NEW, "--base", OLD, "--at", "soon", "-o", page], 2, "malformed")
missing = os.path.join(tmp, "none.db")
fails([NEW, "--base", missing, "-o", page], 1, "--base %s" % missing)
fails([NEW, "--base", OLD, "--base-pid", "999999999", "-o", page], 4,
      "%s: no process with pid 999999999" % OLD)
fails([NEW, "--base", OLD, "--at", "1h", "-o", page], 4, "is outside")
fails([NEW, "--base", OLD, "-o", OLD, "--force"], 3, "")
assert not os.path.exists(page)
hrtest.run([REPORT, NEW, "--base", OLD, "-o", page])
assert stat.S_IMODE(os.stat(page).st_mode) == 0o600, oct(os.stat(page).st_mode)
fails([NEW, "--base", OLD, "-o", page], 3, page)

# The page in a browser, at each run's peak (the default).
(change, b, n), lines = snap("--peak")
assert (b, n) == (BASE_PEAK, NEW_PEAK), lines
chromium, node = shutil.which("chromium"), shutil.which("node")
if not chromium:
    hrtest.skip("chromium is not installed (./heapreel setup installs it)")
if not node or not os.path.isdir(os.path.join(PUPPETEER, "puppeteer-core")):
    hrtest.skip("node or puppeteer-core is missing (./heapreel setup installs them)")
shutil.rmtree(SHOTS, ignore_errors=True)
os.makedirs(SHOTS)
got = json.loads(hrtest.run([node, DRIVER, chromium, PUPPETEER, page, SHOTS, "--diff"],
                            timeout=hrtest.limit(240)).stdout)
assert got["console"] == [], got["console"]
assert got["diff"]["bytes"] == change == NEW_PEAK - BASE_PEAK, (got["diff"], lines[0])
assert (got["diff"]["base"], got["diff"]["new"]) == (b, n), got["diff"]
first = lines[4].split()               # trace-snap's first row: each value, its human size
assert got["first_row"][0] == " ".join(first[12:]) == "alloc_big q_known.c", (got, first)
assert [int(x) for x in got["first_row"][1:]] == [int(first[k]) for k in (0, 3, 6, 9)] == \
    [25000, 20000, -5000, -5000], (got, first)
for word in ("base: ", "new: ", "change: "):
    assert word in got["hover"], got["hover"]
assert got["frames"] > 1, got
assert os.listdir(SHOTS) == ["diff.png"], os.listdir(SHOTS)
print("ok: the comparison page's totals, table and hover equal trace-snap --base's; "
      "screenshot in %s" % SHOTS)
