-- Signals: named messages to a run. Buffered until a step's commit
-- consumes one (`consumed_at`), oldest first per run and name (`seq`,
-- counted per run under the run's row lock). `id` is the sender's
-- idempotency id: a second send of it finds the first.
CREATE TABLE signals (
    id                TEXT PRIMARY KEY,
    run_id            UUID NOT NULL,
    seq               BIGINT NOT NULL,
    name              TEXT NOT NULL,
    payload           JSONB NOT NULL,
    sent_at           TIMESTAMPTZ NOT NULL,
    expires_at        TIMESTAMPTZ NOT NULL,
    sent_by           TEXT,
    consumed_at       TIMESTAMPTZ,
    consumed_step     INTEGER,
    consumed_attempt  INTEGER
);
CREATE INDEX signals_buffered ON signals (run_id, name, seq) WHERE consumed_at IS NULL;
CREATE INDEX signals_of_run ON signals (run_id, seq);
CREATE INDEX signals_expiry ON signals (expires_at) WHERE consumed_at IS NULL;
-- A `signal` step's wait, one per (run, step, attempt): `open` while the
-- run waits, `heard` once a signal woke it, `timed_out` past `deadline`.
CREATE TABLE signal_waits (
    run_id     UUID NOT NULL,
    step_idx   INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    names      JSONB NOT NULL,
    status     TEXT NOT NULL,
    opened_at  TIMESTAMPTZ NOT NULL,
    deadline   TIMESTAMPTZ,
    PRIMARY KEY (run_id, step_idx, attempt)
);
CREATE INDEX signal_waits_due ON signal_waits (deadline) WHERE status = 'open';
