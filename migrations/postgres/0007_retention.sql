-- Retention: removing events by age reads them by time, and removing
-- finished runs by their finish time; periodic work (a compaction pass)
-- runs in one process at a time, whichever first finds its task due.
CREATE INDEX events_by_time ON events (at);
CREATE INDEX runs_by_finish ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE maintenance (
    task    TEXT PRIMARY KEY,
    owner   TEXT,
    next_at TIMESTAMPTZ NOT NULL
);
