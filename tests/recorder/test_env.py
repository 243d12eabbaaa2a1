"""test_env CASE - the recorder's environment and file handling, and what
libheapreel.so shows the program it is preloaded into.

CASE:
  bad_out     REC_OUT in a missing directory: one stderr line, program
              runs unrecorded with its normal output and exit code
  depth       REC_DEPTH=2 caps every stack at 2 frames (call site kept);
              REC_DEPTH=abc warns once and records with the default
  default     no REC_OUT: <program>.<pid>.trc in the working directory, 0600
  collision   an existing trace name and a planted symlink are never
              written through: the next free <name>.N is used
  killed      SIGKILL leaves <trace>.ring (magic, not finished) beside the trace
  closefds    a program that closes every descriptor and reuses our numbers
              for its own file: that file is never written, one stderr line
  exports     libheapreel.so exports only the interposed functions
  unwind      a throwing C++ program's _Unwind_* still bind to libgcc_s,
              not to the recorder's libunwind
"""
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys

import hrtest
import rectest
from rectest import Trace

RING_MAGIC = 0x31474e4952524845
# LD_DEBUG=bindings: binding file FROM [NS] to TO [NS]: normal symbol `SYM'
BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: \w+ symbol `([^']+)'")
EXPORTS = {"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
           "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
           "dlclose", "_exit", "_Exit", "execve", "execv", "execvp", "execvpe",
           "execl", "execle", "execlp", "fexecve",
           "mmap", "mmap64", "munmap", "mremap",  # the program's mappings (mmap.c)
           "rec_start", "rec_stop", "rec_mark", "rec_flush",  # rec.h
           "rec_alloc", "rec_realloc", "rec_free", "rec_pool_create",  # rec.h: custom allocators
           "rec_pool_alloc", "rec_pool_free", "rec_pool_destroy",
           "heapreel_recorder",  # which copy records, when two are loaded
           "heapreel_attach",    # what trace-record -p calls (attach.c)
           # put the shadow stack's patched slots back, then forward (shadow.c)
           "_Unwind_RaiseException", "_Unwind_Resume", "_Unwind_Resume_or_Rethrow",
           "_Unwind_ForcedUnwind", "_Unwind_Backtrace", "backtrace", "pthread_exit",
           "swapcontext", "setcontext",
           "_dl_find_object", "dl_iterate_phdr",  # what unwinders look up first
           # C++ operator new and delete, every form
           "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
           "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
           "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
           "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
           "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t",
           "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
           "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t"}


def env_with(**kw):
    e = dict(os.environ)
    e["LD_PRELOAD"] = hrtest.LIBREC
    e.pop("REC_OUT", None)
    e.pop("REC_DEPTH", None)
    e.update(kw)
    return e


def case_bad_out(d):
    prog = hrtest.prog("entry")
    base = rectest.run_plain([prog])
    bad = os.path.join(d, "missing", "x.trc")
    p = subprocess.run([prog], env=env_with(REC_OUT=bad), capture_output=True, text=True)
    assert p.returncode == base.returncode == 0, p.stderr
    assert p.stdout == base.stdout, p.stdout
    lines = p.stderr.splitlines()
    assert lines == ["heapreel: cannot create %s: No such file or directory; not recording" % bad], lines
    assert not os.path.exists(os.path.dirname(bad))
    print("bad REC_OUT: one line, program unaffected: ok")


def case_depth(d):
    prog = hrtest.prog("entry")
    trace = os.path.join(d, "d2.trc")
    p = subprocess.run([prog], env=env_with(REC_OUT=trace, REC_DEPTH="2"), capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    t = Trace(trace)
    depths = {len(t.stack(r["stack"])) for r in t.allocs()}
    assert max(depths) == 2, "stack depths %s with REC_DEPTH=2" % depths
    sid = rectest.one_stack_per_site(t, [1001])[1001]
    name = rectest.symbolize(t, t.stack(sid)[0])
    assert name in (None, "call_malloc"), name

    trace = os.path.join(d, "dbad.trc")
    p = subprocess.run([prog], env=env_with(REC_OUT=trace, REC_DEPTH="abc"), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == ["heapreel: REC_DEPTH=abc is not a number from 1 to 256; using 64"], p.stderr
    t = Trace(trace)
    assert max(len(t.stack(r["stack"])) for r in t.allocs()) > 2
    print("REC_DEPTH: capped at 2; bad value warned and defaulted: ok")


def case_default(d):
    prog = hrtest.prog("entry")
    p = subprocess.Popen([prog], env=env_with(), cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    assert p.returncode == 0, err
    trace = os.path.join(d, "entry.%d.trc" % p.pid)
    assert os.path.exists(trace), os.listdir(d)
    assert stat.S_IMODE(os.stat(trace).st_mode) == 0o600
    assert os.listdir(d) == [os.path.basename(trace)], os.listdir(d)
    t = Trace(trace)
    assert len(t.allocs(size=1001)) == 3
    print("default name %s, mode 0600, .ring removed: ok" % os.path.basename(trace))


def case_collision(d):
    prog = hrtest.prog("entry")
    trace = os.path.join(d, "c.trc")
    with open(trace, "w") as f:
        f.write("not ours\n")
    target = os.path.join(d, "victim")
    with open(target, "w") as f:
        f.write("keep\n")
    os.symlink(target, trace + ".1")
    p = subprocess.run([prog], env=env_with(REC_OUT=trace), capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert open(trace).read() == "not ours\n"
    assert open(target).read() == "keep\n"
    t = Trace(trace + ".2")
    assert len(t.allocs(size=1001)) == 3
    print("existing file and planted symlink skipped, wrote %s: ok" % os.path.basename(t.path))


def case_killed(d):
    rectest.need(hrtest.TRACE_DUMP, "trace-dump")
    trace = os.path.join(d, "k.trc")
    code = "import sys, time\nx = [str(i) * 3 for i in range(20000)]\nprint('ready', flush=True)\ntime.sleep(60)\n"
    p = subprocess.Popen([sys.executable, "-c", code], env=env_with(REC_OUT=trace),
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGKILL)
    p.wait()
    ring = trace + ".ring"
    assert os.path.exists(trace) and os.path.exists(ring), os.listdir(d)
    with open(ring, "rb") as f:
        head = f.read(128)
    magic, version, pid = struct.unpack_from("<QII", head, 0)
    finished = struct.unpack_from("<I", head, 72)[0]
    assert magic == RING_MAGIC and version == 3 and pid == p.pid and finished == 0, (
        hex(magic), version, pid, finished)
    nodes_next = struct.unpack_from("<I", head, 64)[0]
    assert nodes_next > 1, "no stack nodes in the ring file"
    # module records go to disk at once: the trace can be symbolized
    dump = subprocess.run([hrtest.TRACE_DUMP, trace], capture_output=True, text=True).stdout
    paths = [r["path"] for r in map(rectest.parse_line, dump.splitlines()) if r and r["kind"] == "module"]
    assert os.path.realpath(sys.executable) in paths, paths
    print("SIGKILL: .ring kept (pid %d, %d nodes), modules in the trace: ok" % (pid, nodes_next - 1))


def case_closefds(d):
    # The program writes through 600, a number the recorder had: libunwind
    # 1.6 itself may close() the program's fd 3 (its memory-validation pipe
    # had that number before the program closed it), a known libunwind
    # behaviour this test does not cover.
    trace = os.path.join(d, "cf.trc")
    mine = os.path.join(d, "mine.txt")
    code = ("import os, threading\n"
            "os.closerange(3, 65536)\n"
            "fd = os.open(%r, os.O_WRONLY | os.O_CREAT, 0o600)\n"
            "for n in range(600, 602): os.dup2(fd, n)\n"
            "def work(): return [str(i) * 5 for i in range(50000)]\n"
            "ts = [threading.Thread(target=work) for _ in range(3)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "os.write(600, b'mine')\n" % mine)
    p = subprocess.run([sys.executable, "-c", code], env=env_with(REC_OUT=trace),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # one line, whether the writer noticed through fstat or a failed write
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("heapreel: ") and trace in lines[0] \
        and lines[0].endswith("; recording stopped"), p.stderr
    with open(mine, "rb") as f:
        assert f.read() == b"mine", "the program's file was written by the recorder"
    print("program closed our descriptors and reused the numbers: its file untouched: ok")


def case_exports(d):
    if not shutil.which("nm"):
        hrtest.skip("nm not installed")
    out = hrtest.run(["nm", "-D", "--defined-only", hrtest.LIBREC]).stdout
    syms = {l.split()[-1] for l in out.splitlines() if l.strip()}
    assert syms == EXPORTS, "extra %s, missing %s" % (sorted(syms - EXPORTS), sorted(EXPORTS - syms))
    needed = hrtest.run(["readelf", "-d", hrtest.LIBREC]).stdout if shutil.which("readelf") else ""
    assert "libunwind" not in needed, "libheapreel.so must not link libunwind (it is dlopen'ed RTLD_LOCAL)"
    print("exports: exactly the %d interposed functions and rec.h: ok" % len(EXPORTS))


def case_unwind(d):
    prog = hrtest.prog("cxx_mix")
    rectest.need(prog, "cxx_mix (no C++ compiler?)")
    env = env_with(REC_OUT=os.path.join(d, "u.trc"), LD_DEBUG="bindings")
    p = subprocess.run([prog, "1", "10"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    # the loader's messages, found by their shape, not by line: two threads'
    # messages can share a line (a binding's " [VERSION]" is a write of its own)
    msgs = BINDING.findall(p.stderr)
    binds = [(frm, to, sym) for frm, to, sym in msgs if "libstdc++" in frm and sym.startswith("_Unwind_")]
    assert binds, "no _Unwind_ binding of libstdc++ seen"
    # the unwinders' entry points the shadow stack forwards (shadow.c) bind
    # to libheapreel.so, which passes them on to libgcc_s; the rest to libgcc_s
    forwarded = ("_Unwind_RaiseException", "_Unwind_Resume", "_Unwind_Resume_or_Rethrow",
                 "_Unwind_ForcedUnwind", "_Unwind_Backtrace")
    wrong = [b for b in binds if "libgcc_s" not in b[1] and
             not ("libheapreel" in b[1] and b[2] in forwarded)]
    assert not wrong, "\n".join(map(str, wrong))
    ours = [b for b in msgs if "libheapreel" in b[0] and b[2] == "_Unwind_RaiseException"]
    assert ours and all("libgcc_s" in b[1] for b in ours), \
        "libheapreel.so's _Unwind_RaiseException is not passed to libgcc_s: %s" % ours
    print("C++ exceptions bind to libgcc_s (%d bindings, through libheapreel.so's "
          "forwarders): ok" % len(binds))


def main():
    rectest.need(hrtest.LIBREC, "libheapreel.so")
    d = hrtest.tmpdir("rec-env")
    globals()["case_" + sys.argv[1]](d)


if __name__ == "__main__":
    main()
