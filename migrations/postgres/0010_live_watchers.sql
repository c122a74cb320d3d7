-- Processes that watch live model text now (a `runs watch` or a console
-- page with a `LISTEN cairn_live` open), each row renewed while it
-- watches. A process publishes its steps' text as `NOTIFY` only while a
-- row is current (live.rs), so a fleet nobody watches sends none.
CREATE TABLE live_watchers (
    id UUID PRIMARY KEY,
    until TIMESTAMPTZ NOT NULL
);
