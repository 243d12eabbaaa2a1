-- modules: the mapped files of process :pid by address, for
-- MAPPED_LIBRARIES and pprof mappings.
SELECT path, build_id, start, end, file_offset, perms
  FROM modules
 WHERE pid = :pid
 ORDER BY start, id;
