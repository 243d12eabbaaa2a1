"""test_leftovers CASE - what tests leave behind is removed (issue 21,
defect 11), unless a failure needs it for a look.

CASE:
  tmpdir       hrtest.tmpdir: a small test script run under a private
               TMPDIR leaves nothing when it passes or skips; failed by an
               uncaught exception or stopped by SIGTERM (meson's timeout) it
               keeps its directories and names them on stderr.
"""
import os
import signal
import subprocess
import sys

import hrtest


# ---- tmpdir -----------------------------------------------------------------

# Makes two directories (one with an unwritable one inside, as tests do),
# prints their paths, then ends as the case says.
SCRIPT = """
import os, sys, time
import hrtest
a, b = hrtest.tmpdir("one"), hrtest.tmpdir("two")
os.mkdir(os.path.join(b, "ro"))
open(os.path.join(b, "ro", "f"), "w").close()
os.chmod(os.path.join(b, "ro"), 0o500)
print(a, b, flush=True)
%s
"""
ENDINGS = {                   # ending: (its code, exit code, kept)
    "pass": ("", 0, False),
    "skip": ("hrtest.skip('no reason')", hrtest.SKIP, False),
    "fail": ("assert False, 'a check failed'", 1, True),
    "sigterm": ("time.sleep(600)", 1, True),
}


def ending(name, top):
    code, status, kept = ENDINGS[name]
    p = subprocess.Popen([sys.executable, "-c", SCRIPT % code], env=dict(os.environ, TMPDIR=top),
                         text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dirs = p.stdout.readline().split()
    assert len(dirs) == 2, "%s: printed %r" % (name, dirs)
    if name == "sigterm":
        p.send_signal(signal.SIGTERM)
    _, err = p.communicate()
    assert p.returncode == status, "%s: exit %d, expected %d: %s" % (name, p.returncode, status,
                                                                      err)
    left = sorted(os.path.join(top, f) for f in os.listdir(top))
    if kept:
        assert left == sorted(dirs), "%s: kept %s, made %s" % (name, left, dirs)
        for x in dirs:
            assert "kept in %s\n" % x in err, "%s: %s not named on stderr:\n%s" % (name, x, err)
    else:
        assert not left, "%s: left %s" % (name, left)
    print("%s: exit %d, %s" % (name, status, "kept and named" if kept else "nothing left"))


def case_tmpdir(d):
    for name in ENDINGS:
        top = os.path.join(d, name)
        os.mkdir(top)
        ending(name, top)


def main():
    globals()["case_" + sys.argv[1]](hrtest.tmpdir("leftovers-" + sys.argv[1]))


if __name__ == "__main__":
    main()
