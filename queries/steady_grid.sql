-- steady_grid: allocations of process :pid with ids in (:alo, :ahi], each as
-- (stack_id, size, t_alloc, t_free, temporary): the one read from which
-- q_steady_grid answers the steady windows between every two instants of a
-- grid (the rows made in (t[0], t[n-1]], bounded by ids as in steady.sql)
-- and, when asked, the temporary allocations (every row of the process:
-- temporary.sql's rows, unbounded), instead of a read for each.
SELECT stack_id, size, t_alloc, t_free, temporary
  FROM allocations
 WHERE id > :alo AND id <= :ahi AND pid = :pid;
