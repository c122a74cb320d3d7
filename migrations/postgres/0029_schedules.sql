-- Schedules: runs started by the clock. `next_at` is the next slot to
-- fire and only moves forward; a slot's run is submitted with the
-- idempotency key `schedule:<name>:<slot>` in the transaction that moves
-- it, so a slot runs at most once whoever fires it.
CREATE TABLE schedules (
    name         TEXT PRIMARY KEY,
    crew_name    TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    input        JSONB NOT NULL,
    cadence      JSONB NOT NULL,
    overlap      TEXT NOT NULL,
    catch_up     TEXT NOT NULL,
    thread_id    TEXT,
    priority     INTEGER NOT NULL DEFAULT 0,
    tenant       TEXT,
    paused       BOOLEAN NOT NULL DEFAULT FALSE,
    next_at      TIMESTAMPTZ NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    created_by   TEXT
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused;
-- What became of each slot: fired (with its run), skipped, buffered or
-- missed. A buffered slot fires once the schedule's previous run ended.
CREATE TABLE schedule_slots (
    schedule     TEXT NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    slot         TIMESTAMPTZ NOT NULL,
    outcome      TEXT NOT NULL,
    run_id       UUID,
    at           TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (schedule, slot)
);
