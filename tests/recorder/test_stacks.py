"""test_stacks - the hard cases of stack capture, each recorded with
REC_CHECK_STACKS=1 (every stack the recorder captures is checked against a
full libunwind walk, and the program aborts on a difference): longjmp and
siglongjmp across allocating frames, C++ exceptions unwinding through
allocating frames, allocations in signal handlers (on the thread's stack
and on an alternate one), swapcontext coroutines, short threads on reused
stacks, fork from a deep stack, dlclose then another library at the same
address, two callers of equal frames calling one helper, two stacks
that differ only in a saved frame pointer, and one stack again and again
(also where check mode has no memory to keep the previous one); and what
the shadow stack (REC_SHADOW=1) must survive: exceptions whose cleanups allocate
(also unwound by a libgcc linked into the program), pthread_exit and
pthread_cancel from a deep stack, backtrace() and _Unwind_Backtrace from
the program, stacks deeper than REC_DEPTH and than the shadow, and call
chains that change at random depths (where it stops patching).

With --shadow (argv[2]) the case runs with REC_SHADOW=1, and the walks
that met the shadow's trampoline are counted too (shadow_hits in the
heapreel.stats mark): there must be some. With --pad, the case runs under
PAD frames (STK_PAD), so that every stack is deep enough for the walk that
reuses the thread's previous walk (recorder/stack.c, walk_memo): some
walks must have (memo_hits), each expected stack gets the pad frames
between the case and main, and a stack cut at REC_DEPTH frames must be a
prefix of the expected one. Without either, some shallow walks must have
been hashed from their previous walk's figures (plain_hashes).

Each case (argv[1]) runs tests/programs/stk_hard CASE (or stk_throw) and
checks: the program exits 0 (no difference found); the heapreel.stats
mark counts one check per allocation recorded; the number of allocations
of every size; and every allocation's stack, symbolized with addr2line,
frame by frame: the frames in the program (and its test libraries)
exactly, innermost first, down to _start (or the thread's or coroutine's
entry), and for a signal handler's stack a frame of libc (the signal
trampoline and raise) between the handler and what it interrupted."""
import os
import shutil
import sys

import hrtest
import rectest
from rectest import Trace

ROUNDS = 3
DEEP = 12               # stk_hard.c's DEEP
THROW_DEEP = 8          # stk_throw.cc's DEEP
THREADS = 60
SAME_CALLS = 8          # stk_hard.c's SAME_CALLS
OURS = ("stk_hard", "stk_throw", "stk_shadow", "stk_shadow_static", "libstk_dl_a.so",
        "libstk_dl_b.so")
DEPTH = 64              # REC_DEPTH's default
SHADOW_DEEP = 10        # stk_shadow.cc's DEEP
WAIT_DEEP = 6           # stk_shadow.cc's WAIT_DEEP
POLICY_CALLS, POLICY_DEEP = 6000, 30  # stk_shadow.cc's
BT_AFTER = 150          # stk_shadow.cc's BT_AFTER
LIBC_START = ["(libc)", "(libc)"]  # between main and _start: __libc_start_call_main, _main_impl
SHADOW = "--shadow" in sys.argv[2:]
PAD = 56 if "--pad" in sys.argv[2:] else 0  # with main and libc: past walk_memo's 48
TOP = ["main", "_start"]


class Names:
    """Function names of a trace's return addresses, one addr2line run per
    module; each frame as (module basename, function). Where two modules
    were loaded at one address (one after the other), the one named
    `prefer` is taken."""

    def __init__(self, t, prefer=None):
        self.t = t
        self.prefer = prefer
        self.cache = {}

    def module_of(self, ip):
        ms = [m for m in self.t.modules if m["addr"] <= ip < m["addr"] + m["size"]]
        assert ms, "%s: 0x%x is in no module" % (self.t.path, ip)
        return next((m for m in ms if os.path.basename(m["path"]) == self.prefer), ms[0])

    def frames(self, sid):
        return self.of(self.t.stack(sid))

    def of(self, ips):
        todo = {}
        for ip in ips:
            if ip not in self.cache:
                m = self.module_of(ip)
                todo.setdefault(m["path"], []).append((ip, ip - 1 - (m["addr"] - m["offset"])))
        for path, pairs in todo.items():
            p = hrtest.run(["addr2line", "-f", "-C", "-e", path] + [hex(rel) for _, rel in pairs])
            fns = [fn.split("(")[0] for fn in p.stdout.splitlines()[0::2]]
            assert len(fns) == len(pairs), p.stdout
            for (ip, _), fn in zip(pairs, fns):
                self.cache[ip] = (os.path.basename(path), fn)
        return [self.cache[ip] for ip in ips]

    def ours(self, sid):
        return [fn for mod, fn in self.frames(sid) if mod in OURS]


def record(argv, tag, env=None):
    return record_out(argv, tag, env)[0]


def record_out(argv, tag, env=None):
    """The trace of argv and what it printed."""
    d = hrtest.tmpdir("rec-stacks-" + tag)
    trace = os.path.join(d, tag + ".trc")
    e = {"REC_CHECK_STACKS": "1", "REC_SHADOW": "1" if SHADOW else "0", "STK_PAD": str(PAD)}
    e.update(env or {})
    p = rectest.record(argv, trace, env=e, check=False)
    assert p.returncode == 0, "%s exited %d (a stack differs?):\n%s" % (argv, p.returncode, p.stderr)
    return trace, p.stdout


def checked(path, hits=True, memo=True, plain=True):
    """The trace, its checks counted: one per allocation recorded; with
    --shadow and hits, some walks met the shadow's trampoline; with --pad
    and memo, some took their outer frames from the previous walk; with
    neither and plain, some shallow walks were hashed from the previous
    walk's figures (plain_hashes), each checked against its own hash."""
    t = Trace(path)
    st = t.stats()
    allocs = len(t.allocs())
    assert st.get("stack_checks") == allocs, \
        "%s: %s stacks checked, %d allocations" % (path, st.get("stack_checks"), allocs)
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    if SHADOW and hits:
        assert st.get("shadow_hits", 0) > 0, "%s: the shadow was never met: %s" % (path, st)
    elif not SHADOW:
        assert "shadow_hits" not in st, st
    if PAD and memo and not SHADOW:
        assert st.get("memo_hits", 0) > 0, "%s: no walk reused the previous one: %s" % (path, st)
    if not PAD and memo and plain and not SHADOW:
        assert st.get("plain_hashes", 0) > 0, \
            "%s: no walk was hashed from the previous one: %s" % (path, st)
    return t


def padded(stack):
    """An expected stack (innermost first) as the case gives it under PAD
    frames of pad: between the case and main."""
    if not PAD or "main" not in stack:
        return stack
    i = stack.index("main")
    return stack[:i] + ["pad"] * PAD + stack[i:]


def expect(t, names, size, stacks):
    """The allocations of `size`, in time order, have our frames `stacks`
    (a list, one per allocation; under PAD with the pad frames added, and
    a stack the recorder cut at REC_DEPTH frames compared as far as it
    goes)."""
    rows = t.allocs(size=size)
    assert len(rows) == len(stacks), "size %d: %d allocations, expected %d" % (size, len(rows), len(stacks))
    for i, (r, w) in enumerate(zip(rows, stacks)):
        g, w = names.ours(r["stack"]), padded(w)
        if PAD and len(t.stack(r["stack"])) == DEPTH:
            w = w[:len(g)]
        assert g == w, "size %d, allocation %d: stack\n  %s\nexpected\n  %s" % (size, i, g, w)


def through_signal_frame(t, names, size, handler):
    """Each stack of `size` leaves the handler through libc (the signal
    trampoline) before it meets the program's frames again."""
    for r in t.allocs(size=size):
        f = names.frames(r["stack"])
        i = [fn for _, fn in f].index(handler)
        assert f[i + 1][0] not in OURS, "size %d: no signal frame after %s: %s" % (size, handler, f)


def stk(case, *args):
    prog = hrtest.prog("stk_hard")
    rectest.need(prog, "stk_hard")
    return record([prog, case] + list(args), case)


def case_ab():
    t = checked(stk("ab"))
    n = Names(t)
    expect(t, n, 1000, [["take", "helper", c, "run_ab"] + TOP for _ in range(ROUNDS) for c in ("a", "b")])


def case_fp():
    """Two stacks whose return addresses agree as far as a frame pointer
    that differs (stk_hard.c's fp): under --pad the walk that reuses the
    previous one must see it (a wrong reuse aborts the program)."""
    t = checked(stk("fp"))
    n = Names(t)
    expect(t, n, 1800, [["take", "fp_leaf", "fp_mid", "fp_top", "run_fp"] + TOP] * (2 * ROUNDS))


def case_same():
    t = checked(stk("same"))
    expect(t, Names(t), 1900, [["take", "same_leaf", "run_same"] + TOP] * SAME_CALLS)


def case_nomem():
    """Check mode without the memory that keeps each thread's previous
    full walk (REC_TEST_CHECK_NO_MEM, as when it cannot be mapped): a
    capture that claims to be the thread's previous stack cannot be
    checked, so it is left out of stack_checks, not reported as a
    difference; the stacks stay exact."""
    prog = hrtest.prog("stk_hard")
    rectest.need(prog, "stk_hard")
    t = Trace(record([prog, "same"], "nomem", {"REC_TEST_CHECK_NO_MEM": "1"}))
    st = t.stats()
    allocs = len(t.allocs())
    assert 0 < st.get("stack_checks", 0) < allocs, \
        "%s stacks checked, %d allocations: expected fewer, not none" % (st.get("stack_checks"), allocs)
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    expect(t, Names(t), 1900, [["take", "same_leaf", "run_same"] + TOP] * SAME_CALLS)
    return "stacks nomem: exact, %d of %d checked (the rest taken for the previous one)" % (
        st["stack_checks"], allocs)


def down(fn, k, top):
    return [fn] * k + top


def descents(leaf, fn, deep, top):
    """The stacks of ROUNDS descents through `deep` frames of fn that
    allocate at every level (innermost first: the frames `leaf`)."""
    return [leaf + down(fn, k, top) for _ in range(ROUNDS) for k in range(1, deep + 1)]


def case_longjmp():
    t = checked(stk("longjmp"))
    n = Names(t)
    top = ["jump_top", "run_longjmp"] + TOP
    expect(t, n, 1100, descents(["take"], "jump_down", DEEP, top))
    expect(t, n, 1101, [["take", "after_jump"] + top] * ROUNDS)
    expect(t, n, 1102, [["take", "after_jump_deep", "after_jump2"] + top] * ROUNDS)


def case_siglongjmp():
    t = checked(stk("siglongjmp"))
    n = Names(t)
    top = ["sjump_top", "run_siglongjmp"] + TOP
    expect(t, n, 1200, descents(["take"], "sjump_down", DEEP, top))
    expect(t, n, 1201, [["take", "on_jump_signal"] + down("sjump_down", DEEP, top)] * ROUNDS)
    through_signal_frame(t, n, 1201, "on_jump_signal")
    expect(t, n, 1202, [["take", "after_sjump"] + top] * ROUNDS)


def case_signal():
    t = checked(stk("signal"), memo=False)  # each handler's walk goes to libunwind
    n = Names(t)
    top = ["run_signal"] + TOP
    expect(t, n, 1300, [["take", "on_signal"] + down("sig_down", DEEP, top)] * ROUNDS)
    expect(t, n, 1301, [["take", "on_alt_signal"] + down("sig_down", DEEP, top)] * ROUNDS)
    through_signal_frame(t, n, 1300, "on_signal")
    through_signal_frame(t, n, 1301, "on_alt_signal")
    expect(t, n, 1302, [["take"] + down("sig_down", DEEP, top)] * ROUNDS)


def case_coroutine():
    # each switch puts the slots back; a walk on the coroutine's shallow
    # stack comes between any two deep ones
    t = checked(stk("coroutine"), hits=False, memo=False)
    n = Names(t)
    expect(t, n, 1400, [["take", "co_leaf", "co_body"]] * ROUNDS)
    expect(t, n, 1401, [["take", "main_leaf", "run_coroutine"] + TOP] * ROUNDS)


def case_threads():
    t = checked(stk("threads"))
    n = Names(t)
    for j in range(3):
        expect(t, n, 1500 + j, [["take", "t_leaf"] + ["t_mid"] * j + ["t_body"]] * (THREADS // 3))


def case_fork():
    parent = stk("fork")
    child = parent + ".1"
    assert os.path.exists(child), "no child trace %s" % child
    t = checked(child, memo=False)  # two allocations
    n = Names(t)
    top = ["run_fork"] + TOP
    expect(t, n, 1600, [["take", "fork_leaf"] + down("fork_down", DEEP, top)])
    expect(t, n, 1601, [["take", "child_leaf"] + top])
    t = checked(parent, hits=False, memo=False)  # one allocation
    expect(t, Names(t), 1602, [["take", "parent_leaf"] + top])


def case_dlclose():
    libs = [hrtest.prog("libstk_dl_a.so"), hrtest.prog("libstk_dl_b.so")]
    for lib in libs:
        rectest.need(lib, os.path.basename(lib))
    t = checked(stk("dlclose", *libs))
    at = {}
    for m in t.modules:
        if os.path.basename(m["path"]) in OURS[2:] and "x" in m["perms"]:
            at.setdefault(m["addr"], set()).add(os.path.basename(m["path"]))
    assert any(len(v) == 2 for v in at.values()), \
        "the two libraries were not mapped at the same address: %s" % at
    top = ["call_lib", "run_dlclose"] + TOP
    expect(t, Names(t, "libstk_dl_a.so"), 1700, [["dl_leaf", "dl_run"] + top] * 2)
    expect(t, Names(t, "libstk_dl_b.so"), 1701, [["dl_leaf_b", "dl_mid_b", "dl_run"] + top])


def case_throw():
    prog = hrtest.prog("stk_throw")
    rectest.need(prog, "stk_throw (no C++ compiler)")
    t = checked(record([prog], "throw"))
    n = Names(t)
    top = ["catcher"] + TOP
    expect(t, n, 1800, descents([], "throw_down", THROW_DEEP, top))
    expect(t, n, 1801, [down("other_down", THROW_DEEP, top)] * ROUNDS)
    expect(t, n, 1802, [["after_catch"] + top] * ROUNDS)
    thrown = [r for r in t.allocs(fn="malloc")
              if n.frames(r["stack"])[0][1] == "__cxa_allocate_exception"]
    assert len(thrown) == ROUNDS, "exceptions allocated: %d, expected %d" % (len(thrown), ROUNDS)
    for r in thrown:
        g, w = n.ours(r["stack"]), padded(down("throw_down", THROW_DEEP, top))
        if PAD and len(t.stack(r["stack"])) == DEPTH:
            w = w[:len(g)]
        assert g == w, n.frames(r["stack"])


def shadow_prog(case, name="stk_shadow"):
    prog = hrtest.prog(name)
    rectest.need(prog, name + " (no C++ compiler)")
    return record_out([prog, case], case)


def case_unwind(name="stk_shadow"):
    """With name stk_shadow_static, the exceptions are unwound by the
    program's own libgcc, which the recorder's exports do not reach."""
    trace, _ = shadow_prog("unwind", name)
    t = checked(trace)
    n = Names(t)
    top = ["unwind_catcher", "run_unwind"] + TOP
    expect(t, n, 1900, descents(["take"], "unwind_down", SHADOW_DEEP, top))
    # the cleanups run innermost first, each in the frame being unwound
    expect(t, n, 1901, [["take", "Noisy::~Noisy"] + down("unwind_down", k, top)
                        for _ in range(ROUNDS) for k in range(SHADOW_DEEP, 0, -1)])
    expect(t, n, 1902, [["take", "after_unwind"] + top] * ROUNDS)


def case_exit():
    trace, _ = shadow_prog("exit")
    t = checked(trace)
    n = Names(t)
    deep = SHADOW_DEEP
    expect(t, n, 1910, [["take"] + down("noisy_down", k, ["down_body"]) for k in range(1, deep + 1)])
    expect(t, n, 1911, [["take", "Noisy::~Noisy"] + down("noisy_down", k, ["down_body"])
                        for k in range(deep, 0, -1)])
    expect(t, n, 1912, [["take", "after_exit", "run_exit"] + TOP])


def case_cancel():
    """glibc's pthread_cancel unwinds the thread through its own pointer
    into libgcc_s, past frames the shadow patched (stk_shadow.cc exits 4
    if a destructor did not run)."""
    trace, _ = shadow_prog("cancel")
    t = checked(trace)
    n = Names(t)
    deep = SHADOW_DEEP
    expect(t, n, 1940, [["take"] + down("noisy_down", k, ["down_body"]) for k in range(1, deep + 1)])
    expect(t, n, 1943, [["take"] + ["cancel_wait"] * WAIT_DEEP + ["cancel_bottom"] +
                        down("noisy_down", deep, ["down_body"])])
    expect(t, n, 1941, [["take", "Noisy::~Noisy"] + down("noisy_down", k, ["down_body"])
                        for k in range(deep, 0, -1)])
    expect(t, n, 1942, [["take", "after_cancel", "run_cancel"] + TOP])


def case_policy():
    """Call chains that change at random depths: with --shadow the
    recorder stops patching for a while (shadow_quiet), and every stack
    stays exact."""
    trace, _ = shadow_prog("policy")
    t = checked(trace)
    if SHADOW:
        st = t.stats()
        assert st.get("shadow_quiet", 0) > 0, "%s: patching never stopped: %s" % (trace, st)
    x, depths = 1, []
    for _ in range(POLICY_CALLS):
        x = (x * 1103515245 + 12345) & 0xffffffff
        depths.append(1 + (x >> 16) % POLICY_DEEP)
    expect(t, Names(t), 1950, [["take"] + down("policy_down", d, ["run_policy"] + TOP) for d in depths])


def case_backtrace():
    trace, out = shadow_prog("backtrace")
    t = checked(trace)  # bt_after's second allocation, after backtrace() returned
    n = Names(t)
    deep = SHADOW_DEEP
    top = down("bt_down", deep, ["run_backtrace"] + TOP)
    top = ["bt_bottom"] + top
    expect(t, n, 1920, [["take", "bt_leaf"] + top] * 2)
    ips = [int(line, 16) for line in out.split()]
    got = [fn for mod, fn in n.of(ips) if mod in OURS]
    assert got == ["bt_grab"] + top, "backtrace() saw\n  %s\nexpected\n  %s" % (got, ["bt_grab"] + top)
    after = ["take"] + ["bt_after"] * BT_AFTER + ["run_backtrace", "main"] + LIBC_START + ["_start"]
    expect(t, n, 1921, [[fn for fn in after[:DEPTH] if fn != "(libc)"]] * 2)


def deep_stacks(size, levels, depth):
    """deep_down's allocations of `size` (down) and size + 1 (up), cut at
    `depth` frames as the recorder cuts them."""
    at = [lv for lv in range(levels, 0, -1) if lv % 25 == 0]
    def one(lv):
        frames = ["take"] + ["deep_down"] * (levels - lv + 1) + ["run_deep", "main"] + LIBC_START + ["_start"]
        return [fn for fn in frames[:depth] if fn != "(libc)"]
    return ([one(lv) for lv in at], [one(lv) for lv in reversed(at)])


def case_deep(depth=DEPTH):
    """REC_DEPTH = depth; at 256 the stacks are deeper than the shadow
    (REC_SHADOW_MAX) and than the memo (walk_memo's MEMO_FRAMES)."""
    prog = hrtest.prog("stk_shadow")
    rectest.need(prog, "stk_shadow (no C++ compiler)")
    trace, _ = record_out([prog, "deep"], "deep%d" % depth, env={"REC_DEPTH": str(depth)})
    t = checked(trace, plain=False)  # deep walks, and few shallow ones alike
    n = Names(t)
    for size, levels in ((1930, 300), (1932, 100)):
        down_, up = deep_stacks(size, levels, depth)
        expect(t, n, size, down_ * ROUNDS)
        expect(t, n, size + 1, up * ROUNDS)


CASES = {"ab": case_ab, "fp": case_fp, "longjmp": case_longjmp, "siglongjmp": case_siglongjmp,
         "signal": case_signal, "coroutine": case_coroutine, "threads": case_threads,
         "fork": case_fork, "dlclose": case_dlclose, "throw": case_throw,
         "unwind": case_unwind, "unwind_static": lambda: case_unwind("stk_shadow_static"),
         "exit": case_exit, "cancel": case_cancel, "policy": case_policy, "backtrace": case_backtrace, "deep": case_deep,
         "deep256": lambda: case_deep(256), "same": case_same, "nomem": case_nomem}


def main():
    rectest.need_tools()
    if not shutil.which("addr2line"):
        hrtest.skip("addr2line missing")
    said = CASES[sys.argv[1]]()
    print(said or "stacks %s: every stack checked and exact" % sys.argv[1])


if __name__ == "__main__":
    main()
