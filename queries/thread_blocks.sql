-- thread_blocks: every allocation of process :pid in allocation order, with
-- its thread, for the thread filter (tfilter.c keeps the chosen threads'):
-- the checkpoints and free_blocks know no thread, so a filtered answer is
-- computed from these rows.
SELECT tid, t_alloc, t_free, size, stack_id, temporary
  FROM allocations
 WHERE pid = :pid
 ORDER BY id;
