"""trace-dump on a known trace: every record line, the summary, and the exit
codes and one-line messages for damaged, foreign and missing files."""
import os
import re
import subprocess
import sys

import hrtest

TF_TEST = sys.argv[1]
DUMP = hrtest.TRACE_DUMP
d = hrtest.tmpdir("dump")
sample = os.path.join(d, "sample.trc")
hrtest.run([TF_TEST, "sample", sample])
data = open(sample, "rb").read()


def dump(*args):
    return subprocess.run([DUMP, *args], capture_output=True, text=True)


def write(name, content):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(content)
    return p


def one_line_error(p, path, code):
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    m = re.match(r"trace-dump: (.*): byte (\d+): (.+)$", lines[0])
    assert m and m.group(1) == path, lines[0]
    return int(m.group(2)), m.group(3)


# ---- every record, in file order -------------------------------------------
p = dump(sample)
assert p.returncode == 0 and p.stderr == "", p.stderr
want = [
    "alloc t=100 tid=4242 addr=0x5000 size=24 stack=2 fn=malloc",
    "alloc t=110 tid=4242 addr=0x5040 size=100 stack=1 fn=calloc",
    "realloc t=120 t2=130 tid=4242 old=0x5000 addr=0x6000 size=48 stack=2 fn=realloc",
    "free t=140 tid=4242 addr=0x6000",
    "stack id=1 parent=0 ip=0x401000",
    "stack id=2 parent=1 ip=0x401234",
    "thread tid=4242 name=main",
    "module addr=0x400000 size=8192 offset=0x0 perms=r-xp build_id=deadbeef path=/usr/bin/demo",
    "mark t=150 label=half way",
    "lost t=160 count=3",
    "fork parent=4241 parent_t0=123456789 t=5000",
    "end t=200",
]
assert p.stdout.splitlines() == want, p.stdout

# ---- summary -----------------------------------------------------------------
s = hrtest.summary(sample)
for k, v in dict(events=4, alloc=2, free=1, realloc=1, stacks=2, threads=1,
                 modules=1, marks=1, lost=3, duration_ns=200, segments=4,
                 file_bytes=len(data)).items():
    assert s[k] == v, (k, s[k], v)
assert abs(s["bytes_per_event"] - round(len(data) / 4, 2)) < 0.006, s

# ---- usage -------------------------------------------------------------------
# exit codes as in README "Exit codes": 2 usage, 3 output not writable
assert dump().returncode == 2
assert dump("--bogus", sample).returncode == 2
assert dump(sample, sample).returncode == 2
h = dump("--help")
assert h.returncode == 0 and "usage: trace-dump" in h.stdout
assert "5 damaged" in h.stdout, h.stdout
if os.path.exists("/dev/full"):
    with open("/dev/full", "w") as full:
        p = subprocess.run([DUMP, sample], stdout=full, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 3 and p.stderr.startswith("trace-dump: writing output:"), (
        p.returncode, p.stderr)

# ---- unusable files: exit 1, one line naming file and byte -------------------
empty = write("empty.trc", b"")
assert one_line_error(dump(empty), empty, 1)[0] == 0
text = write("text.trc", b"hello, I am not a trace\n")
off, msg = one_line_error(dump(text), text, 1)
assert off == 0 and "magic" in msg, msg
future = bytearray(data)
future[8] = 99
fut = write("future.trc", bytes(future))
off, msg = one_line_error(dump(fut), fut, 1)
assert off == 8 and "version 99" in msg, msg
missing = os.path.join(d, "missing.trc")
one_line_error(dump(missing), missing, 1)

# ---- segment starts: walk the headers (56 bytes, sizes at 40/44) --------------
hdr_len = int.from_bytes(data[12:16], "little")
starts, at = [], hdr_len
while at < len(data):
    starts.append(at)
    at += 56 + int.from_bytes(data[at + 44:at + 48], "little")
assert at == len(data) and len(starts) == 4, starts

# ---- damaged tail: exit 5, everything before printed ---------------------------
for cut in (starts[-1] + 3, starts[-1] + 56, len(data) - 1):
    t = write("cut.trc", data[:cut])
    p = dump(t)
    off, msg = one_line_error(p, t, 5)
    assert off >= starts[-1], (cut, off)
    assert p.stdout.splitlines() == want[:4], p.stdout
    s = dump("--summary", t)
    assert s.returncode == 5 and "events 4" in s.stdout.splitlines()

# a flipped bit in the second segment (the realloc): the first one prints
flip = bytearray(data)
flip[starts[1] + 70] ^= 0x04
t = write("flip.trc", bytes(flip))
p = dump(t)
off, msg = one_line_error(p, t, 5)
assert off == starts[1], (off, starts)
assert p.stdout.splitlines() == want[:2], p.stdout
flip = bytearray(data)
flip[starts[2] + 5] ^= 0x80     # segment header field: header checksum
t = write("flip2.trc", bytes(flip))
off, msg = one_line_error(dump(t), t, 5)
assert off == starts[2] and "checksum" in msg, msg

print("test_dump: ok")
