"""The control channel is for the recording user only.

A control directory that is not private (mode 0755, a symlink to a private
directory, owned by someone else) is refused by the recorder (one stderr
line, the program runs on and records) and by trace-ctl. A second user is
refused: trace-ctl run as nobody cannot reach or use root's recorder, and a
connection made as nobody straight to the socket gets "error permission
denied" from the recorder (SO_PEERCRED) without changing anything. The
user tests need root and setpriv; they skip otherwise."""
import os
import shutil
import socket

import ctltest
import hrtest

ctltest.need(ctltest.TRACE_RECORD, ctltest.TRACE_CTL, ctltest.prog("ctl_steps"))
d = hrtest.tmpdir("sec")
NOBODY = hrtest.NOBODY


def tampered(name, make):
    path = os.path.join(d, name)
    make(path)
    env = dict(os.environ, REC_CTL_DIR=path)
    t = os.path.join(d, name + ".trc")
    s = ctltest.Steps(t, env=env)
    p = ctltest.ctl(s.pid, "stop", check=False, env=env)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "refusing" in p.stderr, p.stderr
    s.step()
    err = s.finish()
    assert "control directory %s is not private" % path in err, err
    assert len(ctltest.events(ctltest.dump(t), "alloc", 111)) == 10  # still recording


def wide(path):
    os.mkdir(path)
    os.chmod(path, 0o755)


def link(path):
    os.mkdir(path + ".real", 0o700)
    os.symlink(path + ".real", path)


tampered("wide", wide)
tampered("link", link)
if os.geteuid() == 0:
    def foreign(path):
        os.mkdir(path, 0o700)
        os.chown(path, NOBODY, NOBODY)
    tampered("foreign", foreign)

if os.geteuid() != 0:
    hrtest.skip("second-user tests need root")
setpriv = shutil.which("setpriv")
if not setpriv:
    hrtest.skip("second-user tests need setpriv")
as_nobody = [setpriv, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]

t = os.path.join(d, "own.trc")
s = ctltest.Steps(t)
root_dir = "/tmp/heapreel-0"
# trace-ctl as nobody: its own directory has no socket; pointed at root's,
# it refuses a directory it does not own.
own_env = {k: v for k, v in os.environ.items() if k != "REC_CTL_DIR"}
for env in (own_env, dict(own_env, REC_CTL_DIR=root_dir)):
    p = hrtest.run(as_nobody + [ctltest.TRACE_CTL, str(s.pid), "stop"], check=False, env=env)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr

# Straight to the socket as nobody: root opens it O_PATH, the child drops to
# nobody and connects through /proc/self/fd (the directory's permissions are
# then not in the way, the socket file's are: made 0777 here).
sock = os.path.join(root_dir, "%d.sock" % s.pid)
os.chmod(sock, 0o777)
fd = os.open(sock, os.O_PATH)
r, w = os.pipe()
child = os.fork()
if child == 0:
    try:
        os.close(r)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect("/proc/self/fd/%d" % fd)
        c.sendall(b"stop\n")
        os.write(w, c.recv(512) or b"(closed)")
    except Exception as e:  # reported to the parent through the pipe
        os.write(w, ("exception %r" % e).encode())
    os._exit(0)
os.close(w)
answer = os.read(r, 512).decode()
os.waitpid(child, 0)
assert answer.startswith("error permission denied"), answer
assert ctltest.ctl(s.pid, "status").stdout.startswith("ok state=active")
s.step()
s.finish()
assert len(ctltest.events(ctltest.dump(t), "alloc", 111)) == 10
print("ok")
