"""test_real CASE - real programs, unchanged, under the recorder (issue 7
point 5). Each program runs once without and once with libheapreel.so: exit
code, stdout and stderr must be identical. Every trace the recorded runs
left (one per process: forks and execs included) is imported (all traces
of one exec generation into one database: see Session.check and case
exec_dir) and checked: every free pairs an allocation (the
unmatched ones at most UNMATCHED_PER_PROCESS per process: blocks a process
inherited over fork or got before the recorder started), no missed frees,
nothing lost, live bytes never negative, the peak equal to the timeline's
maximum and, where the program reports its own memory figures, plausible
against them. Skips (exit 77, saying what) when a program is not installed.

CASE:
  sqlite3    a script on a file database; its own `.stats` peak
  python3    a threaded script, PYTHONMALLOC=malloc; its tracemalloc peak
  many_threads  python3 with 300 threads alive at once
  git        init, add, commit, log, gc in a temporary repository
  gcc        compile and link a C file (gcc, cc1, as, collect2, ld);
             the two executables built must be byte-identical
  bash       a script with pipes, subshells, fork and exec
  exec_dir   a shell's traces, exec'd images included, in one database
  cxx        tests/programs/cxx_mix (threads, std::map, exceptions)
  dlopen     dlopener: the same library dlopen'ed / dlclose'd 200 times
  threads    hr_kill run to completion: threads exiting while others allocate
  signal     hr_signal: allocations inside SIGALRM/SIGUSR1 handlers (its
             counts depend on timing: exit codes compared, output not; the
             trace must hold exactly what it printed)
  signal_custom  hr_signal custom: the handlers land in rec_realloc's hook;
             every custom block is in the trace, ended, and the trace whole
  setuid     passwd --help and su --help as an unprivileged user (the loader
             ignores LD_PRELOAD for setuid programs), directly and from a
             recorded shell
"""
import os
import re
import shutil
import subprocess
import sys

import hardtest
import hrtest

UNMATCHED_PER_PROCESS = 16
RUN_TIMEOUT = 300                      # seconds, per program run
NOBODY = hrtest.NOBODY                 # uid/gid the setuid case runs as
MiB = 1 << 20

# git's identity and dates, the same in both runs, and no user or system
# configuration, so both repositories get the same commit ids.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Heap Reel", "GIT_AUTHOR_EMAIL": "hr@example.org",
    "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+0000",
    "GIT_COMMITTER_NAME": "Heap Reel", "GIT_COMMITTER_EMAIL": "hr@example.org",
    "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+0000",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "TZ": "UTC",
    # one pack-objects thread: the same deltas, so the same pack, every run
    "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "pack.threads", "GIT_CONFIG_VALUE_0": "1",
}


def tool(name):
    exe = shutil.which(name)
    if not exe:
        hrtest.skip("%s not installed" % name)
    return exe


def run(argv, env, cwd=None, preexec=None):
    return subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=RUN_TIMEOUT, preexec_fn=preexec)


def same(base, rec, what):
    assert rec.returncode == base.returncode, "%s: exit %d under the recorder, %d without:\n%s" % (
        what, rec.returncode, base.returncode, rec.stderr.decode(errors="replace"))
    assert rec.stdout == base.stdout, "%s: stdout differs:\n%r\n---\n%r" % (
        what, base.stdout[-2000:], rec.stdout[-2000:])
    assert rec.stderr == base.stderr, "%s: stderr differs:\n%r\n---\n%r" % (
        what, base.stderr[-2000:], rec.stderr[-2000:])


class Session:
    """Runs commands plain and recorded; the recorded runs' traces all go
    to one directory."""

    def __init__(self, d, tag, env=None):
        self.d = d
        self.tag = tag
        self.env = env or {}
        self.traces = os.path.join(d, tag + "-traces")
        os.mkdir(self.traces)
        os.chmod(self.traces, 0o777)   # the setuid case records as nobody
        self.runs = 0

    def pair(self, argv, plain_cwd=None, rec_cwd=None, preexec=None, between=None):
        """Runs argv plain then (after calling `between`, if given)
        recorded; checks they behave the same; returns both
        CompletedProcess."""
        base = run(argv, hardtest.plain_env(**self.env), plain_cwd, preexec)
        if between:
            between()
        trace = os.path.join(self.traces, self.tag + ".%p.trc")
        rec = run(argv, hardtest.rec_env(trace, **self.env), rec_cwd, preexec)
        same(base, rec, " ".join(argv))
        self.runs += 1
        return base, rec

    def check(self, whole=False, killed=0):
        """Imports the traces of the recorded runs and checks every
        database; returns (Imported, figures summed over the databases).
        A process that exec'd leaves two traces with one pid (NAME.trc, then
        NAME.trc.1 for the new image, ...); unless `whole` each generation
        (.trc, .trc.1, ...) is imported into its own database, so each
        database holds one image per pid (trace-import keys a later image
        pid + 10000000 n when they go in together: case exec_dir).
        `killed`: how many processes the programs kill on purpose (each
        leaves its .ring; the others must not)."""
        files = sorted(os.listdir(self.traces))
        rings = [f for f in files if f.endswith(".ring")]
        assert len(rings) == killed, "%d processes killed, .ring files left: %s" % (killed, rings)
        groups = {}
        for f in files:
            m = re.match(r".*\.trc(?:\.(\d+))?$", f)
            if m:
                groups.setdefault(int(m.group(1) or 0), []).append(os.path.join(self.traces, f))
        assert groups, "no trace written"
        if whole:
            groups = {0: [self.traces]}
        imp = Imported()
        total = {}
        for k, inputs in sorted(groups.items()):
            db = os.path.join(self.d, "%s-%s.db" % (self.tag, "all" if whole else k))
            hardtest.trace_import(inputs, db)
            c = hardtest.connect(db)
            nproc = hardtest.one(c, "SELECT COUNT(*) FROM processes")
            f = hardtest.consistency(c, max_unmatched=UNMATCHED_PER_PROCESS * nproc)
            f["processes"] = nproc
            for key, v in f.items():
                total[key] = max(total.get(key, 0), v) if key == "peak_bytes" else \
                    total.get(key, 0) + v
            imp.conns.append(c)
        print("%s: %d recorded runs, same exit codes and output; %d traces in %d database(s): "
              "%d processes, %d events, %d allocations, %d unmatched frees, peak %d bytes" % (
                  self.tag, self.runs, sum(len(g) for g in groups.values()), len(groups),
                  total["processes"], total["events"], total["allocations"],
                  total["unmatched_frees"], total["peak_bytes"]))
        return imp, total


class Imported:
    """The databases of one session; queries run over all of them."""

    def __init__(self):
        self.conns = []

    def rows(self, sql, *args):
        return [r for c in self.conns for r in c.execute(sql, args).fetchall()]

    def total(self, sql, *args):
        return sum(r[0] or 0 for r in self.rows(sql, *args))

    def only(self):
        assert len(self.conns) == 1, "%d databases" % len(self.conns)
        return self.conns[0]

    def exes(self):
        return {os.path.basename(e or "") for (e,) in self.rows("SELECT exe FROM processes")}


def exe_peak(imp, pattern):
    """Largest peak_bytes of the processes whose executable's name matches
    the regular expression `pattern`."""
    rows = [(os.path.basename(e or ""), p or 0) for e, p in
            imp.rows("SELECT exe, peak_bytes FROM processes")]
    peaks = [p for e, p in rows if re.fullmatch(pattern, e)]
    assert peaks, "no %s process among %s" % (pattern, sorted({e for e, _ in rows}))
    return max(peaks)


SQL = """
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, blob BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, printf('name-%05d', i), i * 0.5, zeroblob(200 + i % 300) FROM n;
CREATE INDEX t_name ON t(name);
SELECT COUNT(*), SUM(v), MIN(name), MAX(name), SUM(length(blob)) FROM t;
SELECT name FROM t WHERE id % 1999 = 0 ORDER BY name DESC;
DELETE FROM t WHERE id % 3 = 0;
SELECT COUNT(*), group_concat(id, ',') FROM (SELECT id FROM t ORDER BY id LIMIT 12);
SELECT name, COUNT(*) FROM t GROUP BY substr(name, 1, 7) ORDER BY 2 DESC LIMIT 3;
.output stats.txt
.stats
"""


def case_sqlite3(d):
    exe = tool("sqlite3")
    script = os.path.join(d, "w.sql")
    with open(script, "w") as f:
        f.write(SQL)
    s = Session(d, "sqlite3", {"HOME": d, "LC_ALL": "C"})
    pd, rd = os.path.join(d, "plain"), os.path.join(d, "rec")
    os.mkdir(pd)
    os.mkdir(rd)
    s.pair([exe, "-batch", "w.db", ".read " + script], plain_cwd=pd, rec_cwd=rd)
    imp, f = s.check()
    with open(os.path.join(rd, "stats.txt")) as fh:
        m = re.search(r"Memory Used:\s+\d+ \(max (\d+)\) bytes", fh.read())
    assert m, "no Memory Used line in sqlite3's .stats"
    own = int(m.group(1))
    peak = exe_peak(imp, "sqlite3")
    # sqlite counts its own heap (malloc'ed through the system allocator,
    # with its 8-byte size prefix); the shell and libc allocate a little more
    assert own * 0.9 <= peak <= own * 1.5 + 4 * MiB, \
        "sqlite3 peak %d bytes, its own .stats says max %d" % (peak, own)
    print("sqlite3: peak %d bytes vs its own .stats max %d (ratio %.2f)" % (peak, own, peak / own))


PY = """
import sys, threading, tracemalloc, json, collections
tracemalloc.start()
counts = {}
def work(n):
    mine = collections.Counter()      # per thread: += on a shared one races
    for i in range(1000):
        mine["w%d" % (i * n % 211)] += 1
    counts[n] = mine
ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
[t.start() for t in ts]
[t.join() for t in ts]
words = sum(counts.values(), collections.Counter())
big = [("item %d" % i) * 8 for i in range(20000)]
data = {"k%d" % i: list(range(i % 9)) for i in range(5000)}
text = json.dumps(data)
blob = b"x" * (24 << 20)
print(len(text), len(big), len(blob), sorted(words.items())[:3], sum(words.values()))
del big, blob
cur, peak = tracemalloc.get_traced_memory()
with open(sys.argv[1], "w") as f:
    f.write("%d\\n" % peak)
"""


def case_python3(d):
    exe = hardtest.system_python()
    script = os.path.join(d, "w.py")
    with open(script, "w") as f:
        f.write(PY)
    s = Session(d, "python3", {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0",
                               "PYTHONDONTWRITEBYTECODE": "1"})
    s.pair([exe, script, "peak"], plain_cwd=d, rec_cwd=s.traces)
    imp, f = s.check()
    with open(os.path.join(s.traces, "peak")) as fh:
        own = int(fh.read())
    peak = exe_peak(imp, r"python3.*")
    # everything tracemalloc traces went through malloc with the same size
    # (PYTHONMALLOC=malloc), so the recorded peak is at least tracemalloc's;
    # above it: what the interpreter allocated before tracemalloc started
    # and tracemalloc's own tables
    assert own <= peak <= own * 1.5 + 16 * MiB, \
        "python3 peak %d bytes, its tracemalloc peak %d" % (peak, own)
    print("python3: peak %d bytes vs tracemalloc's %d (ratio %.2f)" % (peak, own, peak / own))


# join() returns before the thread's OS-level exit has run, and a process
# that exits while a thread of its own is still listed keeps its .ring (as
# it must: that thread may still free), so the script waits for them to go
MANY = """
import os, threading, time
N = %d
gate = threading.Barrier(N + 1)
def work(i):
    keep = [str(j) * (i %% 7 + 1) for j in range(200)]
    gate.wait()
    return len(keep)
ts = [threading.Thread(target=work, args=(i,)) for i in range(N)]
[t.start() for t in ts]
gate.wait()
[t.join() for t in ts]
def ours(tid):
    with open("/proc/self/task/%%s/comm" %% tid) as f:
        return not f.read().startswith("heapreel-")
for _ in range(10000):
    try:
        if [t for t in os.listdir("/proc/self/task") if ours(t)] == [str(os.getpid())]:
            break
    except FileNotFoundError:
        pass
    time.sleep(0.001)
print("threads", N)
"""


def case_many_threads(d):
    # more threads alive at once than the recorder has staging rings (256
    # kept by threads, then 16 lent per call)
    script = os.path.join(d, "many.py")
    with open(script, "w") as f:
        f.write(MANY % 300)
    s = Session(d, "many", {"PYTHONMALLOC": "malloc"})
    s.pair([hardtest.system_python(), script])
    imp, f = s.check()
    assert f["unmatched_frees"] == 0, f


def case_git(d):
    git = tool("git")
    s = Session(d, "git", dict(GIT_ENV, HOME=d))
    repos = []
    for name in ("plain", "rec"):
        r = os.path.join(d, name)
        os.mkdir(r)
        for i in range(40):
            sub = os.path.join(r, "dir%d" % (i % 5))
            os.makedirs(sub, exist_ok=True)
            with open(os.path.join(sub, "f%02d.txt" % i), "w") as fh:
                fh.write("line %d\n" % i * (i + 1))
        repos.append(r)
    steps = [["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "first"],
             ["mv", "dir0", "moved"], ["commit", "-q", "-a", "-m", "second"],
             ["log", "--stat", "--format=%H %an %ad %s"], ["rev-parse", "HEAD"],
             ["gc", "--quiet"], ["fsck", "--no-progress"], ["count-objects", "-v"]]
    for st in steps:
        s.pair([git] + st, plain_cwd=repos[0], rec_cwd=repos[1])
    s.check()


GCC_SRC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; char name[32]; double v; };
#define F(n) static double f##n(struct node *l, int k) { double s = 0; \
    for (struct node *p = l; p; p = p->next) s += p->v * (k + n) / (1.0 + strlen(p->name)); \
    return s > 1e9 ? s / n : s + n; }
F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15) F(16)
F(17) F(18) F(19) F(20) F(21) F(22) F(23) F(24) F(25) F(26) F(27) F(28) F(29) F(30)
static double (*const fs[])(struct node *, int) = { f1, f2, f3, f4, f5, f6, f7, f8, f9, f10,
    f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27,
    f28, f29, f30 };
int main(void)
{
    int unused;                     /* -Wall says so on stderr, in both runs */
    struct node *l = NULL;
    for (int i = 0; i < 100; i++) {
        struct node *n = malloc(sizeof *n);
        snprintf(n->name, sizeof n->name, "n%d", i);
        n->v = i;
        n->next = l;
        l = n;
    }
    double t = 0;
    for (unsigned i = 0; i < sizeof fs / sizeof *fs; i++)
        t += fs[i](l, (int)i);
    printf("%.3f\n", t);
    return 0;
}
"""


def case_gcc(d):
    gcc = tool("gcc")
    src = os.path.join(d, "prog.c")
    with open(src, "w") as f:
        f.write(GCC_SRC)
    s = Session(d, "gcc", {"LC_ALL": "C", "TMPDIR": d})
    built = os.path.join(d, "prog")
    # same directory and arguments in both runs (the debug info holds them)
    s.pair([gcc, "-O2", "-g", "-Wall", "-o", built, src], plain_cwd=d, rec_cwd=d,
           between=lambda: os.rename(built, built + ".plain"))
    with open(built + ".plain", "rb") as a, open(built, "rb") as b:
        assert a.read() == b.read(), "the executables built with and without the recorder differ"
    imp, f = s.check()
    exes = imp.exes()
    # Debian names them x86_64-linux-gnu-as, x86_64-linux-gnu-ld.bfd, ...
    for want in (r"(.*-)?gcc(-\d+)?", r"cc1", r"(.*-)?as", r"collect2", r"(.*-)?ld(\..*)?"):
        assert any(re.fullmatch(want, e) for e in exes), \
            "no %s process among %s" % (want, sorted(exes))
    cc1 = exe_peak(imp, "cc1")
    n_cc1 = imp.total("""SELECT COUNT(*) FROM allocations a JOIN processes p ON p.pid = a.pid
                                WHERE p.exe LIKE '%/cc1'""")
    assert n_cc1 > 10000, "cc1 made only %d allocations" % n_cc1
    print("gcc: %s, identical executables; cc1 %d allocations, peak %d bytes" % (
        ", ".join(sorted(exes)), n_cc1, cc1))


BASH = r"""
set -e
seq 1 2000 | sort -r | sed -n 1,3p
yes | head -n 2
for i in 1 2 3; do ( echo "sub $i" | tr a-z A-Z ); done
x=$(printf '%s\n' alpha beta gamma | grep -c a)
echo "count $x"
cat <<EOF | wc -c
here document through a pipe
EOF
{ echo one; echo two; } > "$1/out.txt"
sort -u "$1/out.txt" | paste -sd,
bash -c 'echo child $((6 * 7))' &
wait
sh -c 'exec /bin/echo "exec replaced sh"'
exec /bin/echo "exec replaced bash"
"""


def case_bash(d):
    bash = tool("bash")
    script = os.path.join(d, "w.sh")
    with open(script, "w") as f:
        f.write(BASH)
    s = Session(d, "bash", {"LC_ALL": "C"})
    s.pair([bash, script, d])
    imp, f = s.check(killed=1)           # yes, by SIGPIPE
    assert f["processes"] >= 15, "only %d processes recorded" % f["processes"]
    exes = imp.exes()
    for want in ("bash", "sort", "head", "tr", "grep", "echo", "dash", "paste"):
        assert want in exes, "no %s process among %s" % (want, sorted(exes))


def case_exec_dir(d):
    bash = tool("bash")
    s = Session(d, "exec")
    # a forked child that execs, and the shell itself exec'ing at the end:
    # two pids with two traces each (NAME.PID.trc, NAME.PID.trc.1)
    s.pair([bash, "-c", "/bin/echo forked; exec /bin/echo replaced"])
    imp, f = s.check()
    assert f["processes"] == 4, f
    whole, fw = s.check(whole=True)
    assert (fw["events"], fw["allocations"]) == (f["events"], f["allocations"]), (fw, f)


def case_cxx(d):
    prog = hrtest.prog("cxx_mix")
    if not os.path.exists(prog):
        hrtest.skip("cxx_mix not built (no C++ compiler)")
    s = Session(d, "cxx")
    s.pair([prog, "6", "3000"])
    imp, f = s.check()
    assert hardtest.one(imp.only(), "SELECT COUNT(DISTINCT tid) FROM allocations") >= 7
    assert f["unmatched_frees"] == 0, f


def case_dlopen(d):
    prog = hrtest.prog("dlopener")
    lib = hrtest.prog("libhrdltest.so")
    hardtest.need(prog, lib)
    rounds, n = 200, 5
    s = Session(d, "dlopen")
    base, rec = s.pair([prog, lib, str(n), str(rounds)])
    assert base.stdout.decode() == "ctor allocs %d size 4001\nwork allocs %d size 4002\n" % (
        2 * rounds, n * rounds), base.stdout
    imp, f = s.check()
    c = imp.only()
    assert f["unmatched_frees"] == 0, f
    by_fn = dict(c.execute("""SELECT f.function, COUNT(*) FROM allocations a
                              JOIN stacks s ON s.id = a.stack_id JOIN frames f ON f.id = s.frame_id
                              WHERE a.size IN (4001, 4002) AND a.t_free IS NOT NULL
                              GROUP BY f.function""").fetchall())
    assert by_fn == {"ctor_site": 2 * rounds, "work_site": n * rounds}, by_fn
    loads = hardtest.one(c, "SELECT COUNT(*) FROM modules WHERE path LIKE '%libhrdltest.so'")
    assert loads >= 1, "no module row for libhrdltest.so"
    print("dlopen: %d rounds, every allocation symbolized in the library (%d module rows)" % (
        rounds, loads))


def case_threads(d):
    prog = hardtest.prog("hr_kill")
    hardtest.need(prog)
    s = Session(d, "threads")
    cnt = os.path.join(d, "cnt")
    hardtest.counters_file(cnt)
    workers = 4
    s.pair([prog, cnt, str(workers), "60000", "exit"],
           between=lambda: hardtest.counters_file(cnt))
    slots, ready, _ = hardtest.read_counters(cnt)   # the recorded run's
    assert ready == workers, ready
    imp, f = s.check()
    c = imp.only()
    lost, in_flight, problems = hardtest.compare(c, slots, workers, exact=True)
    assert not problems, "\n".join(problems)
    assert f["unmatched_frees"] == 0, f
    shorts = slots[hardtest.SHORT][1] // hardtest.SHORT_CALLS
    tids = hardtest.one(c, "SELECT COUNT(DISTINCT tid) FROM allocations WHERE size >= ?",
                        hardtest.SHORT_MIN)
    assert shorts >= 1 and tids == shorts, \
        "%d short-lived threads ran, %d distinct threads in the trace" % (shorts, tids)
    print("threads: %d workers + %d short-lived threads, %d calls, all in the trace exactly" % (
        workers, shorts, sum(sum(x[1:]) for x in slots)))


def case_signal(d):
    prog = hardtest.prog("hr_signal")
    hardtest.need(prog)
    n = 400000
    base = run([prog, str(n)], hardtest.plain_env())
    assert base.returncode == 0, base
    trace = os.path.join(d, "sig.trc")
    rec = run([prog, str(n)], hardtest.rec_env(trace))
    assert rec.returncode == 0 and not rec.stderr, rec
    m = re.match(r"main allocs (\d+) frees (\d+)\nhandler allocs (\d+) frees (\d+)\n$",
                 rec.stdout.decode())
    assert m, rec.stdout
    main_a, main_f, h_a, h_f = map(int, m.groups())
    assert main_a == main_f == n and h_a == h_f > 0, m.groups()
    db = os.path.join(d, "sig.db")
    hardtest.trace_import([trace], db)
    c = hardtest.connect(db)
    got_main = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size BETWEEN 2048 AND 3071")
    got_h, live_h = c.execute("SELECT COUNT(*), SUM(t_free IS NULL) FROM allocations "
                              "WHERE size = 88").fetchone()
    print("signal: %d handler calls; trace: %d main allocations (want %d), %d handler "
          "allocations (want %d), %d never freed; unmatched frees %d, missed frees %d" % (
              h_a, got_main, n, got_h, h_a + 2, live_h, hardtest.meta(c, "unmatched_frees"),
              hardtest.meta(c, "missed_frees")))
    assert got_main == n
    assert got_h == h_a + 2 and live_h == 0, \
        "allocations made in signal handlers are missing from the trace"
    hardtest.consistency(c)


def case_signal_custom(d):
    prog = hardtest.prog("hr_signal")
    hardtest.need(prog)
    n = 400000
    trace = os.path.join(d, "sigc.trc")
    rec = run([prog, str(n), "custom"], hardtest.rec_env(trace))
    assert rec.returncode == 0 and not rec.stderr, rec
    h_a = int(re.search(r"handler allocs (\d+)", rec.stdout.decode()).group(1))
    db = os.path.join(d, "sigc.db")
    hardtest.trace_import([trace], db)
    c = hardtest.connect(db)
    blocks, live = c.execute("SELECT COUNT(*), SUM(t_free IS NULL) FROM allocations "
                             "WHERE kind = 2").fetchone()
    got_h = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size = 88")
    print("signal_custom: %d handler calls; trace: %d custom blocks (want %d), %d live; "
          "%d handler allocations (want %d)" % (h_a, blocks, n + 1, live, got_h, h_a + 2))
    assert blocks == n + 1 and live == 0 and got_h == h_a + 2
    assert hardtest.meta(c, "unmatched_frees") == 0 and hardtest.meta(c, "missed_frees") == 0


def case_setuid(d):
    if os.geteuid() != 0:
        hrtest.skip("setuid: not root, cannot switch to an unprivileged user")
    progs = [p for p in ("/usr/bin/passwd", "/bin/su", "/usr/bin/su") if os.path.exists(p)
             and os.stat(p).st_mode & 0o4000]
    if not progs:
        hrtest.skip("setuid: no setuid passwd or su installed")
    s = Session(d, "setuid", {"LC_ALL": "C", "HOME": "/"})
    seen = set()
    for p in progs:
        if os.path.realpath(p) in seen:
            continue
        seen.add(os.path.realpath(p))
        base, rec = s.pair([p, "--help"], preexec=hardtest.as_user(NOBODY))
        assert base.stdout or base.stderr, "%s --help printed nothing" % p
    assert not os.listdir(s.traces), "a setuid program was recorded: %s" % os.listdir(s.traces)
    # a recorded shell running them: its own trace is complete, theirs absent
    bash = tool("bash")
    s.pair([bash, "-c", "for p in %s; do $p --help >/dev/null 2>&1; echo \"$p $?\"; done"
            % " ".join(sorted(seen))], preexec=hardtest.as_user(NOBODY))
    imp, f = s.check()
    exes = imp.exes()
    assert exes == {"bash"}, exes
    print("setuid: %s ran unrecorded as uid %d with identical output" % (
        ", ".join(sorted(seen)), NOBODY))


def main():
    d = hrtest.tmpdir("hard-real")
    os.chmod(d, 0o755)
    hardtest.need(hrtest.LIBREC, hrtest.TRACE_IMPORT)
    globals()["case_" + sys.argv[1]](d)


if __name__ == "__main__":
    main()
