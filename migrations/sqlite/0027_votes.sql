-- As PostgreSQL's: the votes on waits with an approver policy.
CREATE TABLE wait_votes (
    wait_id     TEXT NOT NULL REFERENCES waits (id) ON DELETE CASCADE,
    principal   TEXT NOT NULL,
    decision    TEXT NOT NULL,
    answer      TEXT NOT NULL,
    via         TEXT,
    at          TEXT NOT NULL,
    PRIMARY KEY (wait_id, principal)
);
