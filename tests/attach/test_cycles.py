"""Attach/detach cycles (HR_ATTACH_CYCLES, default 5; 100 by hand) on
att_churn, whose threads allocate all the time: it never crashes or
hangs, its output is unchanged, its RSS after the cycles is within 5 MB
of before the first, and the traces import with nothing unmatched, missed
or lost. Prints the RSS, the longest pause its ticker thread saw (the
attaches' pauses) and the time a cycle took. With argv[1] "slow" the
recorder pauses 2 ms after each GOT entry it rewrites or puts back
(REC_TEST_GOT_PAUSE_US), so that the threads allocate and free while the
routing is half done: still nothing may be missed."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import atttest as at
from hrtest import tmpdir

CYCLES = int(os.environ.get("HR_ATTACH_CYCLES", "5"))
RSS_SLACK_KIB = 5 * 1024
RECORD_FOR = "0.2s"

at.need_attach()
d = tmpdir("cycles")
stop = os.path.join(d, "stop")
SLOW = sys.argv[1:] == ["slow"]
p, pid = at.start([at.program("att_churn"), stop],
                  extra_env={"REC_TEST_GOT_PAUSE_US": "2000"} if SLOW else None)
at.settle()
rss0 = at.rss_kib(pid)
t0 = time.monotonic()
traces = []
for i in range(CYCLES):
    trace = os.path.join(d, "c%d.trc" % i)
    at.finish(at.attach(pid, trace, "--for", RECORD_FOR))
    assert p.poll() is None, "att_churn died in cycle %d: %s" % (i, p.stderr.read())
    traces.append(trace)
    if i > 1:                 # keep the disk use small: check and drop the older ones
        os.unlink(traces[i - 2])
per_cycle = (time.monotonic() - t0) / CYCLES
at.settle()
rss1 = at.rss_kib(pid)
at.touch(stop)
out, err = p.communicate(timeout=at.WAIT_S)
assert p.returncode == 0 and out == "threads=4 corrupt=0\n", (p.returncode, out, err)
print("cycles=%d rss_before=%d KiB rss_after=%d KiB (%+d KiB); %s; %.2f s a cycle"
      % (CYCLES, rss0, rss1, rss1 - rss0, err.strip(), per_cycle))
assert rss1 - rss0 <= RSS_SLACK_KIB, (rss0, rss1)

for trace in traces[-2:]:
    at.imported(trace)
