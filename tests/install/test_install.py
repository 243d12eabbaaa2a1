"""install-destdir: `meson install --destdir D` of this build (no root; the
build's install log kept as it was) puts exactly the commands,
libheapreel.so, include/heapreel/rec.h, the demo program and the man pages
under D/PREFIX, nothing with a generic name and nothing outside the
prefix. From there, with the build tree out of reach of their lookups:
- the installed trace-record preloads D's libheapreel.so (found relative to
  itself), by an absolute path: `env` under it prints that LD_PRELOAD (and
  the build tree's, run as ./trace-record, the build's library);
- forker recorded by it, imported by the installed trace-import and asked
  for its peak by the installed trace-snap gives the build tree's answer on
  the same traces: the parent's 5 blocks of 3001 bytes, Total 15005 B;
- the installed heapreel profiles forker and the demo with the installed
  commands, and refuses `build` (it needs the source tree) with exit 2;
- a program compiles against the installed <heapreel/rec.h>."""
import json
import os
import shutil
import subprocess

import hrtest

COMMANDS = ["heapreel", "trace-ctl", "trace-dump", "trace-import", "trace-record",
            "trace-snap", "trace-tui"]
if os.path.exists(os.path.join(hrtest.BUILD, "report", "trace-report")):
    COMMANDS.append("trace-report")   # built where its libraries were installed
PEAK_TOTAL = "Total: 15005 B (14.7 KiB)\n"     # forker's parent: 5 blocks of 3001 bytes
forker = hrtest.prog("forker")
hrtest.need(hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP, forker)
if not shutil.which("meson"):
    hrtest.skip("meson is not on PATH")
d = hrtest.tmpdir("install")
stage = os.path.join(d, "stage")

p = hrtest.run(["meson", "introspect", hrtest.BUILD, "--buildoptions"])
opt = {o["name"]: o["value"] for o in json.loads(p.stdout)}
# meson install lists what it installed in the build's install log, which
# `ninja -C build uninstall` removes: the log of the user's own install
# must survive this staged one.
log = os.path.join(hrtest.BUILD, "meson-logs", "install-log.txt")
saved = None
if os.path.exists(log):
    with open(log, "rb") as f:
        saved = f.read()
try:
    hrtest.run(["meson", "install", "-C", hrtest.BUILD, "--no-rebuild", "--quiet",
                "--destdir", stage])
finally:
    if saved is None:
        os.remove(log)
    else:
        with open(log, "wb") as f:
            f.write(saved)
prefix = os.path.join(stage, opt["prefix"].lstrip("/"))
bindir = os.path.join(prefix, opt["bindir"])
lib = os.path.join(prefix, opt["libdir"], "libheapreel.so")
man = os.path.join(prefix, opt["mandir"])

want = {os.path.join(bindir, c) for c in COMMANDS}
want |= {lib, os.path.join(prefix, opt["libdir"], "libheapreel-attach.so"),  # trace-record -p
         os.path.join(prefix, opt["includedir"], "heapreel", "rec.h"),
         os.path.join(prefix, opt["libexecdir"], "heapreel", "demo"),
         os.path.join(man, "man3", "libheapreel.3")}
want |= {os.path.join(man, "man1", c + ".1") for c in COMMANDS}
have = {os.path.join(top, f) for top, _, files in os.walk(stage) for f in files}
assert have == want, "installed but not expected: %s; expected but not installed: %s" % (
    sorted(have - want), sorted(want - have))
for c in COMMANDS:
    assert os.access(os.path.join(bindir, c), os.X_OK), c


def installed(cmd, *args, ok=(0,), cwd=d):
    """An installed command, without a caller's LD_PRELOAD."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "REC_OUT")}
    p = subprocess.run([os.path.join(bindir, cmd)] + list(args), capture_output=True,
                       text=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL, timeout=hrtest.limit(120))
    assert p.returncode in ok, "%s %s: exit %d\n%s%s" % (cmd, args, p.returncode, p.stdout,
                                                         p.stderr)
    return p


# The library of its own install, by an absolute path.
p = installed("trace-record", "-o", os.path.join(d, "env.trc"), "--", "env")
preload = [line for line in p.stdout.splitlines() if line.startswith("LD_PRELOAD=")]
assert preload == ["LD_PRELOAD=" + os.path.realpath(lib)], (preload, lib)

# So does the build tree's, run by a relative path.
rec_dir = os.path.dirname(hrtest.TRACE_RECORD)
p = hrtest.run(["./trace-record", "-o", os.path.join(d, "env2.trc"), "--", "env"], cwd=rec_dir,
               env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
preload = [line for line in p.stdout.splitlines() if line.startswith("LD_PRELOAD=")]
assert preload == ["LD_PRELOAD=" + os.path.realpath(hrtest.LIBREC)], (preload, hrtest.LIBREC)

# The installed pipeline gives the build tree's answer on the same traces.
run = os.path.join(d, "run")
os.mkdir(run)
installed("trace-record", "-o", "run/run.trc", "--", forker)
assert sorted(os.listdir(run))[0] == "run.trc", os.listdir(run)
peaks = []
for imp, snap, db in ((os.path.join(bindir, "trace-import"), os.path.join(bindir, "trace-snap"),
                       "installed.db"),
                      (hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP, "build.db")):
    out = os.path.join(d, db)
    hrtest.run([imp, "-q", os.path.join(run, "run.trc"), out])
    peaks.append(hrtest.run([snap, out, "--peak"]).stdout)
assert peaks[0] == peaks[1], peaks
assert PEAK_TOTAL in peaks[0], peaks[0]

# The installed front end runs the installed commands.
p = installed("heapreel", "profile", "-o", "prof", "--", forker)
assert "import: %s " % os.path.join(bindir, "trace-import") in p.stdout, p.stdout
assert PEAK_TOTAL in p.stdout, p.stdout
p = installed("heapreel", "demo")
assert os.path.join(prefix, opt["libexecdir"], "heapreel", "demo") in p.stdout, p.stdout
assert "Total: " in p.stdout and os.listdir(os.path.join(d, "heapreel-out")), p.stdout
p = installed("heapreel", "build", ok=(2,))
assert p.stderr == "heapreel: build needs the source tree (this heapreel is installed in %s)\n" \
    % os.path.realpath(bindir), p.stderr

# The header is usable from the install.
src = os.path.join(d, "use.c")
with open(src, "w") as f:
    f.write("#define REC_WEAK\n#include <heapreel/rec.h>\n"
            "int main(void) { return rec_mark ? rec_mark(\"x\") : 0; }\n")
hrtest.run([os.environ.get("CC", "cc"), "-Wall", "-Werror", "-fsyntax-only",
            "-I", os.path.join(prefix, opt["includedir"]), src])
print("ok")
