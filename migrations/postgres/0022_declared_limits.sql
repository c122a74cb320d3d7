-- Who set a provider key's limits: `operator` (`cairn limits set`, which
-- wins), `crew` (an agent's `limits`) or `config` (a process's
-- `CAIRN_LIMITS`); NULL for a key without limits. Limits set before this
-- migration were an operator's.
ALTER TABLE provider_keys ADD COLUMN limits_from TEXT;
UPDATE provider_keys SET limits_from = 'operator'
 WHERE in_flight_limit IS NOT NULL OR rpm IS NOT NULL OR tpm IS NOT NULL;
