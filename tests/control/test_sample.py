"""Byte sampling (trace-record --sample 4096) on a program with known
totals (ctl_sample.c): the period reaches the trace header and
processes.sample_period; trace-snap's unbiased numbers at mark:full match
the truth per call site within 5 standard deviations; the .heap output
carries raw sampled numbers under a heap_v2/4096 header; every sampled
block's free was recorded (no leaks at the end), and no other free (no
unmatched frees).

Why 5 sigma: each allocation of s bytes is sampled independently with
probability p = 1 - exp(-s/P). Of N such blocks, k are sampled, k ~
Binomial(N, p); the unbiased count is k/p, with standard deviation
sqrt(N (1 - p) / p) (times s for bytes). A correct sampler fails a 5 sigma
check with probability below 1e-6 per value; a sampler off by a few
percent (wrong gap distribution, lost frees) fails it for site a, where
sigma is 0.9 % of the value. Site c (p = 1 - e^-24) must be exact.

Then sampling across stops (ctl_stopstart.c): 200 times, 4 MB allocated
while stopped, then one 1016-byte probe after rec_start, at period 2^20.
Nothing allocated while stopped is recorded, and the probes are sampled as
any allocation is: about 0.2 of them (Poisson: 5 or more with probability
below 3e-6). A sample point that fell while stopped and stayed for the
start (the countdown counted down, never drawn again) sampled 199 of 200."""
import math
import os
import sqlite3

import ctltest
import hrtest

prog = ctltest.prog("ctl_sample")
ctltest.need(ctltest.TRACE_RECORD, prog, hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP)
P = 4096
SIGMAS = 5
SITES = {  # name: (size, blocks live at "full", blocks allocated by then)
    "site_a": (256, 100000, 200000),
    "site_b": (4096, 10000, 10000),
    "site_c": (100000, 100, 100),
}
d = hrtest.tmpdir("sample")
t, db = os.path.join(d, "s.trc"), os.path.join(d, "s.db")
hrtest.run([ctltest.TRACE_RECORD, "--sample", str(P), "-o", t, "--", prog])
s = hrtest.summary(t)
assert s["alloc"] < 40000, s                # ~12 100 + 6 300 + 100 expected
hrtest.run([hrtest.TRACE_IMPORT, t, db])
c = sqlite3.connect(db)
assert c.execute("SELECT sample_period FROM processes").fetchall() == [(P,)]
# only sampled blocks' frees: none unmatched (recorder/sample.c's filter
# may send a free to the set, never record it unless the set has it)
assert c.execute("SELECT value FROM meta WHERE key = 'unmatched_frees'").fetchall() == [(0,)]


def per_site(metric, at):
    return hrtest.folded_per_function(db, at, SITES, metric)


def check(metric, index, per_object):
    got = per_site(metric, ["--at", "mark:full"])
    for name, (size, *counts) in SITES.items():
        n = counts[index]
        p = 1 - math.exp(-size / P)
        scale = size if per_object else 1
        want = n * scale
        sigma = math.sqrt(n * (1 - p) / p) * scale
        tol = max(SIGMAS * sigma, scale)      # truncation: one object
        assert abs(got[name] - want) <= tol, (metric, name, got[name], want, tol)


check("inuse_objects", 0, False)
check("inuse_space", 0, True)
check("alloc_objects", 1, False)
check("alloc_space", 1, True)

heap = os.path.join(d, "full.heap")
hrtest.run([hrtest.TRACE_SNAP, db, "--at", "mark:full", "-o", heap])
with open(heap) as f:
    first = f.readline()
assert first.rstrip().endswith("@ heap_v2/%d" % P), first

leaks = per_site("inuse_objects", ["--leaks"])
assert leaks == dict.fromkeys(SITES, 0), leaks

# The largest period (REC_PERIOD_MAX, 2^40) is a period like any other: ~100
# MB allocated in all, so a sample is a 1 in 10^4 event (it once wrapped to
# 0 in the control word and recorded every allocation).
tb, dbb = os.path.join(d, "big.trc"), os.path.join(d, "big.db")
hrtest.run([ctltest.TRACE_RECORD, "--sample", str(1 << 40), "-o", tb, "--", prog])
assert hrtest.summary(tb)["alloc"] <= 1, hrtest.summary(tb)
hrtest.run([hrtest.TRACE_IMPORT, tb, dbb])
cb = sqlite3.connect(dbb)
assert cb.execute("SELECT sample_period FROM processes").fetchall() == [(1 << 40,)]
cb.close()

stops = ctltest.prog("ctl_stopstart")
ts = os.path.join(d, "stops.trc")
hrtest.run([ctltest.TRACE_RECORD, "--sample", "1048576", "-o", ts, "--", stops])
sizes = [r[4] for r in hrtest.dump(ts) if r[0] == "alloc"]
assert sizes.count("size=1000") == 0, sizes.count("size=1000")
assert sizes.count("size=1016") <= 4, sizes.count("size=1016")
print("ok")
