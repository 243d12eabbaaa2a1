-- hist: the size and thread of each allocation of process :pid made in
-- (:t1, :t2] and, when :live is 1, still live at :t2, for q_histogram to
-- count per exact size. Reads the process's allocations once: sizes are in
-- no checkpoint.
SELECT size, tid
  FROM allocations
 WHERE pid = :pid AND t_alloc > :t1 AND t_alloc <= :t2
   AND (:live = 0 OR t_free IS NULL OR t_free > :t2);
