-- 0003-meta-canon: which canonical names of a run are job metadata (records of phase "meta":
-- timings, throughput, memory, consumed samples, batch size, progress). They describe the job, not
-- its numerics, and differ between frameworks and from run to run, so 'align report' leaves them out
-- unless asked (--all). Filled by ingest, inside each file's transaction. STRICT; foreign keys on.

CREATE TABLE meta_canon (
  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
  canon  TEXT NOT NULL,                  -- record.canon of a record whose phase is "meta"
  PRIMARY KEY (run_id, canon)
) STRICT, WITHOUT ROWID;

-- Databases ingested before this migration: their meta records are already there.
INSERT OR IGNORE INTO meta_canon(run_id, canon) SELECT DISTINCT run_id, canon FROM record WHERE phase = 'meta';
