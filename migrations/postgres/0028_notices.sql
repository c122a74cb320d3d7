-- Notices of open waits (a webhook POST per wait, signed as Standard
-- Webhooks say) and the signed links they carry. The wait's row, written
-- in the transaction that opened it, is the outbox: a wait with no
-- delivered notice on a channel (`webhook`, `mail`) is due; `notices`
-- records each wait's attempts per channel.
CREATE TABLE notices (
    wait_id      UUID NOT NULL REFERENCES waits (id) ON DELETE CASCADE,
    channel      TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    next_at      TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    last_status  INTEGER,
    last_error   TEXT,
    PRIMARY KEY (wait_id, channel)
);
-- A link lets one principal answer one wait once, until it expires; only
-- the SHA-256 of its token is kept.
CREATE TABLE links (
    hash         TEXT PRIMARY KEY,
    principal    TEXT NOT NULL,
    wait_id      UUID NOT NULL REFERENCES waits (id) ON DELETE CASCADE,
    expires_at   TIMESTAMPTZ NOT NULL,
    consumed_at  TIMESTAMPTZ
);
