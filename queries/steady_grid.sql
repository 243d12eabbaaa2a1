-- steady_grid: allocations of process :pid made in (:t1, :t2], each as
-- (stack_id, size, t_alloc, t_free): the one read from which q_steady_grid
-- answers the steady windows between every two instants of a grid.
-- :alo/:ahi bound the rows as in steady.sql.
SELECT stack_id, size, t_alloc, t_free
  FROM allocations
 WHERE id > :alo AND id <= :ahi AND t_alloc > :t1 AND t_alloc <= :t2
   AND pid = :pid;
