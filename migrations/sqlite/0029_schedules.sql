-- As PostgreSQL's: schedules and what became of each slot.
CREATE TABLE schedules (
    name         TEXT PRIMARY KEY NOT NULL,
    crew_name    TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    input        TEXT NOT NULL,
    cadence      TEXT NOT NULL,
    overlap      TEXT NOT NULL,
    catch_up     TEXT NOT NULL,
    thread_id    TEXT,
    priority     INTEGER NOT NULL DEFAULT 0,
    tenant       TEXT,
    paused       INTEGER NOT NULL DEFAULT 0,
    next_at      TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    created_by   TEXT
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused;
CREATE TABLE schedule_slots (
    schedule     TEXT NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    slot         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    run_id       TEXT,
    at           TEXT NOT NULL,
    PRIMARY KEY (schedule, slot)
);
