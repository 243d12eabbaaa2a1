"""test_unwind - stacks captured through frames of every shape are whole and
exact: cfi_walk (tests/recorder/cfi_walk.c, -O2 without frame pointers)
allocates under 31 recursive frames with RSP-based CFAs, in a function with
an RBP-based CFA (a VLA), in a signal handler (a signal frame, which the
recorder's CFI walk leaves to libunwind), and through two callers whose
walks meet the previous walk's frames with a different stack above them. Every frame is checked by name
with addr2line (skips when addr2line is missing)."""
import os
import shutil

import hrtest
import rectest
from rectest import Trace

DEPTH = 30
REPEAT = 3


def names(t, sid):
    return [rectest.symbolize(t, ip) for ip in t.stack(sid)]


def main():
    rectest.need_tools()
    prog = os.path.join(hrtest.REC_BUILD, "tests", "recorder", "cfi_walk")
    rectest.need(prog, "cfi_walk")
    if not shutil.which("addr2line"):
        hrtest.skip("addr2line missing")
    d = hrtest.tmpdir("rec-unwind")
    trace = os.path.join(d, "walk.trc")
    rectest.record([prog], trace)
    t = Trace(trace)
    # recursion, VLA, signal handler, via_a, via_a deeper, via_b
    counts = {777: REPEAT, 779: REPEAT, 778: 1, 780: REPEAT, 782: REPEAT, 781: REPEAT}
    for size, n in counts.items():
        got = len(t.allocs(size=size))
        assert got == n, "size %d: %d allocations, expected %d" % (size, got, n)
    ids = rectest.one_stack_per_site(t, counts)
    deep = names(t, ids[777])
    want = ["leaf_alloc"] + ["descend"] * (DEPTH + 1) + ["main"]
    assert deep[:len(want)] == want, "recursive stack: %s" % deep
    vla = names(t, ids[779])
    assert vla[:2] == ["with_vla", "main"], "VLA stack: %s" % vla
    sig = names(t, ids[778])
    assert sig[0] == "on_signal" and "main" in sig, "signal stack: %s" % sig
    for size, want in ((780, ["leaf_shared", "mid_shared", "via_a", "main"]),
                       (782, ["leaf_shared", "extra_frame", "mid_shared", "via_a", "main"]),
                       (781, ["leaf_shared", "mid_shared", "via_b", "main"])):
        got = names(t, ids[size])
        assert got[:len(want)] == want, "size %d: stack %s" % (size, got)
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    print("unwind: %d-frame recursion, VLA frame, signal frame, shared frames: ok" % (DEPTH + 2))


if __name__ == "__main__":
    main()
