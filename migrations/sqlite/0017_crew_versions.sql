-- As PostgreSQL's: crew versions stored once, and a run's own upgrade
-- policy.
CREATE TABLE crews (
    fingerprint TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    version     TEXT NOT NULL,
    definition  TEXT NOT NULL,
    first_seen  TEXT NOT NULL
);
CREATE INDEX crews_by_name ON crews (name, version);
INSERT OR IGNORE INTO crews (fingerprint, name, version, definition, first_seen)
SELECT crew_fingerprint, crew_name, crew_version, crew_def, MIN(created_at)
FROM runs GROUP BY crew_fingerprint;
ALTER TABLE runs ADD COLUMN upgrade TEXT;
