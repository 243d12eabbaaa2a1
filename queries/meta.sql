-- meta: one value of the meta table (format, schema_version, complete, ...).
SELECT value FROM meta WHERE key = :key;
