"""test_unwind - stacks captured through frames of every shape are whole and
exact: cfi_walk (tests/recorder/cfi_walk.c, -O2 without frame pointers)
allocates under 31 recursive frames with RSP-based CFAs, in a function with
an RBP-based CFA (a VLA), and in a signal handler (a signal frame, which the
recorder's CFI walk leaves to libunwind). Every frame is checked by name
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


def one_stack(t, size, count):
    got = t.allocs(size=size)
    assert len(got) == count, "size %d: %d allocations, expected %d" % (size, len(got), count)
    ids = {r["stack"] for r in got}
    assert len(ids) == 1 and 0 not in ids, "size %d: stack ids %s (expected one)" % (size, ids)
    return ids.pop()


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
    deep = names(t, one_stack(t, 777, REPEAT))
    want = ["leaf_alloc"] + ["descend"] * (DEPTH + 1) + ["main"]
    assert deep[:len(want)] == want, "recursive stack: %s" % deep
    vla = names(t, one_stack(t, 779, REPEAT))
    assert vla[:2] == ["with_vla", "main"], "VLA stack: %s" % vla
    sig = names(t, one_stack(t, 778, 1))
    assert sig[0] == "on_signal" and "main" in sig, "signal stack: %s" % sig
    st = t.stats()
    assert st["lost"] == 0 and st["stacks_unknown"] == 0, st
    shutil.rmtree(d)  # kept when a check failed, for a look
    print("unwind: %d-frame recursion, VLA frame, signal frame: ok" % (DEPTH + 2))


if __name__ == "__main__":
    main()
