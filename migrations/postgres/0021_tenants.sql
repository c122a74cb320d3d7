-- A run's tenant (`cairn run --tenant`), inherited by its children and
-- forks; and, per tenant, the claim-order time its next queued run takes
-- (`next_at`): runs of one tenant are spaced in claim order, so claims go
-- round-robin across tenants within a priority (cairn_core::tenant).
ALTER TABLE runs ADD COLUMN tenant TEXT;
CREATE TABLE tenants (
    tenant  TEXT PRIMARY KEY,
    next_at TIMESTAMPTZ NOT NULL
);
