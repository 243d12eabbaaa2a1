-- marks: the marks of process :pid in time order (ties: recording order).
SELECT t, label
  FROM marks
 WHERE pid = :pid
 ORDER BY t, rowid;
