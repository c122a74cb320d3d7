-- Principals (`cairn principals`): named people and services with an
-- access level, groups and the tenants they may submit as. A token is
-- `cairn_<token_id>_<secret>`: `token_id` finds the row, and only the
-- SHA-256 of the whole token is kept (`token_hash`, hex).
CREATE TABLE principals (
    name        TEXT PRIMARY KEY,
    role        TEXT NOT NULL CHECK (role IN ('viewer','operator','admin')),
    groups      JSONB NOT NULL,
    email       TEXT,
    tenants     JSONB NOT NULL,
    token_id    TEXT NOT NULL UNIQUE,
    token_hash  TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    created_by  TEXT NOT NULL,
    disabled_at TIMESTAMPTZ
);
-- The console's signed-in sessions, by the digest of their cookie, so
-- every server behind one name knows them (no sticky routing).
CREATE TABLE console_sessions (
    id_hash     TEXT PRIMARY KEY,
    principal   TEXT NOT NULL,
    token_id    TEXT,
    csrf        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
-- Every decision, refusal and change made by a principal, with the channel
-- it came through (`cairn audit`). Run events whose actor names a channel
-- are copied here in their own transaction; no foreign key, so the audit
-- outlives a compacted run.
CREATE TABLE audit (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    principal   TEXT NOT NULL,
    via         TEXT NOT NULL,
    token_id    TEXT,
    client      TEXT,
    action      TEXT NOT NULL,
    run_id      UUID,
    wait_id     UUID,
    detail      JSONB NOT NULL
);
CREATE INDEX audit_by_principal ON audit (principal, id);
CREATE INDEX audit_by_run ON audit (run_id, id) WHERE run_id IS NOT NULL;
