-- pool_blocks: every custom block of process :pid in allocation order, with
-- its thread and pool, for the pool filter (tfilter.c keeps the chosen
-- pools'): a stack's custom blocks may be of several pools, so a pool's
-- answer is computed from these rows, not from the checkpoints.
SELECT tid, t_alloc, t_free, size, stack_id, temporary, pool_id
  FROM allocations
 WHERE pid = :pid AND kind = 2
 ORDER BY id;
