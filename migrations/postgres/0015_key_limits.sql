-- Limits on provider keys (`cairn limits set`): calls in flight at once,
-- requests and tokens per minute, shared by every process on the
-- database. The buckets hold what is left of a minute's requests and
-- tokens in thousandths (NULL: full), as of `refilled_at`; an admission
-- locks the key's row, refills them by the time since, and takes from
-- them.
ALTER TABLE provider_keys ADD COLUMN in_flight_limit BIGINT;
ALTER TABLE provider_keys ADD COLUMN rpm BIGINT;
ALTER TABLE provider_keys ADD COLUMN tpm BIGINT;
ALTER TABLE provider_keys ADD COLUMN requests_milli BIGINT;
ALTER TABLE provider_keys ADD COLUMN tokens_milli BIGINT;
ALTER TABLE provider_keys ADD COLUMN refilled_at TIMESTAMPTZ;
-- A permit: a model call executing on a limited key. It counts only while
-- its run is running under the same lease epoch and that lease stands, so
-- a process that dies releases its permits with its leases; a run holds
-- at most one.
CREATE TABLE key_permits (
    id          BIGSERIAL PRIMARY KEY,
    key         TEXT NOT NULL REFERENCES provider_keys (key) ON DELETE CASCADE,
    run_id      UUID NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    epoch       BIGINT NOT NULL,
    reserved    BIGINT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX key_permits_key ON key_permits (key);
CREATE UNIQUE INDEX key_permits_run ON key_permits (run_id);
