-- counter_names: the names of process :pid's counters, in name order, one
-- index seek each (a skip scan of the counters key: a plain DISTINCT would
-- read every sample).
WITH RECURSIVE n(name) AS (
  SELECT min(name) FROM counters WHERE pid = :pid
  UNION ALL
  SELECT (SELECT min(name) FROM counters WHERE pid = :pid AND name > n.name)
    FROM n WHERE n.name IS NOT NULL
)
SELECT name FROM n WHERE name IS NOT NULL;
