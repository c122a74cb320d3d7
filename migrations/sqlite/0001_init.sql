-- Cairn schema, SQLite dialect. Keep in step with migrations/postgres.
-- Times are RFC 3339 UTC text written by the database clock.

CREATE TABLE runs (
    id               TEXT PRIMARY KEY NOT NULL,
    crew_name        TEXT NOT NULL,
    crew_version     TEXT NOT NULL,
    crew_fingerprint TEXT NOT NULL,
    crew_def         TEXT NOT NULL,
    input            TEXT NOT NULL,
    idempotency_key  TEXT UNIQUE,
    thread_id        TEXT,
    status           TEXT NOT NULL CHECK (status IN
                       ('queued','running','waiting','interrupted','succeeded','failed','cancelled')),
    cursor           INTEGER NOT NULL DEFAULT 0,
    step_count       INTEGER NOT NULL,
    lease_epoch      INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at TEXT,
    not_before       TEXT,
    error            TEXT,
    event_seq        INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    finished_at      TEXT
);
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_created ON runs (created_at, id);
CREATE INDEX runs_by_thread ON runs (thread_id) WHERE thread_id IS NOT NULL;

CREATE TABLE steps (
    run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    role          TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN
                    ('running','succeeded','failed','waiting','interrupted','cancelled')),
    attempt       INTEGER NOT NULL,
    output        TEXT,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    started_at    TEXT NOT NULL,
    finished_at   TEXT,
    error         TEXT,
    takeovers     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID; -- clustered on the key: a commit writes no separate index page

CREATE TABLE events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    data   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
