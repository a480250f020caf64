-- 0002-bisect: the trials of 'align bisect', cached by environment so that rerunning a bisect resumes
-- without running the subsets it already knows. STRICT; foreign keys are enforced.

-- One trial: the command run under the good environment with some switches at their bad value.
CREATE TABLE bisect_trial (
  bisect     TEXT NOT NULL,              -- sha256 of the command argv, the good environment, --trace-glob
  env        TEXT NOT NULL,              -- sha256 of the trial's environment overrides (sorted KEY=VALUE)
  command    TEXT NOT NULL,              -- JSON array: the command as typed
  switches   TEXT NOT NULL,              -- JSON array: the switch set at its bad value ("KEY=V", "KEY unset")
  verdict    TEXT NOT NULL CHECK (verdict IN ('same', 'diverges', 'unusable')),
  reason     TEXT,                       -- unusable: why (exit status, signal, timeout, no trace)
  timeout_s  REAL,                       -- --timeout in force; a timed-out trial is retried under a longer one
  first_diff TEXT,                       -- JSON object: the first divergent record (diverges)
  n_diff     INTEGER,                    -- records that differ from the baseline
  compared   TEXT,                       -- JSON: the baseline run and metrics the verdict is relative to
  run_id     INTEGER REFERENCES run(id) ON DELETE SET NULL,
  run_name   TEXT,                       -- bisect:<hash>, or the run that already held identical traces
  duration   REAL NOT NULL,              -- seconds the command ran
  created    TEXT NOT NULL,              -- UTC ISO-8601
  PRIMARY KEY (bisect, env)
) STRICT;
