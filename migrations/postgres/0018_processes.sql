-- The process registry (`cairn workers`): a row per live process with what
-- it can execute, so a claim takes only runs the claiming process can
-- execute and a runnable run nobody can execute shows as blocked.
--
-- `crews.needs_code`: a version with Rust agents (`kind = "rust"`), which
-- only a process that registered it can execute; every other version runs
-- from its stored definition anywhere.
ALTER TABLE crews ADD COLUMN needs_code BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE crews SET needs_code = TRUE WHERE EXISTS
  (SELECT 1 FROM jsonb_array_elements(crews.definition -> 'agents') a
   WHERE a ->> 'kind' = 'rust');
-- A process's row lives while it beats (`expires_at`, one lease ahead) and
-- is deleted when it stops; `process_crews` is what it registered.
CREATE TABLE processes (
    id          TEXT PRIMARY KEY,
    host        TEXT NOT NULL,
    pid         BIGINT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    beat_at     TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE TABLE process_crews (
    process     TEXT NOT NULL REFERENCES processes (id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL REFERENCES crews (fingerprint),
    PRIMARY KEY (process, fingerprint)
);
CREATE INDEX process_crews_by_crew ON process_crews (fingerprint);
-- When a `run_blocked` event was written for the run's current stall
-- (cleared by its next claim), so the event is written once.
ALTER TABLE runs ADD COLUMN blocked_at TIMESTAMPTZ;
CREATE INDEX runs_by_crew ON runs (crew_fingerprint);
