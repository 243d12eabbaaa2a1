-- free_time: the time of a free, which is its allocation's t_free; the
-- snapshot bisects free numbers with it (they ascend with that time).
SELECT t_free FROM allocations WHERE id = :alloc_id;
