-- As PostgreSQL's: a run's trace context, and the export cursor of each
-- sampled run.
ALTER TABLE runs ADD COLUMN trace TEXT;
CREATE TABLE trace_exports (
    run_id        TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL DEFAULT 0,
    seen          INTEGER NOT NULL DEFAULT 0,
    root_exported INTEGER NOT NULL DEFAULT 0,
    done          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX trace_exports_open ON trace_exports (run_id) WHERE NOT done;
