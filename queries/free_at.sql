-- free_at: the first free at or after rowid :id and its time (ids ascend
-- with t_free); bisected like alloc_at.sql.
SELECT id, t_free FROM frees WHERE id >= :id ORDER BY id LIMIT 1;
