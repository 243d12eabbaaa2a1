-- processes: every traced process, the default (first started) first.
SELECT pid, ppid, exe, cmdline, t_start, t_end, sample_period,
       peak_t, peak_bytes, peak_objects, lost_events, proc
  FROM processes
 ORDER BY t_start, pid;
