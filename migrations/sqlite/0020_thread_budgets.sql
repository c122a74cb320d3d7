-- As PostgreSQL's: a thread's budget, set by an operator.
CREATE TABLE thread_budgets (
    thread_id TEXT PRIMARY KEY NOT NULL,
    budget    TEXT NOT NULL,
    set_by    TEXT NOT NULL,
    reason    TEXT,
    set_at    TEXT NOT NULL
);
