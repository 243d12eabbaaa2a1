"""fixture - small heapreel databases written by hand for the query tests.

A Fixture is filled with processes, stacks and allocation lifetimes, then
finish() writes what trace-import would: allocations in t_alloc order,
frees in t_free order, checkpoints at chosen instants, the timeline, peaks
and meta, from importer/schema.sql. brute() answers every question by
brute force, so tests can compare trace-snap with an independent answer.
"""
import os
import sqlite3

import hrtest

SCHEMA = os.path.join(hrtest.SRC, "importer", "schema.sql")
BUCKET_NS = 1000000
FREE_BLOCK = 2          # frees per free_blocks row: most snapshots span rows


class Proc:
    # What its answers lack (schema version 4): set these before finish().
    LACKS = ("lost_events", "t_loss", "damaged", "t_damaged", "unknown_frees", "fork_t",
             "inherited")

    def __init__(self, pid, exe, sample_period, t_start, t_end):
        self.pid, self.exe, self.sample_period = pid, exe, sample_period
        self.t_start, self.t_end = t_start, t_end
        self.ppid = 1
        self.marks = []
        self.pools = []           # (id, name): the pools table's rows
        self.modules = []
        self.threads = []         # (tid, name): the threads table's rows
        self.lost_events = self.damaged = self.unknown_frees = self.inherited = 0
        self.t_loss = self.t_damaged = self.fork_t = None


class Fixture:
    def __init__(self, path):
        self.path = path
        self.procs = {}
        self.frames = {}          # (ip, name, file, line, depth) -> id
        self.nodes = {}           # (parent, frame id) -> node id
        self.allocs = []          # dicts
        self.ckpt_times = {}      # pid -> [t]

    def process(self, pid, exe="/opt/app/bin/app", sample_period=0, t_start=0,
                t_end=10 * 10**9):
        p = Proc(pid, exe, sample_period, t_start, t_end)
        self.procs[pid] = p
        return p

    def stack(self, *frames):
        """frames leaf first: (ip, name) or (ip, name, file, line, depth)."""
        parent = None
        for fr in reversed(frames):
            ip, name = fr[0], fr[1]
            file, line, depth = (fr[2], fr[3], fr[4]) if len(fr) > 2 else ("app.c", 1, 0)
            key = (ip, name, file, line, depth)
            fid = self.frames.setdefault(key, len(self.frames) + 1)
            nid = self.nodes.setdefault((parent, fid), len(self.nodes) + 1)
            parent = nid
        return parent

    def alloc(self, pid, t, size, stack, t_free=None, tid=1, temporary=0, kind=0, pool=0):
        self.allocs.append(dict(pid=pid, t_alloc=t, t_free=t_free, size=size,
                                stack=stack, tid=tid, temporary=temporary,
                                kind=kind, pool=pool, seq=len(self.allocs)))

    def checkpoints(self, pid, times):
        self.ckpt_times[pid] = sorted(times)

    # ---- brute force ------------------------------------------------------
    def state(self, pid, t, pools=None):
        """stack -> [inuse_n, inuse_b, alloc_n, alloc_b] at instant t; pools:
        only the custom blocks of these pool ids."""
        st = {}
        for a in self.allocs:
            if a["pid"] != pid or a["t_alloc"] > t:
                continue
            if pools is not None and (a["kind"] != 2 or a["pool"] not in pools):
                continue
            r = st.setdefault(a["stack"], [0, 0, 0, 0])
            r[2] += 1
            r[3] += a["size"]
            if a["t_free"] is None or a["t_free"] > t:
                r[0] += 1
                r[1] += a["size"]
        return {k: v for k, v in st.items() if any(v)}

    def live_bytes(self, pid, t):
        return sum(v[1] for v in self.state(pid, t).values())

    def peak(self, pid):
        """(t, bytes, objects): the first instant of maximum live bytes."""
        best = (0, -1, 0)
        times = sorted({a["t_alloc"] for a in self.allocs if a["pid"] == pid})
        for t in times:
            st = self.state(pid, t)
            b = sum(v[1] for v in st.values())
            if b > best[1]:
                best = (t, b, sum(v[0] for v in st.values()))
        return best

    # ---- writing ------------------------------------------------------------
    def finish(self, meta_over=None, complete=True):
        if os.path.exists(self.path):
            os.unlink(self.path)
        db = sqlite3.connect(self.path)
        with open(SCHEMA) as f:
            db.executescript(f.read())
        allocs = sorted(self.allocs, key=lambda a: (a["t_alloc"], a["seq"]))
        for i, a in enumerate(allocs, 1):
            a["id"] = i
            db.execute("INSERT INTO allocations(id,t_alloc,t_free,size,stack_id,tid,pid,"
                       "addr,temporary,kind,pool_id) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                       (i, a["t_alloc"], a["t_free"], a["size"], a["stack"], a["tid"],
                        a["pid"], 0x1000 + 16 * i, a["temporary"], a["kind"], a["pool"]))
        frees = sorted((a for a in allocs if a["t_free"] is not None),
                       key=lambda a: (a["t_free"], a["id"]))
        proc = {pid: k for k, pid in enumerate(sorted(self.procs))}
        for i, a in enumerate(frees, 1):
            a["free_id"] = i
        db.executemany("INSERT INTO free_blocks VALUES(?,?)", hrtest.pack_frees(
            [(a["id"], a["size"], a["stack"], proc[a["pid"]]) for a in frees], FREE_BLOCK))
        for (ip, name, file, line, depth), fid in self.frames.items():
            db.execute("INSERT INTO frames(id,ip,function,file,line,inline_depth) "
                       "VALUES(?,?,?,?,?,?)", (fid, ip, name, file, line, depth))
        for (parent, fid), nid in self.nodes.items():
            db.execute("INSERT INTO stacks VALUES(?,?,?)", (nid, parent, fid))
        ck = 0
        for pid, p in sorted(self.procs.items()):
            pk = self.peak(pid)
            db.execute("INSERT INTO processes(pid,ppid,exe,cmdline,trace_path,t_start,t_end,"
                       "sample_period,peak_t,peak_bytes,peak_objects,proc,%s) "
                       "VALUES(?,?,?,?,?,?,?,?,?,?,?,?%s)"
                       % (",".join(Proc.LACKS), ",?" * len(Proc.LACKS)),
                       (pid, p.ppid, p.exe, p.exe, "/tmp/x.trc", p.t_start, p.t_end,
                        p.sample_period, pk[0], max(pk[1], 0), pk[2], proc[pid])
                       + tuple(getattr(p, k) for k in Proc.LACKS))
            for tid, name in p.threads:
                mine = [a["t_alloc"] for a in allocs if a["pid"] == pid and a["tid"] == tid]
                db.execute("INSERT INTO threads(pid,tid,name,t_first,t_last) VALUES(?,?,?,?,?)",
                           (pid, tid, name, min(mine, default=None), max(mine, default=None)))
            for t, label in p.marks:
                db.execute("INSERT INTO marks VALUES(?,?,?)", (pid, t, label))
            for pool_id, name in p.pools:
                db.execute("INSERT INTO pools VALUES(?,?,?)", (pid, pool_id, name))
            for m in p.modules:
                db.execute("INSERT INTO modules(pid,path,build_id,start,end,file_offset,"
                           "perms,t_load) VALUES(?,?,?,?,?,?,?,0)", (pid,) + m)
            for t in self.ckpt_times.get(pid, []):
                ck += 1
                aid = max([a["id"] for a in allocs if a["t_alloc"] <= t] or [0])
                fid = max([a["free_id"] for a in frees if a["t_free"] <= t] or [0])
                db.execute("INSERT INTO checkpoint_index VALUES(?,?,?,?,?)",
                           (ck, pid, t, aid, fid))
                for stack, v in sorted(self.state(pid, t).items()):
                    db.execute("INSERT INTO checkpoints VALUES(?,?,?,?,?,?)",
                               (ck, stack, v[1], v[0], v[3], v[2]))
            for t in range(p.t_start, p.t_end + 1, BUCKET_NS * 1000):
                st = self.state(pid, t + BUCKET_NS * 1000 - 1)
                db.execute("INSERT INTO timeline VALUES(?,?,?,?,?,0,0)",
                           (pid, t, sum(v[1] for v in st.values()),
                            sum(v[0] for v in st.values()), sum(v[1] for v in st.values())))
        meta = {"format": "heapreel", "schema_version": 4, "t0_mono_ns": 0,
                "frees": len(frees), "free_block": FREE_BLOCK,
                "duration_ns": max(p.t_end for p in self.procs.values()),
                "checkpoint_interval": 4, "timeline_bucket_ns": BUCKET_NS * 1000}
        meta.update(meta_over or {})
        if complete:
            meta["complete"] = 1
        for k, v in meta.items():
            if v is not None:
                db.execute("INSERT INTO meta VALUES(?,?)", (k, v))
        db.commit()
        db.close()


def parse_heap(text):
    """.heap text -> (header type, {tuple(addresses): [in_n, in_b, al_n, al_b]}, maps)."""
    head, _, maps = text.partition("\n\nMAPPED_LIBRARIES:\n")
    lines = head.split("\n")
    hdr = lines[0]
    assert hdr.startswith("heap profile: "), hdr
    typ = hdr.rsplit("@ ", 1)[1]
    rows = {}
    tot = [0, 0, 0, 0]
    for l in lines[1:]:
        nums, _, addrs = l.partition("] @ ")
        a, b = nums.split("[")
        n1, b1 = [int(x) for x in a.replace(":", " ").split()]
        n2, b2 = [int(x) for x in b.replace(":", " ").split()]
        key = tuple(addrs.split())
        assert key not in rows, l
        rows[key] = [n1, b1, n2, b2]
        for i, v in enumerate((n1, b1, n2, b2)):
            tot[i] += v
    hn = hdr[len("heap profile: "):].split("@")[0].replace("[", " ").replace("]", " ")
    assert [int(x) for x in hn.replace(":", " ").split()] == tot, (hdr, tot)
    return typ, rows, maps


# ---- the .pb.gz protobuf, decoded for the tests ------------------------------
def _pb_varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i


def pb_fields(b):
    """message bytes -> [(field, value)] (ints or bytes)."""
    out, i = [], 0
    while i < len(b):
        key, i = _pb_varint(b, i)
        if key & 7 == 0:
            v, i = _pb_varint(b, i)
        elif key & 7 == 2:
            n, i = _pb_varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError("unexpected wire type %d" % (key & 7))
        out.append((key >> 3, v))
    return out


def pb_packed(b):
    """packed repeated int64 -> [int]."""
    out, i = [], 0
    while i < len(b):
        v, i = _pb_varint(b, i)
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def pb_one(msg, num, default=None):
    """the first value of field num of a message."""
    vals = [v for f, v in pb_fields(msg) if f == num]
    return vals[0] if vals else default


S = 10**9
MS = 10**6
EXE = "/opt/app/bin/app"


def standard(path, sample_period=0, ckpts=(2 * S, 4 * S, 6 * S)):
    """The hand-checked fixture: process 100 over 0..10 s.
    small: 10 x 16 B at 1 s + i ms, i < 5 freed at 3 s + i ms
    big:   3 x 4096 B at 2 s, 2.001 s, 2.002 s, never freed
    mid:   2 x 4096 B (through mid()) at 4 s (freed at 6 s) and 4 s + 1 ns
    inl:   4 x 100 B at 5 s + i ns through an inlined helper, freed at
           5.5 s + i ns, temporary
    Checkpoints at 2 s, 4 s, 6 s (instants of events); marks at 3 s and 7 s.
    Returns (fixture, {name: stack id}, {name: .heap address tuple})."""
    f = Fixture(path)
    p = f.process(100, exe=EXE, sample_period=sample_period)
    p.marks = [(3 * S, "after-alloc"), (7 * S, "late"), (8 * S, "late")]
    p.modules = [(EXE, "abcd", 0x400000, 0x402000, 0, "r-xp"),
                 ("/usr/lib/x86_64-linux-gnu/libc.so.6", None, 0x7f0000000000,
                  0x7f0000100000, 0x26000, "r-xp")]
    start = (0x401000, "_start", "start.S", 1, 0)

    def main(ip):
        return (ip, "main", "app.c", 10, 0)
    st = {
        "small": f.stack((0x401010, "alloc_small", "app.c", 3, 0), main(0x401100), start),
        "big": f.stack((0x401020, "alloc_big", "app.c", 5, 0), main(0x401110), start),
        "mid": f.stack((0x401020, "alloc_big", "app.c", 5, 0), (0x401200, "mid", "app.c", 7, 0),
                       main(0x401120), start),
        "inl": f.stack((0x401300, "helper", "h.h", 2, 1), (0x401300, "outer", "app.c", 20, 0),
                       main(0x401130), start),
    }
    # the leaf minus one (queries/heap.c: the Perl readers take it as is)
    addrs = {
        "small": ("0x40100f", "0x401100", "0x401000"),
        "big": ("0x40101f", "0x401110", "0x401000"),
        "mid": ("0x40101f", "0x401200", "0x401120", "0x401000"),
        "inl": ("0x4012ff", "0x401130", "0x401000"),
    }
    for i in range(10):
        f.alloc(100, S + i * MS, 16, st["small"], t_free=(3 * S + i * MS) if i < 5 else None)
    for i in range(3):
        f.alloc(100, 2 * S + i * MS, 4096, st["big"])
    f.alloc(100, 4 * S, 4096, st["mid"], t_free=6 * S)
    f.alloc(100, 4 * S + 1, 4096, st["mid"])
    for i in range(4):
        f.alloc(100, 5 * S + i, 100, st["inl"], t_free=5 * S + S // 2 + i, temporary=1)
    f.checkpoints(100, list(ckpts))
    f.finish()
    return f, st, addrs
