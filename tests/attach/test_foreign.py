"""Attach to Debian's python3 and sqlite3 (as the bench runs them) while
they work: their output is what it is without the attach, the process
goes on after the detach, and the traces import with allocations and
nothing unmatched, missed or lost."""
import os
import shutil
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
import atttest as at
from hrtest import skip, tmpdir

SYSTEM_PYTHON = "/usr/bin/python3"
PY_MIN_ALLOCS = 100          # python3: allocations recorded while attached, at least
ROWS = 20000                  # sqlite3: rows inserted while the attach comes and goes
PY_WORK = r"""
import os, sys, time
print("ready %d" % os.getpid(), flush=True)
bad = 0
stop = sys.argv[1]
while not os.path.exists(stop):
    d = {str(i): [i] * 8 for i in range(2000)}
    bad += sum(v[7] for v in d.values()) != 1999 * 2000 // 2
print("python bad=%d" % bad, flush=True)
"""

at.need_attach()
d = tmpdir("foreign")


def attach_for_a_while(pid, trace):
    r = at.attach(pid, trace)
    at.settle()
    r.send_signal(signal.SIGINT)
    at.finish(r)


# python3 working: a dict of lists built and summed again and again
if os.path.exists(SYSTEM_PYTHON):
    stop = os.path.join(d, "stop")
    p, pid = at.start([SYSTEM_PYTHON, "-c", PY_WORK, stop])
    trace = os.path.join(d, "py.trc")
    attach_for_a_while(pid, trace)
    assert p.poll() is None, p.stderr.read()
    at.touch(stop)
    out, err = p.communicate(timeout=at.WAIT_S)
    assert p.returncode == 0 and out == "python bad=0\n" and err == "", (p.returncode, out, err)
    allocs, before = at.imported(trace)
    # its own calls reach the hooks (python3 is not PIE: its PLT entries for
    # malloc are what dlsym finds): a dict table a round, hundreds of rounds
    assert allocs >= PY_MIN_ALLOCS, allocs
    print("python3: %d allocations, %d frees before the attach" % (allocs, before))
else:
    print("python3 not tested: %s is not installed" % SYSTEM_PYTHON)

# sqlite3 working: rows fed through its stdin while the attach comes and goes
sqlite = shutil.which("sqlite3")
if not sqlite:
    skip("sqlite3 is not installed (./heapreel setup)")
env = dict(os.environ)
env.pop("LD_PRELOAD", None)
q = subprocess.Popen([sqlite, ":memory:"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True, env=env)
attached = threading.Event()


def feed():
    q.stdin.write("CREATE TABLE t(a INTEGER, b TEXT);\n")
    for i in range(ROWS):
        q.stdin.write("INSERT INTO t VALUES(%d, printf('%%0*d', %d, 0));\n" % (i, i % 300))
        if i == ROWS // 4:
            q.stdin.flush()
            attached.wait(at.WAIT_S)
    q.stdin.write("SELECT count(*), sum(a), sum(length(b)) FROM t;\n")
    q.stdin.close()


feeder = threading.Thread(target=feed)
feeder.start()
trace = os.path.join(d, "sq.trc")
try:
    r = at.attach(q.pid, trace)
finally:
    attached.set()            # a failed attach must not hold the feeder for WAIT_S
at.settle()
r.send_signal(signal.SIGINT)
at.finish(r)
feeder.join()
out, err = q.stdout.read(), q.stderr.read()   # its stdin is closed: it ends
q.wait(timeout=at.WAIT_S)
want = "%d|%d|%d\n" % (ROWS, ROWS * (ROWS - 1) // 2, sum(max(i % 300, 1) for i in range(ROWS)))  # 0 pads to "0"
assert q.returncode == 0 and out == want and err == "", (q.returncode, out, want, err)
print("sqlite3: %d allocations, %d frees before the attach" % at.imported(trace))
