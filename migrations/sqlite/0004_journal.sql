-- The journal of agent steps: every transcript item of a turn, committed as
-- it is produced. `seq` counts per step across attempts; `generation` is the
-- number of rejected reviews before the item (a re-run with feedback starts
-- a fresh journal; the old one stays for audit).
CREATE TABLE journal (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_idx   INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('assistant_text','tool_call_started','tool_call',
                 'tool_result','human_answer','repair','turn_end')),
    payload    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, step_idx, seq)
) WITHOUT ROWID;
