//! Threads: their runs, their history and their budgets.

use async_trait::async_trait;
use cairn_core::{Actor, RunId, RunRecord, ThreadTurn};

use crate::{Result, ThreadBudget, ThreadPage, ThreadSummary};

/// Threads: their runs, their history and their budgets.
#[async_trait]
pub trait ThreadStore: Send + Sync + 'static {
    /// The newest `max_runs` succeeded runs of `thread` created before run
    /// `before`, oldest first, each with its input and final output: the
    /// conversation a run of the thread continues. Older runs are not read.
    async fn thread_history(
        &self,
        thread: &str,
        before: RunId,
        max_runs: u32,
    ) -> Result<Vec<ThreadTurn>>;

    /// Threads (runs with a thread id), the one whose newest run is oldest
    /// first (aggregates; no run is loaded): every one, or a page
    /// ([`ThreadPage`]). A cursor thread no run belongs to is
    /// [`Error::ThreadNotFound`].
    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>>;

    /// One thread's summary and its runs, oldest first, from one snapshot.
    /// A thread with no run is [`Error::ThreadNotFound`].
    async fn thread(&self, id: &str) -> Result<(ThreadSummary, Vec<RunRecord>)>;

    /// Sets thread `thread`'s budget: the limits `budget` names replace
    /// those it had (the others stay); with `raise`, each raises a limit
    /// the thread has ([`Error::BadBudget`] for one it lacks, nothing
    /// written). The thread need not have a run yet.
    async fn set_thread_budget(
        &self,
        thread: &str,
        budget: &cairn_core::Budget,
        raise: bool,
        actor: &Actor,
    ) -> Result<ThreadBudget>;

    /// Thread `thread`'s budget and what its runs spent, if it has one.
    async fn thread_budget(&self, thread: &str) -> Result<Option<ThreadBudget>>;
}
