-- The votes on a wait whose agent has an approver policy (its
-- `wait_opened` event carries the policy): one per principal per wait,
-- written in the answer's transaction under the wait's row lock, so
-- concurrent votes serialize and the one that meets the rule decides.
CREATE TABLE wait_votes (
    wait_id     UUID NOT NULL REFERENCES waits (id) ON DELETE CASCADE,
    principal   TEXT NOT NULL,
    decision    TEXT NOT NULL,
    answer      JSONB NOT NULL,
    via         TEXT,
    at          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (wait_id, principal)
);
