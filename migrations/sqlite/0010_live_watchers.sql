-- The same table as PostgreSQL's, for one schema: SQLite has no
-- notifications, so nothing reads or writes it here.
CREATE TABLE live_watchers (
    id TEXT PRIMARY KEY,
    until TEXT NOT NULL
);
