"""test_security CASE - files and SQL (issue 7 point 6).

CASE:
  modes          with umask 000: a running program's trace and .ring, the
                 database and a trace-snap output are all 0600, regular files
  rec_symlink    REC_OUT names a symlink another user planted in /tmp: the
                 program runs unchanged, nothing is written through the link
                 (its target untouched, the link unchanged); the recorder
                 either refuses (one stderr line, no trace) or writes a new
                 0600 file under another name
  rec_symlink_dir  REC_OUT goes through a directory symlink another user
                 planted in /tmp: refused (one stderr line, nothing created in
                 the link's target directory)
  import_symlink trace-import's output is a planted symlink: refused with and
                 without --force, target untouched
  snap_symlink   trace-snap -o names a planted symlink: target untouched
  sql            hostile text (quotes, `; DROP TABLE`) in a mark label, a
                 thread name, an executable's command line, a file name and
                 a time spec: stored and matched verbatim, or refused as a
                 bad time with one line; the database keeps every table
  ctl            trace-ctl: the owner of a recorded process controls it; a
                 third user (directly or through the owner's control
                 directory) and root (trace-ctl, or a raw request on the
                 socket) are refused; a control directory planted by another
                 user is not used
"""
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time

import hardtest
import hrtest

NOBODY = hrtest.NOBODY
PRECIOUS = b"precious, must stay as it is\n"
TRACE_CTL = hrtest.TRACE_CTL
HOSTILE = "x'\");DROP/**/TABLE/**/allocations;--"       # no spaces: mktrace words
HOSTILE_SPACED = "x'); DROP TABLE processes; --"
TABLES = {"meta", "processes", "threads", "modules", "frames", "stacks", "allocations",
          "free_blocks", "marks", "timeline", "checkpoint_index", "checkpoints"}


def mode_of(path):
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode), "%s is not a regular file" % path
    return stat.S_IMODE(st.st_mode)


def umask0():
    os.umask(0)


def entry_pair(env_extra):
    """tests/programs/entry plain and with the recorder and env_extra."""
    prog = hrtest.prog("entry")
    hardtest.need(prog)
    base = subprocess.run([prog], env=hardtest.plain_env(), capture_output=True, text=True)
    env = hardtest.rec_env("unused")
    env.update(env_extra)
    rec = subprocess.run([prog], env=env, capture_output=True, text=True)
    assert base.returncode == rec.returncode == 0, (base, rec)
    assert base.stdout == rec.stdout, "stdout differs under the recorder"
    return rec


def plant(name, target, d):
    """A symlink /tmp/<unique name> -> target, owned by nobody (another
    user), as an attacker would leave it; returns its path."""
    link = "/tmp/hr-plant-%d-%d-%s" % (os.getpid(), random.randrange(1 << 30), name)
    os.symlink(target, link)
    if os.geteuid() == 0:
        os.lchown(link, NOBODY, NOBODY)
    return link


def precious(d, name="victim"):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(PRECIOUS)
    os.chmod(p, 0o644)
    return p


def untouched(link, target):
    with open(target, "rb") as f:
        assert f.read() == PRECIOUS, "the symlink's target %s was written" % target
    assert os.path.islink(link) and os.readlink(link) == target, \
        "%s is no longer the planted link" % link


def case_modes(d):
    exe = hardtest.prog("hr_kill")
    hardtest.need(exe, hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP)
    cnt = os.path.join(d, "cnt")
    hardtest.counters_file(cnt)
    trace = os.path.join(d, "m.trc")
    p = subprocess.Popen([exe, cnt, "2", "0", "exit"], env=hardtest.rec_env(trace),
                         preexec_fn=umask0)
    deadline = time.time() + 30
    while not hardtest.read_counters(cnt)[0][0][1] and time.time() < deadline:
        time.sleep(0.01)               # until the program allocates
    modes = {"trace": mode_of(trace), "ring": mode_of(trace + ".ring")}
    p.send_signal(signal.SIGKILL)
    p.wait()
    db = os.path.join(d, "m.db")
    imp = subprocess.run([hrtest.TRACE_IMPORT, "-q", trace, db], preexec_fn=umask0,
                         capture_output=True, text=True)
    assert imp.returncode in (0, 5), imp.stderr     # 5: a torn tail, from the .ring
    modes["database"] = mode_of(db)
    heap = os.path.join(d, "m.heap")
    subprocess.run([hrtest.TRACE_SNAP, db, "--leaks", "-o", heap], preexec_fn=umask0,
                   check=True, capture_output=True)
    modes["snapshot"] = mode_of(heap)
    bad = {k: oct(v) for k, v in modes.items() if v != 0o600}
    assert not bad, "created with umask 000, not 0600: %s" % bad
    print("umask 000: trace, ring, database, snapshot all 0600: ok")


def case_rec_symlink(d):
    target = precious(d)
    link = plant("rec.trc", target, d)
    try:
        rec = entry_pair({"REC_OUT": link})
        untouched(link, target)
        others = sorted(f for f in os.listdir("/tmp") if f.startswith(os.path.basename(link) + "."))
        if rec.stderr:
            lines = rec.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("heapreel: ") and link in lines[0], \
                rec.stderr
            assert not others, "refused, but wrote %s" % others
            print("planted symlink REC_OUT: refused (%s), target untouched: ok" % lines[0])
        else:
            assert others, "no stderr line and no trace written anywhere"
            for f in others:
                mode_of(os.path.join("/tmp", f))  # regular files, not links
            made = os.path.join("/tmp", others[0])
            assert mode_of(made) == 0o600 and os.lstat(made).st_uid == os.geteuid(), made
            print("planted symlink REC_OUT: not followed, trace written to a new 0600 file "
                  "%s instead (no stderr line), target untouched: ok" % made)
    finally:
        for f in os.listdir("/tmp"):
            if f.startswith(os.path.basename(link)):
                os.unlink(os.path.join("/tmp", f))


def case_rec_symlink_dir(d):
    victim = os.path.join(d, "victim-dir")
    os.mkdir(victim, 0o700)
    link = plant("dir", victim, d)
    try:
        out = os.path.join(link, "run.trc")
        rec = entry_pair({"REC_OUT": out})
        made = os.listdir(victim)
        lines = rec.stderr.splitlines()
        assert not made, "the recorder wrote %s through the planted directory link %s" % (
            made, link)
        assert len(lines) == 1 and lines[0].startswith("heapreel: "), rec.stderr
        print("REC_OUT through a planted directory symlink: refused (%s): ok" % lines[0])
    finally:
        os.unlink(link)


def small_trace(d):
    """A real trace of tests/programs/entry."""
    trace = os.path.join(d, "e.trc")
    p = subprocess.run([hrtest.prog("entry")], env=hardtest.rec_env(trace), capture_output=True)
    assert p.returncode == 0 and os.path.exists(trace), p
    return trace


def case_import_symlink(d):
    hardtest.need(hrtest.TRACE_IMPORT, hrtest.prog("entry"))
    trace = small_trace(d)
    target = precious(d)
    link = plant("out.db", target, d)
    try:
        for force in ([], ["--force"]):
            p = subprocess.run([hrtest.TRACE_IMPORT, "-q"] + force + [trace, link],
                               capture_output=True, text=True)
            untouched(link, target)
            lines = p.stderr.splitlines()
            assert p.returncode != 0 and len(lines) == 1 and link in lines[0], \
                "trace-import %s onto a planted symlink: exit %d, %r" % (force, p.returncode,
                                                                          p.stderr)
            print("trace-import %s-> planted symlink: refused (%s)" % (
                " ".join(force) + " " if force else "", lines[0]))
        left = [f for f in os.listdir("/tmp") if f.startswith(os.path.basename(link) + ".tmp")]
        assert not left, "temporary files left: %s" % left
    finally:
        os.unlink(link)


def case_snap_symlink(d):
    hardtest.need(hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP, hrtest.prog("entry"))
    trace = small_trace(d)
    db = os.path.join(d, "e.db")
    hardtest.trace_import([trace], db)
    target = precious(d)
    link = plant("s.heap", target, d)
    try:
        p = subprocess.run([hrtest.TRACE_SNAP, db, "--leaks", "-o", link], capture_output=True,
                           text=True)
        with open(target, "rb") as f:
            assert f.read() == PRECIOUS, "trace-snap wrote through the planted symlink"
        if p.returncode == 0:
            assert not os.path.islink(link) and mode_of(link) == 0o600, \
                "trace-snap replaced the link by something else than a 0600 file"
            print("trace-snap -o planted symlink: the link was replaced by a new 0600 file, "
                  "target untouched: ok")
        else:
            untouched(link, target)
            assert len(p.stderr.splitlines()) == 1, p.stderr
            print("trace-snap -o planted symlink: refused (%s): ok" % p.stderr.strip())
        left = [f for f in os.listdir("/tmp") if f.startswith(os.path.basename(link) + ".")]
        assert not left, "temporary files left: %s" % left
    finally:
        if os.path.lexists(link):
            os.unlink(link)


CRAFTED = """header 4242 1 5000000000 1700000000000000000 0 /bin/prog prog %(spaced)s
thread 4242 %(word)s
node 1 0 401000
mark 100 %(word)s
mark 200 plain
events 1 4242
a 50 1000 64 1
a 150 2000 128 1
f 250 1000
close 300
"""


def tables(c):
    return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def case_sql(d):
    hardtest.need(hrtest.MKTRACE, hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP)
    # a crafted trace whose strings are SQL
    hostile_dir = os.path.join(d, HOSTILE_SPACED.replace("/", "_"))
    os.mkdir(hostile_dir)
    trace = os.path.join(hostile_dir, "t'; DROP TABLE meta; --.trc")
    hrtest.mktrace(trace, CRAFTED % {"word": HOSTILE, "spaced": HOSTILE_SPACED})
    db = os.path.join(hostile_dir, "o'; DROP TABLE frames; --.db")
    hardtest.trace_import([trace], db)
    c = hardtest.connect(db)
    assert tables(c) >= TABLES, "tables missing: %s" % (TABLES - tables(c))
    assert c.execute("SELECT label FROM marks ORDER BY t").fetchall() == [(HOSTILE,), ("plain",)]
    assert c.execute("SELECT name FROM threads").fetchall() == [(HOSTILE,)]
    cmdline, path = c.execute("SELECT cmdline, trace_path FROM processes").fetchone()
    assert cmdline == "prog " + HOSTILE_SPACED and path.endswith(os.path.basename(trace)), \
        (cmdline, path)
    assert hardtest.one(c, "SELECT COUNT(*) FROM allocations") == 2
    # the mark found by its label; a hostile time spec refused in one line
    p = subprocess.run([hrtest.TRACE_SNAP, db, "--at", "mark:" + HOSTILE, "--format", "text"],
                       capture_output=True, text=True)
    assert p.returncode == 0, "--at mark:<hostile label>: %s" % p.stderr
    for spec in ("1s'; DROP TABLE allocations; --", "mark:nope' OR '1'='1",
                 "0..1s); DROP TABLE marks; --"):
        q = subprocess.run([hrtest.TRACE_SNAP, db, "--at", spec, "--format", "text"],
                           capture_output=True, text=True)
        assert q.returncode != 0 and len(q.stderr.splitlines()) == 1, \
            "--at %r: exit %d, %r" % (spec, q.returncode, q.stderr)
        q = subprocess.run([hrtest.TRACE_SNAP, db, "--growth", "0.." + spec, "--format", "text"],
                           capture_output=True, text=True)
        assert q.returncode != 0 and len(q.stderr.splitlines()) == 1, \
            "--growth 0..%r: exit %d, %r" % (spec, q.returncode, q.stderr)
    c.close()
    c = hardtest.connect(db)
    assert tables(c) >= TABLES and hardtest.one(c, "SELECT COUNT(*) FROM allocations") == 2
    # a recorded program whose command line is SQL
    rd = os.path.join(d, "rec")
    os.mkdir(rd)
    echo = shutil.which("echo") or "/bin/echo"
    r = subprocess.run([echo, HOSTILE_SPACED], env=hardtest.rec_env(os.path.join(rd, "e.trc")),
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == HOSTILE_SPACED + "\n", r
    db2 = os.path.join(d, "e.db")
    hardtest.trace_import([os.path.join(rd, "e.trc")], db2)
    c2 = hardtest.connect(db2)
    assert hardtest.one(c2, "SELECT cmdline FROM processes") == echo + " " + HOSTILE_SPACED, \
        hardtest.one(c2, "SELECT cmdline FROM processes")
    print("hostile mark label, thread name, command line, file names and time specs: "
          "stored verbatim or refused in one line; every table intact: ok")


def ctl(pid, uid=None, **env):
    e = hardtest.plain_env(**env)
    return subprocess.run([TRACE_CTL, str(pid), "status"], env=e, capture_output=True, text=True,
                          preexec_fn=hardtest.as_user(uid) if uid is not None else None, timeout=hrtest.limit(30))


def refused(p, who):
    assert p.returncode != 0 and len(p.stderr.splitlines()) == 1, \
        "trace-ctl as %s: exit %d, stdout %r, stderr %r" % (who, p.returncode, p.stdout, p.stderr)


def case_ctl(d):
    if os.geteuid() != 0:
        hrtest.skip("ctl: not root, cannot run processes as other users")
    prog = hardtest.prog("hr_kill")
    hardtest.need(prog, TRACE_CTL)
    other = NOBODY - 1                 # a third user: neither root nor the owner
    os.chmod(d, 0o755)
    wd = os.path.join(d, "owner")
    os.mkdir(wd)
    os.chown(wd, NOBODY, NOBODY)
    cnt = os.path.join(wd, "cnt")
    hardtest.counters_file(cnt)
    os.chown(cnt, NOBODY, NOBODY)
    ctl_dir = "/tmp/heapreel-%d" % NOBODY
    p = subprocess.Popen([prog, cnt, "1", "0", "exit"], cwd=wd, preexec_fn=hardtest.as_user(NOBODY),
                         env=hardtest.rec_env(os.path.join(wd, "o.trc")))
    try:
        sock = os.path.join(ctl_dir, "%d.sock" % p.pid)
        deadline = time.time() + 30
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.01)
        assert os.path.exists(sock), "no control socket %s" % sock
        # the owner may: the channel works, so the refusals below mean something
        own = ctl(p.pid, NOBODY)
        assert own.returncode == 0 and own.stdout.startswith("ok"), own
        # a third user, through its own directory and through the owner's
        refused(ctl(p.pid, other), "uid %d" % other)
        refused(ctl(p.pid, other, REC_CTL_DIR=ctl_dir), "uid %d with REC_CTL_DIR" % other)
        # root passes the directory's permissions: trace-ctl refuses a
        # directory that is not its own, and the recorder answers a peer of
        # another uid with an error, unheard
        refused(ctl(p.pid, None, REC_CTL_DIR=ctl_dir), "root with REC_CTL_DIR")
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(sock)
        try:
            s.sendall(b"stop\n")
        except BrokenPipeError:
            pass    # answered and closed unheard before the request went out
        answer = s.makefile().readline()
        s.close()
        assert answer.startswith("error"), "root's raw 'stop' was answered %r" % answer
        again = ctl(p.pid, NOBODY)
        assert again.returncode == 0, "trace-ctl as the owner, again: %r" % again.stderr
        assert "state=active" in again.stdout, "the raw request took effect: %r" % again.stdout
        print("trace-ctl: the owner gets %r; uid %d, uid %d through the owner's directory and "
              "root (trace-ctl and a raw socket) are refused: ok" % (own.stdout.strip(), other,
                                                                     other))
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        stale = os.path.join(ctl_dir, "%d.sock" % p.pid)   # a killed process leaves it
        if os.path.lexists(stale):
            os.unlink(stale)
    # a control directory planted by another user is not used
    planted = "/tmp/hr-plant-%d-ctl" % os.getpid()
    os.mkdir(planted)
    os.chmod(planted, 0o777)
    os.chown(planted, NOBODY, NOBODY)
    try:
        r = entry_pair({"REC_OUT": os.path.join(d, "c.trc"), "REC_CTL_DIR": planted})
        assert not os.listdir(planted), "the recorder used the planted directory: %s" % (
            os.listdir(planted))
        assert len(r.stderr.splitlines()) == 1, r.stderr
        print("planted control directory: not used (%s): ok" % r.stderr.strip())
    finally:
        shutil.rmtree(planted)


def main():
    d = hrtest.tmpdir("hard-sec")
    hardtest.need(hrtest.LIBREC)
    globals()["case_" + sys.argv[1]](d)


if __name__ == "__main__":
    main()
