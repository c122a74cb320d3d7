-- As PostgreSQL's: each committed step and journal item keeps the lease
-- it was fenced on.
ALTER TABLE steps ADD COLUMN lease_epoch INTEGER;
ALTER TABLE steps ADD COLUMN lease_owner TEXT;
ALTER TABLE journal ADD COLUMN lease_epoch INTEGER;
ALTER TABLE journal ADD COLUMN lease_owner TEXT;
