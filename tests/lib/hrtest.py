"""hrtest - where the end-to-end test drivers find heapreel's pieces.

Paths come from the environment set by tests/meson.build:
  HR_SRC        source tree
  HR_BUILD      build whose importer/queries/tui/trace-dump are under test
  HR_REC_BUILD  build holding libheapreel.so and the test programs (same as
                HR_BUILD except in sanitizer builds)
A test fails by raising (assert) or exiting non-zero; it skips by exiting 77.
Its temporary directories (tmpdir) are removed when it ends; a test failed
by an uncaught exception or stopped by SIGTERM (meson's timeout) keeps them
and names them on stderr.
"""
import atexit
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile

SRC = os.environ.get("HR_SRC", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("HR_BUILD", os.path.join(SRC, "build"))
REC_BUILD = os.environ.get("HR_REC_BUILD", BUILD)

LIBREC = os.path.join(REC_BUILD, "recorder", "libheapreel.so")
TRACE_DUMP = os.path.join(BUILD, "trace-format", "trace-dump")
TRACE_IMPORT = os.path.join(BUILD, "importer", "trace-import")
TRACE_SNAP = os.path.join(BUILD, "queries", "trace-snap")
TRACE_TUI = os.path.join(BUILD, "viewer-tui", "trace-tui")
TRACE_RECORD = os.path.join(REC_BUILD, "recorder", "trace-record")
TRACE_CTL = os.path.join(REC_BUILD, "recorder", "trace-ctl")
MKTRACE = os.path.join(BUILD, "tests", "importer", "mktrace")  # a trace from a text script
NOBODY = 65534                # uid and gid of nobody: tests that drop root use it
SKIP = 77
# What meson's --timeout-multiplier is for this run (./heapreel test sets
# it): a test's own time limits on what it runs grow with it.
SLOWER = float(os.environ.get("HR_TIMEOUT_MULTIPLIER", "1"))


def limit(seconds):
    """A time limit of a test's own (a bound on a failure, not a timing),
    grown with meson's --timeout-multiplier like the test's own limit."""
    return seconds * SLOWER


def prog(name):
    """Path of a test program built in tests/programs."""
    return os.path.join(REC_BUILD, "tests", "programs", name)


def skip(reason):
    print("SKIP:", reason)
    sys.exit(SKIP)


def need(*paths):
    """Skips the test (exit 77) unless every path exists."""
    for p in paths:
        if not os.path.exists(p):
            skip("%s not built" % p)


def meta(c, key):
    """A value of the meta table of an imported database, or None."""
    r = c.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return r[0] if r else None


def one(c, sql, *args):
    """The single value a query returns (parameters bound)."""
    return c.execute(sql, args).fetchone()[0]


def mktrace(path, script):
    """Writes the trace `script` describes (tests/importer/mktrace.c) to path."""
    p = subprocess.run([MKTRACE, path], input=script, text=True, capture_output=True)
    assert p.returncode == 0, "mktrace failed: %s" % p.stderr
    return path


def trace_import(args, ok=(0,)):
    """trace-import ARGS; asserts its exit code is in `ok` (None: any) and
    that no sanitizer spoke; returns the CompletedProcess."""
    p = subprocess.run([TRACE_IMPORT] + list(args), capture_output=True, text=True)
    assert ok is None or p.returncode in ok, \
        "trace-import %s: exit %d, expected %s\n%s" % (args, p.returncode, ok, p.stderr)
    assert "ERROR: AddressSanitizer" not in p.stderr, p.stderr
    assert "runtime error" not in p.stderr, p.stderr
    return p


def connect(db):
    """An imported database, which must be marked complete. Its frees, which
    free_blocks packs, are unpacked into a TEMP table frees(id, alloc_id,
    size, stack_id, proc) of this connection, for the tests' SQL."""
    c = sqlite3.connect(db)
    assert meta(c, "complete") == 1, "%s not marked complete" % db
    c.execute("CREATE TEMP TABLE frees(id INTEGER PRIMARY KEY, alloc_id, size, stack_id, proc)")
    c.executemany("INSERT INTO temp.frees VALUES(?,?,?,?,?)", unpack_frees(c))
    return c


def _varints(data):
    v = shift = 0
    for b in data:
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            yield v
            v = shift = 0
    assert shift == 0, "a varint cut short"


def unpack_frees(c):
    """The frees of free_blocks (importer/schema.sql), as rows (id, alloc_id,
    size, stack_id, proc); checks each row holds meta.free_block of them (the
    last at most) and that they number meta.frees."""
    per, rows = meta(c, "free_block"), []
    blocks = c.execute("SELECT id, data FROM free_blocks ORDER BY id").fetchall()
    for k, (b, data) in enumerate(blocks):
        assert b == k, "free_blocks row %d missing" % k
        v, prev, n = list(_varints(data)), 0, 0
        assert len(v) % 4 == 0, "free_blocks row %d: %d varints" % (b, len(v))
        for i in range(0, len(v), 4):
            zz, size, stack, proc = v[i:i + 4]
            prev += -(zz >> 1) - 1 if zz & 1 else zz >> 1
            rows.append((b * per + n + 1, prev, size, stack, proc))
            n += 1
        assert n == per or (n <= per and k == len(blocks) - 1), \
            "free_blocks row %d holds %d frees" % (b, n)
    assert len(rows) == (meta(c, "frees") or 0), "%d frees packed" % len(rows)
    return rows


def pack_frees(rows, per):
    """free_blocks rows (id, data) for frees (alloc_id, size, stack_id, proc)
    in free order: the inverse of unpack_frees."""
    out = []
    for b in range(0, len(rows), per):
        data, prev = bytearray(), 0
        for alloc_id, size, stack, proc in rows[b:b + per]:
            d = alloc_id - prev
            prev = alloc_id
            for v in (2 * d if d >= 0 else -2 * d - 1, size, stack, proc):
                while v >= 0x80:
                    data.append(v & 0x7f | 0x80)
                    v >>= 7
                data.append(v)
        out.append((b // per, bytes(data)))
    return out


_tmpdirs = []                 # made by tmpdir() in this process
_failed = []                  # what failed the test: its directories are kept
_excepthook = sys.excepthook


def _note_failure(kind, value, tb):
    _failed.append(kind.__name__)
    _excepthook(kind, value, tb)


def _on_sigterm(sig, frame):
    _failed.append("SIGTERM")
    raise SystemExit("hrtest: SIGTERM (meson's timeout?)")


def _remove(d):
    """Removes d; a test may have left a directory in it without read or
    write permission (os.walk goes top-down: it is opened up before os.walk
    enters it; symlinks are never followed)."""
    for root, dirs, _ in os.walk(d):
        for x in dirs:
            p = os.path.join(root, x)
            if not os.path.islink(p):
                os.chmod(p, 0o700)
    shutil.rmtree(d)


def _clean_up(owner):
    if os.getpid() != owner:  # a forked child ending does not end the test
        return
    for d in _tmpdirs:
        if _failed:
            print("hrtest: %s: the files of the failed test are kept in %s" % (
                _failed[0], d), file=sys.stderr)
            continue
        try:
            if os.path.lexists(d):  # the test may have removed it itself
                _remove(d)
        except OSError as e:  # a passing test must leave nothing: it fails
            print("hrtest: cannot remove %s: %s" % (d, e), file=sys.stderr)
            sys.stderr.flush()
            os._exit(1)


def tmpdir(tag):
    """A new private directory hr-TAG-XXXXXX in /tmp ($TMPDIR if set),
    removed when the test ends, unless an uncaught exception or SIGTERM
    failed it: then it is kept and its path printed on stderr."""
    if not _tmpdirs:
        sys.excepthook = _note_failure
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
        atexit.register(_clean_up, os.getpid())
    d = tempfile.mkdtemp(prefix="hr-%s-" % tag)
    _tmpdirs.append(d)
    return d


def record(argv, trace, env=None, check=True, **kw):
    """Run argv under libheapreel.so writing `trace`; return CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    e["LD_PRELOAD"] = LIBREC
    e["REC_OUT"] = trace
    p = subprocess.run(argv, env=e, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (argv, p.returncode, p.stderr))
    return p


def recorded_db(prog, tag, needs=()):
    """prog (a path) run under libheapreel.so and imported: (tmp, trace,
    db) in a new tmpdir(tag). Skips when prog, the recorder, the importer
    or one of needs is not built."""
    for need in (LIBREC, TRACE_IMPORT, prog) + tuple(needs):
        if not os.path.exists(need):
            skip("%s not built" % need)
    d = tmpdir(tag)
    name = os.path.basename(prog)
    trace, db = os.path.join(d, name + ".trc"), os.path.join(d, name + ".db")
    record([prog], trace)
    run([TRACE_IMPORT, "-q", trace, db])
    return d, trace, db


def run_case(prog, tag, cases):
    """The test of sys.argv[1]: cases["case_" + it](tmp, trace, db), with
    prog (a path) recorded and imported by recorded_db in tmpdir(tag + it)."""
    d, trace, db = recorded_db(prog, tag + sys.argv[1], needs=(TRACE_SNAP,))
    cases["case_" + sys.argv[1]](d, trace, db)


def forked_db(d, argv):
    """argv (a program that forks once, writing run.trc and run.trc.1) run
    under libheapreel.so and both traces imported: (db, connection, parent
    pid, child pid)."""
    trace, db = os.path.join(d, "fork.trc"), os.path.join(d, "fork.db")
    record(argv, trace)
    run([TRACE_IMPORT, "-q", trace, trace + ".1", db])
    c = connect(db)
    parent = one(c, "SELECT pid FROM processes WHERE ppid NOT IN (SELECT pid FROM processes)")
    child = one(c, "SELECT pid FROM processes WHERE ppid = ?", parent)
    return db, c, parent, child


def run(argv, check=True, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d:\n%s%s" % (argv, p.returncode, p.stdout, p.stderr))
    return p


def folded_per_function(db, args, names, metric):
    """trace-snap DB ARGS --format folded --metric METRIC, summed per name
    of `names` over the stacks that hold that function."""
    out = run([TRACE_SNAP, db] + args + ["--format", "folded", "--metric", metric]).stdout
    got = dict.fromkeys(names, 0)
    for line in out.splitlines():
        frames, value = line.rsplit(" ", 1)
        for name in names:
            if name in frames.split(";"):
                got[name] += int(value)
    return got


def snap_total(out):
    """The exact figure of trace-snap's text output's Total line
    ("Total: 20960 B (20.5 KiB)", "Total: 14 objects, ..."): an int."""
    first = out.splitlines()[0]
    assert first.startswith("Total: "), out
    return int(first.split()[1])


def snap_table(out):
    """trace-snap's text output -> (columns, rows): the header's number
    columns, and per row its cells in that order, exact values as written
    ("20480", "97.7%", a human column's "20.0 KiB" as one cell), then the
    name (function or stack) as the last item. Asserts the layout: Total
    line, Kinds line (mmap or custom memory), Threads line (under --tid),
    Warning lines, header, rows of exactly
    those columns."""
    lines = out.splitlines()
    i = 1
    while i < len(lines) and lines[i].startswith(("Kinds: ", "Pool: ", "Threads: ", "Warning: ")):
        i += 1
    head = lines[i].split()
    cols = head[:next(k for k, w in enumerate(head) if w in ("function", "stack,"))]
    rows = []
    for line in lines[i + 1:]:
        words = re.finditer(r"\S+", line)
        cells = []
        for c in cols:
            w = next(words)
            if c == "human":       # a number and its unit
                w = (w, next(words))
                cells.append(line[w[0].start():w[1].end()])
                end = w[1].end()
            else:
                cells.append(w.group())
                end = w.end()
        assert line[end:end + 2] == "  " and line[end + 2] != " ", (line, out)
        rows.append(cells + [line[end + 2:]])
    return cols, rows


def summary(trace, ok=(0,)):
    """trace-dump --summary as a dict of ints (floats where needed); ok: the
    exit codes accepted (2: a damaged segment, after the summary)."""
    p = run([TRACE_DUMP, "--summary", trace], check=False)
    assert p.returncode in ok, "trace-dump --summary exited %d:\n%s%s" % (
        p.returncode, p.stdout, p.stderr)
    out = p.stdout
    d = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        try:
            d[k] = int(v)
        except ValueError:
            try:
                d[k] = float(v)
            except ValueError:
                d[k] = v
    return d


def dump(trace):
    """trace-dump output as a list of token lists."""
    return [l.split() for l in run([TRACE_DUMP, trace]).stdout.splitlines()]
