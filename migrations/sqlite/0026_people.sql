-- As PostgreSQL's: principals, the console's sessions and the audit.
CREATE TABLE principals (
    name        TEXT PRIMARY KEY NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('viewer','operator','admin')),
    groups      TEXT NOT NULL,
    email       TEXT,
    tenants     TEXT NOT NULL,
    token_id    TEXT NOT NULL UNIQUE,
    token_hash  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    disabled_at TEXT
);
CREATE TABLE console_sessions (
    id_hash     TEXT PRIMARY KEY NOT NULL,
    principal   TEXT NOT NULL,
    token_id    TEXT,
    csrf        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT NOT NULL,
    principal   TEXT NOT NULL,
    via         TEXT NOT NULL,
    token_id    TEXT,
    client      TEXT,
    action      TEXT NOT NULL,
    run_id      TEXT,
    wait_id     TEXT,
    detail      TEXT NOT NULL
);
CREATE INDEX audit_by_principal ON audit (principal, id);
CREATE INDEX audit_by_run ON audit (run_id, id) WHERE run_id IS NOT NULL;
