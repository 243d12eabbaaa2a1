-- processes: every traced process, the default (first started) first, with
-- what its answers may lack (schema version 4).
SELECT pid, ppid, exe, cmdline, t_start, t_end, sample_period,
       peak_t, peak_bytes, peak_objects, lost_events, proc,
       t_loss, damaged, t_damaged, unknown_frees, fork_t, inherited
  FROM processes
 ORDER BY t_start, pid;
