-- schema.sql - the database trace-import writes and trace-snap / trace-tui read.
-- It is the contract between importer/ and queries/: tables and columns may be
-- added (bump schema_version if a reader must know), never renamed or removed,
-- except in the snapshots' own table of frees (version 2 took t_free out of
-- it and named the process by processes.proc instead of pid; version 3
-- packed its rows into free_blocks).
-- Documented for users in README.md ("Database schema").
--
-- Times are nanoseconds since meta.t0_mono_ns (the earliest process start of
-- all imported traces), so several processes share one time axis.
-- Sizes are requested sizes in bytes. For sampled traces (processes.sample_period
-- > 0) rows are the sampled allocations; queries unbias.

CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value
) WITHOUT ROWID;
-- keys: format='heapreel', schema_version=4, complete=1 (written last: a
-- database without it is half-written), t0_mono_ns, t0_real_ns, duration_ns,
-- peak_t, peak_bytes, peak_objects, peak_pid (for the run's program: the
-- program the first process ran last, after its execs; per-process peaks are
-- in processes), events, allocations, unmatched_frees, lost_events,
-- damaged (1 if a trace was damaged/truncated and only its prefix imported),
-- checkpoint_interval (allocations between checkpoints), importer_version,
-- counter_values_unnamed (SAMPLE values whose counter the trace never
-- named: not in counters).

CREATE TABLE processes(
  pid           INTEGER PRIMARY KEY,
  ppid          INTEGER,
  exe           TEXT,        -- exact executable path (as /proc/self/exe): MAPPED_LIBRARIES needs it
  cmdline       TEXT,
  trace_path    TEXT,
  t_start       INTEGER,
  t_end         INTEGER,
  sample_period INTEGER NOT NULL DEFAULT 0,
  peak_t        INTEGER,
  peak_bytes    INTEGER,
  peak_objects  INTEGER,
  lost_events   INTEGER NOT NULL DEFAULT 0,
  recovered     INTEGER NOT NULL DEFAULT 0, -- events taken from a leftover .ring
  proc          INTEGER NOT NULL,           -- 0, 1, ...: the number free_blocks name it by
  -- schema version 4: what this process's answers may lack (see below)
  t_loss        INTEGER,                    -- earliest instant an event may be missing from (a lost
                                            -- one, or a missed free); NULL: none lost
  damaged       INTEGER NOT NULL DEFAULT 0, -- 1: its trace was damaged, only the part before t_damaged read
  t_damaged     INTEGER,                    -- last instant read before the damage
  unknown_frees INTEGER NOT NULL DEFAULT 0, -- frees, after a stop or unrouted calls, of blocks the trace never saw
  fork_t        INTEGER,                    -- a forked child: the instant of the fork; else NULL
  inherited     INTEGER NOT NULL DEFAULT 0  -- a forked child: 1 its parent's live set at fork_t is its
                                            -- own (seeded from the parent's trace), 2 unknown (the
                                            -- parent's trace was not imported); 0 otherwise
                                            -- (see "forked children" below)
);

CREATE TABLE threads(
  pid     INTEGER NOT NULL,
  tid     INTEGER NOT NULL,
  name    TEXT,
  t_first INTEGER,
  t_last  INTEGER,
  lost_events INTEGER NOT NULL DEFAULT 0, -- schema version 4: its events counted lost
  PRIMARY KEY(pid, tid)
) WITHOUT ROWID;

CREATE TABLE modules(
  id          INTEGER PRIMARY KEY,
  pid         INTEGER NOT NULL,
  path        TEXT NOT NULL,
  build_id    TEXT,          -- lowercase hex, or NULL
  start       INTEGER NOT NULL,
  end         INTEGER NOT NULL,
  file_offset INTEGER NOT NULL,
  perms       TEXT NOT NULL, -- as in /proc/self/maps, e.g. 'r-xp'
  t_load      INTEGER NOT NULL
);

-- One row per (return address, inline level). An ip whose code was inlined
-- yields several frames: inline_depth 0 is the outermost (real) function,
-- higher depths are the functions inlined into it, innermost last.
CREATE TABLE frames(
  id           INTEGER PRIMARY KEY,
  ip           INTEGER NOT NULL,   -- raw return address as captured
  module_id    INTEGER,            -- NULL if the ip is in no known module
  function     TEXT NOT NULL,      -- demangled name, or 'libfoo.so+0x1234' if unresolved
  file         TEXT,
  line         INTEGER,
  inline_depth INTEGER NOT NULL DEFAULT 0
);

-- The call-stack trie: a stack is its leaf node; walk parent_id to the root
-- (parent_id NULL). Leaf-side nodes are callees. Every frame of an inlined
-- chain is its own node.
CREATE TABLE stacks(
  id        INTEGER PRIMARY KEY,
  parent_id INTEGER,
  frame_id  INTEGER NOT NULL
);

-- One row per allocation lifetime, in allocation order: id ascending means
-- t_alloc non-decreasing (ties broken by import order), across all processes.
-- Every column but t_free is always set. (Not declared NOT NULL: SQLite
-- checks a NOT NULL per column of every row inserted, about 5 % of the
-- import's SQLite work for millions of rows the importer fills itself.)
CREATE TABLE allocations(
  id           INTEGER PRIMARY KEY,
  t_alloc      INTEGER,
  t_free       INTEGER,            -- NULL: never freed (live at the end)
  size         INTEGER,
  stack_id     INTEGER,            -- leaf node in stacks
  tid          INTEGER,
  pid          INTEGER,
  addr         INTEGER,
  from_realloc INTEGER DEFAULT 0,  -- 1: the new block of a realloc (rallocx,
                                   --    xallocx, tc_realloc too; of NULL too)
  temporary    INTEGER DEFAULT 0,  -- 1: freed by the same thread with no other
                                   --    allocation by that thread in between
  kind         INTEGER DEFAULT 0,  -- 0 heap (the allocator's entry points), 1 mmap
                                   -- (an anonymous mapping of the program), 2 custom
  pool_id      INTEGER DEFAULT 0   -- kind custom: pools.id of its pool (of process
                                   -- pid), 0 = none (rec_alloc); else 0
);
-- allocations.kind: an integer, so a heap row costs one byte and the
-- importer's bulk insert stays integers only. The mappings' rows are kept
-- apart from the allocator's: a program's anonymous mmap, mremap's new
-- range (from_realloc 1), and each piece a partial munmap, mremap or
-- MAP_FIXED mapping leaves of one (t_alloc: that instant; the region's end
-- is a free at that instant): a snapshot holds exactly what is mapped. They
-- count in checkpoints (per stack) but not in timeline, processes.peak_*
-- or meta.peak_*, which stay the heap's. A stack's rows are of one kind
-- (a call site calls either the allocator or mmap), so the kind of a
-- stack is the kind of its rows: this index lists the stacks that are not
-- heap's, read whole by trace-snap --kind. Added without a schema_version
-- bump: a reader checks that the column exists (none: every row is heap).
CREATE INDEX allocations_kind ON allocations(kind, stack_id) WHERE kind <> 0;

-- A custom allocator's pools (rec_pool_create): id is the recorder's, per
-- process (a forked child's trace names its parent's pools again, with
-- their ids); names need not be unique. A custom block's rows (kind 2) are
-- the blocks the program reported with rec_alloc, rec_realloc or
-- rec_pool_alloc, paired with their ends per pool (a pool's blocks may lie
-- inside heap blocks: both are rows); rec_pool_destroy ends every live
-- block of its pool at that instant. A stack's custom rows may be of
-- several pools, so trace-snap --pool reads the rows (allocations.pool_id),
-- not the checkpoints. Added, with pool_id, without a schema_version bump:
-- a reader checks that the table exists (none: no pools).
CREATE TABLE pools(
  pid  INTEGER NOT NULL,
  id   INTEGER NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY(pid, id)
) WITHOUT ROWID;

-- The free side of allocations, for snapshots: every free, numbered 1, 2, ...
-- in free order (the freed allocations' t_free non-decreasing), so that a
-- time window reads frees sequentially (an index on allocations.t_free would
-- be built from unsorted data: far too slow). Packed meta.free_block frees to
-- a row: a row per free was a third of the import's SQLite work. Row b
-- (from 0) holds frees b * free_block + 1 ... (b + 1) * free_block (the last
-- row fewer), each as four unsigned LEB128 varints (7 bits a byte, low
-- first, high bit = more): alloc_id as the zigzag of its difference from the
-- previous free's in the row (from 0 for the first; zigzag: 2d for d >= 0,
-- -2d - 1 below), then size, stack_id, and proc (processes.proc). A free's
-- time is allocations.t_free of its alloc_id. It holds what a snapshot sums,
-- and no more; trace-snap and trace-tui decode it (queries/frees.c).
CREATE TABLE free_blocks(
  id   INTEGER PRIMARY KEY,
  data BLOB
);

CREATE TABLE marks(
  pid   INTEGER NOT NULL,
  t     INTEGER NOT NULL,
  label TEXT NOT NULL
);

-- Figures of the whole process sampled over time by the recorder (every
-- REC_STATS_MS; README "Counters" lists the names): rss_bytes (always),
-- rss_anon_bytes, rss_file_shmem_bytes, and the allocator's own
-- (glibc.*, jemalloc.*, tcmalloc.*). One row per sample and counter; a
-- value holds from its t until the counter's next row. The key makes "the
-- value at T" (the last row at or before T) and min/max over a window
-- range reads. Added without a schema_version bump (the other tables did
-- not change): a reader that needs it checks that it exists, and says to
-- import again when it does not (trace-snap --stats).
CREATE TABLE counters(
  pid   INTEGER NOT NULL,
  t     INTEGER NOT NULL,            -- when it was read
  name  TEXT NOT NULL,
  value INTEGER NOT NULL,
  PRIMARY KEY(pid, name, t)
) WITHOUT ROWID;

-- Live bytes/objects over time, per process, in fixed buckets of
-- meta.timeline_bucket_ns: the value at the bucket's end and the bucket's max.
CREATE TABLE timeline(
  pid         INTEGER NOT NULL,
  t           INTEGER NOT NULL,      -- bucket start
  live_bytes  INTEGER NOT NULL,      -- at the end of the bucket
  live_objects INTEGER NOT NULL,
  max_bytes   INTEGER NOT NULL,      -- maximum reached inside the bucket
  allocs      INTEGER NOT NULL,      -- allocations in the bucket
  frees       INTEGER NOT NULL,
  PRIMARY KEY(pid, t)
) WITHOUT ROWID;

-- Checkpoints: at instant t, after applying allocations with id <= alloc_id
-- and frees with id <= free_id (all events with time <= t, none after), the
-- per-stack state of one process. A snapshot at T reads the nearest
-- checkpoint at or before T, then allocations with id > alloc_id and
-- t_alloc <= T, and frees with id > free_id and t_free <= T.
CREATE TABLE checkpoint_index(
  id       INTEGER PRIMARY KEY,
  pid      INTEGER NOT NULL,
  t        INTEGER NOT NULL,
  alloc_id INTEGER NOT NULL,
  free_id  INTEGER NOT NULL
);
CREATE TABLE checkpoints(
  checkpoint_id INTEGER NOT NULL,    -- checkpoint_index.id
  stack_id      INTEGER NOT NULL,
  live_bytes    INTEGER NOT NULL,
  live_objects  INTEGER NOT NULL,
  alloc_bytes   INTEGER NOT NULL,    -- cumulative, since the process started
  alloc_objects INTEGER NOT NULL,
  PRIMARY KEY(checkpoint_id, stack_id)
) WITHOUT ROWID;

-- ---- What trace-import guarantees beyond the tables above (schema_version 3) ----
--
-- meta, further keys: frees (frees in free_blocks), free_block (frees per
-- row of free_blocks), missed_frees (an address was allocated again while
-- live: its earlier block is closed at that instant and counted here, and
-- its process's t_loss is at most the start of that block's timeline bucket),
-- recovered_events (taken from leftover .ring files), clamped_times (events
-- whose time went backwards in their thread and were moved forward to keep
-- the global order), timeline_bucket_ns, inherited_blocks (allocations rows
-- forked children got from their parents, in allocations), inherited_frees
-- (frees, by children of inherited 2, of blocks they did not allocate: not
-- in unmatched_frees), frees_before_attach (frees, in a trace started by
-- trace-record -p, of blocks allocated before the attach: not in
-- unmatched_frees), attach_t (only for such a trace of the run's program:
-- the attach's instant, its heapreel.attach mark; its snapshots hold the
-- heap allocated since).
-- format and importer_version are text; every other value is an integer.
--
-- processes: one row per trace. pid is the process id; a later trace of the
-- same pid (a program the process exec'd, or a pid used again) is a process
-- of its own keyed pid + 10000000 * n, n = 1, 2, ... in order of start, and
-- the pid of every other table follows. proc numbers the processes 0, 1, ...
-- in the order trace-import read their traces. t_start = the process's trace start
-- on the common axis (its t0_mono_ns - meta.t0_mono_ns; a bounded trace
-- that wrapped: where its replay from a keyframe is exact, see
-- meta.window_start_ns; a forked child of inherited 1: fork_t); t_end = its
-- END record, else its last event.
-- peak_t is the time of the allocation that first reached peak_bytes
-- (peak_objects = live objects right after it).
--
-- forked children (a trace with a FORK record, trace-format/FORMAT.md):
-- fork_t is the fork on the common axis (its parent's clock; negative when
-- the fork precedes every trace imported). inherited is 1 when the parent's
-- trace is imported and its live set at fork_t is exact (not before a
-- bounded parent's window, not past a damaged tail or a loss, not itself missing what
-- it inherited) and the child's trace did not wrap; else 2. With 1, every
-- block live in the parent at fork_t is an allocations row of the child:
-- t_alloc = fork_t (so ids stay in time order), the parent's size and
-- stack_id, tid = the child's pid, ids in the parent's allocation order;
-- the child's frees of them pair with them, its snapshots and leaks hold
-- them, and they count in its checkpoints' alloc_* as allocations (--top
-- of a child shows them). A grandchild gets the parent's blocks through
-- the child. With 2, the child's frees of blocks it did not allocate are
-- counted in meta.inherited_frees, not unmatched_frees, and its snapshots
-- lack the inherited blocks.
--
-- threads: one row per (pid, tid) that had events or a name; t_first/t_last
-- NULL for a named thread that never allocated.
--
-- frames: frames.ip is the raw return address; symbols are looked up at ip - 1
-- (the call instruction). function is demangled; an ip that could not be
-- resolved is named 'FILE+0xOFFSET' (FILE = basename of its module, OFFSET =
-- ip - modules.start + modules.file_offset) or '0xIP' outside every module.
-- file is absolute when the compile directory is known. Each trace has one
-- frame '[unknown]' (ip 0, module_id NULL) with a root stack node, used by
-- allocations whose stack was empty or not defined in the trace.
--
-- timeline: for each process, one row per bucket from the bucket of its first
-- event to the bucket of its last; t = bucket index * meta.timeline_bucket_ns
-- (= ceil(duration_ns / 2000)).
--
-- checkpoints: meta.checkpoint_interval is the minimum spacing; a checkpoint
-- is taken once at least max(checkpoint_interval, 8 * the rows it would write)
-- allocations happened since the previous one (so checkpoints stay a small part
-- of the database however many stacks there are), only between two distinct
-- times, and once more after the last event. Each writes a checkpoint_index row
-- for every process that had events since its previous checkpoint, and one
-- checkpoints row per stack that ever allocated in that process (alloc_objects
-- > 0, live_objects possibly 0). A process's state at a time before its first
-- checkpoint starts from nothing (alloc_id = free_id = 0). Its last
-- checkpoint holds its final state.
-- Bounding a snapshot at T: with c1 the process's last checkpoint with
-- t <= T and c2 its next one (t > T), every allocation with t_alloc <= T not
-- in c1 has id in (c1.alloc_id, c2.alloc_id], and every such free has id in
-- (c1.free_id, c2.free_id]: both are rowid ranges, read in order, no index.
-- No index is created: every table is read through its rowid order.
