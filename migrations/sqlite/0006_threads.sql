-- A thread's runs are read oldest first (`threads show`, `runs list` by
-- thread) and summarised by thread (`threads list`): one index on
-- (thread_id, created_at, id) serves both, replacing the thread_id-only one.
DROP INDEX runs_by_thread;
CREATE INDEX runs_by_thread ON runs (thread_id, created_at, id) WHERE thread_id IS NOT NULL;
