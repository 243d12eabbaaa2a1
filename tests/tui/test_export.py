"""The screen tells the truth: the numbers at the cursor equal trace-snap's
for the same instant, and `e` writes the view on screen as a .heap file
with those same totals, which google-pprof reads (skipped without it).
"""
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import hrtest
import tuitest as tt
from tuitest import MIB, S

D = hrtest.tmpdir("tui-export")
DB = os.path.join(D, "phases.db")
tt.build_fixture(DB)
TUI = hrtest.TRACE_TUI
HEADER = re.compile(r"^heap profile:\s*(-?\d+):\s*(-?\d+)\s*\[\s*(-?\d+):\s*(-?\d+)\]\s*@\s*heapprofile")


def heap_totals(path):
    """(in_n, in_b, al_n, al_b) from a .heap file's header line."""
    with open(path) as f:
        m = HEADER.match(f.readline())
    assert m, path
    return tuple(int(m.group(i)) for i in range(1, 5))


def snap(spec):
    out = os.path.join(D, "snap-%s.heap" % re.sub(r"\W", "_", spec))
    hrtest.run([hrtest.TRACE_SNAP, DB, "--at", spec, "-o", out])
    return heap_totals(out)


# Same instants in both tools, including event instants and a mark.
for spec, shown in (("3s", "3"), ("6s", "6"), ("5.25s", "5.25"), ("mark:late", "8.5"),
                    ("end", "10"), ("45%", "4.5")):
    in_n, in_b, al_n, _ = snap(spec)
    with tt.Tmux([TUI, "--at", spec, DB]) as tm:
        st, _ = tt.wait_status(tm, lambda st: st[0] == shown)
        assert (st[1], st[2], st[3]) == (in_b, in_n, al_n), (spec, st, in_b, in_n, al_n)
    print("at", spec, "tui == trace-snap:", in_b, "B", in_n, "objects", al_n, "allocs")

# Export the peak snapshot and a growth window.
peak = os.path.join(D, "peak.heap")
growth = os.path.join(D, "growth.heap")
with tt.Tmux([TUI, DB]) as tm:
    tt.wait_status(tm)
    tm.keys("p")
    tt.wait_status(tm, lambda st: st[0] == "6")
    tm.keys("e", "C-u")
    tm.wait(r"^export \(\.heap \.pb\.gz \.folded \.txt\):\s*$")
    tm.text(peak)
    tm.keys("Enter")
    tm.wait(r"wrote " + re.escape(peak))
    assert heap_totals(peak)[:3] == (tt.PEAK_OBJECTS, tt.PEAK_BYTES, 10), heap_totals(peak)
    assert os.stat(peak).st_mode & 0o077 == 0, oct(os.stat(peak).st_mode)
    # An existing file is replaced only when the user says so.
    before = open(peak).read()
    tm.keys("e", "C-u")
    tm.text(peak)
    tm.keys("Enter")
    tm.wait(re.escape(peak) + r" exists: replace it\? \(y/N\)")
    tm.keys("n")
    tm.wait(re.escape(peak) + r" kept, nothing written")
    assert open(peak).read() == before
    tm.keys("Home", "[", "m", "]")
    tt.wait_status(tm, lambda st: st[4].startswith("growth 0s..4.8s"))
    tm.keys("e", "C-u")
    tm.text(growth)
    tm.keys("Enter")
    tm.wait(r"wrote " + re.escape(growth))
g = heap_totals(growth)
assert g[:2] == (7, 4 * MIB + 300), g
print("exported", peak, heap_totals(peak), growth, g)

# The prompt proposes a name from the database and the instant (in the
# directory trace-tui runs in); the extension typed chooses the format; the
# database itself is never written over, even when the user says yes.
OUT = hrtest.tmpdir("tui-export-out")
with tt.Tmux([TUI, "--at", "6s", DB], cwd=OUT) as tm:
    tt.wait_status(tm, lambda st: st[0] == "6")
    tm.keys("e")
    tm.wait(r"^export \(\.heap \.pb\.gz \.folded \.txt\): phases-6s\.heap\s*$")
    tm.keys("Enter")
    tm.wait(r"^wrote phases-6s\.heap\s*$")
    assert heap_totals(os.path.join(OUT, "phases-6s.heap"))[:2] == (tt.PEAK_OBJECTS, tt.PEAK_BYTES)
    tm.keys("Home", "[", "m", "]")
    tt.wait_status(tm, lambda st: st[4].startswith("growth 0s..4.8s"))
    tm.keys("e")
    tm.wait(r"phases-growth-0s-4\.8s\.heap\s*$")
    for ext in ("folded", "txt", "pb.gz", "svg"):
        tm.keys("BSpace", "BSpace", "BSpace", "BSpace")
        tm.text(ext)
        tm.keys("Enter")
        tm.wait(r"^wrote phases-growth-0s-4\.8s\.%s\s*$" % re.escape(ext))
        tm.keys("e")
        tm.wait(r"phases-growth-0s-4\.8s\.heap\s*$")
    # the flame graph of the growth: its root as wide as the folded stacks
    fg = ET.parse(os.path.join(OUT, "phases-growth-0s-4.8s.svg")).getroot()
    with open(os.path.join(OUT, "phases-growth-0s-4.8s.folded")) as fh:
        fold = sum(int(l.rsplit(" ", 1)[1]) for l in fh)
    assert fg.get("data-total") == str(fold) and fold > 0, (fg.attrib, fold)
    tm.keys("C-u")
    tm.text("view.xyz")
    tm.keys("Enter")
    tm.wait(r"export failed: view\.xyz: unknown extension \(use \.heap, \.pb\.gz, \.folded, \.txt or \.svg\)")
    link = os.path.join(OUT, "db.heap")
    os.symlink(DB, link)
    size = os.path.getsize(DB)
    tm.keys("e", "C-u")
    tm.text(link)
    tm.keys("Enter")
    tm.wait(r"export failed: .*db\.heap: is the database being read, not overwritten")
    assert os.path.getsize(DB) == size and os.path.islink(link)
base = os.path.join(OUT, "phases-growth-0s-4.8s.")
with open(base + "folded") as f:
    folded = f.read()
# Growth 0..4.8 s: alloc_big 4 MiB and alloc_small 300 B, whole stacks root first.
assert folded == ("_start;main;grow_phase;alloc_big %d\n_start;main;grow_phase;alloc_small 300\n"
                  % (4 * MIB)), folded
with open(base + "txt") as f:
    text = f.read()
assert re.search(r"\b%d\b.*alloc_big" % (4 * MIB), text), text
with open(base + "pb.gz", "rb") as f:
    assert f.read(2) == b"\x1f\x8b"
for ext in ("folded", "txt", "pb.gz"):
    assert os.stat(base + ext).st_mode & 0o077 == 0, ext
print("proposed name, formats by extension, database refused:", sorted(os.listdir(OUT)))

pprof = shutil.which("google-pprof")
if not pprof:
    hrtest.skip("google-pprof is not installed (the files were checked by hand)")
# The fixture's program does not exist: any binary lets google-pprof read
# the profile, and the leaf addresses carry the known bytes.
p = subprocess.run([pprof, "--text", "--show_bytes", "/bin/true", peak], capture_output=True,
                   text=True)
assert p.returncode == 0, p.stderr
m = re.search(r"Total: (\d+) B", p.stdout)
assert m and int(m.group(1)) == tt.PEAK_BYTES, p.stdout + p.stderr
big = "0x%016x" % (0x401000 + 0x100 * 4 - 1)   # the leaf minus one (queries/heap.c)
assert re.search(r"^\s*%d\s.*%s$" % (4 * MIB, big), p.stdout, re.M), p.stdout
print("google-pprof reads", peak, "Total:", m.group(1), "B")
print("ok")
