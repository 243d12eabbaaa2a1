-- alloc_at: the first allocation at or after rowid :id and its time; the
-- snapshot bisects rowids with it (ids ascend with t_alloc) to find the
-- last allocation at or before an instant without reading the rows between.
SELECT id, t_alloc FROM allocations WHERE id >= :id ORDER BY id LIMIT 1;
