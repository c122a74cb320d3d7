-- Operator actions: forks record their parent, cancels of running runs are requests.
ALTER TABLE runs ADD COLUMN parent_run_id UUID;
ALTER TABLE runs ADD COLUMN parent_step_idx INTEGER;
ALTER TABLE runs ADD COLUMN cancel_requested_at TIMESTAMPTZ;
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
