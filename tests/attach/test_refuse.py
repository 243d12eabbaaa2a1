"""trace-record -p refuses, one line and its own exit code each, what it
cannot record: a process that has gone (4), another user's (7), a static
program (8), one already recorded, preloaded or attached (9), usage errors
(2); ptrace_scope (6) where the machine has Yama and we are not root
(otherwise the reason is printed). Nothing is left behind by a refusal."""
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import atttest as at
from hrtest import LIBREC, NOBODY, REC_BUILD, TRACE_RECORD, run, tmpdir

PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"

at.need_attach()
d = tmpdir("refuse")
trace = os.path.join(d, "run.trc")


def refused(pid, code, words, *extra):
    """trace-record -p PID exits code with one line holding words; no trace."""
    r = run([TRACE_RECORD, "-p", str(pid), "-o", trace] + list(extra), check=False)
    lines = r.stderr.splitlines()
    assert r.returncode == code and len(lines) == 1 and words in lines[0], \
        (pid, code, r.returncode, r.stderr)
    assert not os.path.exists(trace), os.listdir(d)
    return lines[0]


# usage
for argv, words in ((["-p", "x"], "not a process id"), (["-p", "1", "--", "true"], "takes only"),
                    (["--for", "1s", "--", "true"], "goes with -p"),
                    (["-p", "1", "--for", "soon"], "expected a duration")):
    r = run([TRACE_RECORD] + argv, check=False)
    assert r.returncode == 2 and words in r.stderr, (argv, r.returncode, r.stderr)

# a process that has gone
gone = subprocess.Popen(["true"])
gone.wait()
refused(gone.pid, 4, "no process %d" % gone.pid)

go, end = os.path.join(d, "go"), os.path.join(d, "end")

# already recorded: preloaded
env = dict(os.environ, LD_PRELOAD=LIBREC, REC_OUT=os.path.join(d, "pre.trc"))
pre = subprocess.Popen([at.program("att_phases"), go, end], stdout=subprocess.PIPE, text=True,
                       env=env)
pid = int(pre.stdout.readline().split()[1])
refused(pid, 9, "already being recorded")
pre.kill()
pre.wait()

# already recorded: attached (and a second trace-record -p is refused)
p, pid = at.start([at.program("att_phases"), go, end])
first = at.attach(pid, os.path.join(d, "first.trc"))
refused(pid, 9, "already being recorded by an attach")
first.send_signal(signal.SIGINT)
at.finish(first)
p.kill()
p.wait()

# a static program
static = os.path.join(REC_BUILD, "tests", "attach", "att_static")
if os.path.exists(static):
    p, pid = at.start([static, go, end])
    refused(pid, 8, "statically linked")
    p.kill()
    p.wait()
else:
    print("static program not tested: libc.a is not installed, att_static not built")

# another user's process
if os.geteuid() == 0 and shutil.which("setpriv"):
    p, pid = at.start(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                       "--clear-groups", at.program("att_phases"), go, end])
    refused(pid, 7, "belongs to uid %d" % NOBODY)
    p.kill()
    p.wait()
else:
    print("another user's process not tested: needs root and setpriv to run one as nobody")

# ptrace_scope
if not os.path.exists(PTRACE_SCOPE):
    print("ptrace_scope refusal not tested: %s does not exist (no Yama here)" % PTRACE_SCOPE)
elif os.geteuid() == 0:
    print("ptrace_scope refusal not tested: root may trace whatever the scope")
else:
    with open(PTRACE_SCOPE) as f:
        scope = f.read().strip()
    if scope == "0":
        print("ptrace_scope refusal not tested: %s is 0 (tracing allowed)" % PTRACE_SCOPE)
    else:
        p, pid = at.start([at.program("att_phases"), go, end])
        line = refused(pid, 6, PTRACE_SCOPE)
        assert "is %s" % scope in line, line
        p.kill()
        p.wait()
