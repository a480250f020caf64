-- 0004-run-dedup-calls: content dedup belongs to a run, and records carry the call they belong to.
-- STRICT; foreign keys are enforced (the migration runs with them off: rebuilding `source` must not
-- cascade into `record`; store.c checks foreign_key_check afterwards).

-- Identical bytes into another run are ingested (two identical reruns must be comparable); the same
-- bytes into the same run stay a no-op. The UNIQUE constraint moves from sha256 to (run_id, sha256),
-- which SQLite can only do by rebuilding the table (ids are kept, so record.source_id stays valid).
CREATE TABLE source_new (
  id       INTEGER PRIMARY KEY,
  run_id   INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
  path     TEXT NOT NULL,
  sha256   TEXT NOT NULL,                -- of the decompressed content
  format   TEXT NOT NULL,
  bytes    INTEGER NOT NULL,             -- decompressed size
  records  INTEGER NOT NULL,
  warnings TEXT,                         -- JSON array of "file:line: what" strings
  ingested TEXT NOT NULL,
  UNIQUE (run_id, sha256)
) STRICT;
INSERT INTO source_new SELECT id, run_id, path, sha256, format, bytes, records, warnings, ingested FROM source;
DROP TABLE source;
ALTER TABLE source_new RENAME TO source;
CREATE INDEX source_sha256 ON source(sha256);

-- The call a record belongs to: records of one invocation of an op or module (its inputs and its
-- outputs) share `call` within (run, rank, step, micro); `io` says which side of the call the record
-- is. A call whose inputs are all bitwise-equal and whose output differs is a root-cause candidate.
-- NULL: not linked (loss lines, metrics, traces without the link).
ALTER TABLE record ADD COLUMN call TEXT;
ALTER TABLE record ADD COLUMN io TEXT CHECK (io IN ('in', 'out'));
