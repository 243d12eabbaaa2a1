"""REC_PAUSED=1 (trace-record --paused) then rec_start/rec_stop from the
program (rec.h, weak symbols): exactly the allocations between start and
stop are recorded, and frees of recorded blocks after the stop
(ctl_paused.c lists the counts); the import counts the frees of blocks
allocated while paused apart (processes.unknown_frees), not as unmatched."""
import os

import ctltest
import hrtest

prog = ctltest.prog("ctl_paused")
ctltest.need(ctltest.TRACE_RECORD, prog, hrtest.TRACE_DUMP, hrtest.TRACE_IMPORT)
d = hrtest.tmpdir("paused")
t = os.path.join(d, "p.trc")
p = hrtest.run([ctltest.TRACE_RECORD, "--paused", "-o", t, "--", prog])
recs = ctltest.dump(t)

assert ctltest.events(recs, "alloc", 100) == []
assert ctltest.events(recs, "alloc", 300) == []
a200 = ctltest.events(recs, "alloc", 200)
assert len(a200) == 300, len(a200)
addr200 = {r["addr"] for r in a200}
frees = ctltest.events(recs, "free")
freed200 = [r for r in frees if r["addr"] in addr200]
assert len(freed200) == 200, len(freed200)

ms = ctltest.marks(recs)
labels = [m["label"] for m in ms]
assert labels == ["heapreel.stop", "heapreel.start", "active", "heapreel.stop"], labels
start, stop = ms[1]["t"], ms[3]["t"]
assert all(start <= r["t"] <= stop for r in a200)
# 100 of the 200-byte blocks were freed while active, 100 after the stop.
assert sum(1 for r in freed200 if r["t"] > stop) == 100
assert sum(1 for r in freed200 if r["t"] < ms[2]["t"]) == 100
# Nothing at all was recorded before the start (paused from the start).
assert all(r["t"] >= start for r in recs if r["kind"] in ("alloc", "free", "realloc"))

# The import: the frees of blocks allocated before the start are counted as
# such (unknown_frees), not as unmatched frees; 100 recorded blocks stay live.
db = os.path.join(d, "p.db")
hrtest.trace_import(["-q", t, db])
c = hrtest.connect(db)
assert hrtest.meta(c, "unmatched_frees") == 0, hrtest.meta(c, "unmatched_frees")
assert hrtest.one(c, "SELECT unknown_frees FROM processes") == 200, \
    hrtest.one(c, "SELECT unknown_frees FROM processes")
assert hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size = 200 AND t_free IS NULL") == 100
c.close()

# Without the recorder the weak symbols are absent and the program says so.
plain = hrtest.run([prog], check=False)
assert plain.returncode == 2, plain.returncode
print("ok")
