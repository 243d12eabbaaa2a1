#!/usr/bin/env python3
"""The database cannot be written to the end (importer, output not
writable): trace-import exits 3 (not 1, "unusable input"), with exactly
one line naming the database and the system's reason, and leaves neither
the database nor its temporary file.

usage: test_full.py CASE
  fsize  a file size limit (RLIMIT_FSIZE, as `ulimit -f`) below the
         database's size: EFBIG, and SIGXFSZ, which must not kill it.
  tmpfs  a TMPFS_SIZE tmpfs the database does not fit in: ENOSPC. Skips
         (77, saying why) when a tmpfs cannot be mounted.
  tmpfs_tiny  a TINY_SIZE tmpfs too small for the empty database's
         schema: the same exit and line, from the database's creation.
"""
import os
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrtest  # noqa: E402
from imptest import MKTRACE  # noqa: E402

SYNTH = ["2", "20000", "7"]            # mktrace --synth THREADS ALLOCS SEED: a ~1 MB database
FSIZE = 256 << 10                      # bytes: a quarter of that database
TMPFS_SIZE = "256k"
TINY_SIZE = "16k"                      # less than the schema's pages (8 KiB each)


def synth_trace(d):
    trc = os.path.join(d, "synth.trc")
    hrtest.run([MKTRACE, "--synth", trc] + SYNTH)
    return trc


def import_into(trc, db, preexec=None):
    """trace-import trc db; asserts exit 3, one line, nothing left."""
    p = subprocess.run([hrtest.TRACE_IMPORT, "-q", trc, db], capture_output=True,
                       text=True, preexec_fn=preexec)
    left = [f for f in os.listdir(os.path.dirname(db))
            if f.startswith(os.path.basename(db))]
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert not left, left
    return p.stderr


def case_fsize(d):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE, FSIZE))
    db = os.path.join(d, "out.db")
    err = import_into(synth_trace(d), db, limit)
    assert err == "trace-import: %s: cannot write it: File too large\n" % db, err


def case_tmpfs(d, size=TMPFS_SIZE):
    fs = os.path.join(d, "tmpfs")
    os.mkdir(fs)
    if os.geteuid() != 0 or not shutil.which("mount"):
        hrtest.skip("cannot mount a tmpfs: not root, or no mount command")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size,
                        "heapreel-test", fs], capture_output=True, text=True)
    if p.returncode:
        hrtest.skip("cannot mount a tmpfs: %s" % (p.stderr.strip() or p.returncode))
    try:
        db = os.path.join(fs, "out.db")
        err = import_into(synth_trace(d), db)
        assert err == "trace-import: %s: cannot write it: No space left on device\n" % db, err
    finally:
        subprocess.run(["umount", fs], check=True)


def case_tmpfs_tiny(d):
    case_tmpfs(d, TINY_SIZE)


def main():
    name = sys.argv[1]
    for p in (MKTRACE, hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    globals()["case_" + name](hrtest.tmpdir("impfull-" + name))
    print("ok", name)


if __name__ == "__main__":
    main()
