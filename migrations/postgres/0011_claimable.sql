-- A claim looks for the oldest due queued run and the oldest running run
-- whose lease expired, each on an index of its own status, so it never
-- walks the rows of runs that cannot be claimed. With thousands of runs in
-- flight, one scan over every run in creation order (and the dead versions
-- their heartbeats leave behind) took 100 ms a claim.
CREATE INDEX runs_queued ON runs (created_at, id) WHERE status = 'queued';
CREATE INDEX runs_running ON runs (created_at, id) WHERE status = 'running';
-- Room on each page for a heartbeat's new version of its row, so the
-- update stays on the page (HOT: no new index entries, nothing to scan
-- past). Applies to pages written from now on.
ALTER TABLE runs SET (fillfactor = 80);
-- The steps that must run alone (a second shared death), which every claim
-- asks about: a handful at most, found without reading every step ever run.
CREATE INDEX steps_shared_deaths ON steps (run_id, idx) WHERE shared_deaths > 1;
