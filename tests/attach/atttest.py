"""atttest - what the attach tests share: gdb's presence, a program of ours
started unrecorded, and trace-record -p run against it."""
import atexit
import os
import shutil
import subprocess
import time

from hrtest import REC_BUILD, TRACE_IMPORT, TRACE_RECORD, connect, limit, meta, need, run, skip

LIBATTACH = os.path.join(REC_BUILD, "recorder", "libheapreel-attach.so")
ATTACHED_LINE = "trace-record: attached to process"
WAIT_S = limit(120)           # a step of a test never waits longer than this


def need_attach():
    """Skips unless gdb, trace-record and the attach library are there."""
    if not shutil.which("gdb"):
        skip("gdb is not installed (./heapreel setup installs it)")
    need(TRACE_RECORD, LIBATTACH)


def program(name):
    """A program of tests/attach, built."""
    path = os.path.join(REC_BUILD, "tests", "attach", name)
    need(path)
    return path


def _end(p):
    if p.poll() is None:
        p.kill()
        p.wait()


def start(argv, cwd=None, extra_env=None):
    """argv started unrecorded (stdout piped), in cwd, with extra_env;
    (process, pid) once it printed "ready PID"."""
    env = dict(os.environ, **(extra_env or {}))
    env.pop("LD_PRELOAD", None)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=cwd)
    atexit.register(_end, p)          # a failed test leaves no program running
    line = p.stdout.readline()
    assert line.startswith("ready "), "%s printed %r" % (argv, line)
    return p, int(line.split()[1])


def attach(pid, trace, *extra):
    """trace-record -p PID -o TRACE [EXTRA] started; returns it once it
    says it attached (asserts it did)."""
    r = subprocess.Popen([TRACE_RECORD, "-p", str(pid), "-o", trace] + list(extra),
                         stderr=subprocess.PIPE, text=True)
    line = r.stderr.readline()
    if ATTACHED_LINE not in line:
        rest = r.stderr.read()
        r.wait()
        raise AssertionError("trace-record -p %d: exit %s: %s%s" % (pid, r.returncode, line, rest))
    return r


def finish(r):
    """Waits for trace-record -p; asserts exit 0; its stderr."""
    _, err = r.communicate(timeout=WAIT_S)
    assert r.returncode == 0, "trace-record -p: exit %d: %s" % (r.returncode, err)
    return err


def wait_line(p, want):
    """Reads p's stdout until a line equal to want."""
    line = p.stdout.readline()
    assert line.rstrip("\n") == want, "expected %r, got %r" % (want, line)


def touch(path):
    with open(path, "w"):
        pass


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def settle():
    """A moment for the program to run on (not a timed assertion)."""
    time.sleep(0.2)


def imported(trace):
    """trace imported beside it (.db): asserts it has allocations and
    nothing unmatched, missed, lost or damaged; (allocations,
    frees_before_attach)."""
    db = trace[:-4] + ".db"
    imp = run([TRACE_IMPORT, trace, db])
    c = connect(db)
    assert meta(c, "allocations") > 0, imp.stderr
    for key in ("unmatched_frees", "missed_frees", "lost_events", "damaged"):
        assert meta(c, key) == 0, (trace, key, meta(c, key), imp.stderr)
    return meta(c, "allocations"), meta(c, "frees_before_attach")
