-- checkpoints: the checkpoint index of all processes, per process in time
-- order; small (one row per checkpoint interval), kept in memory.
SELECT pid, id, t, alloc_id, free_id
  FROM checkpoint_index
 ORDER BY pid, t, id;
