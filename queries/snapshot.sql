-- snapshot: the live set of process :pid at instant :t, as rows to sum per
-- stack_id: (stack_id, live_objects, live_bytes, alloc_objects, alloc_bytes).
-- = the nearest checkpoint at or before :t (:ckpt, -1 if none)
-- + allocations after it (id in (:alo, :ahi]) made at or before :t: all count
--   as allocated, those not freed by :t as live (an alloc at :t is live at :t)
-- - frees after it at or before :t of allocations the checkpoint already
--   holds (a free at :t is gone at :t): profile.c adds those, from
--   free_blocks.
-- :ahi is the last allocation id at or before :t (found by rowid bisection,
-- never beyond the next checkpoint), so the table is read as a short rowid
-- range, never scanned whole; the time test is then always true and only
-- guards against an inconsistent database.
SELECT stack_id, live_objects, live_bytes, alloc_objects, alloc_bytes
  FROM checkpoints
 WHERE checkpoint_id = :ckpt
UNION ALL
SELECT stack_id,
       t_free IS NULL OR t_free > :t,
       CASE WHEN t_free IS NULL OR t_free > :t THEN size ELSE 0 END,
       1, size
  FROM allocations
 WHERE id > :alo AND id <= :ahi AND t_alloc <= :t AND pid = :pid;
