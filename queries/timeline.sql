-- timeline: live bytes/objects per time bucket of process :pid.
SELECT t, live_bytes, live_objects, max_bytes, allocs, frees
  FROM timeline
 WHERE pid = :pid
 ORDER BY t;
