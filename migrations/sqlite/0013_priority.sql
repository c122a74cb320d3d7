-- As PostgreSQL's: claims in order of `claim_at` (submit time less the
-- priority's head start). SQLite cannot add a NOT NULL column without a
-- default, so the column stays nullable here and every insert sets it.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN claim_at TEXT;
UPDATE runs SET claim_at = created_at;
DROP INDEX runs_queued;
DROP INDEX runs_running;
CREATE INDEX runs_queued ON runs (claim_at, id) WHERE status = 'queued';
CREATE INDEX runs_running ON runs (claim_at, id) WHERE status = 'running';
