-- Crew versions (cairn_core::upgrade). Every crew definition a run was
-- stored with, once, by fingerprint: what `cairn crews list|show|diff`
-- and `cairn runs upgrade --to VERSION` read. Written in the transaction
-- that stores a run with a definition (submit, spawn, a forced claim, an
-- upgrade); filled here from the runs a database already has. Runs keep
-- their own copy of the definition (`runs.crew_def`) as before.
-- `runs.upgrade` is a run's own upgrade policy (NULL: its crew's).
CREATE TABLE crews (
    fingerprint TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    version     TEXT NOT NULL,
    definition  JSONB NOT NULL,
    first_seen  TIMESTAMPTZ NOT NULL
);
CREATE INDEX crews_by_name ON crews (name, version);
INSERT INTO crews (fingerprint, name, version, definition, first_seen)
SELECT DISTINCT ON (crew_fingerprint) crew_fingerprint, crew_name, crew_version, crew_def, created_at
FROM runs ORDER BY crew_fingerprint, created_at
ON CONFLICT DO NOTHING;
ALTER TABLE runs ADD COLUMN upgrade TEXT;
