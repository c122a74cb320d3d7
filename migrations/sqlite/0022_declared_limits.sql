-- As PostgreSQL's: who set a provider key's limits.
ALTER TABLE provider_keys ADD COLUMN limits_from TEXT;
UPDATE provider_keys SET limits_from = 'operator'
 WHERE in_flight_limit IS NOT NULL OR rpm IS NOT NULL OR tpm IS NOT NULL;
