-- Evidence for `crash_loop`: a takeover counts against a step (`takeovers`)
-- only when its dead holder held no other run. One whose holder died with
-- other runs in flight is counted here instead, and the step then runs
-- alone (a claimer holding it gets no other run), where a death is evidence.
ALTER TABLE steps ADD COLUMN shared_deaths INTEGER NOT NULL DEFAULT 0;
-- Set on the in-flight steps of a holder found dead with several runs, so
-- each is judged the same at its own takeover.
ALTER TABLE steps ADD COLUMN died_shared INTEGER NOT NULL DEFAULT 0;
