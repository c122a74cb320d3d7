-- Provider keys: a provider's "too many requests" with a time to wait
-- pauses every step that calls it with the same API key, in every process
-- on the database; those steps wait (deferred, the same attempt) instead
-- of calling. A key's row is written on its first pause and kept, with a
-- count of pauses, for `cairn limits list`.
CREATE TABLE provider_keys (
    key          TEXT PRIMARY KEY,
    paused_until TIMESTAMPTZ,
    reason       TEXT,
    paused_by    TEXT,
    paused_at    TIMESTAMPTZ,
    pauses       BIGINT NOT NULL DEFAULT 0
);
-- The key a queued run was deferred on (cleared by its next claim): what
-- a resumed key wakes at once, and the key's queue depth.
ALTER TABLE runs ADD COLUMN deferred_key TEXT;
CREATE INDEX runs_deferred ON runs (deferred_key) WHERE deferred_key IS NOT NULL;
