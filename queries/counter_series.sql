-- counter_series: every sample of counter :name of process :pid, in time
-- order.
SELECT t, value
  FROM counters
 WHERE pid = :pid AND name = :name
 ORDER BY t;
