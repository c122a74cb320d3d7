-- A thread's budget (`cairn threads budget`): limits on what the thread's
-- runs and their children spend together, as a run's `budget` holds them;
-- who set or last raised it, and why. A thread is its runs' `thread_id`,
-- so the row may come before the thread's first run.
CREATE TABLE thread_budgets (
    thread_id TEXT PRIMARY KEY,
    budget    JSONB NOT NULL,
    set_by    TEXT NOT NULL,
    reason    TEXT,
    set_at    TIMESTAMPTZ NOT NULL
);
