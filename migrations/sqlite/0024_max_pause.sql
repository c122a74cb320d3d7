-- As PostgreSQL's: the longest a provider's answer may pause a provider
-- key, in milliseconds (NULL: 15 minutes).
ALTER TABLE provider_keys ADD COLUMN max_pause_ms INTEGER;
