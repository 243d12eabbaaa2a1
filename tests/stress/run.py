"""run.py - the stress runner (./heapreel stress): runs the fault tests N
times each while other processes load the machine, because a test that
fails once in a hundred runs is a real bug, and load is what shakes one out.

  python3 tests/stress/run.py [--build DIR] [-n N] [--quick] [--only PATTERN]
                              [--busy K] [--no-alloc] [--timeout-multiplier M]

Each run is one `meson test -C DIR --no-rebuild` of every selected test
(FAULT_TESTS below, matched against the build's test names), so within a
run the tests also load each other. Beside them run K busy loops (default
2) and one process that allocates and frees in a loop. The log of every
failed test is kept in a directory under DIR/stress/ that the runner names;
for each failure it prints the test, the run number and the end of the log.
The last line is "N passed, N failed"; the exit status is 1 if any test
failed (or did not run), 2 on bad usage.

It must never: be run by .ci/run or ./heapreel test (it takes long), leave
a load process running (they are killed by pid when it ends, and die with
it if it is killed), or rebuild (the build it is given is the one tested).
"""
import argparse
import datetime
import fnmatch
import json
import os
import signal
import subprocess
import sys
import time

# The fault tests, by meson test name (fnmatch patterns). A new fault test
# joins the stress runs by adding its name here.
FAULT_TESTS = [
    "hard-sigkill-*",          # SIGKILL at random instants (the seed is in the log)
    "hard-python-sigkill",     # python3 SIGKILLed at random instants
    "hard-abort", "hard-segv", "hard-oom",
    "hard-disk-*",             # disk full, file size limit, output directory removed
    "hard-bounded-*",          # bounded recording: wrapped, killed, flushed, idle thread
    "hard-real-many_threads",  # 300 threads alive at once
    "hard-real-threads",       # threads exiting in waves while others allocate
    "hard-real-signal",        # allocations in signal handlers
    "rec-thread_exit",         # exit() from a thread
    "hard-exit_thread", "hard-_exit_thread",  # exit(), _exit() while others allocate
    "rec-crowd",               # 1000 threads alive at once
    "import-recorded-inherit", # forked children's inherited heaps
    "import-recorded-forkstorm",  # a fork storm under one REC_OUT
    "rec-fork", "rec-fork_exit", "rec-fork_exec",
    "rec-fork_walk",           # forks while the writer walks the loaded objects
    "rec-env-killed",          # SIGKILL: the .ring left behind is readable
    "import-recorded-killed",  # a killed process's trace imported in full
    "leftovers-import-tmp",    # a SIGKILLed import's temporary file removed, a running one's not
    "leftovers-ctl-sockets",   # a SIGKILLed process's control socket removed, live ones not
    "test_stopped",            # threads racing stops: no recorded block loses its free
    "rec-ring_grow",           # a growing thread's wait for room, raced by a test hook
    "rec-quick_exit",          # an exit before the writer thread first runs
    "test_attach*",            # trace-record -p part-way: exact per function (and jemalloc's)
    "test_cycles",             # attach/detach cycles on threads allocating all the time
    "test_cycles-slow",        # the same, each GOT entry rewritten 2 ms apart
    "test_foreign",            # attach to python3 and sqlite3 while they work
    "test_dlopen",             # a library dlopen'ed while attached: its unrouted span
    "test_midcall",            # attaches to a thread living in malloc and free
]
QUICK_RUNS = 1                 # --quick: one run...
QUICK_BUSY = 1                 # ... with one busy loop
DEFAULT_RUNS = 20
DEFAULT_BUSY = 2               # busy loops: as many as the machine's 2 cores
TIMEOUT_MULTIPLIER = 3         # the tests' timeouts assume an unloaded machine
TAIL_LINES = 40                # lines of a failed test's log printed
ALLOC_BYTES = 64 << 20         # what the allocating load process keeps live at most
FAILED_RESULTS = ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS")

# Both die with the runner, even a SIGKILLed one (PR_SET_PDEATHSIG; the
# parent may already be gone when it is set: then they stop at once).
DIE_WITH_RUNNER = """
import ctypes, os, sys
ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
if os.getppid() != %d:
    sys.exit()
"""
BUSY_LOOP = "while True: pass"
ALLOC_LOOP = """
import random
live, total = [], 0
while True:
    n = random.randrange(16, 1 << 16)
    live.append(bytearray(n))
    total += n
    while total > %d:
        total -= len(live.pop(random.randrange(len(live))))
""" % ALLOC_BYTES


def parse_args():
    ap = argparse.ArgumentParser(prog="heapreel stress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "build"),
                    help="the meson build whose tests run (default build/)")
    ap.add_argument("-n", "--runs", type=int, default=None,
                    help="runs of each test (default %d)" % DEFAULT_RUNS)
    ap.add_argument("--quick", action="store_true",
                    help="%d run with %d busy loop: checks the runner" % (QUICK_RUNS, QUICK_BUSY))
    ap.add_argument("--only", action="append", default=[], metavar="PATTERN",
                    help="only the fault tests matching PATTERN (fnmatch; repeatable)")
    ap.add_argument("--busy", type=int, default=None, help="busy loops beside the tests")
    ap.add_argument("--no-alloc", action="store_true", help="no allocating load process")
    ap.add_argument("--timeout-multiplier", type=float, default=TIMEOUT_MULTIPLIER,
                    help="meson test's --timeout-multiplier (default %g)" % TIMEOUT_MULTIPLIER)
    a = ap.parse_args()
    if a.runs is None:
        a.runs = QUICK_RUNS if a.quick else DEFAULT_RUNS
    if a.busy is None:
        a.busy = QUICK_BUSY if a.quick else DEFAULT_BUSY
    if a.runs < 1 or a.busy < 0:
        ap.error("--runs must be at least 1 and --busy at least 0")
    a.build = os.path.abspath(a.build)
    return a


def select_tests(build, only):
    """The build's tests that FAULT_TESTS names (and --only keeps), in the
    build's order; exits 2 naming a pattern that matches none of them."""
    p = subprocess.run(["meson", "introspect", build, "--tests"], capture_output=True, text=True)
    if p.returncode:
        sys.exit("heapreel stress: cannot list the tests of %s (built?): %s" % (
            build, p.stderr.strip()))
    names = [t["name"] for t in json.loads(p.stdout)]
    faults = [n for n in names if any(fnmatch.fnmatch(n, pat) for pat in FAULT_TESTS)]
    for pat, among in [(pat, names) for pat in FAULT_TESTS] + [(pat, faults) for pat in only]:
        if not fnmatch.filter(among, pat):
            print("heapreel stress: no %stest in %s matches %r" % (
                "fault " if among is faults else "", build, pat), file=sys.stderr)
            sys.exit(2)
    return [n for n in faults if not only or any(fnmatch.fnmatch(n, pat) for pat in only)]


def start_load(busy, alloc):
    """The load processes (their own sessions, so a Ctrl-C goes to us)."""
    code = [BUSY_LOOP] * busy + ([ALLOC_LOOP] if alloc else [])
    first = DIE_WITH_RUNNER % os.getpid()
    return [subprocess.Popen([sys.executable, "-c", first + c], start_new_session=True,
                             stdin=subprocess.DEVNULL) for c in code]


def stop_load(procs):
    for p in procs:
        p.kill()
        p.wait()


def run_once(build, tests, k, mult, out):
    """One meson test run of tests; its results as [(name, result, log)]."""
    base = "stress-%d" % k
    with open(os.path.join(out, base + ".meson.txt"), "w") as f:
        subprocess.run(["meson", "test", "-C", build, "--no-rebuild", "--logbase", base,
                        "-t", str(mult)] + tests, stdout=f, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL,
                       env=dict(os.environ, HR_TIMEOUT_MULTIPLIER=str(mult)))  # hrtest.SLOWER
    jlog = os.path.join(build, "meson-logs", base + ".json")
    res = []
    try:
        with open(jlog) as f:
            for line in f:
                t = json.loads(line)   # name: "project:suite / test"
                res.append((t["name"].rsplit(" / ", 1)[-1], t["result"],
                            (t.get("stdout") or "") + (t.get("stderr") or "")))
        os.replace(jlog, os.path.join(out, base + ".json"))
        os.unlink(os.path.join(build, "meson-logs", base + ".txt"))
    except OSError:
        pass
    missing = set(tests) - {n for n, _, _ in res}
    res += [(n, "NOT RUN", "meson test left no result (see %s.meson.txt)" % base)
            for n in sorted(missing)]
    return res


def tail(text, n):
    lines = text.rstrip("\n").splitlines()[-n:] or ["(the test printed nothing)"]
    return "\n".join("    " + l for l in lines)


def main():
    a = parse_args()
    tests = select_tests(a.build, a.only)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = os.path.join(a.build, "stress", stamp)
    os.makedirs(out)
    print("heapreel stress: %d runs of %d tests (%s) beside %d busy loop(s)%s; logs in %s" % (
        a.runs, len(tests), " ".join(tests), a.busy, "" if a.no_alloc else " and an allocator",
        out), flush=True)
    # SIGTERM ends us like Ctrl-C, so the load processes are stopped either way.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    load = start_load(a.busy, not a.no_alloc)
    passed = failed = skipped = 0
    failures = []
    try:
        for k in range(1, a.runs + 1):
            t0 = time.monotonic()
            res = run_once(a.build, tests, k, a.timeout_multiplier, out)
            bad = [(n, r, log) for n, r, log in res if r in FAILED_RESULTS or r == "NOT RUN"]
            skipped += sum(r == "SKIP" for _, r, _ in res)
            passed += sum(r in ("OK", "EXPECTEDFAIL") for _, r, _ in res)
            failed += len(bad)
            for n, r, log in bad:
                path = os.path.join(out, "%s.run-%d.log" % (n, k))
                with open(path, "w") as f:
                    f.write(log)
                failures.append((n, k, r, path, log))
            print("run %d/%d: %d failed%s (%.0f s)" % (
                k, a.runs, len(bad), ": " + " ".join(n for n, _, _ in bad) if bad else "",
                time.monotonic() - t0), flush=True)
    except KeyboardInterrupt:
        print("heapreel stress: interrupted", file=sys.stderr)
        failed += 1
    finally:
        stop_load(load)
    for n, k, r, path, log in failures:
        print("\n%s, run %d: %s (log %s); its end:\n%s" % (n, k, r, path, tail(log, TAIL_LINES)))
    if skipped:
        print("%d skipped (a test says why in its log)" % skipped)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
