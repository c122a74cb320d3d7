-- Lease takeovers are counted for metrics on every scrape: a partial index
-- keeps that count off a scan of the whole event log.
CREATE INDEX events_takeovers ON events (run_id)
    WHERE kind = 'run_claimed' AND data->>'from_status' = 'running';
