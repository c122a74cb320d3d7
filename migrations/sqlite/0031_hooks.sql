-- As PostgreSQL's: inbound webhooks.
CREATE TABLE hooks (
    name        TEXT PRIMARY KEY NOT NULL,
    scheme      TEXT NOT NULL,
    secret      TEXT NOT NULL,
    signal      TEXT NOT NULL,
    target      TEXT NOT NULL,
    payload     TEXT,
    id_expr     TEXT,
    start_crew  TEXT,
    created_at  TEXT NOT NULL,
    created_by  TEXT
);
