"""report-cli: trace-report's command line, its output file and its data,
without a browser. Exit codes and one-line errors as README "Exit codes"
(2 usage, 1 database unusable, 3 output not writable: exists without
--force, is the database even with it, missing directory); the page is
created 0600, never through a planted symlink; it loads nothing from the
network; its data (the <script id="data"> JSON) survives a mark label and
a path holding "</script>" and quotes; and every precomputed profile in it
(each snapshot instant, each steady window, the peak, the leaks, the
temporary allocations, the live bytes per kind of memory at each instant)
has trace-snap --format text's Total for the same question and instants,
on a hand-made database (the query tests' fixture) of two processes whose
allocations interleave, one sampled, one with mappings (kind mmap)."""
import json
import os
import re
import subprocess
import sys

import hrtest

sys.path.insert(0, os.path.join(hrtest.SRC, "tests", "queries"))
import fixture  # noqa: E402  (the query tests' hand-made databases)

REPORT = os.path.join(hrtest.BUILD, "report", "trace-report")
if not os.path.exists(REPORT):
    hrtest.skip("trace-report not built (its libraries are missing: ./heapreel setup)")
hrtest.need(hrtest.TRACE_SNAP)
tmp = hrtest.tmpdir("report-cli")
DB = os.path.join(tmp, "a.db")
EVIL = '</script><b>"quoted" \\ label'
S = fixture.S


def make(path):
    """Two processes whose allocations interleave (so a window's rows of one
    lie between the other's): 100 with marks, 200 sampled; each with blocks
    kept, freed later, and temporary. Returns the stack of process 100's
    own function."""
    f = fixture.Fixture(path)
    for pid, period in ((100, 0), (200, 4096)):
        p = f.process(pid, sample_period=period)
        if pid == 100:
            p.marks = [(3 * S, "after-alloc"), (5 * S, EVIL), (7 * S, "late")]
        leaf = f.stack((0x401010 + pid, "alloc_%d" % pid, "app.c", 3, 0),
                       (0x401100, "main", "app.c", 10, 0), (0x401000, "_start", "start.S", 1, 0))
        other = f.stack((0x402010, "helper", "h.h", 2, 1), (0x402010, "outer", "app.c", 20, 0),
                        (0x401100, "main", "app.c", 10, 0), (0x401000, "_start", "start.S", 1, 0))
        for i in range(40):
            t = (i + 1) * S // 5 + pid
            freed = t + (i % 7 + 1) * S // 3 if i % 3 else None
            f.alloc(pid, t, 16 * (i + 1) + pid, leaf if i % 2 else other,
                    t_free=freed if freed is None or freed < 10 * S else None)
            f.alloc(pid, t + 1, 50, other, t_free=t + 2, temporary=1)
        f.checkpoints(pid, [2 * S, 4 * S, 6 * S])
        mapped = leaf if pid == 100 else mapped
    f.finish()
    return mapped


# process 100's alloc_100 blocks are mappings (kind mmap): the page's
# timeline has a line of them
mapped = make(DB)
c = hrtest.connect(DB)
c.execute("UPDATE allocations SET kind = 1 WHERE stack_id = ?", (mapped,))
c.execute("UPDATE processes SET cmdline = ? WHERE pid = 100",
          ("/opt/app/bin/app --name '</SCRIPT>'",))
c.commit()
c.close()
ROW = 5                        # numbers per stack in a profile's rows (report/json.c)


def fails(args, code, text):
    p = subprocess.run([REPORT] + args, capture_output=True, text=True)
    assert p.returncode == code, (args, p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trace-report: ") and text in lines[0], \
        (args, p.stderr)


out = os.path.join(tmp, "r.html")
fails([], 2, "expected one database")
fails([DB], 2, "-o REPORT.html is required")
fails([DB, "-o", out, "--bogus"], 2, "--bogus")
fails([os.path.join(tmp, "none.db"), "-o", out], 1, "none.db")
junk = os.path.join(tmp, "junk.db")
with open(junk, "w") as fh:
    fh.write("not a database\n")
fails([junk, "-o", out], 1, "junk.db")
fails([DB, "-o", os.path.join(tmp, "no", "dir.html")], 3, "dir.html")
fails([DB, "-o", DB, "--force"], 3, "is the database being read")
assert not os.path.exists(out)

hrtest.run([REPORT, DB, "-o", out])
assert os.stat(out).st_mode & 0o777 == 0o600, oct(os.stat(out).st_mode)
with open(out, encoding="utf-8") as fh:
    page = fh.read()
fails([DB, "-o", out], 3, "already exists")
hrtest.run([REPORT, DB, "-o", out, "--force"])
victim = os.path.join(tmp, "victim")
with open(victim, "w") as fh:
    fh.write("keep\n")
link = os.path.join(tmp, "link.html")
os.symlink(victim, link)
fails([DB, "-o", link], 3, "already exists")
hrtest.run([REPORT, DB, "-o", link, "--force"])    # replaces the link, not its target
assert open(victim).read() == "keep\n" and not os.path.islink(link)
assert not [n for n in os.listdir(tmp) if ".html." in n], os.listdir(tmp)   # no temporary left

# One file: nothing fetched from elsewhere.
assert not re.search(r'<(script|img|link)[^>]+(src|href)=|url\(|@import', page, re.I), \
    "the page loads something"
m = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
data = json.loads(m.group(1))
p = data["procs"][0]
assert [EVIL] == [label for _, label in p["marks"] if label == EVIL], p["marks"]
assert p["cmdline"] == "/opt/app/bin/app --name '</SCRIPT>'", p["cmdline"]
assert data["default_pid"] == 100 and p["pid"] == 100, (data["default_pid"], p["pid"])


def total(profile):
    return sum(profile["rows"][i + 2] for i in range(0, len(profile["rows"]), ROW))


# trace-snap's metrics and their column in a profile's rows (report/json.c)
METRICS = {"inuse_objects": 1, "inuse_space": 2, "alloc_objects": 3, "alloc_space": 4}


def flat(profile, col):
    """Column col of profile's rows summed per leaf function, zeros left out."""
    out = {}
    rows = profile["rows"]
    for i in range(0, len(rows), ROW):
        fn = data["fns"][data["frames"][3 * data["stacks"][rows[i]][0]]]
        out[fn] = out.get(fn, 0) + rows[i + col]
    return {fn: v for fn, v in out.items() if v}


def snap_flat(p, metric, *args):
    """trace-snap's flat column per function, zeros left out."""
    out = hrtest.run([hrtest.TRACE_SNAP, DB, "--pid", str(p["pid"]), "--format", "text",
                      "--metric", metric] + list(args)).stdout
    return {r[-1]: int(r[0]) for r in hrtest.snap_table(out)[1] if int(r[0])}


def check(p):
    """Every precomputed profile of process p as trace-snap answers it."""
    def snap(*args):
        return hrtest.snap_total(hrtest.run([hrtest.TRACE_SNAP, DB, "--pid", str(p["pid"]),
                                             "--format", "text"] + list(args)).stdout)
    marks = {t for t, _ in p["marks"]}
    assert marks <= set(p["points"]) and p["peak_t"] in p["points"], p["points"]
    assert len(p["points"]) == len(p["snaps"]) >= 101, len(p["points"])
    for i, (t, s) in enumerate(zip(p["points"], p["snaps"])):
        assert s["t2"] == t and total(s) == snap("--at", "%dns" % t), (p["pid"], t)
        for kind in ("heap", "mmap"):
            assert p["kinds"][kind][i] == snap("--kind", kind, "--at", "%dns" % t), (kind, t)
    grid = [p["points"][i] for i in p["grid"]]
    assert len(p["steady"]) == len(grid) * (len(grid) - 1) // 2, len(p["steady"])
    k = 0
    for i, t1 in enumerate(grid):
        for t2 in grid[i + 1:]:
            s = p["steady"][k]
            assert (s["t1"], s["t2"]) == (t1, t2), (s["t1"], s["t2"], t1, t2)
            window = "%dns..%dns" % (t1, t2)
            assert total(s) == snap("--steady", window), (p["pid"], t1, t2)
            for metric, col in METRICS.items():     # what it allocated too, per function
                assert flat(s, col) == snap_flat(p, metric, "--steady", window), \
                    (p["pid"], t1, t2, metric)
            k += 1
    for q in ("peak", "leaks", "temporary"):
        assert total(p[q]) == snap("--" + q), (p["pid"], q)
    return len(p["snaps"]), len(p["steady"])


assert [q["pid"] for q in data["procs"]] == [100, 200], [q["pid"] for q in data["procs"]]
assert any(data["procs"][0]["kinds"]["mmap"]) and not any(data["procs"][1]["kinds"]["mmap"])
counts = [check(q) for q in data["procs"]]
# the leaks name their functions through the dictionary
fns = {data["fns"][data["frames"][3 * fr]] for fr in data["stacks"][p["leaks"]["rows"][0]]}
assert "main" in fns and "_start" in fns, fns
print("ok: per process, snapshots and steady windows %s, peak, leaks, temporary as trace-snap"
      % counts)
