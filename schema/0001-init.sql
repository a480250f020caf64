-- 0001-init: runs, their source files, and the observed records.
-- Every table is STRICT; foreign keys are enforced (PRAGMA foreign_keys=ON at open).

-- One ingested run: all sources (files) ingested under one name.
CREATE TABLE run (
  id        INTEGER PRIMARY KEY,
  name      TEXT NOT NULL UNIQUE,        -- --as NAME, or derived from the first file name
  framework TEXT NOT NULL,               -- megatron, paddle, torchtitan, xtuner, align, ...
  format    TEXT NOT NULL,               -- parser that produced the first source
  header    TEXT,                        -- JSON: environment and modes captured from a header
  resumed   INTEGER NOT NULL DEFAULT 0,  -- 1 when a restart repeated steps (later ones win)
  created   TEXT NOT NULL                -- UTC ISO-8601
) STRICT;

-- One input file; its content hash makes re-ingesting the same bytes a no-op.
CREATE TABLE source (
  id       INTEGER PRIMARY KEY,
  run_id   INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
  path     TEXT NOT NULL,
  sha256   TEXT NOT NULL UNIQUE,         -- of the decompressed content
  format   TEXT NOT NULL,
  bytes    INTEGER NOT NULL,             -- decompressed size
  records  INTEGER NOT NULL,
  warnings TEXT,                         -- JSON array of "file:line: what" strings
  ingested TEXT NOT NULL
) STRICT;

-- One observed value (scalar or tensor) of a run.
CREATE TABLE record (
  id         INTEGER PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
  source_id  INTEGER NOT NULL REFERENCES source(id) ON DELETE CASCADE,
  line       INTEGER NOT NULL,           -- 1-based line (or record index) in the source
  rank       INTEGER NOT NULL,
  step       INTEGER NOT NULL,           -- 1-based training step (-1 when none)
  micro      INTEGER NOT NULL,           -- micro-batch within the step (0 when none)
  seq        INTEGER NOT NULL,           -- execution order within (run, rank)
  occ        INTEGER NOT NULL,           -- occurrence of (canon, rank, step, micro) in seq order
  name       TEXT NOT NULL,              -- as written in the source
  canon      TEXT NOT NULL,              -- canonical name after the built-in aliases
  phase      TEXT NOT NULL,              -- fwd, bwd, grad, param, optim, loss, metric, eval
  dtype      TEXT,                       -- fp32, fp64, bf16, fp16, int64, ... (NULL: unknown)
  shape      TEXT,                       -- JSON array, NULL for scalars
  bits       INTEGER,                    -- exact bit pattern in dtype when known
  value      REAL,                       -- parsed value (scalars)
  text       TEXT,                       -- the value as printed
  digits     INTEGER,                    -- significant digits printed (NULL: exact)
  lo         REAL,                       -- interval of reals consistent with the print
  hi         REAL,
  digest     TEXT,                       -- hex digest of the tensor bytes
  digest_alg TEXT,                       -- xxh3t64 (ATF tree digest), md5, crc32, sha256
  stats      TEXT,                       -- JSON object: min, max, mean, norm, ...
  head       TEXT,                       -- JSON array: first elements
  payload    BLOB,                       -- zlib-compressed raw bytes (optional)
  missing    TEXT,                       -- why the value is absent although the key is present
  extra      TEXT,                       -- JSON object of unknown fields, kept verbatim
  superseded INTEGER NOT NULL DEFAULT 0  -- 1 when a later restart re-ran this step
) STRICT;

CREATE UNIQUE INDEX record_order ON record(run_id, rank, seq);
CREATE INDEX record_key ON record(run_id, canon, rank, step, micro, occ);

-- Per (run, rank, step) summary kept by ingest, so a comparison can skip steps whose records are
-- identical without reading them. h = sum (mod 2^64, as a signed integer) of a hash of each
-- non-superseded record's key and value identity (canon, micro, occ, and bits+dtype, or digest, or
-- printed text, or the missing reason); n_exact counts records identified by bits or digest.
CREATE TABLE stepsum (
  run_id  INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
  rank    INTEGER NOT NULL,
  step    INTEGER NOT NULL,
  n       INTEGER NOT NULL,
  n_exact INTEGER NOT NULL,
  h       INTEGER NOT NULL,
  PRIMARY KEY (run_id, rank, step)
) STRICT, WITHOUT ROWID;
