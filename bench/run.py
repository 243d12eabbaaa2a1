#!/usr/bin/env python3
"""run.py - heapreel's benchmark harness, started by `./heapreel bench`.

Builds the workloads of bench/workloads/ (ours: churn.c, ~2.2 M and ~10 M
allocation calls; the sqlite3 CLI on the 150 k rows of gen_sql.py's script;
pychurn.py under the system python3 with PYTHONMALLOC=malloc; the compile
of bigcxx.cc by g++ -O1 -c, timed as the cc1plus it runs)
and runs each one
alternately without profiler, under the clock floor (bench/clock_floor.c: a
preloaded malloc family that only reads the clock once per call, the least
a recorder that stamps every event with its time can cost), under
libheapreel.so with REC_DEPTH=1 (everything the recorder does but walk the
stack beyond the call site: what a free walk would leave), under
libheapreel.so, under heaptrack and under `heaptrack -r` (record only), at
least --runs times each. It prints, per
workload: the median wall-time ratio vs the baseline with its min-max, trace
bytes per event (and heaptrack -r's trace bytes over the same events), the
recorder's extra peak RSS, the writer thread's CPU time
(its own figure, in the trace's heapreel.stats mark) and the issue-2 overhead
target; then, for each later stage that is built, its figures (import,
snapshots, TUI steps). A stage that is not built is skipped with one line.
Then many small traces (issue 22): bench/workloads/spawn.c forks
MANY_CHILDREN children under trace-record, one trace each, and the run's
directory is imported alternately with the same allocations made by one
process (spawn's WAVE 0): total import time, ms per trace, events per
second, and the many traces' cost beyond their events (medians).
Last, bounded recording's memory: our own workload bench/bounded_live.c
(5 M live blocks, churned) run alternately without profiler, recorded and
recorded under REC_MAX_SIZE, with the recorder's extra peak RSS per live
block and the wall times (medians). And the custom allocator API's cost
per call (issue 23): bench/pool_calls.c's loop of rec_pool_alloc and
rec_pool_free pairs timed by itself, alternately without the recorder
(the weak calls skipped), recorded and recorded while stopped (medians);
likewise bench/mmap_calls.c's anonymous mmap + munmap pairs (the mmap
hooks' cost per call, --only mmap), which on the sqlite3 workload, times its
mmap-family system calls (strace -c), gives the hooks' share of its run.

--shadow runs every recording with REC_SHADOW=1 (stack capture through
the shadow stack, recorder/shadow.c).

--check-stacks runs every recording with REC_CHECK_STACKS=1 (each stack
checked against a full libunwind walk; a difference aborts the run): the
figures then mean nothing, and the last line counts the recorded runs and
those that found a difference.

It must never run from .ci/run (CI runs the tests only), and never leave big
files behind: everything goes to a temporary directory, removed at the end
unless --keep.
"""
import argparse
import fcntl
import json
import os
import pty
import re
import shutil
import signal
import shlex
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = os.path.join(REPO, "bench", "workloads")
HEAPTRACK_AS_LIMIT = 4 << 30   # heaptrack's analysis can grow to 18 GiB: cap it
GNU_TIME = "/usr/bin/time"     # Debian package "time"
RUN_TIMEOUT_S = 900            # a run that hangs is killed and counted failed
SQLITE_ROWS = 150000
QUICK_SQLITE_ROWS = 10000
PY_ROUNDS, PY_DEPTH = 10, 40  # pychurn.py: ~30 k nodes, ~3 M malloc calls
QUICK_PY_ROUNDS = 2
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's; else the one running this
CXX_SOURCE = "bigcxx.cc"
SNAP_INSTANTS = [5, 15, 25, 35, 45, 55, 65, 75, 85, 95]  # % of the trace
SAMPLE_PERIODS = (4096, 65536, 524288)  # REC_SAMPLE bytes: overhead should fall as it grows
SAMPLE_TARGET = 1.05          # issue 6: --sample 524288 costs at most 5 %
SAMPLE_TARGET_ROUNDS = 8      # the target period runs this many times --runs times
IMPORT_RUNS = 3               # imports (and heaptrack_prints) per workload
BOUNDED_SIZE = "64M"          # REC_MAX_SIZE of the bounded runs (issue 7)
STATS_MS = 10                 # REC_STATS_MS of the counters runs (issue 23: the default)
STATS_TARGET = 1.01           # issue 23: sampling the counters costs at most 1 %
STATS_ROUNDS = 4              # the counters runs: this many times --runs pairs
LIVE_BLOCKS = 5000000         # bounded_live: blocks live at once
REPORT_OPENS = 5              # trace-report's page opened this many times in Chromium
QUICK_LIVE_BLOCKS = 500000
LIVE_ROUNDS = 40              # bounded_live: churn rounds (a tenth of the blocks each)
# REC_MAX_SIZE of the bounded_live runs: a quarter must hold a keyframe of
# 5 M blocks (about 16 bytes each), and the run writes several keyframes.
LIVE_MAX_SIZE = "512M"
POOL_PAIRS = 2000000          # pool_calls: rec_pool_alloc + rec_pool_free pairs per run
QUICK_POOL_PAIRS = 200000
MMAP_PAIRS = 200000           # mmap_calls: mmap + munmap pairs per run
QUICK_MMAP_PAIRS = 20000
MANY_CHILDREN = 3000          # import_many: traces of one run (issue 22: < 10 s)
QUICK_MANY_CHILDREN = 300
MANY_BLOCKS = 125             # allocations per child (~750 k events in all, as in issue 22)
MANY_WAVE = 4                 # children alive at a time
TUI_STEPS = 100               # cursor steps timed by trace-tui --bench-steps
PTY_COLS, PTY_ROWS = 120, 40  # the terminal the TUI is timed in
KIB = 1024
MIB = 1024 * 1024

# Hook for the recorder's ring-full wait counter (issue 2 target: no
# application thread ever waits on the writer). Looked for, in this order: a
# key of trace-dump --summary; the recorder's closing mark
# "heapreel.stats ring_waits=N lost=N ..." in the database; the same mark in
# trace-dump's text (when trace-import is not built).
RING_WAIT_KEY = "ring_waits"
STATS_MARK = "heapreel.stats"

# Messages by which a heaptrack run shows that its analysis died even when
# the traced program itself exited 0 (the heaptrack script returns the
# program's exit code).
HEAPTRACK_FAILURE_SIGNS = ("bad_alloc", "terminate called", "Killed",
                           "Aborted", "Segmentation fault", "Broken pipe")

CHECK_ENV = "REC_CHECK_STACKS"  # --check-stacks sets it to 1 for every run
SHADOW_ENV = "REC_SHADOW"       # --shadow sets it to 1 for every run
DIFFER_LINE = "REC_CHECK_STACKS: stacks differ: "  # heads the recorder's report
checks = {"on": False, "shadow": False, "runs": 0, "differ": 0}    # --check-stacks' tally, --shadow

VARIANTS = ("base", "floor", "depth1", "rec", "ht", "htr")
LABELS = {"base": "base", "floor": "clock floor", "depth1": "REC_DEPTH=1", "rec": "libheapreel.so",
          "ht": "heaptrack", "htr": "heaptrack -r"}


class Run:
    """One timed run: exit status, wall seconds, peak RSS (bytes), CPU
    seconds (user + system; None unless measured), stderr."""

    def __init__(self, rc, wall, rss, cpu, err, timed_out):
        self.rc, self.wall, self.rss, self.cpu, self.err = rc, wall, rss, cpu, err
        self.timed_out = timed_out

    @property
    def ok(self):
        return self.rc == 0 and not self.timed_out


def timed(argv, env=None, cwd=None, rss=True):
    """Runs argv; measures its wall time and, with rss, its peak RSS and
    CPU time.

    The peak RSS comes from GNU time (%M: the maximum over the program and
    its waited-for children, such as heaptrack's interpreter), not from
    wait4 here: a child forked from this Python process keeps Python's own
    RSS high-water mark across exec, which would hide small differences."""
    with tempfile.NamedTemporaryFile() as rssf, tempfile.TemporaryFile() as errf:
        cmd = [GNU_TIME, "-f", "%M %U %S", "-o", rssf.name] + argv if rss else argv
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
        killed = []

        def kill():
            killed.append(True)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(RUN_TIMEOUT_S, kill)
        timer.start()
        rc = p.wait()
        wall = time.monotonic() - t0
        timer.cancel()
        errf.seek(0)
        err = errf.read().decode(errors="replace")
        f = rssf.read().decode(errors="replace").split()
        measured = rss and len(f) >= 3 and f[-3].isdigit()
        peak = int(f[-3]) * KIB if measured else 0
        cpu = float(f[-2]) + float(f[-1]) if measured else None
    return Run(rc, wall, peak, cpu, err, bool(killed))


def last_line(text):
    """The last non-empty line of a program's stderr: where it says what went wrong."""
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:160] if lines else ""


# ---- workloads ----------------------------------------------------------------

def cc1plus_argv(work, src):
    """The cc1plus command line g++ -O1 -c src runs (from g++ -###), its
    assembly written into work: the compiler proper, without the driver
    and the assembler, so that every variant records the one process that
    allocates."""
    p = subprocess.run(["g++", "-std=c++17", "-O1", "-###", "-c", src, "-o",
                        os.path.join(work, "bigcxx.o")], capture_output=True, text=True)
    line = next((l for l in p.stderr.splitlines() if "cc1plus" in l), None)
    if p.returncode != 0 or line is None:
        sys.exit("bench: g++ -### names no cc1plus: %s" % last_line(p.stderr))
    argv = shlex.split(line)
    argv[argv.index("-o") + 1] = os.path.join(work, "bigcxx.s")
    return argv


def prepare_workloads(work, quick):
    """Builds churn and the SQL script; returns [(name, argv, env)], env
    the variables a workload runs with under every variant."""
    churn = os.path.join(work, "churn")
    subprocess.run(["cc", "-std=c17", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread",
                    os.path.join(WORKLOADS, "churn.c"), "-o", churn], check=True)
    rows = QUICK_SQLITE_ROWS if quick else SQLITE_ROWS
    sql = os.path.join(work, "w.sql")
    subprocess.run([sys.executable, os.path.join(WORKLOADS, "gen_sql.py"),
                    sql, str(rows)], check=True, stdout=subprocess.DEVNULL)
    sqlite_bin = shutil.which("sqlite3")
    if not sqlite_bin:
        sys.exit("bench: sqlite3 is not installed (./heapreel setup)")
    small, large = (50000, 200000) if quick else (1000000, 4500000)
    python = SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else sys.executable
    py_rounds = QUICK_PY_ROUNDS if quick else PY_ROUNDS
    return [
        ("churn 4x%s" % human_count(small), [churn, "4", str(small), "42"], {}),
        ("churn 4x%s" % human_count(large), [churn, "4", str(large), "42"], {}),
        ("sqlite3 %s rows" % human_count(rows), [sqlite_bin, ":memory:", ".read " + sql], {}),
        ("python3 pychurn.py %d %d" % (py_rounds, PY_DEPTH),
         [python, os.path.join(WORKLOADS, "pychurn.py"), str(py_rounds), str(PY_DEPTH)],
         {"PYTHONMALLOC": "malloc"}),
        ("g++ -O1 -c %s (cc1plus)" % CXX_SOURCE,
         cc1plus_argv(work, os.path.join(WORKLOADS, CXX_SOURCE)), {}),
    ]


def human_count(n):
    if n >= 1000000:
        return ("%.1fM" % (n / 1e6)).replace(".0M", "M")
    if n >= 1000:
        return "%dk" % (n // 1000)
    return str(n)


def clean_env():
    """The environment without any profiler preloaded or configured (but
    REC_CHECK_STACKS=1 under --check-stacks, REC_SHADOW=1 under --shadow)."""
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("REC_")}
    if checks["on"]:
        env[CHECK_ENV] = "1"
    if checks["shadow"]:
        env[SHADOW_ENV] = "1"
    return env


def tally_check(err):
    """Counts a recorded run under --check-stacks, and whether the
    recorder found a stack that differs (its stderr says so)."""
    if checks["on"]:
        checks["runs"] += 1
        checks["differ"] += DIFFER_LINE in err


def heaptrack_output(prefix):
    """The file heaptrack wrote for -o PREFIX (it appends .zst/.gz/.raw.*)."""
    d, base = os.path.split(prefix)
    found = [os.path.join(d, f) for f in os.listdir(d) if f.startswith(base + ".")]
    return found[0] if found else None


def run_variant(variant, argv, tools, work, tag, sample=None, max_size=None, stats_ms=None,
                wenv=None):
    """One run of one variant; returns (Run, output file or None). sample,
    max_size, stats_ms: for "rec", REC_SAMPLE, REC_MAX_SIZE and REC_STATS_MS
    (None: the recorder's default); wenv: the workload's own variables.
    "depth1" is "rec" with REC_DEPTH=1."""
    env = clean_env()
    env.update(wenv or {})
    # The preload is set by env(1) after GNU time, so that only the workload
    # is recorded; the baseline goes through env(1) too, for the same cost.
    if variant == "base":
        return timed(["env"] + argv, env=env, cwd=work), None
    if variant == "floor":
        return timed(["env", "LD_PRELOAD=" + tools["floor"]] + argv, env=env, cwd=work), None
    if variant in ("rec", "depth1"):
        trc = os.path.join(work, tag + ".trc")
        period = ["REC_DEPTH=1"] if variant == "depth1" else []
        period += ["REC_SAMPLE=%d" % sample] if sample else []
        period += ["REC_MAX_SIZE=%s" % max_size] if max_size else []
        period += ["REC_STATS_MS=%d" % stats_ms] if stats_ms is not None else []
        r = timed(["env", "LD_PRELOAD=" + tools["librec"], "REC_OUT=" + trc] + period + argv,
                  env=env, cwd=work)
        if r.ok and not os.path.exists(trc):
            r.rc, r.err = -1, "no trace written to %s" % trc
        tally_check(r.err)
        return r, trc
    prefix = os.path.join(work, tag)
    cmd = ["prlimit", "--as=%d" % HEAPTRACK_AS_LIMIT, "--", "heaptrack"]
    if variant == "htr":
        cmd.append("-r")
    r = timed(cmd + ["-o", prefix] + argv, env=env, cwd=work)
    out = heaptrack_output(prefix)
    if r.ok and (out is None or os.path.getsize(out) == 0
                 or any(s in r.err for s in HEAPTRACK_FAILURE_SIGNS)):
        r.rc = r.rc or -1
    return r, out


def tag_of(name, variant, i):
    """The file name stem of run i of a variant of workload `name`."""
    return "%s-%s-%d" % (re.sub(r"\W+", "_", name), variant, i)


def why_failed(runs):
    """Why the first failed run of `runs` failed, in a few words."""
    bad = next(r for r in runs if not r.ok)
    return "timed out" if bad.timed_out else "exit %d: %s" % (bad.rc, last_line(bad.err))


def remove(path):
    if path and os.path.exists(path):
        os.remove(path)
    if path and os.path.exists(path + ".ring"):
        os.remove(path + ".ring")


# ---- statistics and printing ---------------------------------------------------

def ratio_stats(runs, base_median):
    walls = [r.wall for r in runs if r.ok]
    if not walls:
        return None
    rs = [w / base_median for w in walls]
    return statistics.median(walls), statistics.median(rs), min(rs), max(rs)


def fmt_ratio(st):
    return "%.2fx (%.2f-%.2f)" % (st[1], st[2], st[3])


def median_run(runs):
    """The run of median wall time (the upper one of an even count)."""
    return sorted(runs, key=lambda x: x.wall)[len(runs) // 2]


def fmt_bytes(n):
    sign = "-" if n < 0 else "+"
    n = abs(n)
    if n >= MIB:
        return "%s%.1f MiB" % (sign, n / MIB)
    return "%s%.0f KiB" % (sign, n / KIB)


def trace_summary(dump, trc):
    p = subprocess.run([dump, "--summary", trc], capture_output=True, text=True)
    if p.returncode != 0:
        return None, last_line(p.stderr)
    d = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition(" ")
        d[k] = v.strip()
    return d, None


def stats_marks(res, db):
    """The labels of the recorder's STATS_MARK marks (one per process)."""
    if db:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        try:
            return [r[0] for r in con.execute(
                "SELECT label FROM marks WHERE label LIKE ? ORDER BY pid", (STATS_MARK + "%",))]
        finally:
            con.close()
    labels = []
    with subprocess.Popen([res["dump"], res["trace"]], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as p:
        for line in p.stdout:
            if line.startswith("mark") and STATS_MARK in line:
                labels.append(line[line.index(STATS_MARK):].strip())
    return labels


def mark_values(res, db, key, what):
    """(labels, values of key=N) of the kept trace's STATS_MARK marks, or
    None after a line (headed `what`) saying why there are none."""
    try:
        labels = stats_marks(res, db)
    except (sqlite3.Error, OSError) as e:
        print("  %-17s n/a: cannot read the recorder's marks (%s)" % (what, e))
        return None
    values = [int(m.group(1)) for m in (re.search(r"\b%s=(\d+)" % key, l) for l in labels) if m]
    if not values:
        print("  %-17s n/a: no %s key and no %s mark in the trace" % (what, key, STATS_MARK))
        return None
    return labels, values


def report_ring_waits(res, db):
    summary = res["summary"] or {}
    if RING_WAIT_KEY in summary:
        print("  ring-full waits   %s (trace-dump --summary)" % summary[RING_WAIT_KEY])
        return
    got = mark_values(res, db, RING_WAIT_KEY, "ring-full waits") if res["trace"] else None
    if got:
        print("  ring-full waits   %d (recorder: %s)" % (sum(got[1]), "; ".join(
            l[len(STATS_MARK):].strip() for l in got[0])))


def report_writer_cpu(res, db):
    """The writer thread's CPU time in the kept recording (each process's
    heapreel.stats mark says it: writer_cpu_us), and the share of a core
    it is over that run's wall time."""
    got = mark_values(res, db, "writer_cpu_us", "writer CPU") if res["trace"] else None
    if not got:
        return
    cpu = sum(got[1]) / 1e6
    core = cpu / res["trace_wall"] if res["trace_wall"] else float("nan")
    print("  writer CPU        %.2f s, %.2f core over the recorded run's %.2f s wall (issue 25 target"
          " <= 0.5 core: %s)" % (cpu, core, res["trace_wall"] or 0,
                                "MET" if core <= 0.5 else "NOT MET"))
    res["row"]["writer"] = "%.2f s (%.2f core)" % (cpu, core)


def report_htr_size(htr, events, row):
    """heaptrack -r's trace bytes over the events libheapreel.so recorded
    in its own run of the workload (the same calls: issue 25's target is a
    trace no larger per allocation call)."""
    if not htr or not events:
        return
    bpe = os.path.getsize(htr) / events
    print("  heaptrack -r      %.2f B/event (its trace of %.1f MiB over the events above)" % (
        bpe, os.path.getsize(htr) / MIB))
    row["htr_bpe"] = "%.2f" % bpe


def bench_recording(name, argv, tools, work, runs, wenv):
    """Alternating runs of every variant; prints the recording figures and
    returns what later stages need."""
    results = {v: [] for v in VARIANTS}
    keep = {}      # variant -> output file of its last successful run
    kept_wall = {}  # variant -> that run's wall time
    tty = sys.stderr.isatty()
    for i in range(runs):
        if tty:
            print("  round %d/%d ..." % (i + 1, runs), file=sys.stderr, end="\r", flush=True)
        for v in VARIANTS:
            if v in ("ht", "htr") and not tools["heaptrack"]:
                continue
            if v == "floor" and not tools["floor"]:
                continue
            r, out = run_variant(v, argv, tools, work, tag_of(name, v, i), wenv=wenv)
            results[v].append(r)
            if v == "depth1":
                remove(out)
            elif r.ok and out:
                remove(keep.get(v))
                keep[v] = out
                kept_wall[v] = r.wall
            elif out:
                remove(out)
    base = [r for r in results["base"] if r.ok]
    print("\n== %s: %s%s (%d alternating runs of each)" % (
        name, "".join("%s=%s " % kv for kv in sorted(wenv.items())), " ".join(argv), runs))
    if not base:
        print("  base              FAILED: %s" % last_line(results["base"][0].err))
        return None
    calls = re.search(r"alloc_calls=(\d+)", base[-1].err)
    t_base = statistics.median(r.wall for r in base)
    print("  base              %.3f s median%s" % (
        t_base, ", %s allocation calls" % calls.group(1) if calls else ""))
    stats = {}
    row = {"workload": name}  # this workload's line of the closing table
    for v in ("floor", "depth1", "rec", "ht", "htr"):
        rs = results[v]
        if v == "floor" and not rs:
            continue
        if not rs:
            print("  %-17s skipped: heaptrack is not installed (./heapreel setup --bench)" % LABELS[v])
            continue
        nfail = sum(1 for r in rs if not r.ok)
        st = ratio_stats(rs, t_base)
        stats[v] = st
        if st is None:
            why = why_failed(rs)
            cap = " under prlimit --as=%d GiB" % (HEAPTRACK_AS_LIMIT >> 30) if v in ("ht", "htr") else ""
            print("  %-17s FAILED %d/%d%s (%s)" % (LABELS[v], nfail, len(rs), cap, why))
            row[v] = "failed"
            continue
        extra = " [%d/%d runs failed]" % (nfail, len(rs)) if nfail else ""
        print("  %-17s %s%s" % (LABELS[v], fmt_ratio(st), extra))
        row[v] = fmt_ratio(st)

    trc = keep.get("rec")
    summary = None
    if trc:
        summary, err = trace_summary(tools["dump"], trc)
        if summary is None:
            print("  trace             trace-dump --summary failed: %s" % err)
        else:
            events = int(summary.get("events", 0))
            size = int(summary.get("file_bytes", os.path.getsize(trc)))
            bpe = size / events if events else float("nan")
            print("  trace             %.2f B/event (%d events, %.1f MiB)" % (
                bpe, events, size / MIB))
            row["bpe"] = "%.2f" % bpe
            report_htr_size(keep.get("htr"), events, row)
    pairs = [r.rss - b.rss for b, r in zip(results["base"], results["rec"]) if b.ok and r.ok]
    if pairs:
        print("  recorder RSS      %s extra peak RSS (median of %d pairs)" % (
            fmt_bytes(statistics.median(pairs)), len(pairs)))
        row["rss"] = fmt_bytes(statistics.median(pairs))
    row["target"] = check_target(stats, t_base)
    return {"name": name, "t_base": t_base, "stats": stats, "trace": trc, "dump": tools["dump"],
            "row": row,
            "summary": summary, "ht_file": keep.get("ht"), "keep": keep,
            "trace_wall": kept_wall.get("rec"),
            "rec_wall": stats.get("rec") and stats["rec"][0]}


def bench_bounded(name, argv, tools, work, runs, wenv):
    """Bounded recording: unbounded alternated with REC_MAX_SIZE=BOUNDED_SIZE;
    the median ratio of the bounded wall time to the unbounded one (same
    run), and the largest bounded trace against the bound."""
    plain, bounded, sizes = [], [], []
    for i in range(runs):
        r, out = run_variant("rec", argv, tools, work, tag_of(name, "unbounded", i), wenv=wenv)
        plain.append(r)
        remove(out)
        r, out = run_variant("rec", argv, tools, work, tag_of(name, "bounded", i),
                             max_size=BOUNDED_SIZE, wenv=wenv)
        bounded.append(r)
        if r.ok:
            sizes.append(os.path.getsize(out))
        remove(out)
    walls = [r.wall for r in plain if r.ok]
    st = ratio_stats(bounded, statistics.median(walls)) if walls else None
    if st is None:
        print("  bounded           FAILED (%s)" % why_failed(plain if not walls else bounded))
        return
    print("  REC_MAX_SIZE=%s   %s of the unbounded recording; largest trace %d bytes" % (
        BOUNDED_SIZE, fmt_ratio(st), max(sizes)))


def bench_bounded_memory(tools, work, runs, quick):
    """Bounded recording's cost in the program's memory: bounded_live run
    alternately without profiler, under libheapreel.so and under libheapreel.so with
    REC_MAX_SIZE=LIVE_MAX_SIZE; the medians of peak RSS and wall time, and
    the extra peak RSS per live block of the bounded recording over the
    unbounded one (the keymap) and over no profiler."""
    prog = tools.get("bounded_live")
    if not prog:
        print("bounded memory: skipped (bench/bounded_live not built)")
        return
    live = QUICK_LIVE_BLOCKS if quick else LIVE_BLOCKS
    argv = [prog, str(live), str(LIVE_ROUNDS)]
    res = {"base": [], "rec": [], "bounded": []}
    for i in range(runs):
        res["base"].append(run_variant("base", argv, tools, work, "live-base-%d" % i)[0])
        for v, size in (("rec", None), ("bounded", LIVE_MAX_SIZE)):
            r, out = run_variant("rec", argv, tools, work, "live-%s-%d" % (v, i), max_size=size)
            res[v].append(r)
            remove(out)
    print("bounded memory: bounded_live, %s live blocks, REC_MAX_SIZE=%s, %d run(s)" % (
        human_count(live), LIVE_MAX_SIZE, runs))
    med = {}
    for v, rs in res.items():
        ok = [r for r in rs if r.ok]
        if not ok:
            print("  %-8s FAILED (%s)" % (v, why_failed(rs)))
            return
        med[v] = (statistics.median(r.wall for r in ok), statistics.median(r.rss for r in ok))
        print("  %-8s %8.2f s  peak RSS %s" % (v, med[v][0], fmt_bytes(med[v][1])))
    print("  bounded: %.1f bytes/live block over the unbounded recording, %.1f over no profiler;"
          " wall %.2fx the unbounded recording's" % (
              (med["bounded"][1] - med["rec"][1]) / live,
              (med["bounded"][1] - med["base"][1]) / live,
              med["bounded"][0] / med["rec"][0]))


def calls_run(prog, pairs, tools, work, variant, i):
    """One run of a calls program (pool_calls, mmap_calls): its ns per
    pair, None if it failed."""
    env = dict(os.environ)
    trace = os.path.join(work, "calls-%s-%d.trc" % (variant, i))
    if variant != "base":
        env.update(LD_PRELOAD=tools["librec"], REC_OUT=trace)
    if variant == "stopped":
        env["REC_PAUSED"] = "1"
    p = subprocess.run([prog, str(pairs)], env=env, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    remove(trace)
    remove(trace + ".ring")
    m = re.match(r"ns_per_pair ([0-9.]+)$", p.stdout.strip())
    return float(m.group(1)) if p.returncode == 0 and m else None


def bench_calls(tools, work, runs, prog_name, pairs, what):
    """The recorder's cost on one kind of call: prog_name (a program that
    times its own loop of pairs of calls) alternately without the recorder,
    recorded and recorded while stopped (REC_PAUSED); the medians of ns per
    pair, and per call over the base (returned, or None)."""
    prog = tools.get(prog_name)
    if not prog:
        print("%s: skipped (bench/%s not built)" % (prog_name, prog_name))
        return None
    res = {"base": [], "recorded": [], "stopped": []}
    for i in range(runs):
        for v in res:
            res[v].append(calls_run(prog, pairs, tools, work, v, i))
    print("%s: %s pairs of %s, %d run(s)" % (prog_name, human_count(pairs), what, runs))
    med = {}
    for v, ns in res.items():
        ok = [x for x in ns if x is not None]
        if not ok:
            print("  %-9s FAILED" % v)
            return None
        med[v] = statistics.median(ok)
        print("  %-9s %7.1f ns per pair (median; min %.1f, max %.1f)" % (
            v, med[v], min(ok), max(ok)))
    for v in ("recorded", "stopped"):
        print("  %-9s %7.1f ns per call over the base, %.2fx the base loop" % (
            v, (med[v] - med["base"]) / 2, med[v] / med["base"] if med["base"] else 0))
    return (med["recorded"] - med["base"]) / 2


def mmap_family_calls(argv, wenv, work):
    """How many mmap, munmap and mremap system calls the workload makes
    without the recorder (strace -f -c), or None: an upper bound of the
    calls that pass through the recorder's hooks (the allocator's and the
    loader's own go to the kernel without them)."""
    if not shutil.which("strace"):
        return None
    out = os.path.join(work, "strace-c.txt")
    env = dict(os.environ, **(wenv or {}))
    p = subprocess.run(["strace", "-f", "-c", "-o", out, "-e", "trace=mmap,munmap,mremap"]
                       + argv, env=env, capture_output=True, timeout=RUN_TIMEOUT_S)
    try:
        text = open(out).read() if p.returncode == 0 else ""
    finally:
        remove(out)
    calls = [int(m.group(1)) for m in re.finditer(
        r"^\s*[0-9.]+\s+[0-9.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?m(?:un|re)?map\s*$", text, re.M)]
    return sum(calls) if calls else None


def bench_mmap_hooks(name, argv, wenv, tools, work, runs, t_base, per_call):
    """The mmap hooks' share of a workload's run: its mmap-family calls
    times the hooks' cost per call (bench_calls on mmap_calls), over the
    workload's base wall time."""
    calls = mmap_family_calls(argv, wenv, work)
    if calls is None or per_call is None or not t_base:
        print("  %-17s n/a (%s)" % ("mmap hooks", "strace not installed" if calls is None
                                    and not shutil.which("strace") else "no figure"))
        return
    cost = calls * max(per_call, 0) * 1e-9
    print("  %-17s %d mmap/munmap/mremap calls (strace -c, an upper bound) x %.0f ns = "
          "%.3f ms, %.4f %% of the base run's %.2f s" % (
              "mmap hooks", calls, per_call, cost * 1e3, 100 * cost / t_base, t_base))


def sandwiched(before, run, after, field):
    """run's figure divided by the mean of the base runs on either side of
    it (those of them that succeeded): a drift of the machine's load, and
    any cost of coming first or second, cancel to first order."""
    bases = [getattr(b, field) for b in (before, after) if b.ok and getattr(b, field)]
    return getattr(run, field) / statistics.mean(bases) if bases and run.ok else None


def quartiles(xs):
    """(median, first quartile, third quartile) of xs."""
    med = statistics.median(xs)
    q1, _, q3 = statistics.quantiles(xs, n=4) if len(xs) > 1 else (med, med, med)
    return med, q1, q3


def bench_counters(name, argv, tools, work, runs):
    """Counters (issue 23): the recording with REC_STATS_MS=0 alternated with
    REC_STATS_MS=STATS_MS (off, on, off, ..., off), STATS_ROUNDS times --runs
    pairs; each sampling run divided by the mean of the two runs without
    sampling around it (sandwiched): the median of those ratios of wall and
    CPU time, their quartiles, and the samples a trace held."""
    first, out = run_variant("rec", argv, tools, work, tag_of(name, "stats0", 0), stats_ms=0)
    remove(out)
    off, on, samples, spent = [first], [], None, None
    for i in range(runs * STATS_ROUNDS):
        r, out = run_variant("rec", argv, tools, work, tag_of(name, "stats", i),
                             stats_ms=STATS_MS)
        if r.ok and samples is None:
            summary, _ = trace_summary(tools["dump"], out)
            samples = summary.get("samples") if summary else None
            spent = sampling_spent(tools["dump"], out, r.wall)
        remove(out)
        on.append(r)
        r, out = run_variant("rec", argv, tools, work, tag_of(name, "stats0", i + 1), stats_ms=0)
        remove(out)
        off.append(r)
    trios = [(off[i], on[i], off[i + 1]) for i in range(len(on))]
    wall = [x for x in (sandwiched(*t, "wall") for t in trios) if x is not None]
    label = "REC_STATS_MS=%d" % STATS_MS
    if not wall:
        print("  %-17s FAILED (%s)" % (label, why_failed([x for t in trios for x in t])))
        return
    cpu = [x for x in (sandwiched(*t, "cpu") for t in trios) if x is not None]
    med, q1, q3 = quartiles(wall)
    print("  %-17s %.3fx wall of REC_STATS_MS=0 (quartiles %.3f-%.3f, range %.2f-%.2f), "
          "%s CPU, %d runs; %s samples, target <= %.2fx: %s" % (
              label, med, q1, q3, min(wall), max(wall),
              "%.3fx" % statistics.median(cpu) if cpu else "n/a", len(wall),
              samples if samples is not None else "?", STATS_TARGET,
              "MET" if med <= STATS_TARGET else "NOT MET"))
    if spent:
        print("  %-17s %s" % ("sampling's time", spent))


def sampling_spent(dump, trc, wall):
    """What the recorder says one sampling run spent sampling (its
    heapreel.stats marks: counters_cpu_us, the writer's CPU time in samples,
    and allocator_stats_us, the wall time of the allocator's statistics
    calls), as shares of the run's wall time: the direct cost, which the
    wall ratio above measures only within the machine's noise. The writer
    thread pays the first; during the second the allocator's locks are
    held, and a program thread may wait for them."""
    labels = stats_marks({"dump": dump, "trace": trc}, None)
    got = {}
    for key in ("counters_cpu_us", "allocator_stats_us"):
        vals = [int(m.group(1)) for m in (re.search(r"\b%s=(\d+)" % key, l) for l in labels) if m]
        if not vals or not wall:
            return None
        got[key] = sum(vals) / 1e6
    return ("%.1f ms of the writer's CPU in a %.2f s run (%.3f %%); the allocator's "
            "statistics calls %.1f ms wall (%.3f %%, its locks held)" % (
                got["counters_cpu_us"] * 1e3, wall, 100 * got["counters_cpu_us"] / wall,
                got["allocator_stats_us"] * 1e3, 100 * got["allocator_stats_us"] / wall))


def bench_counters_only(tools, work, runs, quick):
    """--only counters: on the sqlite3 workload, the counters' cost
    (bench_counters) and the mmap hooks' share (bench_mmap_hooks, against
    the median of `runs` base runs), without the other variants."""
    name, argv, wenv = [w for w in prepare_workloads(work, quick) if "sqlite3" in w[0]][0]
    print("heapreel bench: counters and mmap hooks on %s, %d run(s)" % (name, runs))
    bench_counters(name, argv, tools, work, runs)
    base = [r.wall for r in (run_variant("base", argv, tools, work, None, wenv=wenv)[0]
                             for _ in range(runs)) if r.ok]
    bench_mmap_hooks(name, argv, wenv, tools, work, runs,
                     statistics.median(base) if base else None,
                     bench_calls(tools, work, runs, "mmap_calls",
                                 QUICK_MMAP_PAIRS if quick else MMAP_PAIRS,
                                 "anonymous mmap + munmap"))


def bench_sampling(name, argv, tools, work, runs, wenv):
    """Byte sampling: base alternated with a recording at each period of
    SAMPLE_PERIODS (base, sampled, base, sampled, ..., base; the periods'
    order rotates from round to round, so none always runs right after the
    largest trace). Each sampled run is divided by the mean of the base runs
    just before and just after it (sandwiched): on a shared machine the load
    drifts less within those three runs than over the series, and an
    overhead of a few percent is smaller than that drift. Per period: the
    median of those ratios, of wall time and of CPU time (user + system),
    their quartiles, and the trace's events. The target period (the last)
    gets SAMPLE_TARGET_ROUNDS times as many runs: its verdict is on a few
    percent, where single ratios here differ by tens."""
    order, events = [], {}
    target = SAMPLE_PERIODS[-1]
    wanted = {p: runs * SAMPLE_TARGET_ROUNDS if p == target else runs for p in SAMPLE_PERIODS}
    base = [run_variant("base", argv, tools, work, None, wenv=wenv)[0]]
    for i in range(runs * SAMPLE_TARGET_ROUNDS):
        k = i % len(SAMPLE_PERIODS)
        for p in SAMPLE_PERIODS[k:] + SAMPLE_PERIODS[:k]:
            if sum(q == p for q, _ in order) >= wanted[p]:
                continue
            r, out = run_variant("rec", argv, tools, work, tag_of(name, "sample%d" % p, i),
                                 sample=p, wenv=wenv)
            order.append((p, r))
            base.append(run_variant("base", argv, tools, work, None, wenv=wenv)[0])
            if r.ok and p not in events:
                summary, _ = trace_summary(tools["dump"], out)
                if summary:
                    events[p] = int(summary.get("events", 0))
            remove(out)
    for p in SAMPLE_PERIODS:
        label = "REC_SAMPLE=%d" % p
        mine = [(base[j], r, base[j + 1]) for j, (q, r) in enumerate(order) if q == p]
        wall = [x for x in (sandwiched(*t, "wall") for t in mine) if x is not None]
        if not wall:
            print("  %-17s FAILED (%s)" % (label, why_failed([x for t in mine for x in t])))
            continue
        cpu = [x for x in (sandwiched(*t, "cpu") for t in mine) if x is not None]
        med, q1, q3 = quartiles(wall)
        verdict = ""
        if p == target:
            verdict = ", target <= %.2fx: %s" % (SAMPLE_TARGET,
                                                  "MET" if med <= SAMPLE_TARGET else "NOT MET")
        print("  %-17s %.3fx wall (quartiles %.3f-%.3f, range %.2f-%.2f), %s CPU, %d runs; "
              "%s events%s" % (label, med, q1, q3, min(wall), max(wall),
                               "%.3fx" % statistics.median(cpu) if cpu else "n/a",
                               len(wall), events.get(p, "?"), verdict))


def check_target(stats, t_base):
    """Issue 2: (t_rec - t_base) <= (t_heaptrack - t_base) / 3, or half the
    overhead of heaptrack -r where heaptrack failed."""
    rec = stats.get("rec")
    if rec is None:
        return "n/a"
    over = rec[0] - t_base
    if stats.get("ht"):
        ref, div, what = stats["ht"][0] - t_base, 3, "heaptrack"
    elif stats.get("htr"):
        ref, div, what = stats["htr"][0] - t_base, 2, "heaptrack -r"
    else:
        print("  target            n/a: no heaptrack run succeeded")
        return "n/a"
    limit = ref / div
    verdict = "MET" if over <= limit else "NOT MET"
    print("  target            overhead %.3f s <= (%s overhead %.3f s)/%d = %.3f s: %s" % (
        over, what, ref, div, limit, verdict))
    return "%s (vs %s/%d)" % (verdict, what, div)


TABLE = (("workload", "workload"), ("floor", "clock floor"), ("depth1", "REC_DEPTH=1"),
         ("rec", "libheapreel.so"), ("ht", "heaptrack"),
         ("htr", "heaptrack -r"), ("bpe", "trace B/event"),
         ("htr_bpe", "heaptrack -r B/event"), ("rss", "extra RSS"),
         ("writer", "writer CPU"),
         ("target", "overhead target"))


def print_table(rows):
    """The recording figures of every workload as one Markdown table."""
    print("\n| %s |" % " | ".join(h for _, h in TABLE))
    print("|%s" % ("---|" * len(TABLE)))
    for r in rows:
        print("| %s |" % " | ".join(r.get(k, "n/a") for k, _ in TABLE))


# ---- later stages ----------------------------------------------------------------

def db_allocations(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'allocations'").fetchone()
        if row is None:
            row = con.execute("SELECT count(*) FROM allocations").fetchone()
        return int(row[0])
    finally:
        con.close()


def bench_import(res, tools, work):
    imp = tools["import"]
    if not imp:
        print("  import            skipped: trace-import is not built")
        return None
    if not res["trace"]:
        print("  import            skipped: no successful recording")
        return None
    db = res["trace"][:-len(".trc")] + ".db"
    ht = res["ht_file"]
    if not (ht and shutil.which("heaptrack_print")):
        ht = None
    # Import and heaptrack_print alternate, IMPORT_RUNS times: medians.
    imports, prints = [], []
    for _ in range(IMPORT_RUNS):
        remove(db)
        r = timed([imp, res["trace"], db], cwd=work)
        if not r.ok:
            print("  import            FAILED (exit %d): %s" % (r.rc, last_line(r.err)))
            return None
        imports.append(r)
        if ht:
            prints.append(timed(["heaptrack_print", ht], cwd=work))
    r = median_run(imports)
    events = int((res["summary"] or {}).get("events", 0))
    try:
        nalloc = db_allocations(db)
        per_alloc = "%.1f B/allocation" % (os.path.getsize(db) / nalloc) if nalloc else "no allocations"
    except sqlite3.Error as e:
        per_alloc = "DB unreadable by sqlite3 (%s)" % e
    rate = "%.2f M events/s" % (events / r.wall / 1e6) if events else "? events/s"
    print("  import            %.2f s, %s, peak RSS %.0f MiB, DB %.1f MiB, %s (median of %d)" % (
        r.wall, rate, r.rss / MIB, os.path.getsize(db) / MIB, per_alloc, len(imports)))
    ht_print = None
    if ht:
        hp = next((x for x in prints if not x.ok), None) or median_run(prints)
        if hp.ok:
            ht_print = hp.wall
            print("  heaptrack_print   %.2f s, peak RSS %.0f MiB (on heaptrack's trace of the same run; median of %d)" % (
                hp.wall, hp.rss / MIB, len(prints)))
        else:
            print("  heaptrack_print   FAILED (exit %d): %s" % (hp.rc, last_line(hp.err)))
    else:
        print("  heaptrack_print   n/a: no heaptrack trace (heaptrack failed or is not installed)")
    ht_st = res["stats"].get("ht")
    if res["rec_wall"] and ht_st and ht_print is not None:
        ours = res["rec_wall"] + r.wall
        theirs = ht_st[0] + ht_print
        print("  pipeline          record+import %.2f s vs heaptrack+heaptrack_print %.2f s: %s" % (
            ours, theirs, "MET" if ours <= theirs else "NOT MET"))
    return db


def bench_snap(db, tools):
    snap = tools["snap"]
    if not snap:
        print("  snapshots         skipped: trace-snap is not built")
        return
    times, failures = [], []
    for pct in SNAP_INSTANTS:
        r = timed([snap, db, "--at", "%d%%" % pct], rss=False)
        if r.ok:
            times.append(r.wall)
        else:
            failures.append((pct, r))
    if failures:
        pct, r = failures[0]
        print("  snapshots         --at %d%% FAILED (exit %d): %s" % (pct, r.rc, last_line(r.err)))
    if times:
        print("  snapshots         --at x%d: median %.1f ms, max %.1f ms (process start included)" % (
            len(times), statistics.median(times) * 1e3, max(times) * 1e3))
    others = []
    for args in (["--peak"], ["--growth", "25%..75%"], ["--leaks"]):
        r = timed([snap, db] + args, rss=False)
        others.append("%s %s" % (args[0], "%.1f ms" % (r.wall * 1e3) if r.ok
                                 else "FAILED (exit %d: %s)" % (r.rc, last_line(r.err))))
    print("  queries           " + ", ".join(others))


def run_in_pty(argv, timeout):
    """Runs a full-screen program on a fresh pseudo-terminal of PTY_COLS x
    PTY_ROWS (draining what it draws); returns (exit code, its stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", PTY_ROWS, PTY_COLS, 0, 0))
    env = dict(os.environ, TERM=os.environ.get("TERM") or "xterm")

    def drain():
        try:
            while os.read(master, 65536):
                pass
        except OSError:  # EIO once the program closed the terminal
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=errf, env=env,
                             start_new_session=True)
        os.close(slave)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        reader.join(timeout=5)
        os.close(master)
        errf.seek(0)
        return rc, errf.read().decode(errors="replace")


def bench_tui(db, tools):
    tui = tools["tui"]
    if not tui:
        print("  tui               skipped: trace-tui is not built")
        return
    h = subprocess.run([tui, "--help"], capture_output=True, text=True)
    if "--bench-steps" not in h.stdout + h.stderr:
        print("  tui               skipped: trace-tui --help offers no --bench-steps option")
        return
    rc, err = run_in_pty([tui, "--bench-steps", str(TUI_STEPS), db], RUN_TIMEOUT_S)
    if rc != 0:
        print("  tui               --bench-steps FAILED (exit %d): %s" % (rc, last_line(err)))
        return
    for line in err.strip().splitlines():
        print("  tui               " + line)


# ---- main ------------------------------------------------------------------------

CROWD_THREADS = 1000                   # threads alive at once (issue 21: <= 2x)
CROWD_BLOCKS = 20                      # blocks each allocates and frees


def bench_crowd(tools, work, runs):
    """Many live threads that each allocate a little (tests/programs/crowd):
    base alternated with the recording, the median ratio of wall times,
    and the recorder's calls through lent rings (0: every thread had a
    ring of its own)."""
    if not tools["crowd"]:
        print("crowd: tests/programs/crowd not built: skipped")
        return
    argv = [tools["crowd"], str(CROWD_THREADS), str(CROWD_BLOCKS)]
    name = "crowd %dx%d" % (CROWD_THREADS, CROWD_BLOCKS)
    base, rec, lent = [], [], []
    for i in range(max(runs, 5)):
        base.append(run_variant("base", argv, tools, work, tag_of(name, "base", i))[0])
        r, out = run_variant("rec", argv, tools, work, tag_of(name, "rec", i))
        rec.append(r)
        if r.ok and tools["dump"]:
            d = subprocess.run([tools["dump"], out], capture_output=True, text=True)
            lent += [int(m) for m in re.findall(r"\blent=(\d+)", d.stdout)]
        remove(out)
    walls = [r.wall for r in base if r.ok]
    st = ratio_stats(rec, statistics.median(walls)) if walls else None
    if st is None:
        print("%s: FAILED (%s)" % (name, why_failed(base if not walls else rec)))
        return
    print("%s: recorded %s of the unrecorded run (median of %d alternated pairs; "
          "target <= 2x: %s); calls through lent rings: %s" % (
              name, fmt_ratio(st), len(rec), "MET" if st[1] <= 2 else "NOT MET",
              max(lent) if lent else "?"))


def record_spawn(tools, spawn, work, name, children, wave):
    """A trace-record run of spawn into the fresh directory work/name;
    returns it, or None after saying why it failed."""
    run = os.path.join(work, name)
    p = subprocess.run([tools["record"], "-o", run + "/", "--", spawn, str(children),
                        str(MANY_BLOCKS), str(wave)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env=clean_env(), timeout=RUN_TIMEOUT_S)
    tally_check(p.stderr)
    if p.returncode != 0:
        print("  %-17s recording FAILED (exit %d): %s" % (name, p.returncode, last_line(p.stderr)))
        return None
    return run


def db_events(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return int(con.execute("SELECT value FROM meta WHERE key = 'events'").fetchone()[0])
    finally:
        con.close()


def bench_import_many(tools, work, runs, quick):
    """Issue 22: a run of many small processes. spawn's children recorded by
    trace-record (one trace each), the directory imported alternately with
    one trace of the same allocations (spawn WAVE 0); medians of the
    import times, per trace and per event, and the many traces' extra time
    per trace over the single one."""
    if not (tools["import"] and tools["record"]):
        print("import_many: skipped (trace-import or trace-record not built)")
        return
    spawn = os.path.join(work, "spawn")
    subprocess.run(["cc", "-std=c17", "-O2", "-g", "-fno-omit-frame-pointer",
                    os.path.join(WORKLOADS, "spawn.c"), "-o", spawn], check=True)
    children = QUICK_MANY_CHILDREN if quick else MANY_CHILDREN
    dirs = {"many": record_spawn(tools, spawn, work, "many", children, MANY_WAVE),
            "one": record_spawn(tools, spawn, work, "one", children, 0)}
    if None in dirs.values():
        return
    ntraces = len([f for f in os.listdir(dirs["many"]) if ".trc" in f])
    res = {"many": [], "one": []}
    for _ in range(runs):
        for k, d in dirs.items():
            db = os.path.join(work, k + ".db")
            remove(db)
            r = timed([tools["import"], "-q", d, db], cwd=work)
            if not r.ok:
                print("import_many: import of %s FAILED (exit %d): %s" % (
                    d, r.rc, last_line(r.err)))
                return
            res[k].append(r)
    events = db_events(os.path.join(work, "many.db"))
    many, one = (statistics.median(r.wall for r in res[k]) for k in ("many", "one"))
    cpu, cpu_one = (statistics.median(r.cpu for r in res[k]) for k in ("many", "one"))
    print("import_many: spawn %d %d %d, %d traces, %d events (%d alternating imports of each)" % (
        children, MANY_BLOCKS, MANY_WAVE, ntraces, events, runs))
    print("  %d traces        %.2f s (CPU %.2f s), %.2f ms/trace, %.2f M events/s, peak RSS %.0f MiB"
          " (median); issue 22 target < 10 s for 3000: %s" % (
              ntraces, many, cpu, many / ntraces * 1e3, events / many / 1e6,
              median_run(res["many"]).rss / MIB,
              ("MET" if many < 10 else "NOT MET") if children == MANY_CHILDREN else "n/a (--quick)"))
    print("  1 trace           %.2f s (CPU %.2f s), same allocations in one process (median)" % (
        one, cpu_one))
    print("  per extra trace   %.2f ms (CPU %.2f ms): (many - one) / %d" % (
        (many - one) / (ntraces - 1) * 1e3, (cpu - cpu_one) / (ntraces - 1) * 1e3, ntraces - 1))


def bench_report(tools, work, quick):
    """trace-report (issue 24) on the database of the largest churn
    (~10 M allocations; --quick: the small one): the page's size, the time
    to write it, and in headless Chromium (bench/report_page.js, as the
    browser measures them) the first contentful paint, the first selection
    drawn, and the time a new selection takes to show (median of clicks
    spread over the timeline, and a drag)."""
    report, chromium, node = tools["report"], shutil.which("chromium"), shutil.which("node")
    puppeteer = os.path.join(REPO, "report", "vendor", "node_modules")
    if not report or not tools["import"]:
        print("report: skipped: trace-report or trace-import is not built (./heapreel setup)")
        return
    name, argv, _ = [w for w in prepare_workloads(work, quick) if w[0].startswith("churn")][-1]
    d = os.path.join(work, "report")
    os.mkdir(d)
    env = clean_env()
    env.update(LD_PRELOAD=tools["librec"], REC_OUT=os.path.join(d, "run.trc"))
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    db, page = os.path.join(work, "report.db"), os.path.join(work, "report.html")
    subprocess.run([tools["import"], "-q", d, db], check=True)
    print("report: %s, %s allocations in the database" % (name, human_count(db_allocations(db))))
    r = timed([report, db, "-o", page])
    if not r.ok:
        print("  trace-report      FAILED (exit %d): %s" % (r.rc, last_line(r.err)))
        return
    # the CPU time and the load beside the wall time: on a shared machine
    # the wall time measures the others' load as much as trace-report
    print("  trace-report      %.2f s (CPU %.2f s, load average %.1f), peak RSS %.1f MiB, "
          "page %.2f MB (%d bytes)" % (r.wall, r.cpu, os.getloadavg()[0], r.rss / MIB,
                                       os.path.getsize(page) / 1e6, os.path.getsize(page)))
    if not chromium or not node or not os.path.isdir(os.path.join(puppeteer, "puppeteer-core")):
        print("  browser           skipped: chromium, node or puppeteer-core missing")
        return
    p = subprocess.run([node, os.path.join(REPO, "bench", "report_page.js"), chromium, puppeteer,
                        page, str(1 if quick else REPORT_OPENS)], capture_output=True, text=True)
    if p.returncode:
        print("  browser           FAILED: %s" % last_line(p.stderr))
        return
    m = json.loads(p.stdout)
    print("  first paint       median %.0f ms (max %.0f) of %d opens; first selection drawn "
          "at %.0f ms" % (statistics.median(m["paint_ms"]), max(m["paint_ms"]),
                          len(m["paint_ms"]), statistics.median(m["ready_ms"])))
    print("  new selection     click: median %.0f ms, max %.0f ms (%d); drag (growth): %.0f ms"
          % (statistics.median(m["select_ms"]), max(m["select_ms"]), len(m["select_ms"]),
             m["drag_ms"]))
    remove(db)


def find_tools(build):
    def exe(*parts):
        p = os.path.join(build, *parts)
        return p if os.access(p, os.X_OK) else None

    def lib(*parts):
        p = os.path.join(build, *parts)
        return p if os.path.exists(p) else None
    tools = {
        "librec": os.path.join(build, "recorder", "libheapreel.so"),
        "dump": exe("trace-format", "trace-dump"),
        "import": exe("importer", "trace-import"),
        "snap": exe("queries", "trace-snap"),
        "tui": exe("viewer-tui", "trace-tui"),
        "bounded_live": exe("bench", "bounded_live"),
        "floor": lib("bench", "libclock_floor.so"),
        "pool_calls": exe("bench", "pool_calls"),
        "mmap_calls": exe("bench", "mmap_calls"),
        "heaptrack": shutil.which("heaptrack"),
        "crowd": exe("tests", "programs", "crowd"),
        "record": exe("recorder", "trace-record"),
        "report": exe("report", "trace-report"),
    }
    if not os.path.exists(tools["librec"]):
        sys.exit("bench: %s not found: build first (./heapreel build)" % tools["librec"])
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit("bench: %s not found (Debian package time; ./heapreel setup --bench)" % GNU_TIME)
    if not tools["dump"]:
        sys.exit("bench: trace-dump not found in %s: build first (./heapreel build)" % build)
    return tools


def main():
    ap = argparse.ArgumentParser(prog="heapreel bench",
                                 description="heapreel's benchmarks on the workloads of "
                                 "bench/workloads/")
    ap.add_argument("--runs", type=int, default=5, help="runs of each variant (default 5)")
    ap.add_argument("--quick", action="store_true",
                    help="1 run of smaller workloads, to check the harness")
    ap.add_argument("--only", metavar="WORD",
                    help="only the workloads whose name contains WORD (churn, sqlite3, python, "
                    "g++, crowd, import_many, bounded, pool, mmap, report; counters: only "
                    "the counters' and the mmap hooks' cost on sqlite3)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="build directory")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--check-stacks", action="store_true",
                    help="record with %s=1: every stack checked against a full libunwind "
                    "walk (the figures then mean nothing)" % CHECK_ENV)
    ap.add_argument("--shadow", action="store_true",
                    help="record with %s=1: stacks captured through the shadow stack" % SHADOW_ENV)
    ap.add_argument("--no-sampling", action="store_true",
                    help="skip the byte-sampling runs (REC_SAMPLE=%s)" %
                    ",".join(str(p) for p in SAMPLE_PERIODS))
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    runs = 1 if a.quick else a.runs
    checks["on"] = a.check_stacks
    checks["shadow"] = a.shadow
    tools = find_tools(os.path.abspath(a.build))
    work = tempfile.mkdtemp(prefix="heapreel-bench-")
    try:
        # bounded_live and crowd are built by meson
        if a.only == "counters":
            bench_counters_only(tools, work, runs, a.quick)
            return
        workloads = [] if a.only in ("bounded", "crowd", "import_many", "pool", "mmap",
                                     "report") else \
            prepare_workloads(work, a.quick)
        if a.only:
            workloads = [w for w in workloads if a.only in w[0]]
        print("heapreel bench: %s, %d run(s) of each variant, work dir %s" % (
            "quick" if a.quick else "full", runs, work))
        rows = []
        for name, argv, wenv in workloads:
            res = bench_recording(name, argv, tools, work, runs, wenv)
            if res is None:
                continue
            rows.append(res["row"])
            if not a.no_sampling:
                bench_sampling(name, argv, tools, work, runs, wenv)
            bench_bounded(name, argv, tools, work, runs, wenv)
            if "sqlite3" in name:
                bench_counters(name, argv, tools, work, runs)
                bench_mmap_hooks(name, argv, wenv, tools, work, runs, res["t_base"],
                                 bench_calls(tools, work, runs, "mmap_calls",
                                             QUICK_MMAP_PAIRS if a.quick else MMAP_PAIRS,
                                             "anonymous mmap + munmap"))
            db = bench_import(res, tools, work)
            report_ring_waits(res, db)
            report_writer_cpu(res, db)
            if db:
                bench_snap(db, tools)
                bench_tui(db, tools)
            if not a.keep:  # big files go as soon as their workload is done
                for f in list(res["keep"].values()) + [db]:
                    remove(f)
        if rows:
            print_table(rows)
        if not a.only or a.only in "crowd":
            bench_crowd(tools, work, runs)
        if not a.only or a.only in "import_many":
            bench_import_many(tools, work, runs, a.quick)
        if not a.only or a.only in "bounded":
            bench_bounded_memory(tools, work, runs, a.quick)
        if not a.only or a.only in "pool":
            bench_calls(tools, work, runs, "pool_calls",
                        QUICK_POOL_PAIRS if a.quick else POOL_PAIRS,
                        "rec_pool_alloc + rec_pool_free")
        if a.only and a.only in "mmap":
            bench_calls(tools, work, runs, "mmap_calls",
                        QUICK_MMAP_PAIRS if a.quick else MMAP_PAIRS, "anonymous mmap + munmap")
        if not a.only or a.only in "report":
            bench_report(tools, work, a.quick)
        if checks["on"]:
            print("check-stacks: %d recorded runs, %d found a stack that differs" % (
                checks["runs"], checks["differ"]))
    finally:
        if a.keep:
            print("work directory kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
