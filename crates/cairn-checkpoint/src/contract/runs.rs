//! Runs: submit, the reads of runs and their events, and events appended under
//! a lease.

use async_trait::async_trait;
use cairn_core::{EventKind, EventRecord, Fence, NewEvent, RunId, RunRecord, StepRecord};

use crate::{Backend, NewRun, Result, RunFilter, StoreStats, Submitted};

/// Runs: submit, the reads of runs and their events, and events appended under
/// a lease.
#[async_trait]
pub trait RunStore: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Creates a queued run, or returns the existing run with the same
    /// idempotency key (and changes nothing). A key reused with a different
    /// crew or input is refused.
    async fn submit(&self, run: NewRun) -> Result<Submitted>;

    /// A run and all its checkpoint rows, sorted by index.
    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)>;

    /// One run without its steps.
    async fn get_run(&self, id: RunId) -> Result<RunRecord>;

    /// Runs oldest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;

    /// Run counts by status, the claimable queue and lease takeovers, for
    /// metrics (aggregates; no run is loaded).
    async fn stats(&self) -> Result<StoreStats>;

    /// All events of a run, by sequence.
    async fn events(&self, id: RunId) -> Result<Vec<EventRecord>>;

    /// The events of a run whose sequence number is greater than `after`
    /// (what a live stream has not sent yet), by sequence.
    async fn events_after(&self, id: RunId, after: i64) -> Result<Vec<EventRecord>>;

    /// The events of a run of one kind, by sequence: what a reader of one
    /// kind needs of a long run without reading every event (a takeover's
    /// reap reads its `program_started`).
    async fn events_of_kind(&self, id: RunId, kind: EventKind) -> Result<Vec<EventRecord>>;

    /// Appends events to a run held under `held` (fenced like a journal item).
    async fn record_events(&self, id: RunId, held: &Fence, events: &[NewEvent]) -> Result<()>;
}
