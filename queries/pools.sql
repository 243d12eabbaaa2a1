-- pools: the pools of process :pid (schema.sql pools), in creation order.
SELECT id, name FROM pools WHERE pid = :pid ORDER BY id;
