-- Priority: a claim takes queued (and expired running) runs in order of
-- `claim_at`, the submit time less the run's head start (priority × 60 s),
-- so higher priority goes first and a lower one is never starved: it ages
-- past newer runs of higher priority. Existing runs keep their order.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN claim_at TIMESTAMPTZ;
UPDATE runs SET claim_at = created_at;
ALTER TABLE runs ALTER COLUMN claim_at SET NOT NULL;
DROP INDEX runs_queued;
DROP INDEX runs_running;
CREATE INDEX runs_queued ON runs (claim_at, id) WHERE status = 'queued';
CREATE INDEX runs_running ON runs (claim_at, id) WHERE status = 'running';
