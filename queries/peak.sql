-- peak: the instant of maximum live bytes of process :pid, found exactly by
-- the importer while replaying; the profile is the snapshot at that instant.
SELECT peak_t, peak_bytes, peak_objects
  FROM processes
 WHERE pid = :pid;
