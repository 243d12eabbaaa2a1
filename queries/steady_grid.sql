-- steady_grid: allocations of process :pid with ids in (:alo, :ahi] (one
-- interval of q_steady_grid's grid, ending at instant :t) that are still live
-- at :t, or temporary, each as (stack_id, size, t_free, temporary). What a
-- window of the grid allocated comes from two snapshots (cumulative counts);
-- only the rows that outlive their interval can be live at a window's end,
-- and the temporary ones are the temporary profile's: a row that is neither
-- (most of them) is filtered here instead of reaching C.
SELECT stack_id, size, t_free, temporary
  FROM allocations
 WHERE id > :alo AND id <= :ahi AND pid = :pid
   AND (t_free IS NULL OR t_free > :t OR temporary = 1);
