-- free_at: the first free at or after rowid :id and its time (ids ascend
-- with t_free, which is its allocation's); bisected like alloc_at.sql.
SELECT f.id, a.t_free
  FROM frees f JOIN allocations a ON a.id = f.alloc_id
 WHERE f.id >= :id ORDER BY f.id LIMIT 1;
