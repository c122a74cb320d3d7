-- As PostgreSQL's: a provider key's shared pause, and the key a queued run
-- was deferred on.
CREATE TABLE provider_keys (
    key          TEXT PRIMARY KEY,
    paused_until TEXT,
    reason       TEXT,
    paused_by    TEXT,
    paused_at    TEXT,
    pauses       INTEGER NOT NULL DEFAULT 0
);
ALTER TABLE runs ADD COLUMN deferred_key TEXT;
CREATE INDEX runs_deferred ON runs (deferred_key) WHERE deferred_key IS NOT NULL;
