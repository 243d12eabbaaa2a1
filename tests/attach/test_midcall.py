"""Attaches, MIDCALL_ATTACHES times, to att_midcall, whose first thread
(the one gdb's calls run in) is inside malloc or free most of the time: a
call made there re-enters the allocator half way through (two owners for
one block; before trace-record let the thread out first, 4 of 20 attaches
crashed it). It must survive every attach, find no block handed out twice,
and the last trace import with nothing unmatched, missed or lost."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import atttest as at
from hrtest import tmpdir

MIDCALL_ATTACHES = 20
RECORD_FOR = "0.05s"

at.need_attach()
d = tmpdir("midcall")
stop = os.path.join(d, "stop")
p, pid = at.start([at.program("att_midcall"), stop])
trace = None
for i in range(MIDCALL_ATTACHES):
    if trace:
        os.unlink(trace)
    trace = os.path.join(d, "m%d.trc" % i)
    at.finish(at.attach(pid, trace, "--for", RECORD_FOR))
    assert p.poll() is None, "att_midcall died in attach %d: %s" % (i, p.stderr.read())
at.touch(stop)
out, err = p.communicate(timeout=at.WAIT_S)
assert p.returncode == 0 and out == "corrupt=0\n" and err == "", (p.returncode, out, err)
allocs, _ = at.imported(trace)
print("%d attaches survived; the last recorded %d allocations" % (MIDCALL_ATTACHES, allocs))
