-- counter_at: the last sample of counter :name of process :pid at or before
-- :t (its value holds until the next): when it was read, and the value.
SELECT t, value
  FROM counters
 WHERE pid = :pid AND name = :name AND t <= :t
 ORDER BY t DESC
 LIMIT 1;
