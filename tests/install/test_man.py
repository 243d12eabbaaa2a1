"""install-man: every command meson installs into bindir has a man page in
man/ that is installed too, and the recorder library its section 3 page;
each page renders without a warning (groff -ww, else man --warnings; skip
when neither is installed), has the sections a man page is read for, with
EXIT STATUS (commands) or RETURN VALUE (the API), and its OPTIONS (and
COMMANDS) sections name exactly the options the command's --help names
(-h and --help aside: not every --help lists itself); every --help fits 80
columns."""
import json
import os
import re
import shutil
import subprocess

import hrtest

MAN = os.path.join(hrtest.SRC, "man")
SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO")
RESULT = {"1": "EXIT STATUS", "3": "RETURN VALUE"}   # how a page's section says it ends
SELF_HELP = {"-h", "--help"}
HELP_WIDTH = 80                 # a --help fits the terminal the TUI asks for
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")

if shutil.which("groff"):
    RENDER = ["groff", "-man", "-Tutf8", "-ww", "-z"]
elif shutil.which("man"):
    RENDER = ["man", "--warnings", "-l"]
else:
    hrtest.skip("neither groff nor man is installed")


def installed():
    """{installed path: build path} of the build's install."""
    p = subprocess.run(["meson", "introspect", hrtest.BUILD, "--installed"],
                       capture_output=True, text=True, check=True)
    return {dst: src for src, dst in json.loads(p.stdout).items()}


def sections(roff):
    """{section name: its roff text}."""
    out, name = {}, None
    for line in roff.splitlines():
        m = re.match(r'\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            name = m.group(1)
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def plain(roff):
    """roff source with font changes and escapes undone, enough to read
    option names in it."""
    roff = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", roff)
    return roff.replace("\\-", "-").replace("\\&", "").replace("\\(dq", '"')


files = installed()
commands = sorted(os.path.basename(p) for p in files if os.path.dirname(p).endswith("/bin"))
# trace-report only where its libraries were installed (report/meson.build)
assert len(commands) == 7 + os.path.exists(os.path.join(hrtest.BUILD, "report", "trace-report")), \
    commands
pages = {os.path.basename(p): p for p in files if "/man/man" in p}
for cmd in commands:
    assert cmd + ".1" in pages, "%s is installed without a man page" % cmd
assert "libheapreel.3" in pages, sorted(pages)

for page in sorted(pages):
    path = os.path.join(MAN, page)
    r = subprocess.run(RENDER + [path], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8"))
    assert r.returncode == 0 and r.stderr == "", "%s: %s" % (page, r.stderr)
    with open(path) as f:
        roff = f.read()
    have = sections(roff)
    for s in SECTIONS + (RESULT[page[-1]],):
        assert s in have, "%s has no %s section" % (page, s)
    name = page.rsplit(".", 1)[0]
    assert re.search(r"^\.TH %s %s " % (re.escape(name.upper()), page[-1]), roff, re.M), page
    if not page.endswith(".1"):
        continue
    listed = set(OPTION.findall(plain(have.get("OPTIONS", "") + have.get("COMMANDS", ""))))
    src = [s for d, s in files.items() if os.path.basename(d) == name][0]
    h = subprocess.run([src, "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert h.returncode == 0, "%s --help: exit %d\n%s" % (name, h.returncode, h.stderr)
    wide = [line for line in h.stdout.splitlines() if len(line) > HELP_WIDTH]
    assert not wide, "%s --help is wider than %d columns: %r" % (name, HELP_WIDTH, wide)
    helped = set(OPTION.findall(h.stdout))
    assert listed - SELF_HELP == helped - SELF_HELP, \
        "%s: only in the man page %s, only in --help %s" % (
            page, sorted(listed - helped - SELF_HELP), sorted(helped - listed - SELF_HELP))
    print("%s: %d options, as --help" % (page, len(helped - SELF_HELP)))
print("ok")
