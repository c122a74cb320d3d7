-- As PostgreSQL's: a run's tenant, and each tenant's claim-order clock.
ALTER TABLE runs ADD COLUMN tenant TEXT;
CREATE TABLE tenants (
    tenant  TEXT PRIMARY KEY NOT NULL,
    next_at TEXT NOT NULL
);
