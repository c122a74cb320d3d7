-- Inbound webhooks: each maps a POST to a signal. `secret` is what the
-- scheme checks against: a token's SHA-256 (hex), or the signing secret
-- (an HMAC needs it itself).
CREATE TABLE hooks (
    name        TEXT PRIMARY KEY,
    scheme      TEXT NOT NULL,
    secret      TEXT NOT NULL,
    signal      TEXT NOT NULL,
    target      TEXT NOT NULL,
    payload     TEXT,
    id_expr     TEXT,
    start_crew  TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    created_by  TEXT
);
