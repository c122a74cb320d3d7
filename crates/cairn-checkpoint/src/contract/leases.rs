//! Leases: claims, heartbeats, a step's commit under its lease, and setting a
//! corrupt run aside.

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{Corruption, Fence, RunId};

use crate::{ClaimRequest, Claimed, Lease, NewRun, Result, Started, StepCommit};

/// Leases: claims, heartbeats, a step's commit under its lease, and setting a
/// corrupt run aside.
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// [`RunStore::submit`] and, when the run it creates can start at once (no
    /// thread to wait in), [`LeaseStore::claim`] of it for `req` in the same
    /// transaction: `cairn run`'s start. A crash before it leaves nothing;
    /// after it, a `running` run that a takeover finishes. A repeated
    /// idempotency key, or a run of a thread, is only submitted (`claimed`
    /// is `None`) and its caller claims it the usual way.
    async fn start(&self, run: NewRun, req: &ClaimRequest) -> Result<Started>;

    /// Takes the run's lease: epoch + 1, status `running`, the cursor's step
    /// marked `running` (attempt 1 for a new step, attempt + 1 after a
    /// failure, the same attempt with `takeovers + 1` for a step whose holder
    /// vanished), and a `run_claimed` event.
    async fn claim(&self, id: RunId, req: &ClaimRequest) -> Result<Claimed>;

    /// Claims the oldest runnable run, skipping rows other claimers hold
    /// (`FOR UPDATE SKIP LOCKED` on PostgreSQL): a `queued` run whose
    /// `not_before` has passed, or a `running` run whose lease expired (a
    /// takeover). `None` when nothing is runnable.
    async fn claim_next(&self, req: &ClaimRequest) -> Result<Option<Claimed>>;

    /// Up to `max` claims of [`LeaseStore::claim_next`] in one transaction, in
    /// claim order: a worker with free slots takes a backlog (or a dead
    /// worker's runs) in a transaction and a connection per batch, not per
    /// run. Each run is claimed and fenced on its own as `claim_next`
    /// would; a batch that meets an error rolls back whole and falls back
    /// to one `claim_next` (which sets a corrupt run aside). Empty when
    /// nothing is runnable.
    async fn claim_batch(&self, req: &ClaimRequest, max: usize) -> Result<Vec<Claimed>>;

    /// Returns when a run may have become runnable (a submit, retry,
    /// continue, fork or answer: PostgreSQL `LISTEN/NOTIFY`), or after `max`,
    /// whichever comes first. A wake-up is a hint, never a claim: callers
    /// still `claim_next`. SQLite has no notifications and just waits `max`.
    async fn wait_for_work(&self, max: Duration);

    /// Extends the lease of a run held under `held` (its epoch and owner),
    /// by the database clock,
    /// and says whether a cancel was requested, so one query per beat both
    /// keeps the lease and watches for a cancel. [`Lease::Lost`] if another
    /// claim took the run or it stopped: a zombie cannot extend what it no
    /// longer holds.
    async fn heartbeat(&self, id: RunId, held: &Fence, lease: Duration) -> Result<Lease>;

    /// [`LeaseStore::heartbeat`] for every run a process holds, in one
    /// statement: what each beat found, in the order given. A process's
    /// lease upkeep then costs one statement per beat however many runs it
    /// holds; each run is still fenced by its own epoch and owner.
    async fn heartbeat_many(&self, held: &[(RunId, Fence)], lease: Duration) -> Result<Vec<Lease>>;

    /// Fails a run whose stored state does not make sense with error kind
    /// `corruption`, without decoding it, so it never blocks a worker's
    /// queue or takes crash-loop rounds: the run `failed` and its lease
    /// released, a step left `running` failed too, and a `run_failed`
    /// event naming the corruption. With `held`, only while that lease
    /// holds the run (a worker that claimed it); without, only while it is
    /// queued or running. Whether this call set it aside.
    async fn set_aside(&self, corruption: &Corruption, held: Option<&Fence>) -> Result<bool>;

    /// Commits the end of a step (see [`StepCommit`]). A stale epoch is
    /// rejected with [`Error::StaleEpoch`], the current epoch of another
    /// owner with [`Error::LeaseReused`]; either changes nothing.
    async fn commit_step(&self, commit: &StepCommit) -> Result<()>;
}
