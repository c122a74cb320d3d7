-- Cairn schema, PostgreSQL dialect. Keep in step with migrations/sqlite.

CREATE TABLE runs (
    id               UUID PRIMARY KEY,
    crew_name        TEXT NOT NULL,
    crew_version     TEXT NOT NULL,
    crew_fingerprint TEXT NOT NULL,
    crew_def         JSONB NOT NULL,
    input            JSONB NOT NULL,
    idempotency_key  TEXT UNIQUE,
    thread_id        TEXT,
    status           TEXT NOT NULL CHECK (status IN
                       ('queued','running','waiting','interrupted','succeeded','failed','cancelled')),
    cursor           INTEGER NOT NULL DEFAULT 0,
    step_count       INTEGER NOT NULL,
    lease_epoch      BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    not_before       TIMESTAMPTZ,
    error            JSONB,
    event_seq        BIGINT NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ
);
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_created ON runs (created_at, id);
CREATE INDEX runs_by_thread ON runs (thread_id) WHERE thread_id IS NOT NULL;

CREATE TABLE steps (
    run_id        UUID NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    role          TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN
                    ('running','succeeded','failed','waiting','interrupted','cancelled')),
    attempt       INTEGER NOT NULL,
    output        JSONB,
    input_tokens  BIGINT,
    output_tokens BIGINT,
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ,
    error         JSONB,
    takeovers     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE events (
    run_id UUID NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,
    at     TIMESTAMPTZ NOT NULL,
    kind   TEXT NOT NULL,
    data   JSONB NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Aborts the statement (and so its implicit transaction) with a message.
-- Used by single-statement commits to refuse a half-applied change.
CREATE FUNCTION cairn_raise(msg TEXT) RETURNS INTEGER LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', msg;
END
$$;
