"""test_programs CASE - runs one of tests/programs under libheapreel.so and checks
its trace exactly: events per kind and fn, sizes, one stack id per call site
(and, where addr2line exists, that the innermost frame is that call site),
threads, fork and exec traces, MODULE records for a dlopen'ed library.

CASE: entry realloc threads crowd thread_exit fork fork_exit fork_exec exec_path dlopen dlopen_cxx cxx cxx_entry
      cxx_entry_je cxx_sampled cxx_entry_tc clock pairs alloc_api_je alloc_api_je_restore
      alloc_api_tc alloc_api_probe got_threads fork_walk ring_grow quick_exit small_stacks
      thread_cycle thread_cycle_dtor_first
"""
import glob
import math
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys

import hrtest
import rectest
from rectest import Trace


SIGMAS = 6  # a sample count's allowed distance from its mean, in standard deviations
FORK_WALK_HANG_S = 90  # fork_walk: a hang, not a slow run (it takes ~1 s)


def out_lines(p):
    return [l.split() for l in p.stdout.splitlines()]


def case_entry(d):
    trace = os.path.join(d, "entry.trc")
    p = rectest.record([hrtest.prog("entry")], trace)
    t = Trace(trace)
    expect = {w[0]: (int(w[1]), int(w[2])) for w in out_lines(p)}
    assert len(expect) == 9, p.stdout
    for fn, (calls, size) in expect.items():
        got = t.allocs(size=size)
        assert len(got) == calls, "%s: %d allocations of %d, expected %d" % (fn, len(got), size, calls)
        assert all(r["kind"] == "alloc" and r["fn"] == fn for r in got), "%s: %s" % (fn, got)
    ids = rectest.one_stack_per_site(t, [s for _, s in expect.values()])
    # every block the program allocated is freed once, by free()
    ours = {r["addr"] for r in t.events if r["kind"] == "alloc" and r["size"] in ids}
    freed = [r for r in t.frees() if r["addr"] in ours]
    assert len(freed) == 27, "frees %d" % len(freed)
    for fn, (_, size) in expect.items():
        name = rectest.symbolize(t, t.stack(ids[size])[0])
        if name is not None:
            assert name == "call_" + fn, "call site of %s symbolizes to %s" % (fn, name)
    s = t.summary
    assert s["alloc"] == len([r for r in t.events if r["kind"] == "alloc"]), s
    assert s["free"] == len(t.frees()), s
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    print("entry: 9 entry points x 3 calls, 27 frees, 9 stacks: ok")


def case_realloc(d):
    trace = os.path.join(d, "realloc.trc")
    p = rectest.record([hrtest.prog("realloc_chain")], trace)
    want = {w[0]: int(w[1]) for w in out_lines(p)}
    t = Trace(trace)
    rounds = want["free"]
    first = t.allocs(size=100)
    assert len(first) == rounds and all(r["kind"] == "alloc" and r["fn"] == "realloc" for r in first), first
    arr = t.allocs(size=210)
    assert len(arr) == rounds and all(r["kind"] == "alloc" and r["fn"] == "reallocarray" for r in arr), arr
    for size in (200, 5000, 300000, 60):
        got = t.allocs(size=size)
        assert len(got) == rounds and all(r["kind"] == "realloc" and r["fn"] == "realloc" for r in got), \
            "realloc to %d: %s" % (size, got)
    got = t.allocs(size=2100)
    assert len(got) == rounds and all(r["kind"] == "realloc" and r["fn"] == "reallocarray" for r in got), got
    reallocs = [r for r in t.events if r["kind"] == "realloc"]
    assert len(reallocs) == want["realloc"], "realloc records %d, expected %d" % (len(reallocs), want["realloc"])
    # a realloc record pairs the old block with the new one, old time first
    for r in reallocs:
        assert r["old"] != 0 and r["t2"] >= r["t"], r
    # realloc(p, 0) frees the block the shrinking realloc returned
    shrunk = {r["addr"] for r in t.allocs(size=60)}
    by_zero = [r for r in t.frees() if r["addr"] in shrunk]
    assert len(by_zero) == want["free_by_realloc"], by_zero
    ids = rectest.one_stack_per_site(t, [100, 200, 5000, 300000, 60, 210, 2100])
    names = {100: "start", 200: "grow1", 5000: "grow2", 300000: "grow3", 60: "shrink",
             210: "arr_start", 2100: "arr_grow"}
    for size, sid in ids.items():
        name = rectest.symbolize(t, t.stack(sid)[0])
        if name is not None:
            assert name == names[size], "size %d: call site %s, expected %s" % (size, name, names[size])
    assert t.summary["realloc"] == want["realloc"], t.summary
    print("realloc_chain: %d allocs, %d reallocs, %d frees by realloc: ok" % (
        2 * rounds, len(reallocs), rounds))


def case_threads(d):
    n, k = 4, 500
    trace = os.path.join(d, "threads.trc")
    rectest.record([hrtest.prog("threads"), str(n), str(k)], trace)
    t = Trace(trace)
    sizes = [2000 + i for i in range(n)]
    by_addr = {}
    for size in sizes:
        got = t.allocs(size=size)
        assert len(got) == k, "size %d: %d allocations, expected %d" % (size, len(got), k)
        assert len({r["tid"] for r in got}) == 1, "size %d allocated by several threads" % size
        for r in got:
            by_addr.setdefault(r["addr"], []).append(r)
    ids = rectest.one_stack_per_site(t, sizes)
    for i, size in enumerate(sizes):
        name = rectest.symbolize(t, t.stack(ids[size])[0])
        if name is not None:
            assert name == "site%d" % i, "worker %d call site %s" % (i, name)
    # each block is freed once, by another thread than the one that allocated it
    cross = 0
    for r in t.frees():
        if r["addr"] in by_addr:
            cross += 1
            assert r["tid"] != by_addr[r["addr"]][-1]["tid"], "freed by its own thread: %s" % r
    assert cross >= n * k, "frees of worker blocks: %d, expected %d" % (cross, n * k)
    names = {r["tid"]: r["name"] for r in t.threads}
    workers = sorted(v for v in names.values() if str(v).startswith("worker-"))
    assert workers == ["worker-%d" % i for i in range(n)], names
    assert len(names) == n + 1, "threads %s, expected %d" % (names, n + 1)
    assert t.summary["threads"] == n + 1, t.summary
    tids = {r["tid"] for r in t.events}
    assert len(tids) == n + 1, "threads with events %s" % tids
    print("threads: %d x %d allocations, %d stacks, %d threads named: ok" % (n, k, n, n + 1))


def case_small_stacks(d):
    """Threads with 16 to 36 KiB stacks, a few KiB of each in use, allocate
    under the recorder: its TLS no longer fills such a stack (pthread_create
    failed with EINVAL up to 32 KiB, a 36 KiB thread crashed in the hook)."""
    trace = os.path.join(d, "small_stacks.trc")
    # libunwind's full walk in each hook leaves a checked run less stack
    pad = 3072 if os.environ.get("REC_CHECK_STACKS") == "1" else 5120
    p = rectest.record([hrtest.prog("small_stacks"), str(pad)], trace)
    want = out_lines(p)
    assert [w[3] for w in want] == ["16384", "20480", "24576", "32768", "36864"], p.stdout
    t = Trace(trace)
    sizes = [int(w[7]) for w in want]
    assert sizes == [3000 + i for i in range(len(want))], p.stdout
    tids = set()
    for w, size in zip(want, sizes):
        got = t.allocs(size=size)
        assert len(got) == int(w[5]), "size %d: %d allocations, expected %s" % (size, len(got), w[5])
        assert len({r["tid"] for r in got}) == 1, "size %d allocated by several threads" % size
        tid = got[0]["tid"]
        tids.add(tid)
        every_other = {r["addr"] for r in got[0::2]}
        freed = [r for r in t.frees() if r["tid"] == tid and r["addr"] in every_other]
        assert len(freed) == int(w[9]), "size %d: %d frees, expected %s" % (size, len(freed), w[9])
    assert len(tids) == len(want), "threads %s" % tids
    ids = rectest.one_stack_per_site(t, sizes)
    for i, size in enumerate(sizes):
        name = rectest.symbolize(t, t.stack(ids[size])[0])
        if name is not None:
            assert name == "site%d" % i, "thread %d call site %s" % (i, name)
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    print("small_stacks: %d threads of 16-36 KiB stacks, %d allocations each: ok" % (len(want), int(want[0][5])))


def thread_cycle(d, n, *mode):
    """thread_cycle N [MODE] recorded: its allocations (each site with one
    stack, every block freed) and the virtual size it grew by, checked;
    returns the trace's heapreel.stats."""
    trace = os.path.join(d, "thread_cycle.trc")
    p = rectest.record([hrtest.prog("thread_cycle"), str(n)] + list(mode), trace)
    w = out_lines(p)[0]
    size, v0, v1 = int(w[3]), int(w[5]), int(w[6])
    grown_kib = v1 - v0
    # glibc's stack cache and an arena may grow once (30 MiB here), never by thread
    assert grown_kib < n * 24 // 2, "virtual size grew %d KiB over %d threads: %s" % (grown_kib, n, p.stdout)
    dtor_size, dtor_allocs, size_allocs = int(w[11]), int(w[13]), int(w[15])
    t = Trace(trace)
    want = {size: size_allocs, dtor_size: dtor_allocs}
    for sz, k in want.items():
        got = t.allocs(size=sz)
        assert len(got) == k, "%d allocations of %d, expected %d" % (len(got), sz, k)
    # addresses are reused, so a free is ours if the block it frees is; in
    # time order (a thread's events after its ring closed come in later)
    live, freed = {}, {sz: 0 for sz in want}
    for r in sorted(t.events, key=lambda r: r["t"]):
        if r["kind"] == "alloc":
            live[r["addr"]] = r["size"]
        elif r["kind"] == "free":
            sz = live.pop(r["addr"], None)
            if sz in freed:
                freed[sz] += 1
    assert freed == want, "frees %s, expected %s" % (freed, want)
    sites = [(sz, name) for sz, name in ((size, "cycle_site"), (dtor_size, "dtor_site"))
             if want[sz]]
    ids = rectest.one_stack_per_site(t, [sz for sz, _ in sites])
    for sz, name in sites:
        got = rectest.symbolize(t, t.stack(ids[sz])[0])
        if got is not None:
            assert got == name, "size %d: call site %s, expected %s" % (sz, got, name)
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    print("thread_cycle%s: %d threads, virtual size %+d KiB, %d + %d allocations: ok" % (
        "".join(" " + m for m in mode), int(w[1]), grown_kib, size_allocs, dtor_allocs))
    return st


def case_thread_cycle(d):
    """10000 threads one after the other, one allocation each and two in
    a thread-specific data destructor (in two rounds, each after the
    recorder's destructors): every thread's tables are given back at its
    exit (24 KiB each: 234 MiB if they were not), and every allocation is
    in the trace, each site with one stack."""
    thread_cycle(d, 10000)


def case_thread_cycle_dtor_first(d):
    """5000 threads that allocate only in that destructor, after glibc
    passed the recorder's keys in that round: their tables, taken in a
    destructor round, are given back by the next, so the threads one
    after the other take the same ones (two mappings in all: the main
    thread's and theirs). When the recorder kept its tables until the last
    round, these threads' rounds counted late and none was given back: one
    mapping a thread."""
    n = 5000
    st = thread_cycle(d, n, "dtor-first")
    assert st["tables_mapped"] == 2, "%d tables mapped for %d threads: %s" % (
        st["tables_mapped"], n + 16, st)
    print("thread_cycle dtor-first: %d threads, %d tables mapped: ok" % (n + 16, st["tables_mapped"]))


def case_crowd(d):
    """1000 threads alive at once, each allocating a little: each gets a
    staging ring of its own (none borrows one per call, which costs a
    writer round trip each: 140 s instead of 0.05 s before), nothing lost."""
    n, k = 1000, 20
    trace = os.path.join(d, "crowd.trc")
    p = rectest.record([hrtest.prog("crowd"), str(n), str(k)], trace)
    assert out_lines(p) == [["crowd", str(n), "x", str(k)]], p.stdout
    t = Trace(trace)
    a = t.allocs(size=4321)
    assert len(a) == n * k, "%d allocations of the crowd" % len(a)
    assert len({r["tid"] for r in a}) == n, "threads %d" % len({r["tid"] for r in a})
    addrs = {r["addr"] for r in a}
    freed = sum(1 for r in t.frees() if r["addr"] in addrs)
    assert freed >= len(addrs), "%d frees of %d addresses" % (freed, len(addrs))
    st = t.stats()
    assert st["lent"] == 0 and st["lost"] == 0, st
    print("crowd: %d threads x %d allocations, none through a lent ring: ok" % (n, k))


def case_thread_exit(d):
    n, k = 4, 300
    trace = os.path.join(d, "texit.trc")
    p = rectest.record([hrtest.prog("threads"), str(n), str(k), "exit"], trace, check=False)
    assert p.returncode == 3, (p.returncode, p.stderr)
    t = Trace(trace)
    for i in range(n):
        assert len(t.allocs(size=2000 + i)) == k, "worker %d: %d allocations" % (i, len(t.allocs(size=2000 + i)))
    # the main thread (in pthread_join) outlived the exit's start: its
    # later events would be in the .ring, left for the import as after a kill
    assert os.path.exists(trace + ".ring"), "no .ring: nothing recorded after exit() began"
    db = os.path.join(d, "texit.db")
    hrtest.trace_import(["-q", trace, db])
    c = hrtest.connect(db)
    for i in range(n):
        got = hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size = ?", 2000 + i)
        assert got == k, "worker %d: %d allocations imported" % (i, got)
    assert hrtest.meta(c, "lost_events") == 0, hrtest.meta(c, "lost_events")
    c.close()
    print("exit() from a worker thread: trace complete with END, .ring left for the threads "
          "still running, %d allocations: ok" % (n * k))


def fork_traces(d, how, extra=()):
    pattern = os.path.join(d, "fork.%p.trc")
    p = rectest.record([hrtest.prog("forker"), how] + list(extra), pattern)
    pids = {w[0]: int(w[1]) for w in out_lines(p) if w[0] in ("parent", "child")}
    ppid, cpid = pids["parent"], pids["child"]
    parent = Trace(os.path.join(d, "fork.%d.trc" % ppid))
    child = Trace(os.path.join(d, "fork.%d.trc" % cpid))
    assert len(parent.allocs(size=3001)) == 5 and not parent.allocs(size=3002), "parent trace"
    assert len(child.allocs(size=3002)) == 7 and not child.allocs(size=3001), "child trace"
    cblocks = {r["addr"] for r in child.allocs(size=3002)}
    assert len([r for r in child.frees() if r["addr"] in cblocks]) == 4, "child frees"
    rectest.one_stack_per_site(parent, [3001])
    rectest.one_stack_per_site(child, [3002])
    left = glob.glob(os.path.join(d, "*.ring"))
    assert not left, "ring files left after clean exits: %s" % left
    return parent, child, cpid


def case_fork(d):
    fork_traces(d, "exit")
    print("fork (child exit()): parent 5, child 7+4, own traces: ok")


def case_fork_exit(d):
    fork_traces(d, "_exit")
    print("fork (child _exit()): child trace closed with END: ok")


def case_fork_exec(d):
    parent, child, cpid = fork_traces(d, "exec", [hrtest.prog("entry")])
    # the exec'd program has the child's pid: its trace is the next free name
    t = Trace(os.path.join(d, "fork.%d.trc.1" % cpid))
    assert len(t.allocs(size=1001)) == 3 and not t.allocs(size=3002), "exec'd program's trace"
    assert t.summary["alloc"] >= 27
    print("fork + exec: child trace, exec'd program's trace .1: ok")


def case_fork_walk(d):
    """Forks while the writer walks the loaded objects (REC_TEST_WALK_DELAY_US
    keeps it inside dl_iterate_phdr, holding the loader's lock, 5 ms at a
    time): fork's prepare handler waits for the walk, so no child inherits
    the lock held (each did, and hung at its trace's first walk: walk.c)."""
    children, wave = 20, 5
    env = dict(os.environ, LD_PRELOAD=hrtest.LIBREC, REC_OUT=os.path.join(d, "storm.trc"),
               REC_TEST_WALK_DELAY_US="5000")
    # its own process group: a hung child is killed with the rest
    p = subprocess.Popen([hrtest.prog("forkstorm"), str(children), str(wave)], env=env,
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=FORK_WALK_HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError("forkstorm hung: a child inherited the loader's lock held")
    assert p.returncode == 0 and len(out.splitlines()) == children, (p.returncode, out)
    traces = [f for f in os.listdir(d) if f.startswith("storm.trc")]
    assert len(traces) == children + 1 and not [f for f in traces if f.endswith(".ring")], traces
    print("%d forks during the writer's walks: none hung, %d traces: ok" % (children, len(traces)))


def case_exec_path(d):
    """A PATH search by hand (one execv per directory, as python's
    os.execvp does) and an execvp of a missing program: the failed execs
    leave no trace of their own (each one used to), the program's trace
    goes on; a successful one gives the new program its own trace."""
    prog = hrtest.prog("pathexec")
    nowhere, empty = os.path.join(d, "nowhere"), os.path.join(d, "empty")
    os.mkdir(empty)
    bindir = os.path.dirname(os.path.realpath(shutil.which("true")))
    for name, dirs, want in (("failed", [nowhere, empty], ["run.trc"]),
                             ("found", [nowhere, empty, bindir], ["run.trc", "run.trc.1"])):
        run = os.path.join(d, name)
        os.mkdir(run)
        p = rectest.record([prog, "true"] + dirs, os.path.join(run, "run.trc"))
        assert p.stdout == ("failed 3\n" if name == "failed" else ""), p.stdout
        assert sorted(os.listdir(run)) == want, (name, sorted(os.listdir(run)))
        t = Trace(os.path.join(run, "run.trc"))
        assert len(t.allocs(size=4003)) == 2, name
        assert len(t.allocs(size=4004)) == (3 if name == "failed" else 0), name
        if name == "found":
            Trace(os.path.join(run, "run.trc.1"))   # true's own, closed with END
    print("exec through a PATH search: no trace per failed exec, the program's goes on: ok")


def case_dlopen(d):
    dlopen_lib(d, "libhrdltest.so", "malloc", ("ctor_site", "work_site"))


def case_dlopen_cxx(d):
    """A C program that dlopens a C++ library: operator new was not there
    when libheapreel.so looked, its hooks stand in with malloc and free."""
    rectest.need(hrtest.prog("libhrdlcxx.so"), "libhrdlcxx.so (no C++ compiler?)")
    dlopen_lib(d, "libhrdlcxx.so", "new[]", ("_ZL9ctor_sitev", "_ZL9work_sitev"))


def dlopen_lib(d, name, fn, sites):
    """dlopener with library `name`: its 2 + 6 allocations come from fn,
    with stacks whose leaf is in the library, at the functions `sites`."""
    lib = hrtest.prog(name)
    trace = os.path.join(d, "dl.trc")
    rectest.record([hrtest.prog("dlopener"), lib, "6"], trace)
    t = Trace(trace)
    real = os.path.realpath(lib)
    mods = [m for m in t.modules if os.path.realpath(m["path"]) == real]
    assert mods, "no MODULE record for %s: %s" % (lib, t.modules)
    assert all(m["perms"] == "r-xp" for m in mods), mods
    exe = [m for m in t.modules if m["path"] == os.path.realpath(hrtest.prog("dlopener"))]
    assert exe, "no MODULE record for the executable"
    assert len(t.allocs(size=4001, fn=fn)) == 2 and len(t.allocs(size=4002, fn=fn)) == 6, \
        [r["line"] for r in t.allocs() if r["size"] in (4001, 4002)]
    ids = rectest.one_stack_per_site(t, [4001, 4002])
    for size, site in zip((4001, 4002), sites):
        leaf = t.stack(ids[size])[0]
        m = t.module_of(leaf)
        assert m in mods, "size %d: call site %#x not in the library" % (size, leaf)
        got = rectest.symbolize(t, leaf)
        if got is not None:
            assert got == site, "size %d: %s" % (size, got)
    ctor = {r["addr"] for r in t.allocs(size=4001)}
    assert len([r for r in t.frees() if r["addr"] in ctor]) == 2, "destructor frees"
    print("dlopen %s: module record, 2 + 6 allocations (%s) inside the library: ok" % (name, fn))


def case_cxx(d):
    prog = hrtest.prog("cxx_mix")
    rectest.need(prog, "cxx_mix (no C++ compiler?)")
    base = rectest.run_plain([prog, "3", "300"])
    trace = os.path.join(d, "cxx.trc")
    p = rectest.record([prog, "3", "300"], trace, check=False)
    assert p.returncode == base.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == base.stdout, "output differs:\n%s---\n%s" % (base.stdout, p.stdout)
    t = Trace(trace)
    assert t.summary["threads"] == 4, t.summary
    # every exception allocates via __cxa_allocate_exception -> malloc
    assert t.summary["alloc"] > 3 * 300, t.summary
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    print("cxx_mix: same output, %d allocations, 4 threads: ok" % t.summary["alloc"])


def cxx_entry(d, name):
    """cxx_entry built against one allocator: recorded, imported, and at
    each mark every site's live bytes exact, the bad_alloc caught and
    nothing recorded for it, and every block freed by the end."""
    prog = hrtest.prog(name)
    rectest.need(prog, "%s (no C++ compiler, or its allocator is not installed)" % name)
    trace, db = os.path.join(d, name + ".trc"), os.path.join(d, name + ".db")
    p = rectest.record([prog], trace)
    rows = out_lines(p)
    assert rows[-1] == ["caught", "1"], p.stdout
    sizes = {w[1]: int(w[2]) for w in rows if w[0] == "site"}
    assert len(sizes) == 7, p.stdout
    hrtest.trace_import(["-q", trace, db])
    # the bad_alloc's exception object: allocated inside the failing new's
    # hook (the allocator's own call, passed through), freed by the catch
    c = hrtest.connect(db)
    assert hrtest.meta(c, "unmatched_frees") == 1, hrtest.meta(c, "unmatched_frees")
    c.close()
    for label, live in (("all", 3), ("some", 2), ("none", 0)):
        # trace-snap names a C++ function with its parameters
        got = hrtest.folded_per_function(db, ["--at", "mark:" + label],
                                         [site + "(int)" for site in sizes], "inuse_space")
        want = {site + "(int)": live * size for site, size in sizes.items()}
        assert got == want, "%s at mark %s: %s, expected %s" % (name, label, got, want)
    t = Trace(trace)
    fns = {"site_new": "new", "site_new_array": "new[]", "site_new_aligned": "new",
           "site_new_aligned_array": "new[]", "site_new_nothrow": "new",
           "site_new_nothrow_array": "new[]", "site_malloc": "malloc"}
    ids = rectest.one_stack_per_site(t, list(sizes.values()))
    for site, size in sizes.items():
        got = t.allocs(size=size)
        assert len(got) == 3, "%s: %d allocations of %d, expected 3: %s" % (site, len(got), size, got)
        assert all(r["kind"] == "alloc" and r["fn"] == fns[site] for r in got), "%s: %s" % (site, got)
        # the stack starts at new's caller (a static function, mangled)
        name = rectest.symbolize(t, t.stack(ids[size])[0])
        if name is not None:
            assert name == "_ZL%d%si" % (len(site), site), "%s: call site %s" % (site, name)
        addrs = {r["addr"] for r in got}
        freed = [r for r in t.frees() if r["addr"] in addrs]
        assert len(freed) == 3, "%s: %d frees, expected 3" % (site, len(freed))
    assert not [r for r in t.allocs() if r["size"] >= 1 << 62], "the failed new was recorded"
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    print("%s: 7 entry points x 3 blocks byte-exact at 3 marks, bad_alloc caught: ok" % name)


def case_cxx_sampled(d):
    """Sampling a C++ program under libstdc++: a new that is not sampled
    must not give its inner malloc a second draw (that sampled new's bytes
    twice, the second time as malloc from inside operator new)."""
    churn, size, period = 4000, 1006, 4096
    prog = hrtest.prog("cxx_entry")
    rectest.need(prog, "cxx_entry (no C++ compiler?)")
    trace = os.path.join(d, "sampled.trc")
    rectest.record([prog, str(churn)], trace, env={"REC_SAMPLE": str(period)})
    got = Trace(trace).allocs(size=size)
    fns = sorted({r["fn"] for r in got})
    assert fns == ["new[]"], "%d samples of %d, fns %s" % (len(got), size, fns)
    # each new sampled once with probability 1 - e^(-size/period): about
    # 873 samples, sigma 26; SIGMAS either way fails once in 10^8 runs
    p = 1 - math.exp(-size / period)
    mean, sigma = churn * p, math.sqrt(churn * p * (1 - p))
    assert abs(len(got) - mean) <= SIGMAS * sigma, \
        "%d samples, expected %.0f +- %.0f" % (len(got), mean, SIGMAS * sigma)
    print("cxx_entry sampled every %d bytes: %d samples of new[], none of its malloc: ok" % (
        period, len(got)))


def case_cxx_entry(d):
    cxx_entry(d, "cxx_entry")


def case_cxx_entry_je(d):
    cxx_entry(d, "cxx_entry_je")


def case_cxx_entry_tc(d):
    cxx_entry(d, "cxx_entry_tc")


def api_marks(db, marks, sizes):
    """At each mark, every site's live bytes from trace-snap, exact:
    marks is [(label, blocks live)], sizes {site function: bytes a block}."""
    for label, live in marks:
        got = hrtest.folded_per_function(db, ["--at", "mark:" + label], list(sizes),
                                         "inuse_space")
        want = {site: live * size for site, size in sizes.items()}
        assert got == want, "at mark %s: %s, expected %s" % (label, got, want)


def api_blocks_once(t, db, sizes, fns):
    """Each site's 3 blocks recorded once, by its entry point (sizes
    {site: bytes}, fns {site: fn of the records that made its blocks}),
    and every free paired (their being freed: api_marks at "none")."""
    for site, size in sizes.items():
        got = t.allocs(size=size)
        assert len(got) == 3 and all(r["fn"] == fns[site] for r in got), \
            "%s: %s" % (site, [r["line"] for r in got])
    c = hrtest.connect(db)
    assert hrtest.meta(c, "unmatched_frees") == 0, hrtest.meta(c, "unmatched_frees")
    c.close()
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st


JE_API = ("mallocx", "rallocx", "xallocx", "dallocx", "sdallocx")


def got_entries(prog):
    """prog's GOT entries bound to jemalloc's API, as NAME:OFFSET (readelf
    -r); both kinds must be among them (alloc_api_je takes mallocx's
    address: a GLOB_DAT; it calls the rest: JUMP_SLOTs)."""
    if not shutil.which("readelf"):
        hrtest.skip("readelf not installed (binutils)")
    out = hrtest.run(["readelf", "-rW", prog]).stdout
    entries, kinds = [], set()
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 5 and w[4] in JE_API and w[2].endswith(("JUMP_SLOT", "GLOB_DAT")):
            entries.append("%s:%s" % (w[4], w[0]))
            kinds.add(w[2].rsplit("_", 2)[-2])
    assert kinds == {"JUMP", "GLOB"} and {e.split(":")[0] for e in entries} == set(JE_API), out
    return entries


def alloc_api_je(d, env, restored):
    """alloc_api_je (jemalloc's own API) with libhrdlje.so: the same output
    as unrecorded but for its GOT words, which are the hooks while
    recorded and, if restored (at its mark "restore"), exactly the words
    it had unrecorded at start; every site byte-exact at every mark, each
    block counted once."""
    prog, lib = hrtest.prog("alloc_api_je"), hrtest.prog("libhrdlje.so")
    rectest.need(prog, "alloc_api_je (jemalloc is not installed: libjemalloc-dev)")
    argv = [prog, lib] + got_entries(prog)
    base = rectest.run_plain(argv)
    trace, db = os.path.join(d, "je.trc"), os.path.join(d, "je.db")
    p = rectest.record(argv, trace, env=env)
    rows = out_lines(p)
    assert [w for w in rows if w[0] != "word"] == [w for w in out_lines(base) if w[0] != "word"], \
        "output differs:\n%s---\n%s" % (base.stdout, p.stdout)
    words = {(w[1], w[2]): w[3] for w in rows if w[0] == "word"}
    plain = {(w[1], w[2]): w[3] for w in out_lines(base) if w[0] == "word"}
    assert len(words) == len(plain) == 2 * len(JE_API), p.stdout
    for name in JE_API:
        assert words["start", name] == "hooked", (name, p.stdout)
        want = plain["start", name] if restored else "hooked"
        assert words["after", name] == want, "%s after restore: %s, expected %s" % (
            name, words["after", name], want)
    assert ["probe", "tc_malloc", "absent"] in rows, p.stdout
    sizes = {w[1]: int(w[2]) for w in rows if w[0] == "site"}
    assert len(sizes) == 5, p.stdout
    hrtest.trace_import(["-q", trace, db])
    api_marks(db, (("all", 3), ("some", 2), ("none", 0)), sizes)
    api_marks(db, (("dl", 4), ("dl-none", 0)), {"dl_site": 2010})
    t = Trace(trace)
    shrunk = sizes["site_xallocx"] != 1 << 20
    api_blocks_once(t, db, sizes, {"site_mallocx": "mallocx", "site_mallocx_aligned": "mallocx",
                               "site_rallocx": "rallocx",
                               "site_xallocx": "xallocx" if shrunk else "mallocx",
                               "site_malloc": "malloc"})
    # rallocx's source blocks and xallocx's large ones: mallocx, once each;
    # the second xallocx (no change) recorded nothing
    assert len(t.allocs(size=100, fn="mallocx")) == 3, t.allocs(size=100)
    assert len(t.allocs(size=1 << 20, fn="mallocx")) == 3, t.allocs(size=1 << 20)
    assert len(t.allocs(fn="xallocx")) == (3 if shrunk else 0), t.allocs(fn="xallocx")
    assert len(t.allocs(size=2010, fn="mallocx")) == 4, "the dlopen'ed library's mallocx"
    after = len(t.allocs(size=2011, fn="mallocx"))
    assert after == (0 if restored else 1), "after the mark restore: %d" % after
    return t


def case_alloc_api_je(d):
    alloc_api_je(d, None, False)
    print("alloc_api_je: mallocx, rallocx, xallocx, sdallocx, dallocx and a dlopen'ed "
          "library's mallocx byte-exact at 5 marks, each block once, output unchanged: ok")


def case_alloc_api_je_restore(d):
    """rec_got_restore (REC_TEST_GOT_RESTORE: at the program's mark
    "restore") puts back every GOT entry it changed, word for word (lazy
    entries their PLT stub), and a later mallocx goes unrecorded."""
    alloc_api_je(d, {"REC_TEST_GOT_RESTORE": "restore"}, True)
    print("alloc_api_je: every GOT entry back after rec_got_restore, later calls unrecorded: ok")


def case_alloc_api_tc(d):
    prog = hrtest.prog("alloc_api_tc")
    rectest.need(prog, "alloc_api_tc (tcmalloc is not installed: libtcmalloc-minimal4)")
    base = rectest.run_plain([prog])
    trace, db = os.path.join(d, "tc.trc"), os.path.join(d, "tc.db")
    p = rectest.record([prog], trace)
    assert p.stdout == base.stdout, "output differs:\n%s---\n%s" % (base.stdout, p.stdout)
    rows = out_lines(p)
    assert rows[0] == ["probe", "mallocx", "absent"], p.stdout
    sizes = {w[1]: int(w[2]) for w in rows if w[0] == "site"}
    assert len(sizes) == 10, p.stdout
    hrtest.trace_import(["-q", trace, db])
    api_marks(db, (("all", 3), ("some", 2), ("none", 0)), sizes)
    t = Trace(trace)
    api_blocks_once(t, db, sizes, {
        "site_tc_malloc": "tc_malloc", "site_tc_skip": "tc_malloc",
        "site_tc_calloc": "tc_calloc", "site_tc_realloc": "tc_realloc",
        "site_tc_memalign": "tc_memalign", "site_tc_posix_memalign": "tc_posix_memalign",
        "site_tc_new": "tc_new", "site_tc_newarray": "tc_newarray",
        "site_tc_new_nothrow": "tc_new", "site_tc_realloc_null": "tc_realloc"})
    assert len(t.allocs(size=100, fn="tc_malloc")) == 3, "tc_realloc's source blocks"
    # tc_realloc(NULL, n) makes a block as realloc(NULL, n) does: from_realloc
    c = hrtest.connect(db)
    got = c.execute("SELECT size, from_realloc, count(*) FROM allocations"
                    " WHERE size IN (?, ?) GROUP BY size ORDER BY size",
                    (sizes["site_tc_realloc"], sizes["site_tc_realloc_null"])).fetchall()
    c.close()
    assert got == [(sizes["site_tc_realloc"], 1, 3), (sizes["site_tc_realloc_null"], 1, 3)], got
    print("alloc_api_tc: 10 tc_* sites x 3 blocks byte-exact at 3 marks, each once: ok")


def case_got_threads(d):
    """got_threads: 4 threads call mallocx, rallocx and sdallocx through the
    GOT while it is put back (at its mark "restore"), and, unrestored, to
    the end. Both runs complete and no free is unmatched; unrestored, every
    round is recorded and nothing stays live; restored, every round before
    the mark is recorded and at most the block of each thread's round that
    the restore cut in two stays live."""
    prog = hrtest.prog("got_threads")
    rectest.need(prog, "got_threads (jemalloc is not installed: libjemalloc-dev)")
    threads, rounds = 4, 2000
    for restore in (False, True):
        trace, db = os.path.join(d, "gt%d.trc" % restore), os.path.join(d, "gt%d.db" % restore)
        env = {"REC_TEST_GOT_RESTORE": "restore"} if restore else None
        p = rectest.record([prog, str(threads), str(rounds)], trace, env=env)
        assert p.stdout == "threads %d\n" % threads, p.stdout
        hrtest.trace_import(["-q", trace, db])
        c = hrtest.connect(db)
        assert hrtest.meta(c, "unmatched_frees") == 0, hrtest.meta(c, "unmatched_frees")
        made, live = c.execute("SELECT count(*), count(*) - count(t_free) FROM allocations"
                               " WHERE size = 1501").fetchone()
        first, cut = c.execute("SELECT count(*), count(*) - count(t_free) FROM allocations"
                               " WHERE size = 1500").fetchone()
        c.close()
        if restore:
            assert threads * rounds <= made <= first <= 2 * threads * rounds, (made, first)
            assert live + cut <= threads, (live, cut)
        else:
            assert made == first == 2 * threads * rounds and live == cut == 0, \
                (made, first, live, cut)
    print("got_threads: %d threads through the GOT while it is put back: ok" % threads)


def case_ring_grow(d):
    """A thread whose first (small) ring is full waits until the writer has
    drained it empty, then grows it. REC_TEST_HOLD_FIRST_DRAIN makes the
    writer's first drain of it take just over half, once the thread waits:
    the rest is less than a round drains unasked, and the writer used to
    leave it for DRAIN_AGE_ROUNDS (200) rounds (20 s and more under load:
    the thread starved). A round that begins while a thread waits drains
    every ring: served in the round after the held one, or the next (it
    began waiting before the held round did). Nothing is lost."""
    k = 3000  # allocations and frees: 6000 events, the small ring holds 2048
    trace = os.path.join(d, "grow.trc")
    rectest.record([hrtest.prog("threads"), "1", str(k)], trace,
                   env={"REC_TEST_HOLD_FIRST_DRAIN": "1"})
    t = Trace(trace)
    got = t.allocs(size=2000)
    assert len(got) == k, "%d allocations, expected %d" % (len(got), k)
    ours = {r["addr"] for r in got}
    assert len([r for r in t.frees() if r["addr"] in ours]) == k
    st = t.stats()
    assert st["lost"] == 0, st
    assert 1 <= st["wait_rounds"] <= 2, "a wait for room spanned %d writer rounds" % st["wait_rounds"]
    print("ring_grow: the growing thread waited %d round(s): ok" % st["wait_rounds"])


def case_quick_exit(d):
    """A program that exits before the writer thread first runs (held back
    by REC_TEST_WRITER_LATE_US: the recorder's start does not wait for it)
    has a whole trace: its exit waits for the writer's tid before it looks
    for other threads, else it would take the writer for the program's and
    leave the .ring behind (92 times in 100 under load)."""
    k = 100
    trace = os.path.join(d, "quick.trc")
    rectest.record([hrtest.prog("threads"), "1", str(k)], trace,
                   env={"REC_TEST_WRITER_LATE_US": "200000"})
    assert not os.path.exists(trace + ".ring"), os.listdir(d)
    t = Trace(trace)
    assert len(t.allocs(size=2000)) == k and t.stats()["lost"] == 0, t.stats()
    print("quick_exit: whole trace, no .ring: ok")


def case_alloc_api_probe(d):
    """A process without jemalloc or tcmalloc (python3 on glibc) probing
    for their APIs under the recorder finds none of them."""
    code = ("import ctypes; c = ctypes.CDLL(None); "
            "print(*[n for n in ('mallocx', 'sdallocx', 'tc_malloc', 'tc_free') if hasattr(c, n)])")
    base = rectest.run_plain([sys.executable, "-c", code])
    assert base.returncode == 0 and base.stdout == "\n", base.stdout + base.stderr
    p = rectest.record([sys.executable, "-c", code], os.path.join(d, "py.trc"))
    assert p.stdout == "\n", "found under the recorder: %s" % p.stdout
    print("python3 on glibc: no mallocx, sdallocx, tc_malloc, tc_free under the recorder: ok")


def case_pairs(d):
    n, k = 4, 2000
    trace = os.path.join(d, "pairs.trc")
    p = rectest.record([hrtest.prog("pairs"), str(n), str(k)], trace)
    assert out_lines(p)[-1] == ["flush", "0"], p.stdout
    t = Trace(trace)
    for i in range(n):
        got = t.allocs(size=3000 + i)
        assert len(got) == k, "size %d: %d allocations, expected %d" % (3000 + i, len(got), k)
        assert len({r["tid"] for r in got}) == 1, "size %d allocated by several threads" % (3000 + i)
        ours = {r["addr"] for r in got}
        freed = [r for r in t.frees() if r["addr"] in ours]
        assert len(freed) == k and {r["tid"] for r in freed} == {got[0]["tid"]}, \
            "size %d: %d frees" % (3000 + i, len(freed))
    stacks = {r["stack"] for i in range(n) for r in t.allocs(size=3000 + i)}
    assert len(stacks) == 1, "one call site, stacks %s" % stacks
    # each thread's events, in file order, keep their order: pairs of
    # chunks are written in the order they left their rings
    last = {}
    for r in t.events:
        assert r["t"] >= last.get(r["tid"], 0), "thread %d goes back in time: %s" % (r["tid"], r)
        last[r["tid"]] = r["t"]
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    # the flush found the n rings full of events: at least one pair
    assert st["helper_segments"] >= 1, st
    print("pairs: %d x %d allocations and frees, %d segments by the encoder thread: ok"
          % (n, k, st["helper_segments"]))


T0_MONO_OFFSET = 32  # trace header: u64 t0_mono_ns (trace-format/FORMAT.md)


def case_clock(d):
    trace = os.path.join(d, "clocked.trc")
    p = rectest.record([hrtest.prog("clocked")], trace)
    with open(trace, "rb") as f:
        t0 = struct.unpack_from("<Q", f.read(T0_MONO_OFFSET + 8), T0_MONO_OFFSET)[0]
    t = Trace(trace)
    rows = out_lines(p)
    assert len(rows) == 3, p.stdout
    for size, before, after in ((int(a), int(b), int(c)) for a, b, c in rows):
        got = t.allocs(size=size)
        assert len(got) == 1, "%d: %s" % (size, got)
        at = t0 + got[0]["t"]
        assert before <= at <= after, \
            "allocation of %d stamped %d ns, CLOCK_MONOTONIC read %d .. %d around it" % (
                size, at, before, after)
    print("clocked: 3 allocations stamped within CLOCK_MONOTONIC's reads around them: ok")


def main():
    rectest.need_tools()
    case = sys.argv[1]
    d = hrtest.tmpdir("rec-" + case)
    globals()["case_" + case](d)
    for f in glob.glob(os.path.join(d, "*.trc*")):
        mode = stat.S_IMODE(os.lstat(f).st_mode)
        assert mode == 0o600, "%s has mode %o" % (f, mode)


if __name__ == "__main__":
    main()
