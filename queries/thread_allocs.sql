-- thread_allocs: how many allocations each thread of process :pid made.
-- Reads the process's allocations once: there is no index by thread.
SELECT tid, count(*), min(t_alloc), max(t_alloc)
  FROM allocations
 WHERE pid = :pid
 GROUP BY tid;
