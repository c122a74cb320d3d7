-- Human waits: review after a step, approval before one, a question inside one.
CREATE TABLE waits (
    id          TEXT PRIMARY KEY NOT NULL,
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_idx    INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('review','approval','question')),
    status      TEXT NOT NULL CHECK (status IN ('open','answered','expired','cancelled')),
    prompt      TEXT NOT NULL,
    question_id TEXT,
    deadline    TEXT,
    on_deadline TEXT,
    answer      TEXT,
    answered_by TEXT,
    answered_at TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX waits_by_run ON waits (run_id, step_idx, created_at);
CREATE INDEX waits_open_deadline ON waits (deadline) WHERE status = 'open';
