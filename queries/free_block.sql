-- free_block: one row of free_blocks (schema.sql says how it is packed);
-- frees.c decodes it.
SELECT data FROM free_blocks WHERE id = :row;
