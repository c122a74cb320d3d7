-- As PostgreSQL's: provider keys' limits and buckets, and the permits of
-- calls executing on limited keys.
ALTER TABLE provider_keys ADD COLUMN in_flight_limit INTEGER;
ALTER TABLE provider_keys ADD COLUMN rpm INTEGER;
ALTER TABLE provider_keys ADD COLUMN tpm INTEGER;
ALTER TABLE provider_keys ADD COLUMN requests_milli INTEGER;
ALTER TABLE provider_keys ADD COLUMN tokens_milli INTEGER;
ALTER TABLE provider_keys ADD COLUMN refilled_at TEXT;
CREATE TABLE key_permits (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    key         TEXT NOT NULL REFERENCES provider_keys (key) ON DELETE CASCADE,
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    epoch       INTEGER NOT NULL,
    reserved    INTEGER NOT NULL,
    acquired_at TEXT NOT NULL
);
CREATE INDEX key_permits_key ON key_permits (key);
CREATE UNIQUE INDEX key_permits_run ON key_permits (run_id);
