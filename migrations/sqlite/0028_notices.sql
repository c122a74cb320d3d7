-- As PostgreSQL's: notices of open waits and their signed links.
CREATE TABLE notices (
    wait_id      TEXT NOT NULL REFERENCES waits (id) ON DELETE CASCADE,
    channel      TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    next_at      TEXT NOT NULL,
    delivered_at TEXT,
    last_status  INTEGER,
    last_error   TEXT,
    PRIMARY KEY (wait_id, channel)
);
CREATE TABLE links (
    hash         TEXT PRIMARY KEY NOT NULL,
    principal    TEXT NOT NULL,
    wait_id      TEXT NOT NULL REFERENCES waits (id) ON DELETE CASCADE,
    expires_at   TEXT NOT NULL,
    consumed_at  TEXT
);
