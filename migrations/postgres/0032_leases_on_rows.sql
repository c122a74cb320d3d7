-- Each committed step and journal item keeps the lease it was fenced on
-- (the run's epoch and owner at its commit), so a history checker reads
-- who wrote each row from the row itself. NULL on rows written before
-- this migration and on steps an operator wrote without a lease.
ALTER TABLE steps ADD COLUMN lease_epoch BIGINT;
ALTER TABLE steps ADD COLUMN lease_owner TEXT;
ALTER TABLE journal ADD COLUMN lease_epoch BIGINT;
ALTER TABLE journal ADD COLUMN lease_owner TEXT;
