"""ctltest - shared helpers of the control tests: where trace-record,
trace-ctl and our programs are, a trace decoded by trace-dump, and a
program driven step by step through its stdin (ctl_steps)."""
import os
import re
import subprocess
import time

import hrtest

TRACE_RECORD = hrtest.TRACE_RECORD
TRACE_CTL = hrtest.TRACE_CTL

need = hrtest.need


def prog(name):
    return os.path.join(hrtest.REC_BUILD, "tests", "control", name)


def parse(line):
    """One trace-dump line -> dict of its key=value fields plus 'kind'; a
    mark's label (the rest of the line) is kept whole."""
    kind, _, rest = line.partition(" ")
    r = {"kind": kind}
    if kind == "mark":
        m = re.match(r"t=(\d+) label=(.*)$", rest)
        r["t"], r["label"] = int(m.group(1)), m.group(2)
        return r
    for k, v in re.findall(r"(\w+)=(\S*)", rest):
        try:
            r[k] = int(v, 0)
        except ValueError:
            r[k] = v
    return r


def dump(trace):
    out = hrtest.run([hrtest.TRACE_DUMP, trace]).stdout
    return [parse(l) for l in out.splitlines() if l.strip()]


def events(recs, kind, size=None):
    return [r for r in recs if r["kind"] == kind and (size is None or r.get("size") == size)]


def marks(recs):
    """User and reserved marks in time order, the closing stats mark left out."""
    ms = [r for r in recs if r["kind"] == "mark" and not r["label"].startswith("heapreel.stats")]
    return sorted(ms, key=lambda r: r["t"])


def ctl(pid, *args, check=True, env=None):
    p = subprocess.run([TRACE_CTL, str(pid)] + list(args), capture_output=True, text=True,
                       env=env, timeout=hrtest.limit(30))
    if check and p.returncode != 0:
        raise AssertionError("trace-ctl %s %s exited %d: %s" % (pid, " ".join(args),
                                                                p.returncode, p.stderr))
    return p


def wait_active(pid, timeout=hrtest.limit(30.0)):
    """Returns once the recorder of pid says it is recording (trace-ctl
    record has started it); fails if it does not within timeout."""
    deadline = time.monotonic() + timeout
    while not ctl(pid, "status").stdout.startswith("ok state=active"):
        assert time.monotonic() < deadline, "process %d never started recording" % pid


class Steps:
    """ctl_steps under trace-record: step() runs the next step and returns
    once the program said it is done (no timing involved)."""

    def __init__(self, trace, extra=(), env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.p = subprocess.Popen([TRACE_RECORD, "-o", trace] + list(extra) +
                                  ["--", prog("ctl_steps")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=e)
        first = self.p.stdout.readline().split()
        assert first[0] == "pid", first
        self.pid = int(first[1])
        self._ready()

    def _ready(self):
        line = self.p.stdout.readline()
        assert line == "ready\n", "ctl_steps said %r" % line

    def step(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        self._ready()

    def finish(self):
        self.p.stdin.close()
        err = self.p.stderr.read()
        rc = self.p.wait(timeout=hrtest.limit(60))
        assert rc == 0, "ctl_steps exited %d: %s" % (rc, err)
        return err
