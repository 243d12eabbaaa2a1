"""test_real CASE - real programs nobody here wrote, run with and without
libheapreel.so: the exit code and the output must be identical, and every trace
they leave must decode completely (END present, events recorded, no .ring
file left behind).

CASE: sqlite3 python3 bash
"""
import glob
import os
import shutil
import sys

import hrtest
import rectest
from rectest import Trace

SQL = """
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
INSERT INTO t SELECT i, printf('name-%05d', i), i * 0.5 FROM n;
CREATE INDEX t_name ON t(name);
SELECT COUNT(*), SUM(v), MIN(name), MAX(name) FROM t;
SELECT name FROM t WHERE id % 997 = 0 ORDER BY name DESC;
DELETE FROM t WHERE id % 2 = 0;
SELECT COUNT(*), group_concat(id, ',') FROM (SELECT id FROM t ORDER BY id LIMIT 10);
"""

PY = """
import json, threading, collections
words = collections.Counter()
def work(n):
    for i in range(2000):
        words["w%d" % (i * n % 101)] += 1
ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 4)]
[t.start() for t in ts]
[t.join() for t in ts]
data = {"k%d" % i: list(range(i % 7)) for i in range(500)}
print(len(json.dumps(data)), sorted(words.items())[:3], sum(words.values()))
"""

BASH = 'x=$(echo sub); /bin/echo "exec $x"; for i in 1 2; do ( /bin/true ); done; ' \
       'y=$(ls / | wc -l); test "$y" -gt 0 && echo listed'


def compare(argv, d, tag, **kw):
    base = rectest.run_plain(argv, **kw)
    pattern = os.path.join(d, tag + ".%p.trc")
    rec = rectest.record(argv, pattern, check=False, **kw)
    assert rec.returncode == base.returncode, "exit %d under the recorder, %d without:\n%s" % (
        rec.returncode, base.returncode, rec.stderr)
    assert rec.stdout == base.stdout, "stdout differs:\n%s---\n%s" % (base.stdout, rec.stdout)
    assert rec.stderr == base.stderr, "stderr differs:\n%s---\n%s" % (base.stderr, rec.stderr)
    traces = sorted(glob.glob(os.path.join(d, tag + ".*.trc*")))
    rings = [t for t in traces if t.endswith(".ring")]
    assert not rings, "ring files left: %s" % rings
    assert traces, "no trace written"
    decoded = [Trace(t) for t in traces]
    for t in decoded:
        st = t.stats()
        assert st["lost"] == 0, (t.path, st)
    return base, decoded


def case_sqlite3(d):
    exe = shutil.which("sqlite3")
    if not exe:
        hrtest.skip("sqlite3 not installed")
    script = os.path.join(d, "w.sql")
    with open(script, "w") as f:
        f.write(SQL)
    base, traces = compare([exe, ":memory:", ".read " + script], d, "sqlite3")
    assert len(traces) == 1
    s = traces[0].summary
    assert s["alloc"] > 1000 and s["free"] > 1000, s
    print("sqlite3: same output, %d allocations, %d frees recorded" % (s["alloc"], s["free"]))


def case_python3(d):
    script = os.path.join(d, "w.py")
    with open(script, "w") as f:
        f.write(PY)
    base, traces = compare([sys.executable, script], d, "python3")
    s = max(traces, key=lambda t: t.summary["alloc"]).summary
    assert s["alloc"] > 1000 and s["threads"] >= 4, s
    print("python3: same output, %d allocations, %d threads" % (s["alloc"], s["threads"]))


def case_bash(d):
    bash = shutil.which("bash")
    if not bash:
        hrtest.skip("bash not installed")
    base, traces = compare([bash, "-c", BASH], d, "bash")
    # bash, its subshells and the programs they exec each leave a trace
    assert len(traces) >= 5, [t.path for t in traces]
    print("bash -c: same output, %d traces (forks and execs), all complete" % len(traces))


def main():
    rectest.need_tools()
    d = hrtest.tmpdir("rec-real")
    globals()["case_" + sys.argv[1]](d)


if __name__ == "__main__":
    main()
