-- threads: the threads of process :pid with their names, by first
-- allocation (threads that never allocated last), then tid.
SELECT tid, name, t_first, t_last
  FROM threads
 WHERE pid = :pid
 ORDER BY t_first IS NULL, t_first, tid;
