"""test_base - trace-snap NEW.db --base OLD.db: two recordings of our
q_known program, the base with its defaults (4 blocks from leak_some, 2
from mid) and the new run with `q_known 7 1`, compared at each run's own
peak (27229 B and 23228 B) and at its leaks: exact per-function changes in
the text table, signed folded stacks, a differential SVG (the new run's
widths, the change in each title, blue for shrinkage and red for growth,
and what only the base holds counted in the header); instants resolved in
each database; frames matched by function and file name, whatever their
addresses and directories (fixture databases); a missing, corrupt or
mistaken base is one line and the README's exit code."""
import os
import re
import xml.etree.ElementTree as ET

import hrtest
import fixture

SNAP = hrtest.TRACE_SNAP
NS = "{http://www.w3.org/2000/svg}"
PROG = os.path.join(hrtest.REC_BUILD, "tests", "queries", "q_known")
tmp, _, OLD = hrtest.recorded_db(PROG, "q-base", needs=(SNAP,))
NEW = os.path.join(tmp, "new.db")
hrtest.record([PROG, "7", "1"], os.path.join(tmp, "new.trc"))
hrtest.run([hrtest.TRACE_IMPORT, "-q", os.path.join(tmp, "new.trc"), NEW])
checks = 0


def snap(*args, ok=0):
    p = hrtest.run([SNAP, NEW, "--base", OLD] + list(args), check=False)
    assert p.returncode == ok, (args, p.returncode, p.stdout, p.stderr)
    return p


def fails(args, code, text):
    global checks
    p = hrtest.run([SNAP] + args, check=False)
    assert p.returncode == code and p.stderr.count("\n") == 1 and text in p.stderr, (args, p)
    checks += 1


# The text table at each run's peak: base, new, change per function.
out = snap("--peak").stdout.splitlines()
assert out[0] == "Total: -4001 B (-3.9 KiB), from 27229 B (26.6 KiB) in the base to 23228 B " \
    "(22.7 KiB) in the new run", out
assert out[1].startswith("Base: live bytes of process ") and out[1].endswith(
    "the live set at the peak, %s" % out[1].rsplit(" ", 1)[1]) and "(%s)" % OLD in out[1], out
assert out[2].startswith("New: live bytes of process ") and "(%s)" % NEW in out[2], out
assert out[3].split() == ["base", "human", "new", "human", "change", "human", "cum-change",
                          "human", "function"], out


def table(lines):
    """The rows after the header: {name: (base, new, change, cum-change)}."""
    rows = {}
    for line in lines:
        w = line.split(None, 12)  # base N U new N U change N U cum-change N U name
        rows[w[12]] = (int(w[0]), int(w[3]), int(w[6]), int(w[9]))
    return rows


rows = table(out[4:])
want = {"alloc_big": (25000, 20000, -5000, -5000), "leak_some": (1332, 2331, 999, 999),
        "mid": (0, 0, 0, -5000), "main": (0, 0, 0, -4001),
        "alloc_small": (120, 120, 0, 0), "churn": (777, 777, 0, 0)}
assert {k: rows.get(k + " q_known.c") for k in want} == want, rows
assert list(rows)[:2] == ["alloc_big q_known.c", "leak_some q_known.c"], rows  # largest first
checks += 1

# Objects: one mid block fewer, three leak_some blocks more.
out = snap("--peak", "--metric", "inuse_objects").stdout.splitlines()
assert out[0] == "Total: +2 objects, from 15 objects in the base to 17 objects in the new run", out
checks += 1

# Signed folded stacks: the paths that changed, summing to the total change.
fold = snap("--peak", "--format", "folded").stdout.splitlines()
got = sorted((l.rsplit(" ", 1)[0].split(";main q_known.c;", 1)[1], int(l.rsplit(" ", 1)[1]))
             for l in fold)
assert got == [("leak_some q_known.c", 999), ("mid q_known.c;alloc_big q_known.c", -5000)], fold
checks += 1

# The differential flame graph: the new run's widths, the change in titles.
svg = os.path.join(tmp, "d.svg")
snap("--peak", "-o", svg)
assert oct(os.stat(svg).st_mode & 0o777) == "0o600"
root = ET.parse(svg).getroot()
boxes = {}
for g in root.iter(NS + "g"):
    if g.get("class") == "f":
        title = g.find(NS + "title").text.split("\n")
        boxes.setdefault(title[0], []).append((int(g.get("data-v")), title[1],
                                               g.find(NS + "rect").get("fill")))
assert root.get("data-total") == "23228" and boxes["all"][0][0] == 23228, boxes["all"]
boxes = {k.replace(" q_known.c", ""): v for k, v in boxes.items()}
v, title, fill = boxes["mid"][0]
assert v == 5000 and title == "new 5000 B (4.9 KiB), base 10000 B (9.8 KiB), change " \
    "-5000 B (-4.9 KiB)", boxes["mid"]
assert re.fullmatch(r"rgb\((\d+),\1,255\)", fill), fill          # blue: shrank
v, title, fill = boxes["leak_some"][0]
assert v == 2331 and title.endswith("change +999 B (+999 B)"), boxes["leak_some"]
assert re.fullmatch(r"rgb\(255,(\d+),\1\)", fill), fill          # red: grew
assert boxes["churn"][0][2] == "rgb(225,225,225)", boxes["churn"]  # grey: unchanged
checks += 1

# At the leaks, mid's block is only in the base: not drawn, and said so.
snap("--leaks", "-o", svg, "--force")
head = [t.text for t in ET.parse(svg).getroot().iter(NS + "text") if t.get("class") == "head"]
assert head[1] == "Total: -4001 B (-3.9 KiB), from 6332 B (6.2 KiB) in the base to 2331 B " \
    "(2.3 KiB) in the new run", head
assert head[2] == "Left out: 1 call path of the base with nothing in the new run (5000 B " \
    "(4.9 KiB) in the base) not drawn (--format text shows them)", head
checks += 1

# Instants are each database's own: an instant past the base's end is
# outside the base (exit 4), and the error says it is the base's.
c_old, c_new = hrtest.connect(OLD), hrtest.connect(NEW)
end_old = hrtest.one(c_old, "SELECT t_end FROM processes")
end_new = hrtest.one(c_new, "SELECT t_end FROM processes")
longer, shorter = (NEW, OLD) if end_new > end_old else (OLD, NEW)
t = "%dns" % max(end_old, end_new)
fails([longer, "--base", shorter, "--at", t], 4, "--base %s: time '%s' is outside" % (shorter, t))
out = hrtest.run([SNAP, NEW, "--base", OLD, "--at", "end"]).stdout
assert out.startswith("Total: -4001 B (-3.9 KiB), from 6332 B"), out   # each run's end
checks += 1

# Frames meet by function and file name: other addresses, another build
# directory; a function of the same name in another file stays apart.
FX = {}
for run, ip, d, grow in (("old", 0x1000, "/src/v1/", 0), ("new", 0x9000, "/build/v2/", 50)):
    FX[run] = os.path.join(tmp, run + "-fx.db")
    fx = fixture.Fixture(FX[run])
    fx.process(100)
    main = (ip + 0x100, "main", d + "main.c", 3, 0)
    fx.alloc(100, fixture.S, 100, fx.stack((ip + 0x10, "helper", d + "a.c", 5, 0), main))
    fx.alloc(100, fixture.S, 200 + grow, fx.stack((ip + 0x20, "helper", d + "b.c", 9, 0), main))
    fx.alloc(100, fixture.S, 300, fx.stack((ip + 0x30, "work", None, 0, 0), main))
    fx.finish()
out = hrtest.run([SNAP, FX["new"], "--base", FX["old"], "--at", "end"]).stdout.splitlines()
assert out[0].startswith("Total: +50 B (+50 B), from 600 B"), out
assert table(out[4:]) == {"helper b.c": (200, 250, 50, 50), "main main.c": (0, 0, 0, 50),
                          "helper a.c": (100, 100, 0, 0), "work": (300, 300, 0, 0)}, out
out = hrtest.run([SNAP, FX["new"], "--base", FX["old"], "--at", "end", "--format",
                  "folded"]).stdout
assert out == "main main.c;helper b.c 50\n", out
checks += 1

# A missing or corrupt base, one that is the output, and misuse.
BAD = os.path.join(tmp, "bad.db")
with open(BAD, "wb") as fh:
    fh.write(b"not a database at all" * 100)
fails([NEW, "--base", os.path.join(tmp, "none.db"), "--peak"], 1,
      "--base %s: " % os.path.join(tmp, "none.db"))
fails([NEW, "--base", BAD, "--peak"], 1, "--base %s: not a heapreel database" % BAD)
fails([NEW, "--base", OLD, "--peak", "--format", "folded", "-o", OLD, "--force"], 3,
      "is the database being read")
fails([NEW, "--base", OLD, "--peak", "--base-pid", "1"], 4, "no process with pid 1")
fails([NEW, "--base", OLD, "--peak", "--format", "heap"], 2, "--base writes text, folded or svg")
fails([NEW, "--base", OLD, "--peak", "--by", "stack"], 2, "no --by stack")
fails([NEW, "--base", OLD, "--peak", "--tid", "1"], 2, "--base compares per-stack questions")
fails([NEW, "--base", OLD, "--stats"], 2, "--base compares per-stack questions")
fails([NEW, "--peak", "--base-pid", "1"], 2, "--base-pid goes with --base")
print("ok: %d checks" % checks)
