-- Child runs (`kind = "children"` steps). A child hangs from its parent's
-- step and attempt (`parent_run_id`, `parent_step_idx`, `parent_attempt`)
-- under a key; its parent's join counts it once, when it first settles.
ALTER TABLE runs ADD COLUMN child_key TEXT;
ALTER TABLE runs ADD COLUMN child_ord INTEGER;
ALTER TABLE runs ADD COLUMN parent_attempt INTEGER;
ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
-- A child beyond its step's `concurrency`: queued, not claimable until a
-- sibling settles and releases it.
ALTER TABLE runs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
-- Counted against its parent's join (once).
ALTER TABLE runs ADD COLUMN join_settled INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_by_join ON runs (parent_run_id, parent_step_idx, parent_attempt, child_ord)
    WHERE child_key IS NOT NULL;

-- One per spawning attempt: the rule and the counts that decide it.
CREATE TABLE joins (
    run_id          TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_idx        INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    rule            TEXT NOT NULL CHECK (rule IN ('all','all_ok','first_ok','quorum')),
    quorum          INTEGER NOT NULL DEFAULT 0,
    on_parent_close TEXT NOT NULL CHECK (on_parent_close IN ('cancel','detach')),
    total           INTEGER NOT NULL,
    settled         INTEGER NOT NULL DEFAULT 0,
    ok              INTEGER NOT NULL DEFAULT 0,
    status          TEXT NOT NULL CHECK (status IN ('open','met','failed')),
    created_at      TEXT NOT NULL,
    decided_at      TEXT,
    PRIMARY KEY (run_id, step_idx, attempt)
) WITHOUT ROWID;
