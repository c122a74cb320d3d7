-- A provider key's `rpm` as providers mean it: at most N requests in any
-- 60-second window. One row per request the key admitted, at the
-- database's clock in milliseconds since the epoch; an admission reads the
-- N-th newest within the last minute and, once it admits, deletes the
-- rows that left the window (`cairn_core::keys::window`). The bucket in
-- `requests_milli`, which let 2N through in the minute after it was set,
-- is no longer read or written.
CREATE TABLE key_requests (
    key   TEXT NOT NULL REFERENCES provider_keys (key) ON DELETE CASCADE,
    at_ms BIGINT NOT NULL
);
CREATE INDEX key_requests_key_at ON key_requests (key, at_ms);
