"""test_kill CASE [N] - nothing is lost when a recorded program dies badly
(issue 7 point 1). hr_kill publishes, after every completed allocator
call, per thread, how many calls it completed (see hr_kill.c); the trace it
leaves (segments + the leftover .ring) is imported and compared, per thread.

CASE:
  sigkill N   N runs of hr_kill (1..4 workers, short-lived threads beside;
              one run in 3 forks first, so a parent and a child with their
              own traces die together), each SIGKILLed (the whole process
              group) at a random instant (seeded: HR_SEED, else
              random; printed with the case so a failure can be replayed).
              Per thread the imported calls must be >= the published ones
              and at most one more (the call in flight may be in or not).
  python_sigkill N  python3 killed N times at random instants: consistency
  abort       after a known number of calls the program calls abort()
  segv        ... stores through a null pointer (SIGSEGV)
  oom         ... a cgroup memory limit makes the OOM killer SIGKILL it;
              skipped, with the reason, where cgroups cannot be set up
In abort/segv/oom the counts must be exact. Every run is also checked for
pairing (every free pairs an allocation) and non-negative live bytes.

Prints "kills K processes_killed P events_lost L in_flight_recovered R"
for sigkill (in_flight_recovered: calls in the trace the program had not
yet published when it died; allowed, at most one per thread).
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import hardtest
import hrtest

# hr_kill.c's counters file
from hardtest import GROW_BYTES, SPAN, compare, counters_file, read_counters, size_class

MAX_DELAY = 0.12                       # kill within 120 ms of the start
FORK_ONE_IN = 3                        # runs where hr_kill forks (2 processes killed)
OOM_LIMIT = 96 << 20                   # the cgroup's memory limit
OOM_WAIT = 120                         # seconds the OOM run may take at most
CRASH_ITERS = 20000                    # window steps per worker before abort/segv/grow
CRASH_WORKERS = 3


def gone(pid):
    """Waits until pid has stopped running (gone or a zombie)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.005)
    raise AssertionError("pid %d still running 30 s after SIGKILL" % pid)


def check_killed(trace, slots, nworkers, db):
    """One killed process's trace against what it published; returns
    (lost, in_flight, problems, note)."""
    published = sum(sum(s[1:]) for s in slots)
    note = "%d calls published" % published
    if not os.path.exists(trace):
        assert published == 0, "no trace %s but %d calls published" % (trace, published)
        return 0, 0, [], note + ", killed before the trace existed"
    imp = hardtest.trace_import([trace], db, ok=(0, 1, 5))
    if imp.returncode == 1:
        # killed inside the recorder's start: nothing can have been published
        assert published == 0, "%d calls published but the import failed:\n%s" % (
            published, imp.stderr)
        return 0, 0, [], note + ", killed while the recorder started (%s)" % imp.stderr.strip()
    c = hardtest.connect(db)
    f = hardtest.consistency(c)
    lost, in_flight, problems = compare(c, slots, nworkers, exact=False)
    note += ", %d events imported (%d from the .ring)%s" % (
        f["events"], f["recovered_events"], ", damaged tail" if imp.returncode == 5 else "")
    c.close()
    return lost, in_flight, problems, note


def run_killed(d, i, rng, exe):
    """One run (one time in FORK_ONE_IN a parent and its forked child)
    SIGKILLed at a random instant; returns (lost, in_flight, problems,
    note) summed over its processes, and how many processes it had."""
    nworkers = rng.randint(1, 4)
    delay = rng.uniform(0, MAX_DELAY)
    fork = rng.randrange(FORK_ONE_IN) == 0
    cnt = os.path.join(d, "cnt")
    counters_file(cnt)
    run_dir = os.path.join(d, "run%d" % i)
    os.mkdir(run_dir)
    p = subprocess.Popen([exe, cnt, str(nworkers), "0", "exit"] + (["fork"] if fork else []),
                         env=hardtest.rec_env(os.path.join(run_dir, "k.%p.trc")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(delay)
    os.killpg(p.pid, signal.SIGKILL)   # the forked child too
    out, err = p.communicate()
    assert p.returncode == -signal.SIGKILL, "run %d exited %d before the kill: %s" % (
        i, p.returncode, err.decode(errors="replace"))
    assert not err, "run %d: stderr %r" % (i, err)
    pids = [p.pid]
    child = [int(f.split(".")[1]) for f in os.listdir(run_dir)
             if f.endswith(".trc") and f != "k.%d.trc" % p.pid]
    if fork:
        assert len(child) <= 1, os.listdir(run_dir)
        child_slots = read_counters(cnt, 1)[0]
        if not child:
            assert sum(sum(x[1:]) for x in child_slots) == 0, "child published, no trace"
        pids += child
    else:
        assert not child, os.listdir(run_dir)
    total = [0, 0, []]
    notes = []
    for k, pid in enumerate(pids):
        gone(pid)
        slots = read_counters(cnt, k)[0]
        lost, in_flight, problems, note = check_killed(
            os.path.join(run_dir, "k.%d.trc" % pid), slots, nworkers,
            os.path.join(run_dir, "k%d.db" % k))
        total[0] += lost
        total[1] += in_flight
        total[2] += ["%s: %s" % ("child" if k else "process", pr) for pr in problems]
        notes.append(("child: " if k else "") + note)
    shutil.rmtree(run_dir)
    head = "%d workers%s, killed at %.1f ms, " % (nworkers, " x 2 processes (fork)" if fork else "",
                                                  delay * 1e3)
    return total[0], total[1], total[2], head + "; ".join(notes), len(pids)


def case_sigkill(d, n):
    exe = hardtest.prog("hr_kill")
    hardtest.need(exe, hrtest.LIBREC, hrtest.TRACE_IMPORT)
    seed = int(os.environ.get("HR_SEED", random.randrange(1 << 31)))
    print("seed %d (rerun with HR_SEED=%d)" % (seed, seed))
    rng = random.Random(seed)
    kills = procs = lost = in_flight = 0
    failures = []
    for i in range(n):
        l, fl, problems, note, np = run_killed(d, i, rng, exe)
        kills += 1
        procs += np
        lost += l
        in_flight += fl
        print("run %d: %s%s" % (i, note, "" if not problems else " -- WRONG"))
        for pr in problems:
            print("   ", pr)
        if problems:
            failures.append(i)
    print("kills %d processes_killed %d events_lost %d in_flight_recovered %d" % (
        kills, procs, lost, in_flight))
    assert not failures, "runs %s lost or invented events (seed %d)" % (failures, seed)


PY_FOREVER = """
import threading
def churn(k):
    keep = {}
    i = 0
    while True:
        keep[i % 500] = [str(i) * (k + 1)] * (i % 7)
        i += 1
for k in range(3):
    threading.Thread(target=churn, args=(k,), daemon=True).start()
churn(3)
"""
PY_UNMATCHED = 16                      # frees of blocks python got before the recorder started


def case_python_sigkill(d, n):
    """A real program, python3 (PYTHONMALLOC=malloc, 4 threads churning
    dicts and lists), SIGKILLed n times at random instants: each trace,
    .ring recovered, imports consistently (pairing, no missed frees, live
    bytes never negative). It publishes no counts: consistency only."""
    hardtest.need(hrtest.LIBREC, hrtest.TRACE_IMPORT)
    # Debian's python3 when there is one: a python built with full debug
    # info (pyenv's) takes seconds per import to symbolize
    py = hardtest.system_python()
    seed = int(os.environ.get("HR_SEED", random.randrange(1 << 31)))
    print("seed %d (rerun with HR_SEED=%d), %s" % (seed, seed, py))
    rng = random.Random(seed)
    for i in range(n):
        delay = rng.uniform(0.05, 0.25)
        trace = os.path.join(d, "py%d.trc" % i)
        p = subprocess.Popen([py, "-c", PY_FOREVER],
                             env=hardtest.rec_env(trace, PYTHONMALLOC="malloc"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        out, err = p.communicate()
        assert p.returncode == -signal.SIGKILL and not err, (p.returncode, err)
        db = os.path.join(d, "py%d.db" % i)
        imp = hardtest.trace_import([trace], db, ok=(0, 5))
        c = hardtest.connect(db)
        f = hardtest.consistency(c, max_unmatched=PY_UNMATCHED)
        print("run %d: killed at %.0f ms: %d events (%d from the .ring)%s, %d unmatched frees" % (
            i, delay * 1e3, f["events"], f["recovered_events"],
            ", damaged tail" if imp.returncode == 5 else "", f["unmatched_frees"]))
        c.close()
        for path in (trace, trace + ".ring", db):
            if os.path.exists(path):
                os.unlink(path)


def crash_run(d, end, preexec=None, timeout=60):
    exe = hardtest.prog("hr_kill")
    hardtest.need(exe, hrtest.LIBREC, hrtest.TRACE_IMPORT)
    cnt = os.path.join(d, "cnt")
    counters_file(cnt)
    trace = os.path.join(d, end + ".trc")

    def child():
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core file
        if preexec:
            preexec()
    p = subprocess.run([exe, cnt, str(CRASH_WORKERS), str(CRASH_ITERS), end],
                       env=hardtest.rec_env(trace), capture_output=True, preexec_fn=child,
                       timeout=hrtest.limit(timeout))
    assert os.path.exists(trace + ".ring"), "no .ring left beside %s" % trace
    return p, cnt, trace


def check_exact(d, cnt, trace, grow=False):
    slots, ready, grown = read_counters(cnt)
    assert ready == CRASH_WORKERS, "%d workers started" % ready
    db = os.path.join(d, "crash.db")
    imp = hardtest.trace_import([trace], db, ok=(0, 5))
    c = hardtest.connect(db)
    f = hardtest.consistency(c)
    lost, in_flight, problems = compare(c, slots, CRASH_WORKERS, exact=True)
    assert not problems, "\n".join(problems)
    calls = sum(sum(s[1:]) for s in slots)
    assert calls > CRASH_WORKERS * CRASH_ITERS, calls
    # after their loops every worker freed its window: nothing of theirs live
    for w in range(CRASH_WORKERS):
        live = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size >= ? AND size < ? "
                               "AND t_free IS NULL", size_class(w), size_class(w) + SPAN)
        assert live == 0, "worker %d: %d blocks live at the end" % (w, live)
    if grow:
        g = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size = ? AND tid = ?",
                         GROW_BYTES, slots[0][0])
        assert grown <= g <= grown + 1, "grow: published %d, imported %d" % (grown, g)
        calls += grown
    print("%d calls published, all imported (%d events, %d from the .ring%s)" % (
        calls, f["events"], f["recovered_events"],
        ", damaged tail" if imp.returncode == 5 else ""))


def case_abort(d):
    p, cnt, trace = crash_run(d, "abort")
    assert p.returncode == -signal.SIGABRT, "exit %d: %s" % (p.returncode, p.stderr)
    check_exact(d, cnt, trace)


def case_segv(d):
    p, cnt, trace = crash_run(d, "segv")
    assert p.returncode == -signal.SIGSEGV, "exit %d: %s" % (p.returncode, p.stderr)
    check_exact(d, cnt, trace)


def case_exit_thread(d, end="exit_thread"):
    """exit() (or _exit) called by a thread while the other workers and the
    short-lived threads go on allocating: every call they completed until
    the kernel ended them is in the database (the trace, then its .ring),
    or counted lost; nothing mis-paired."""
    p, cnt, trace = crash_run(d, end)
    assert p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr)
    assert not p.stderr, p.stderr
    slots, ready, _ = read_counters(cnt)
    assert ready == CRASH_WORKERS, "%d workers started" % ready
    db = os.path.join(d, "exit.db")
    hardtest.trace_import([trace], db, ok=(0,))
    c = hardtest.connect(db)
    f = hardtest.consistency(c, lost=None, missed_if_lost=True)
    lost, in_flight, problems = compare(c, slots, CRASH_WORKERS, exact=False)
    published = sum(sum(s[1:]) for s in slots)
    print("%d calls published, %d events imported (%d from the .ring), %d missing, "
          "%d counted lost, %d in flight" % (published, f["events"], f["recovered_events"],
                                             lost, f["lost_events"], in_flight))
    assert lost <= f["lost_events"], \
        "%d published calls missing, only %d counted lost" % (lost, f["lost_events"])
    assert in_flight <= CRASH_WORKERS + 1, "%d events beyond the published calls" % in_flight
    hardtest.check_worker_losses(c, slots, CRASH_WORKERS)
    per_thread = hardtest.one(c, "SELECT COALESCE(SUM(lost_events), 0) FROM threads")
    assert per_thread <= f["lost_events"], (per_thread, f["lost_events"])
    if f["lost_events"]:
        assert hardtest.one(c, "SELECT COUNT(*) FROM processes WHERE t_loss IS NULL") == 0, \
            "events lost but no processes.t_loss"
    c.close()


def case__exit_thread(d):
    case_exit_thread(d, "_exit_thread")


def memory_cgroup():
    """(kind, parent dir) of a memory cgroup hierarchy we may create a group
    in, or (None, reason)."""
    if os.geteuid() != 0:
        return None, "not root: cannot create a cgroup"
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        ctl = os.path.join(root, "cgroup.controllers")
        sub = os.path.join(root, "cgroup.subtree_control")
        if os.path.exists(ctl) and "memory" in open(ctl).read().split():
            if os.path.exists(sub) and "memory" in open(sub).read().split():
                return "v2", root
            try:
                with open(sub, "w") as f:
                    f.write("+memory")
                return "v2", root
            except OSError as e:
                v2_reason = "cgroup v2 at %s: cannot enable memory: %s" % (root, e)
                break
    else:
        v2_reason = "no cgroup v2 hierarchy with the memory controller"
    v1 = "/sys/fs/cgroup/memory"
    if os.path.exists(os.path.join(v1, "memory.limit_in_bytes")) and os.access(v1, os.W_OK):
        return "v1", v1
    return None, v2_reason + "; no writable cgroup v1 memory hierarchy"


def oom_kills(kind, g):
    """The group's OOM kill counter."""
    name = "memory.events" if kind == "v2" else "memory.oom_control"
    with open(os.path.join(g, name)) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
    return None


def case_oom(d):
    kind, parent = memory_cgroup()
    if not kind:
        hrtest.skip("OOM test: " + parent)
    g = os.path.join(parent, "heapreel-oom-%d" % os.getpid())
    try:
        os.mkdir(g)
    except OSError as e:
        hrtest.skip("OOM test: cannot create %s: %s" % (g, e))
    try:
        if kind == "v2":
            with open(os.path.join(g, "memory.max"), "w") as f:
                f.write(str(OOM_LIMIT))
            if os.path.exists(os.path.join(g, "memory.swap.max")):
                with open(os.path.join(g, "memory.swap.max"), "w") as f:
                    f.write("0")
        else:
            with open(os.path.join(g, "memory.limit_in_bytes"), "w") as f:
                f.write(str(OOM_LIMIT))
        procs = os.path.join(g, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        p, cnt, trace = crash_run(d, "grow", preexec=join, timeout=OOM_WAIT)
        kills = oom_kills(kind, g)
        if p.returncode != -signal.SIGKILL:
            raise AssertionError("exit %d under a %d MiB limit: %s" % (
                p.returncode, OOM_LIMIT >> 20, p.stderr))
        assert kills is None or kills >= 1, "SIGKILLed but the cgroup counts no OOM kill"
        print("cgroup %s %s, limit %d MiB: OOM-killed (oom_kill %s)" % (
            kind, g, OOM_LIMIT >> 20, kills))
        check_exact(d, cnt, trace, grow=True)
    finally:
        for _ in range(50):            # the killed child may take a moment to leave
            try:
                os.rmdir(g)
                break
            except OSError:
                time.sleep(0.1)


def main():
    d = hrtest.tmpdir("hard-kill")
    case = sys.argv[1]
    if case in ("sigkill", "python_sigkill"):
        globals()["case_" + case](d, int(sys.argv[2]))
    else:
        globals()["case_" + case](d)


if __name__ == "__main__":
    main()
