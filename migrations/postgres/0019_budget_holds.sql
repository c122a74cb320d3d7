-- What a child run's model call holds against its ancestors' budgets
-- while it runs (its estimate of tokens, and of cost in billionths of a
-- dollar), counted only while the run holds the lease it was taken under
-- (so a process that dies drops its holds with its leases). No foreign
-- key: taking a hold must lock no run row (`script/rollup.rs`); retention
-- removes the holds of the runs it removes.
CREATE TABLE budget_holds (
    run_id     UUID PRIMARY KEY,
    epoch      BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    cost_nanos BIGINT NOT NULL,
    held_at    TIMESTAMPTZ NOT NULL
);
