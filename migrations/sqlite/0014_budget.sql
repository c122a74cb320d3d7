-- As PostgreSQL's: a run's own budget (JSON), over its crew's.
ALTER TABLE runs ADD COLUMN budget TEXT;
