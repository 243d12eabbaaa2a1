-- temporary: allocations of process :pid freed by the thread that made them
-- with no other allocation by that thread in between (computed by the
-- importer; per thread, unlike heaptrack's rule: README "trace-snap"), as
-- (stack_id, size). Reads the whole
-- table once: the flag can be anywhere.
SELECT stack_id, size
  FROM allocations
 WHERE temporary = 1 AND pid = :pid;
