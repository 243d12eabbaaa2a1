"""tuitest - drive trace-tui inside a private tmux server, and build the
fixture database the TUI tests read.

The fixture is a hand-written heapreel database (importer/schema.sql) of a
program with known phases, so every number on the screen is known exactly:

  grow phase   alloc_big    1 MiB at 1, 2, 3, 4 s (the first two freed at 9 s)
               alloc_small  100 B at 1.5, 2.5, 3.5 s (never freed)
  mark "steady" at 4.8 s
  steady phase alloc_small  1000 B at 5, 5.5, 6.5, 7.1 s, each freed 0.25 s later,
                            and one at 7.5 s never freed
               alloc_small  2 MiB at 6 s, freed at 7 s: the peak
  mark "late" at 8.5 s; the process ends at 10 s

Never: assert on timing; leave a tmux server running (use Tmux as a context
manager).
"""
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import time

import hrtest

S = 1_000_000_000
MIB = 1 << 20
PID = 4242
T_END = 10 * S
BUCKET = S
FREE_BLOCK = 3            # frees per free_blocks row: several rows, one short

# (function, file, line) per frame id; ip = 0x401000 + 0x100 * id.
FRAMES = {
    1: ("_start", None, 0),
    2: ("main", "phases.c", 40),
    3: ("grow_phase", "phases.c", 20),
    4: ("alloc_big", "phases.c", 10),
    5: ("alloc_small", "phases.c", 14),
    6: ("steady_phase", "phases.c", 30),
}
# stack id -> (parent stack id, frame id): the trie, root side first.
STACKS = {1: (None, 1), 2: (1, 2), 3: (2, 3), 4: (3, 4), 5: (3, 5), 6: (2, 6), 7: (6, 5)}
BIG, SMALL_GROW, SMALL_STEADY = 4, 5, 7

# (t_alloc, t_free or None, size, stack), in allocation order.
ALLOCS = [
    (1 * S, 9 * S, MIB, BIG),
    (1500 * S // 1000, None, 100, SMALL_GROW),
    (2 * S, 9 * S, MIB, BIG),
    (2500 * S // 1000, None, 100, SMALL_GROW),
    (3 * S, None, MIB, BIG),
    (3500 * S // 1000, None, 100, SMALL_GROW),
    (4 * S, None, MIB, BIG),
    (5000 * S // 1000, 5250 * S // 1000, 1000, SMALL_STEADY),
    (5500 * S // 1000, 5750 * S // 1000, 1000, SMALL_STEADY),
    (6000 * S // 1000, 7000 * S // 1000, 2 * MIB, SMALL_STEADY),
    (6500 * S // 1000, 6750 * S // 1000, 1000, SMALL_STEADY),
    (7100 * S // 1000, 7350 * S // 1000, 1000, SMALL_STEADY),
    (7500 * S // 1000, None, 1000, SMALL_STEADY),
]
MARKS = [(4800 * S // 1000, "steady"), (8500 * S // 1000, "late")]
CHECKPOINTS = [4500 * S // 1000, 8 * S]     # instants of the two checkpoints
PEAK_T = 6 * S
PEAK_BYTES = 4 * MIB + 300 + 2 * MIB
PEAK_OBJECTS = 8


def live_at(t, stacks=None):
    """(bytes, objects, allocations so far) at t, as the schema defines it."""
    b = o = n = 0
    for ta, tf, size, st in ALLOCS:
        if ta > t or (stacks and st not in stacks):
            continue
        n += 1
        if tf is None or tf > t:
            b += size
            o += 1
    return b, o, n


def build_fixture(path, empty=False, lacks=None, marks=()):
    """Writes the fixture database to path (no allocations if empty); lacks:
    processes columns of what its answers lack (schema version 4), marks:
    (t, label) added to MARKS."""
    schema = open(os.path.join(hrtest.SRC, "importer", "schema.sql")).read()
    db = sqlite3.connect(path)
    db.executescript(schema)
    allocs = [] if empty else ALLOCS
    frees = sorted((tf, i + 1) for i, (ta, tf, size, st) in enumerate(allocs) if tf is not None)
    meta = {
        "format": "heapreel", "schema_version": 4, "t0_mono_ns": 1000, "t0_real_ns": 0,
        "duration_ns": T_END, "peak_t": PEAK_T if allocs else 0,
        "peak_bytes": PEAK_BYTES if allocs else 0, "peak_objects": PEAK_OBJECTS if allocs else 0,
        "peak_pid": PID, "events": len(allocs) + len(frees), "allocations": len(allocs),
        "frees": len(frees), "free_block": FREE_BLOCK,
        "unmatched_frees": 0, "lost_events": 0, "damaged": 0, "checkpoint_interval": 6,
        "importer_version": "fixture", "timeline_bucket_ns": BUCKET,
    }
    db.executemany("INSERT INTO meta VALUES(?,?)", meta.items())
    db.execute("INSERT INTO processes(pid, ppid, exe, cmdline, trace_path, t_start, t_end,"
               " sample_period, peak_t, peak_bytes, peak_objects, proc)"
               " VALUES(?,?,?,?,?,?,?,?,?,?,?,0)",
               (PID, 1, "/opt/fixture/phases", "phases", "run.trc", 0, T_END, 0,
                meta["peak_t"], meta["peak_bytes"], meta["peak_objects"]))
    for col, v in (lacks or {}).items():
        db.execute("UPDATE processes SET %s = ?" % col, (v,))
    db.execute("INSERT INTO threads(pid, tid, name, t_first, t_last) VALUES(?,?,?,?,?)",
               (PID, PID, "phases", 0, T_END))
    db.execute("INSERT INTO modules VALUES(1,?,?,NULL,?,?,0,'r-xp',0)",
               (PID, "/opt/fixture/phases", 0x400000, 0x500000))
    for fid, (fn, file, line) in FRAMES.items():
        db.execute("INSERT INTO frames VALUES(?,?,1,?,?,?,0)",
                   (fid, 0x401000 + 0x100 * fid, fn, file, line or None))
    for sid, (parent, fid) in STACKS.items():
        db.execute("INSERT INTO stacks VALUES(?,?,?)", (sid, parent, fid))
    for i, (ta, tf, size, st) in enumerate(allocs):
        db.execute("INSERT INTO allocations VALUES(?,?,?,?,?,?,?,?,0,0,0,0)",
                   (i + 1, ta, tf, size, st, PID, PID, 0x10000 + 0x1000 * i))
    db.executemany("INSERT INTO free_blocks VALUES(?,?)", hrtest.pack_frees(
        [(aid, allocs[aid - 1][2], allocs[aid - 1][3], 0) for _, aid in frees], FREE_BLOCK))
    for t, label in ([] if empty else MARKS) + list(marks):
        db.execute("INSERT INTO marks VALUES(?,?,?)", (PID, t, label))
    # Timeline: value at each bucket's end and the maximum inside it.
    for k in range(T_END // BUCKET):
        t0, t1 = k * BUCKET, (k + 1) * BUCKET - 1
        inst = [t0, t1] + [e for a in allocs for e in (a[0], a[1]) if e is not None and t0 <= e <= t1]
        end_b, end_o, _ = live_at(t1) if allocs else (0, 0, 0)
        mx = max(live_at(t)[0] for t in inst) if allocs else 0
        na = sum(1 for a in allocs if t0 <= a[0] <= t1)
        nf = sum(1 for a in allocs if a[1] is not None and t0 <= a[1] <= t1)
        db.execute("INSERT INTO timeline VALUES(?,?,?,?,?,?,?)", (PID, t0, end_b, end_o, mx, na, nf))
    # Checkpoints, exactly as the importer defines them.
    for c, t in enumerate(CHECKPOINTS if allocs else []):
        aid = max(i + 1 for i, a in enumerate(allocs) if a[0] <= t)
        fid = max([j + 1 for j, (tf, _) in enumerate(frees) if tf <= t] or [0])
        db.execute("INSERT INTO checkpoint_index VALUES(?,?,?,?,?)", (c + 1, PID, t, aid, fid))
        for st in sorted(set(a[3] for a in allocs)):
            lb, lo, n = live_at(t, {st})
            ab = sum(a[2] for a in allocs if a[3] == st and a[0] <= t)
            db.execute("INSERT INTO checkpoints VALUES(?,?,?,?,?,?)", (c + 1, st, lb, lo, ab, n))
    db.execute("INSERT INTO meta VALUES('complete', 1)")
    db.commit()
    db.close()


class Tmux:
    """trace-tui running in a private tmux server (socket hr-<pid>-<n>: a
    server being killed must not meet the next one on its socket)."""
    count = 0

    def __init__(self, argv, width=120, height=40, env=None, cwd=None):
        if not shutil.which("tmux"):
            hrtest.skip("tmux is not installed")
        Tmux.count += 1
        self.sock = "hr-%d-%d" % (os.getpid(), Tmux.count)
        self.base = ["tmux", "-L", self.sock, "-f", "/dev/null"]
        e = dict(os.environ)
        e.update({"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
        e.pop("NO_COLOR", None)
        e.pop("TMUX", None)
        e.update(env or {})
        self.env = e
        envargs = []
        for k in ("NO_COLOR", "LANG", "LC_ALL"):
            if k in e:
                envargs += ["%s=%s" % (k, e[k])]
        # The program's stderr goes to a file: once the screen is taken over
        # nothing may be printed there, so anything in it (a sanitizer's
        # report in an ASan build) fails the test when the server is killed.
        self.errfile = os.path.join(hrtest.tmpdir("tmux"), "stderr")
        argv = ["sh", "-c", 'exec "$@" 2>"$0"', self.errfile] + list(argv)
        # The pane keeps its content after the program exits, so its last
        # screen and exit status can be read.
        cmd = " ".join(shlex.quote(a) for a in ["env"] + envargs + argv)
        subprocess.run(self.base + ["start-server", ";", "set-option", "-g", "remain-on-exit", "on",
                                    ";", "new-session", "-d", "-x", str(width), "-y", str(height),
                                    "-c", cwd or os.getcwd(), cmd], env=e, check=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        sock = subprocess.run(self.base + ["display-message", "-p", "#{socket_path}"],
                              env=self.env, capture_output=True, text=True).stdout.strip()
        subprocess.run(self.base + ["kill-server"], env=self.env, capture_output=True)
        if sock.endswith("/" + self.sock) and os.path.exists(sock):
            os.unlink(sock)     # tmux can leave the socket file behind
        err = self.stderr()
        if exc[0] is None:
            assert err == "", "trace-tui wrote to stderr under the screen:\n" + err

    def stderr(self):
        try:
            with open(self.errfile) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def keys(self, *keys):
        """tmux key names ("Right", "S-Right", "PPage") or literal strings."""
        for k in keys:
            subprocess.run(self.base + ["send-keys", k], env=self.env, check=True)

    def text(self, s):
        subprocess.run(self.base + ["send-keys", "-l", s], env=self.env, check=True)

    def screen(self):
        return subprocess.run(self.base + ["capture-pane", "-p"], env=self.env,
                              capture_output=True, text=True).stdout

    def wait(self, what, timeout=30.0):
        """Polls the pane until `what` (a regex, or a function of the screen
        returning a true value) holds; returns the match and the screen.
        The screen must read the same twice in a row: ncurses sends a frame
        in pieces, and a capture between two of them shows a new status
        line over the old table."""
        deadline = time.monotonic() + hrtest.limit(timeout)
        prev = None
        while True:
            scr = self.screen()
            m = re.search(what, scr, re.M) if isinstance(what, str) else what(scr)
            if m and scr == prev:
                return m, scr
            prev = scr if m else None
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for %r; screen:\n%s" % (what, scr))
            time.sleep(0.05)

    def resize(self, width, height):
        subprocess.run(self.base + ["resize-window", "-x", str(width), "-y", str(height)],
                       env=self.env, check=True)

    def dead(self):
        out = subprocess.run(self.base + ["list-panes", "-F", "#{pane_dead}"], env=self.env,
                             capture_output=True, text=True).stdout
        return out.strip() == "1"


# A narrow terminal shortens the status line word by word (screen.c): the
# size in binary units goes, then the view, "objects" and the mark's words,
# then "live". "! after loss, after stop": what the snapshot lacks; "mark L
# (T)" or "@L": the mark at or before the cursor.
LACK = (r"(?:(?:after )?(?:loss|damage|stop|unrouted calls)|no mmap|custom unrecorded"
        r"|since attach)")
STATUS = re.compile(r"t=(\S+)s\s+(?:live )?(-?\d+) B(?: \([^)]*\))?\s+(-?\d+) obj(?:ects)?"
                    r"\s+(-?\d+) allocs(?: ! (%s(?:, %s)*))?(?: (?:mark (.+?) \(([^)]*)\)|@(\S+)))?"
                    r"(?: \[([^\]]*)\]?)?" % (LACK, LACK))


def status(screen):
    """(time string, live bytes, objects, allocations, view, what it lacks,
    the mark named) of the status line."""
    m = STATUS.search(screen)
    if not m:
        return None
    return (m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(9) or "",
            m.group(5) or "", m.group(6) or m.group(8) or "")


def STATUS_ROW(screen):
    """The index of the status line among the screen's lines."""
    return next(i for i, l in enumerate(screen.splitlines()) if STATUS.search(l))


def wait_status(tm, pred=lambda st: True, timeout=30.0):
    """Waits for a status line satisfying pred; returns (status, screen)."""
    def ok(scr):
        st = status(scr)
        return st if st and pred(st) else None
    return tm.wait(ok, timeout)


ROW = re.compile(r"\s*(-?\d+)\s+(?:-?[\d.]+%)?\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+[-+ ]*(\S+)\s*$")


def table(screen):
    """The main pane's rows, top to bottom: (function, (flat, cum, objects, allocs))."""
    lines = screen.splitlines()
    head = next((i for i, l in enumerate(lines) if re.search(r"\bcum\s+objects\s+allocs", l)), None)
    rows = []
    for line in lines[head + 1:] if head is not None else []:
        m = ROW.match(line)
        if not m:
            break
        rows.append((m.group(5), tuple(int(m.group(i)) for i in range(1, 5))))
    return rows


def names(screen):
    return [fn for fn, _ in table(screen)]


def row(screen, function):
    """The table row of a function: (flat, cum, objects, allocs) or None."""
    return next((v for fn, v in table(screen) if fn == function), None)
