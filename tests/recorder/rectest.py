"""rectest - shared helpers of the recorder tests: run a program under
libheapreel.so, decode its trace with trace-dump, and answer questions about it
(events per kind / fn / size, stacks, modules, threads, symbolized call
sites). Every helper fails by raising AssertionError with what was wrong."""
import os
import re
import shutil
import subprocess

import hrtest

EVENT_KINDS = ("alloc", "free", "realloc")


def need(path, what):
    if not os.path.exists(path):
        hrtest.skip("%s not built (%s)" % (what, path))


def need_tools():
    need(hrtest.LIBREC, "libheapreel.so")
    need(hrtest.TRACE_DUMP, "trace-dump")


def run_plain(argv, **kw):
    """The program without the recorder (for output comparisons)."""
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def record(argv, trace, env=None, check=True, **kw):
    return hrtest.record(argv, trace, env=env, check=check, **kw)


def parse_line(line):
    """One trace-dump line -> dict: 'kind', 'line' (the raw text) and its
    key=value fields; numbers become ints (0x... as hex)."""
    words = line.split()
    if not words:
        return None
    r = {"kind": words[0], "line": line}
    rest = line[len(words[0]):].strip()
    for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', rest):
        k, v = m.group(1), m.group(2)
        if v.startswith('"'):
            v = v[1:-1]
        else:
            try:
                v = int(v, 0)
            except ValueError:
                pass
        r[k] = v
    return r


def dump(trace):
    need(hrtest.TRACE_DUMP, "trace-dump")
    out = hrtest.run([hrtest.TRACE_DUMP, trace]).stdout
    recs = [parse_line(l) for l in out.splitlines()]
    return [r for r in recs if r]


class Trace:
    """A decoded trace with indexes the tests use."""

    def __init__(self, path):
        self.path = path
        self.recs = dump(path)
        self.summary = hrtest.summary(path)
        self.events = [r for r in self.recs if r["kind"] in EVENT_KINDS]
        self.nodes = {r["id"]: (r["parent"], r["ip"]) for r in self.recs if r["kind"] == "stack"}
        self.modules = [r for r in self.recs if r["kind"] == "module"]
        self.threads = [r for r in self.recs if r["kind"] == "thread"]
        self.marks = [r for r in self.recs if r["kind"] == "mark"]
        assert any(r["kind"] == "end" for r in self.recs), "%s has no END record" % path

    def allocs(self, size=None, fn=None):
        """ALLOC and REALLOC records (a REALLOC allocates its new block)."""
        return [r for r in self.events if r["kind"] in ("alloc", "realloc")
                and (size is None or r["size"] == size) and (fn is None or r["fn"] == fn)]

    def frees(self):
        return [r for r in self.events if r["kind"] == "free"]

    def stack(self, sid):
        """ips of stack sid, innermost (the call site) first."""
        ips = []
        while sid:
            assert sid in self.nodes, "stack node %d missing from %s" % (sid, self.path)
            parent, ip = self.nodes[sid]
            ips.append(ip)
            assert parent < sid, "node %d has parent %d >= itself" % (sid, parent)
            sid = parent
        return ips

    def module_of(self, ip):
        for m in self.modules:
            if m["addr"] <= ip < m["addr"] + m["size"]:
                return m
        return None

    def stats(self):
        """The recorder's closing heapreel.stats MARK as a dict of ints."""
        for m in self.marks:
            if m["line"].split("label=", 1)[-1].startswith("heapreel.stats "):
                return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m["line"].split("label=", 1)[1])}
        raise AssertionError("%s has no heapreel.stats mark" % self.path)


def symbolize(trace, ip):
    """Function name of return address ip via addr2line, or None when
    addr2line is missing or the module is unknown."""
    m = trace.module_of(ip)
    if m is None or not shutil.which("addr2line"):
        return None
    rel = ip - 1 - (m["addr"] - m["offset"])
    p = subprocess.run(["addr2line", "-f", "-e", m["path"], hex(rel)], capture_output=True, text=True)
    return p.stdout.split("\n")[0] if p.returncode == 0 else None


def one_stack_per_site(trace, sizes):
    """Every size in `sizes` comes from one call site: all its allocations
    share one stack id, and different sizes have different stack ids.
    Returns {size: stack id}."""
    ids = {}
    for size in sizes:
        stacks = {r["stack"] for r in trace.allocs(size=size)}
        assert len(stacks) == 1, "size %d: %d stack ids %s (expected 1)" % (size, len(stacks), stacks)
        ids[size] = stacks.pop()
        assert ids[size] != 0, "size %d: empty stack" % size
    assert len(set(ids.values())) == len(ids), "sites share stack ids: %s" % ids
    return ids
