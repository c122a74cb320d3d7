-- As PostgreSQL's: what a step's priced model calls cost.
ALTER TABLE steps ADD COLUMN cost_nanos INTEGER;
