"""test_diskfull CASE - the trace cannot be written (issue 7 point 3): the
disk fills, a file size limit is reached, the output directory is removed.
hr_disk (a deterministic workload printing a checksum of its own work) runs
once unrecorded and, per case, recorded where writing fails. Every case
asserts: exit code and stdout identical to the unrecorded run; stderr
exactly one line, "heapreel: ...", saying what happened (the wording
checked); and, where a trace is left, that it imports (exit 0, or 5 for a
damaged tail) into a consistent prefix: events > 0 and fewer than a clean
recording of the same run, every free paired, no unmatched frees (hr_disk
frees only what its own thread allocated), no missed frees but those of
frees counted lost (a thread's ring full once writing failed), live bytes never
negative, no allocation with the unknown stack (stacks still queued in the
writer's memory come back from the .ring left beside the trace), and
lost_events at most the events missing, exactly them where the program
ran to its end (fsize, tmpfs, tmpfs_lost).

CASE:
  fsize_start  RLIMIT_FSIZE of 1 MiB set before exec (preexec_fn): below the
               size of the sparse .ring staging file (about 4.3 GiB), so
               the recorder refuses to record at start ("File too large")
               rather than die of SIGXFSZ in ftruncate; no file left.
  fsize        RLIMIT_FSIZE lowered (prlimit) while hr_disk waits after
               its first phase, to the trace's size + FSIZE_MARGIN: the
               writer hits it mid-run (EFBIG; the SIGXFSZ it raises stays
               pending on the writer thread, which blocks every signal).
               A limit set before exec cannot do this: any limit under
               the .ring's size refuses the trace at start.
  fsize_kill   as fsize, then SIGKILLed after its second phase: rings may
               hold events past a gap the failed writer left (taken out,
               never written); the import must not pair across it.
  fsize_waves  hr_kill (workers, and short-lived threads exiting in waves)
               until the limit stops the trace, then SIGKILLed: every call
               it published is imported or counted lost (not hr_disk).
  fsize_shut   hr_resize: once the limit stopped the trace, threads fill
               their rings with reallocs (two events each), one of them
               with an odd number of slots: each thread's imported calls
               are a prefix of its calls, the rest counted lost, so no
               free goes without the realloc that made its block.
  tmpfs_start  a TMPFS_START tmpfs: too small for what the recorder
               reserves at start (header, first node chunk, the first
               thread's ring); it refuses, nothing is left on the tmpfs.
  tmpfs_lost   a TMPFS_LOST tmpfs: room for what the start reserves and
               little more: threads find no room for a ring, or the trace
               none to grow (either is the one line said); what the trace
               and its .ring lack is exactly what they count lost.
  tmpfs        a TMPFS_FULL tmpfs that the trace fills mid-run (ENOSPC);
               threads arriving later may find no room for a ring first:
               either is the one line said.
  rmdir        the output directory removed (rm -r) while hr_disk waits
               after its first phase: the recorder notices the trace has no
               link left and stops writing into it; while hr_disk waits
               after its second phase, `trace-ctl PID flush` answers that
               writing failed, and a copy taken through /proc/PID/fd of the
               trace (what was written before the removal) and of its .ring
               (every event published since: the writer drains no ring once
               it stopped writing) imports, with the second phase's threads.
Skips (77, saying why) when a tmpfs cannot be mounted.
"""
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import time

import hardtest
import hrtest

WORK = ["8", "2", "300000"]            # hr_disk PHASES THREADS STEPS: ~5M events
PAUSES = 7                             # lines hr_disk reads in "pause" mode
RUN_TIMEOUT = 120                      # seconds a run may take (a hang fails)
MESSAGE_WAIT = 30                      # seconds to wait for the recorder's line
FSIZE_START = 1 << 20
WAVES_WORKERS = 3                      # fsize_waves: hr_kill workers
WAVES_START = 2 << 20                  # trace bytes before the limit is set
WAVES_AFTER = 0.3                      # seconds recorded after writing failed
SHUT_REALLOCS = 100000                 # fsize_shut: 2 events each, more than a ring holds
SHUT_RESIZERS = 2                      # hr_resize.c's RESIZERS
FSIZE_MARGIN = 256 << 10
TMPFS_START = "1m"                     # < the ~1.2 MiB reserved at start
TMPFS_LOST = "6m"                      # start reservation + trace, no 2nd ring
TMPFS_FULL = "24m"                     # start + 4 rings + ~3 MiB: the trace (~14 MB) fills it
UNKNOWN_ALLOCS = ("SELECT COUNT(*) FROM allocations a JOIN stacks s ON s.id = a.stack_id "
                  "JOIN frames f ON f.id = s.frame_id WHERE f.function = '[unknown]'")


# The recorder's line when the .ring cannot grow (%s: the trace path, escaped).
RING_FULL = ("cannot grow %s\\.ring: No space left on device; events of new threads are "
             "counted as lost, new stacks recorded as unknown")


def hr_disk(pause=False):
    exe = hardtest.prog("hr_disk")
    hardtest.need(exe, hrtest.LIBREC, hrtest.TRACE_IMPORT, hrtest.TRACE_DUMP)
    return [exe] + WORK + (["pause"] if pause else [])


def run(argv, env, preexec=None):
    p = subprocess.run(argv, env=env, input=b"\n" * PAUSES, capture_output=True,
                       preexec_fn=preexec, timeout=RUN_TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def plain(pause=False):
    """The unrecorded run every recorded one must match."""
    rc, out, err = run(hr_disk(pause), hardtest.plain_env())
    assert rc == 0 and not err, "unrecorded hr_disk: exit %d: %r" % (rc, err)
    return rc, out


def clean_events(d, pause=False):
    """Events of a recording where nothing fails (all the recorded runs
    would hold without trouble), in the same mode (reading stdin allocates
    its buffer: one event more)."""
    trace = os.path.join(d, "clean.trc")
    rc, out, err = run(hr_disk(pause), hardtest.rec_env(trace))
    assert rc == 0 and not err, "clean recording: exit %d: %r" % (rc, err)
    n = hrtest.summary(trace)["events"]
    os.unlink(trace)
    return n


def same_run(ref, rc, out, err, pattern):
    """Exit code and stdout as unrecorded; stderr one heapreel line matching
    pattern (a regex)."""
    text = err.decode(errors="replace")
    assert rc == ref[0], "exit %d, unrecorded %d; stderr:\n%s" % (rc, ref[0], text)
    assert out == ref[1], "stdout differs from the unrecorded run:\n%s\n---\n%s" % (
        out.decode(errors="replace"), ref[1].decode(errors="replace"))
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("heapreel: "), \
        "stderr must be one heapreel line, got %d lines:\n%s" % (len(lines), text)
    assert re.fullmatch(pattern, lines[0]), "unexpected line %r (expected %r)" % (
        lines[0], pattern)
    print("said:", lines[0])


def check_prefix(trace, db, clean, exact=False):
    """The trace (and its .ring) imports into a consistent prefix of the
    clean recording; lost_events exactly what is missing (exact: the
    program ran to its end, every event of it is imported or counted), or
    at most that."""
    imp = hardtest.trace_import([trace], db, ok=(0, 5))
    c = hardtest.connect(db)
    f = hardtest.consistency(c, lost=None, missed_if_lost=True)
    unknown = hardtest.one(c, UNKNOWN_ALLOCS)
    c.close()
    assert 0 < f["events"] < clean, "%d events imported, %d in a clean recording" % (
        f["events"], clean)
    assert f["lost_events"] <= clean - f["events"], \
        "%d events lost, but only %d missing" % (f["lost_events"], clean - f["events"])
    assert not exact or f["lost_events"] == clean - f["events"], \
        "%d events missing, %d counted lost" % (clean - f["events"], f["lost_events"])
    assert unknown == 0, "%d allocations with the unknown stack" % unknown
    print("imported (exit %d): %d of %d events, %d lost, %d allocations, %d frees" % (
        imp.returncode, f["events"], clean, f["lost_events"], f["allocations"], f["frees"]))


# ---- file size limit --------------------------------------------------------

def case_fsize_start(d):
    ref = plain()
    out_dir = os.path.join(d, "out")
    os.mkdir(out_dir)
    trace = os.path.join(out_dir, "f.trc")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_START, FSIZE_START))
    rc, out, err = run(hr_disk(), hardtest.rec_env(trace), preexec=limit)
    assert rc != -signal.SIGXFSZ, "killed by SIGXFSZ"
    same_run(ref, rc, out, err,
             "heapreel: cannot create %s\\.ring: File too large; not recording" % re.escape(trace))
    assert os.listdir(out_dir) == [], "left behind: %s" % os.listdir(out_dir)


class Paused:
    """hr_disk in "pause" mode (or argv), recorded: waits for its phase
    lines and the recorder's stderr without buffering surprises."""

    def __init__(self, env, argv=None):
        self.p = subprocess.Popen(argv or hr_disk(pause=True), env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = b""
        self.err = b""

    def _read_until(self, test, what):
        deadline = time.time() + MESSAGE_WAIT
        while not test():
            left = deadline - time.time()
            assert left > 0, "no %s after %d s; stdout %r stderr %r" % (
                what, MESSAGE_WAIT, self.out, self.err)
            r, _, _ = select.select([self.p.stdout, self.p.stderr], [], [], left)
            for f in r:
                b = os.read(f.fileno(), 65536)
                assert b, "hr_disk closed its %s before the %s" % (
                    "stdout" if f is self.p.stdout else "stderr", what)
                if f is self.p.stdout:
                    self.out += b
                else:
                    self.err += b

    def phase_done(self, k):
        tag = b"phase %d " % k
        self._read_until(lambda: tag in self.out, "phase %d line" % k)

    def heapreel_line(self):
        self._read_until(lambda: self.err.endswith(b"\n"), "heapreel line")

    def go(self):
        self.p.stdin.write(b"\n")
        self.p.stdin.flush()

    def finish(self):
        out, err = self.p.communicate(b"\n" * PAUSES, timeout=RUN_TIMEOUT)
        return self.p.returncode, self.out + out, self.err + err


def limited(d):
    """hr_disk recorded, paused after phase 0, its RLIMIT_FSIZE then lowered
    to the trace's size + FSIZE_MARGIN; returns (Paused, trace, limit)."""
    trace = os.path.join(d, "f.trc")
    h = Paused(hardtest.rec_env(trace))
    h.phase_done(0)
    lim = os.path.getsize(trace) + FSIZE_MARGIN
    resource.prlimit(h.p.pid, resource.RLIMIT_FSIZE, (lim, lim))
    print("RLIMIT_FSIZE lowered to %d bytes after phase 0" % lim)
    return h, trace, lim


FSIZE_LINE = "heapreel: cannot write %s: write failed \\(EFBIG\\); recording stopped"


def case_fsize(d):
    ref = plain(pause=True)
    clean = clean_events(d, pause=True)
    h, trace, lim = limited(d)
    rc, out, err = h.finish()
    assert rc != -signal.SIGXFSZ, "killed by SIGXFSZ"
    same_run(ref, rc, out, err, FSIZE_LINE % re.escape(trace))
    assert os.path.getsize(trace) <= lim, "trace %d bytes over the limit %d" % (
        os.path.getsize(trace), lim)
    assert os.path.exists(trace + ".ring"), "no .ring left beside the stopped trace"
    check_prefix(trace, os.path.join(d, "f.db"), clean, exact=True)


def case_fsize_kill(d):
    """As fsize, then SIGKILLed after phase 1 (the writer failed, threads
    may have left events in their rings past what the trace holds): the
    trace and its .ring still import consistently."""
    clean = clean_events(d, pause=True)
    h, trace, lim = limited(d)
    h.go()
    h.phase_done(1)
    h.heapreel_line()
    h.p.kill()
    rc, out, err = h.finish()
    assert rc == -signal.SIGKILL, "exit %d" % rc
    assert err.decode().splitlines() == [FSIZE_LINE.replace("\\", "") % trace], err
    check_prefix(trace, os.path.join(d, "f.db"), clean)


def case_fsize_waves(d):
    """hr_kill's workers, and short-lived threads exiting in waves (each
    with a small tail of events still in its ring, its ring then claimed
    by the next one, which glibc hands the same arena), recorded until the
    file size limit stops the trace, then SIGKILLed: every call they
    published is in the database (trace, then .ring) or counted lost, and
    no free pairs with a block it did not end."""
    exe = hardtest.prog("hr_kill")
    hardtest.need(exe, hrtest.LIBREC, hrtest.TRACE_IMPORT)
    cnt = os.path.join(d, "cnt")
    hardtest.counters_file(cnt)
    trace = os.path.join(d, "w.trc")
    p = subprocess.Popen([exe, cnt, str(WAVES_WORKERS), "0", "exit"], env=hardtest.rec_env(trace),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + MESSAGE_WAIT
    while not os.path.exists(trace) or os.path.getsize(trace) < WAVES_START:
        assert time.time() < deadline and p.poll() is None, "no trace growing"
        time.sleep(0.005)
    lim = os.path.getsize(trace) + FSIZE_MARGIN
    resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (lim, lim))
    err = b""
    while not err.endswith(b"\n"):
        r, _, _ = select.select([p.stderr], [], [], max(0, deadline - time.time()))
        assert r, "no heapreel line after %d s" % MESSAGE_WAIT
        err += os.read(p.stderr.fileno(), 4096)
    time.sleep(WAVES_AFTER)          # threads come and go with nobody writing
    p.kill()
    p.communicate()
    assert err.decode().splitlines() == [FSIZE_LINE.replace("\\", "") % trace], err
    slots = hardtest.read_counters(cnt)[0]
    db = os.path.join(d, "w.db")
    hardtest.trace_import([trace], db, ok=(0, 5))
    c = hardtest.connect(db)
    f = hardtest.consistency(c, lost=None, missed_if_lost=True)
    lost, in_flight, _ = hardtest.compare(c, slots, WAVES_WORKERS, exact=False)
    published = sum(sum(x[1:]) for x in slots)
    print("%d calls published, %d events imported (%d from the .ring), %d missing, "
          "%d counted lost (glibc's own calls included)" % (
              published, f["events"], f["recovered_events"], lost, f["lost_events"]))
    assert lost <= f["lost_events"], \
        "%d published calls missing, only %d counted lost" % (lost, f["lost_events"])
    hardtest.check_worker_losses(c, slots, WAVES_WORKERS)
    c.close()


def case_fsize_shut(d):
    """hr_resize: its phase 1 runs until the limit stopped the trace,
    then each resizer thread's ring fills with reallocs; what the trace
    and its .ring hold of each resizer is a prefix of its calls, the rest
    counted lost to that thread."""
    exe = hardtest.prog("hr_resize")
    hardtest.need(exe, hrtest.LIBREC, hrtest.TRACE_IMPORT)
    trace = os.path.join(d, "r.trc")
    h = Paused(hardtest.rec_env(trace), [exe, str(SHUT_REALLOCS)])
    h.phase_done(0)
    lim = os.path.getsize(trace) + FSIZE_MARGIN
    resource.prlimit(h.p.pid, resource.RLIMIT_FSIZE, (lim, lim))
    h.go()
    h.heapreel_line()
    h.go()
    rc, out, err = h.finish()
    assert rc == 0, "hr_resize exit %d; stderr %r" % (rc, err)
    assert err.decode().splitlines() == [FSIZE_LINE.replace("\\", "") % trace], err
    tids = [int(t) for t in re.findall(r"^resizer \d+ tid (\d+)$", out.decode(), re.M)]
    assert len(tids) == SHUT_RESIZERS, "stdout %r" % out
    db = os.path.join(d, "r.db")
    hardtest.trace_import([trace], db)
    c = hardtest.connect(db)
    f = hardtest.consistency(c, lost=None, missed_if_lost=True)
    assert f["unmatched_frees"] == 0, "%d unmatched frees" % f["unmatched_frees"]
    for k, tid in enumerate(tids):
        mallocs = k + 1
        allocs = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE tid=?", tid)
        moved = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE tid=? AND from_realloc",
                             tid)
        freed = hardtest.one(c, "SELECT COUNT(*) FROM allocations WHERE tid=? "
                                "AND t_free IS NOT NULL", tid)
        lost = hardtest.one(c, "SELECT lost_events FROM threads WHERE tid=?", tid)
        print("resizer %d: %d mallocs, %d of %d reallocs imported, %d blocks freed, "
              "%d events lost" % (k, allocs - moved, moved, SHUT_REALLOCS, freed, lost))
        assert 0 < moved < SHUT_REALLOCS, "the ring of resizer %d did not fill in its loop" % k
        assert allocs == mallocs + moved and freed == moved, \
            "resizer %d: not a prefix of its calls" % k
        assert lost == 2 * (SHUT_REALLOCS - moved) + mallocs, \
            "resizer %d: %d events lost, %d calls' events missing" % (
                k, lost, 2 * (SHUT_REALLOCS - moved) + mallocs)
    c.close()


# ---- a small tmpfs ------------------------------------------------------------

class Tmpfs:
    def __init__(self, d, size):
        self.path = os.path.join(d, "tmpfs")
        os.mkdir(self.path)
        why = None
        if os.geteuid() != 0:
            why = "not root"
        elif not shutil.which("mount"):
            why = "no mount command"
        else:
            p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size,
                                "heapreel-test", self.path], capture_output=True, text=True)
            why = p.returncode and (p.stderr.strip() or "mount exited %d" % p.returncode)
        if why:
            hrtest.skip("cannot mount a tmpfs: %s" % why)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        subprocess.run(["umount", self.path], check=True)


def case_tmpfs_start(d):
    ref = plain()
    with Tmpfs(d, TMPFS_START) as fs:
        trace = os.path.join(fs, "t.trc")
        rc, out, err = run(hr_disk(), hardtest.rec_env(trace))
        same_run(ref, rc, out, err, "heapreel: cannot create %s\\.ring: No space left on "
                 "device; not recording" % re.escape(trace))
        assert os.listdir(fs) == [], "left behind: %s" % os.listdir(fs)


def case_tmpfs_lost(d):
    ref = plain()
    clean = clean_events(d)
    with Tmpfs(d, TMPFS_LOST) as fs:
        trace = os.path.join(fs, "t.trc")
        rc, out, err = run(hr_disk(), hardtest.rec_env(trace))
        same_run(ref, rc, out, err, "heapreel: (%s|cannot write %s: write failed "
                 "\\(ENOSPC\\); recording stopped)" % (RING_FULL % re.escape(trace),
                                                    re.escape(trace)))
        assert "t.trc" in os.listdir(fs), os.listdir(fs)
        # what is missing is what the LOST records and the .ring count
        check_prefix(trace, os.path.join(d, "t.db"), clean, exact=True)


def case_tmpfs(d):
    ref = plain()
    clean = clean_events(d)
    with Tmpfs(d, TMPFS_FULL) as fs:
        trace = os.path.join(fs, "t.trc")
        rc, out, err = run(hr_disk(), hardtest.rec_env(trace))
        same_run(ref, rc, out, err, "heapreel: (cannot write %s: write failed "
                 "\\(ENOSPC\\); recording stopped|%s)" % (re.escape(trace),
                                                         RING_FULL % re.escape(trace)))
        assert sorted(os.listdir(fs)) == ["t.trc", "t.trc.ring"], os.listdir(fs)
        check_prefix(trace, os.path.join(d, "t.db"), clean, exact=True)


# ---- output directory removed -----------------------------------------------

def deleted_fds(pid, prefix):
    """{path: fd} of pid's descriptors on files under prefix, now deleted."""
    fds = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith(prefix) and link.endswith(" (deleted)"):
            fds[link[:-len(" (deleted)")]] = fd
    return fds


def case_rmdir(d):
    ref = plain(pause=True)
    clean = clean_events(d, pause=True)
    out_dir = os.path.join(d, "out")
    os.mkdir(out_dir)
    trace = os.path.join(out_dir, "r.trc")
    h = Paused(hardtest.rec_env(trace))
    h.phase_done(0)
    shutil.rmtree(out_dir)
    h.go()
    h.phase_done(1)
    h.heapreel_line()
    # hr_disk waits; a flush answers that writing failed (the writer drains
    # no ring once it has: they keep their events); then take what the
    # files hold
    p = hrtest.run([hrtest.TRACE_CTL, str(h.p.pid), "flush"], check=False)
    assert p.returncode == 1 and "writing the trace failed" in p.stderr, (p.returncode, p.stderr)
    fds = deleted_fds(h.p.pid, out_dir + "/")
    assert sorted(fds) == [trace, trace + ".ring"], "descriptors: %s" % fds
    save = os.path.join(d, "saved")
    os.mkdir(save)
    copy = os.path.join(save, "r.trc")
    for path, suffix in ((trace, ""), (trace + ".ring", ".ring")):
        hrtest.run(["cp", "--sparse=always", "/proc/%d/fd/%s" % (h.p.pid, fds[path]),
                    copy + suffix])
    rc, out, err = h.finish()
    same_run(ref, rc, out, err, "heapreel: %s was removed; recording stopped" % re.escape(trace))
    assert not os.path.exists(out_dir), "%s was made again" % out_dir
    db = os.path.join(d, "r.db")
    check_prefix(copy, db, clean)
    # the main thread, phase 0's threads from the trace, and phase 1's,
    # started after the removal, from the .ring: nothing was thrown away
    c = hardtest.connect(db)
    tids = [t for (t,) in c.execute("SELECT DISTINCT tid FROM allocations")]
    c.close()
    assert len(tids) == 1 + 2 * int(WORK[1]), \
        "threads %s in the copy: phase 1's events not kept in the .ring" % sorted(tids)


def main():
    d = hrtest.tmpdir("hard-disk")
    globals()["case_" + sys.argv[1]](d)


if __name__ == "__main__":
    main()
