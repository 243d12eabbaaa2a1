-- steady: allocations of process :pid made in the window (:t1, :t2], each as
-- (stack_id, size, live at :t2). Like jemalloc's prof.active window: what the
-- window allocated and kept. :alo/:ahi are the last allocation ids at or
-- before :t1 and :t2 (rowid bisection), so only the window is read; the
-- time tests then only guard against an inconsistent database.
SELECT stack_id, size, t_free IS NULL OR t_free > :t2
  FROM allocations
 WHERE id > :alo AND id <= :ahi AND t_alloc > :t1 AND t_alloc <= :t2
   AND pid = :pid;
