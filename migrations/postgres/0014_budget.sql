-- A run's own limits on model use (`--budget`, raised by an operator's
-- continue), over its crew's `[budget]`; NULL: its crew's alone.
ALTER TABLE runs ADD COLUMN budget JSONB;
