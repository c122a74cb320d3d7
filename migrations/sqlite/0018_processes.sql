-- As PostgreSQL's: the process registry and blocked runs.
ALTER TABLE crews ADD COLUMN needs_code INTEGER NOT NULL DEFAULT 0;
UPDATE crews SET needs_code = 1 WHERE EXISTS
  (SELECT 1 FROM json_each(crews.definition, '$.agents') a
   WHERE json_extract(a.value, '$.kind') = 'rust');
CREATE TABLE processes (
    id          TEXT PRIMARY KEY NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    started_at  TEXT NOT NULL,
    beat_at     TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE TABLE process_crews (
    process     TEXT NOT NULL REFERENCES processes (id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL REFERENCES crews (fingerprint),
    PRIMARY KEY (process, fingerprint)
);
CREATE INDEX process_crews_by_crew ON process_crews (fingerprint);
ALTER TABLE runs ADD COLUMN blocked_at TEXT;
CREATE INDEX runs_by_crew ON runs (crew_fingerprint);
