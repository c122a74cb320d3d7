-- The longest a provider's answer (`Retry-After`, reset headers) may pause
-- a provider key, in milliseconds (`cairn limits set --max-pause`, an
-- agent's or `CAIRN_LIMITS`'s `max_pause_ms`); NULL: the default, 15
-- minutes. A limit like the others: replaced by a set, dropped by a reset.
ALTER TABLE provider_keys ADD COLUMN max_pause_ms BIGINT;
