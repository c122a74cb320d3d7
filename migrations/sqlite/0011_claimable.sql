-- As PostgreSQL's: a claim's two branches each on an index of its own status.
CREATE INDEX runs_queued ON runs (created_at, id) WHERE status = 'queued';
CREATE INDEX runs_running ON runs (created_at, id) WHERE status = 'running';
-- The steps that must run alone (a second shared death), which every claim
-- asks about: a handful at most, found without reading every step ever run.
CREATE INDEX steps_shared_deaths ON steps (run_id, idx) WHERE shared_deaths > 1;
