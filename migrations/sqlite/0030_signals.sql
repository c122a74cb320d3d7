-- As PostgreSQL's: signals, buffered until consumed, and signal waits.
CREATE TABLE signals (
    id                TEXT PRIMARY KEY NOT NULL,
    run_id            TEXT NOT NULL,
    seq               INTEGER NOT NULL,
    name              TEXT NOT NULL,
    payload           TEXT NOT NULL,
    sent_at           TEXT NOT NULL,
    expires_at        TEXT NOT NULL,
    sent_by           TEXT,
    consumed_at       TEXT,
    consumed_step     INTEGER,
    consumed_attempt  INTEGER
);
CREATE INDEX signals_buffered ON signals (run_id, name, seq) WHERE consumed_at IS NULL;
CREATE INDEX signals_of_run ON signals (run_id, seq);
CREATE INDEX signals_expiry ON signals (expires_at) WHERE consumed_at IS NULL;
CREATE TABLE signal_waits (
    run_id     TEXT NOT NULL,
    step_idx   INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    names      TEXT NOT NULL,
    status     TEXT NOT NULL,
    opened_at  TEXT NOT NULL,
    deadline   TEXT,
    PRIMARY KEY (run_id, step_idx, attempt)
);
CREATE INDEX signal_waits_due ON signal_waits (deadline) WHERE status = 'open';
