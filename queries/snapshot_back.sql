-- snapshot_back: the same live set as snapshot.sql, computed backwards from
-- the NEXT checkpoint (:ckpt at instant :tc) when it is nearer than the
-- previous one, as rows to sum per stack_id:
-- = that checkpoint
-- - allocations after :t up to it (id in (:alo, :ahi]): no longer counted as
--   allocated, nor as live if they were live at :tc
-- + frees after :t up to it of allocations made at or before :t (id <=
--   :alo): live again (profile.c adds those, from free_blocks).
-- :alo is the last allocation id at or before :t, found by rowid bisection.
SELECT stack_id, live_objects, live_bytes, alloc_objects, alloc_bytes
  FROM checkpoints
 WHERE checkpoint_id = :ckpt
UNION ALL
SELECT stack_id,
       -(t_free IS NULL OR t_free > :tc),
       CASE WHEN t_free IS NULL OR t_free > :tc THEN -size ELSE 0 END,
       -1, -size
  FROM allocations
 WHERE id > :alo AND id <= :ahi AND pid = :pid;
