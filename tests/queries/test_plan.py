"""test_plan - the snapshot (both directions), bisection and steady-window SQL read the allocations
table as rowid ranges (bounded by checkpoints) and free_blocks by rowid, never a full scan:
EXPLAIN QUERY PLAN on a database made from importer/schema.sql."""
import os
import sqlite3

import hrtest
import fixture

tmp = hrtest.tmpdir("q-plan")
DB = os.path.join(tmp, "p.db")
fixture.standard(DB)
db = sqlite3.connect(DB)
checks = 0


def plan(name, params):
    with open(os.path.join(hrtest.SRC, "queries", name + ".sql")) as fh:
        sql = fh.read()
    return [r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql, params)]


snap = plan("snapshot", dict(ckpt=1, t=5, alo=1, ahi=9, flo=0, fhi=3, pid=100, proc=0))
assert not [l for l in snap if l.startswith("SCAN")], snap
assert "SEARCH allocations USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in snap, snap
assert "SEARCH checkpoints USING PRIMARY KEY (checkpoint_id=?)" in snap, snap
checks += 3
back = plan("snapshot_back", dict(ckpt=2, tc=9, alo=5, ahi=9, flo=1, fhi=3, pid=100, proc=0))
assert not [l for l in back if l.startswith("SCAN")], back
assert "SEARCH allocations USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in back, back
checks += 2
p = plan("alloc_at", dict(id=3))
assert p == ["SEARCH allocations USING INTEGER PRIMARY KEY (rowid>?)"], p
# a free is read from its row, its time from its allocation: rowid lookups
p = plan("free_block", dict(row=1))
assert p == ["SEARCH free_blocks USING INTEGER PRIMARY KEY (rowid=?)"], p
p = plan("free_time", dict(alloc_id=3))
assert p == ["SEARCH allocations USING INTEGER PRIMARY KEY (rowid=?)"], p
checks += 3
steady = plan("steady", dict(alo=1, ahi=9, t1=1, t2=5, pid=100))
assert steady == ["SEARCH allocations USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"], steady
checks += 1
print("ok: %d checks" % checks)
