-- As PostgreSQL's: what a child run's model call holds against its
-- ancestors' budgets while it runs (its estimate of tokens and cost),
-- counted only while the run holds the lease it was taken under.
CREATE TABLE budget_holds (
    run_id     TEXT PRIMARY KEY NOT NULL,
    epoch      INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    cost_nanos INTEGER NOT NULL,
    held_at    TEXT NOT NULL
);
