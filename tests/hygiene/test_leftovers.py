"""test_leftovers CASE - what tests, killed imports and killed recorded
processes leave behind is removed by whoever comes next (issue 21, defect
11), and never what is still in use.

CASE:
  tmpdir       hrtest.tmpdir: a small test script run under a private
               TMPDIR leaves nothing when it passes or skips; failed by an
               uncaught exception or stopped by SIGTERM (meson's timeout) it
               keeps its directories and names them on stderr.
  import_tmp   trace-import's temporary file OUT.tmp-PID-XXXXXX: an import
               held still in the middle (a module of its trace is a FIFO
               it opens) is SIGKILLed; an import to the same OUT meanwhile
               keeps the file of the running one and removes the planted
               leftovers of processes that are gone (and their -journal),
               but not a symlink (its target untouched), nor a directory,
               nor a file some import holds locked (flock: an import of
               another pid namespace), nor another OUT's; the next import
               removes the killed one's (and the file no longer locked).
  ctl_sockets  the control directory (REC_CTL_DIR): a recorded process
               SIGKILLed leaves its PID.sock; the next recorded process
               removes it and planted sockets of pids that are gone, and
               keeps the socket of a live pid (not listening), a listening
               socket of a gone pid (another pid namespace), a symlink and
               a regular file named PID.sock; trace-ctl sweeps the same way.
A pid that is gone for sure: /proc/sys/kernel/pid_max (pids are below it).
"""
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time

import hrtest

WAIT_S = hrtest.limit(30)     # bound on waiting for a file to appear (a failure, not a timing)


def wait_for(what, found):
    """Polls found() until it returns something true; fails after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        r = found()
        if r:
            return r
        time.sleep(0.01)
    raise AssertionError("no %s after %d s" % (what, WAIT_S))


def gone_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read())


def killed(p):
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL, "exited %d before the kill" % p.returncode


def precious(d):
    target = os.path.join(d, "precious")
    with open(target, "w") as f:
        f.write("precious\n")
    return target


def untouched(target):
    with open(target) as f:
        assert f.read() == "precious\n", "%s was written" % target


# ---- tmpdir -----------------------------------------------------------------

# Makes two directories (one with an unwritable one inside, as tests do),
# prints their paths, then ends as the case says.
SCRIPT = """
import os, sys, time
import hrtest
a, b = hrtest.tmpdir("one"), hrtest.tmpdir("two")
os.mkdir(os.path.join(b, "ro"))
open(os.path.join(b, "ro", "f"), "w").close()
os.chmod(os.path.join(b, "ro"), 0o500)
print(a, b, flush=True)
%s
"""
ENDINGS = {                   # ending: (its code, exit code, kept)
    "pass": ("", 0, False),
    "skip": ("hrtest.skip('no reason')", hrtest.SKIP, False),
    "fail": ("assert False, 'a check failed'", 1, True),
    "sigterm": ("time.sleep(600)", 1, True),
}


def ending(name, top):
    code, status, kept = ENDINGS[name]
    p = subprocess.Popen([sys.executable, "-c", SCRIPT % code], env=dict(os.environ, TMPDIR=top),
                         text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dirs = p.stdout.readline().split()
    assert len(dirs) == 2, "%s: printed %r" % (name, dirs)
    if name == "sigterm":
        p.send_signal(signal.SIGTERM)
    _, err = p.communicate()
    assert p.returncode == status, "%s: exit %d, expected %d: %s" % (name, p.returncode, status,
                                                                      err)
    left = sorted(os.path.join(top, f) for f in os.listdir(top))
    if kept:
        assert left == sorted(dirs), "%s: kept %s, made %s" % (name, left, dirs)
        for x in dirs:
            assert "kept in %s\n" % x in err, "%s: %s not named on stderr:\n%s" % (name, x, err)
    else:
        assert not left, "%s: left %s" % (name, left)
    print("%s: exit %d, %s" % (name, status, "kept and named" if kept else "nothing left"))


def case_tmpdir(d):
    for name in ENDINGS:
        top = os.path.join(d, name)
        os.mkdir(top)
        ending(name, top)


# ---- import_tmp -------------------------------------------------------------

PLAIN = """header 4242 1 5000000000 1700000000000000000 0 /bin/prog prog
thread 4242 main
node 1 0 401000
flush
events 1 4242
a 10 1000 100 1
flush
"""
# The module's file is a FIFO: symbolizing opens it, which blocks until a
# writer comes (none does), after the temporary database was created.
STUCK = PLAIN.replace("thread 4242 main\n", "thread 4242 main\nmodule 400000 10000 0 5 %s\n")


def tmp_files(d, out):
    return sorted(f for f in os.listdir(d) if f.startswith(out + ".tmp-"))


def case_import_tmp(d):
    hrtest.need(hrtest.TRACE_IMPORT, hrtest.MKTRACE)
    fifo = os.path.join(d, "module.fifo")
    os.mkfifo(fifo)
    stuck = hrtest.mktrace(os.path.join(d, "stuck.trc"), STUCK % fifo)
    plain = hrtest.mktrace(os.path.join(d, "plain.trc"), PLAIN)
    db = os.path.join(d, "o.db")
    a = subprocess.Popen([hrtest.TRACE_IMPORT, "-q", stuck, db], stderr=subprocess.PIPE)
    try:
        running = wait_for("temporary file of the running import", lambda: tmp_files(d, "o.db"))
        assert len(running) == 1 and running[0].startswith("o.db.tmp-%d-" % a.pid), \
            "the running import (pid %d) made %s" % (a.pid, running)
        assert a.poll() is None, "the import ended (exit %d): %s" % (a.returncode, a.stderr.read())
        dead = gone_pid()
        target = precious(d)
        left = ["o.db.tmp-%d-Ab3xYz" % dead, "o.db.tmp-%d-Ab3xYz-journal" % dead]
        kept = ["o.db.tmp-%d-linkzz" % dead, "o.db.tmp-%d-dirzzz" % dead,
                "o.db.tmp-%d-lockzz" % dead, "p.db.tmp-%d-otherz" % dead]
        for f in left + kept[2:]:
            with open(os.path.join(d, f), "w") as fh:
                fh.write("x")
        os.symlink(target, os.path.join(d, kept[0]))
        os.mkdir(os.path.join(d, kept[1]))
        lock = os.open(os.path.join(d, kept[2]), os.O_RDONLY)
        fcntl.flock(lock, fcntl.LOCK_EX)
        hrtest.trace_import(["-q", plain, db])
        os.close(lock)
        now = tmp_files(d, "o.db") + tmp_files(d, "p.db")
        assert sorted(running + kept) == now, "after an import: %s, expected %s" % (
            now, sorted(running + kept))
        untouched(target)
        print("an import meanwhile: the running import's %s kept; the leftovers of gone pid %d "
              "removed, its symlink, directory, locked file and another OUT's kept: ok" % (
                  running[0], dead))
        killed(a)
    finally:
        if a.poll() is None:
            killed(a)
    assert os.path.exists(os.path.join(d, running[0])), "the killed import's file vanished"
    hrtest.trace_import(["-q", "--force", plain, db])
    assert tmp_files(d, "o.db") == sorted(kept[:2]), tmp_files(d, "o.db")
    print("the next import: the SIGKILLed import's %s and the file no longer locked removed: "
          "ok" % running[0])


# ---- ctl_sockets ------------------------------------------------------------

def bound(path, listening=False):
    """A unix socket bound at path, listening or not (a killed process's)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    if listening:
        s.listen(1)
    return s


def case_ctl_sockets(d):
    hrtest.need(hrtest.LIBREC, hrtest.TRACE_CTL, hrtest.prog("entry"))
    ctl = os.path.join(d, "ctl")
    os.mkdir(ctl, 0o700)
    env = dict(os.environ, REC_CTL_DIR=ctl, LD_PRELOAD=hrtest.LIBREC,
               REC_OUT=os.path.join(d, "r%p.trc"))
    sock = lambda pid: os.path.join(ctl, "%d.sock" % pid)  # noqa: E731
    # a recorded process killed: its socket stays
    p = subprocess.Popen(["sleep", "600"], env=env)
    try:
        wait_for("control socket of pid %d" % p.pid, lambda: os.path.exists(sock(p.pid)))
    finally:
        killed(p)
    assert os.path.exists(sock(p.pid)), "the killed process's socket vanished"
    dead = gone_pid()
    target = precious(d)
    keep = [bound(sock(os.getpid())), bound(sock(dead + 1), listening=True)]
    os.symlink(target, sock(dead + 2))
    with open(sock(dead + 3), "w") as f:
        f.write("x")
    planted = [bound(sock(dead))]
    planted[0].close()
    kept = sorted(os.listdir(ctl))
    kept.remove("%d.sock" % p.pid)
    kept.remove("%d.sock" % dead)
    r = subprocess.run([hrtest.prog("entry")], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r
    assert sorted(os.listdir(ctl)) == kept, "after a recorded run: %s, expected %s" % (
        sorted(os.listdir(ctl)), kept)
    untouched(target)
    print("a recorded run removed the sockets of killed pid %d and gone pid %d; kept those of "
          "a live pid, a listening socket, a symlink, a file: ok" % (p.pid, dead))
    planted = [bound(sock(dead))]
    planted[0].close()
    r = subprocess.run([hrtest.TRACE_CTL, str(dead), "status"], env=dict(os.environ,
                       REC_CTL_DIR=ctl), capture_output=True, text=True)
    assert r.returncode == 4 and "no process %d" % dead in r.stderr, r   # not in the data
    assert sorted(os.listdir(ctl)) == kept, "after trace-ctl: %s" % sorted(os.listdir(ctl))
    for s in keep:
        s.close()
    print("trace-ctl removed the socket of gone pid %d: ok" % dead)


def main():
    globals()["case_" + sys.argv[1]](hrtest.tmpdir("leftovers-" + sys.argv[1]))


if __name__ == "__main__":
    main()
