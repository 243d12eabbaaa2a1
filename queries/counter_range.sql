-- counter_range: the smallest and largest value of counter :name of process
-- :pid sampled in (:t1, :t2], and how many samples that is.
SELECT min(value), max(value), count(*)
  FROM counters
 WHERE pid = :pid AND name = :name AND t > :t1 AND t <= :t2;
