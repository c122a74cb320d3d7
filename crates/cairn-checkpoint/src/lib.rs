//! The durability contract of Cairn and its two backends.
//!
//! [`Store`] is everything the executor may ask of storage. Each operation
//! is written once, in `script/` (a module per concern), over a small dialect layer (`sql/`:
//! named parameters, a few `{tokens}`, connections and rows of either
//! database); `SqliteStore` and `PgStore` (a folder each) bring their pool
//! and the fast paths a benchmark pays for. One conformance suite and a
//! differential test (`tests/it`) hold them to the same results. This is the
//! only crate that contains SQL; it knows nothing of HTTP, processes or
//! agents.
//!
//! **Invariant:** every state change is one transaction that also appends its
//! events, and every write on a running run is fenced by its lease epoch.

mod claims;
mod commit;
pub mod counters;
mod error;
pub mod failpoint;
mod live;
mod open;
mod plan;
mod postgres;
mod raw;
mod registry;
#[doc(hidden)]
pub use raw::forget_decoded_crews;
mod script;
mod sql;
mod sqlite;

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{
    Actor, Admission, Answer, Attempt, Corruption, CrewDef, EventRecord, JournalEntry, JournalKind,
    KeyAsk, KeyLimits, KeyPause, KeyState, LeaseEpoch, NewEvent, Permit, RunId, RunRecord,
    RunStatus, StepIdx, StepRecord, ThreadTurn, WaitId, WaitRecord, WaitStatus,
};
use serde_json::Value;

pub use claims::{ClaimRequest, Claimed, Lease, Takeover};
pub use commit::{NewChild, Next, SpawnCommit, StepCommit, StepRows, StepTransition};
pub use error::{DbFault, Error, Kind};
pub use live::LiveHub;
pub use registry::{BlockedRun, Offered, ProcessBeat, ProcessRecord, Registry};

/// The contract's traits, for callers of their methods: `use
/// cairn_checkpoint::prelude::*;`.
pub mod prelude {
    pub use crate::{Registry, Store};
}
pub use script::retention::{CompactPolicy, Compacted, RunsByRule};

pub use open::{
    open, pg_options, Backend, Durability, OpenOptions, Pooler, DEFAULT_MAX_CONNECTIONS,
};
pub use postgres::PgStore;
pub use sqlite::{GroupStats, SqliteStore};

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A run to submit.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub crew: CrewDef,
    pub input: Value,
    pub idempotency_key: Option<String>,
    pub thread_id: Option<String>,
    /// What to do when the thread is busy.
    pub on_busy: OnBusy,
    /// Claim order (`cairn_core::priority`).
    pub priority: cairn_core::Priority,
    /// Whose run it is: claims go round-robin across tenants within a
    /// priority (`cairn_core::tenant`).
    pub tenant: Option<cairn_core::Tenant>,
    /// The run's own limits on model use, over its crew's.
    pub budget: Option<cairn_core::Budget>,
    /// The run's trace (`cairn_core::trace`): stored with it; a sampled
    /// run's spans are exported from its events (`Store::trace_pending`).
    pub trace: Option<cairn_core::Tracing>,
    /// The run's own upgrade policy (`None`: its crew's).
    pub upgrade: Option<cairn_core::upgrade::UpgradePolicy>,
}

/// A traced run whose events went past its export cursor: what its spans
/// are built from (`cairn_core::trace::spans`).
#[derive(Debug, Clone)]
pub struct TraceWork {
    pub run: RunRecord,
    pub trace: cairn_core::TraceContext,
    /// The export cursor: the last event already exported.
    pub after: i64,
    pub root_exported: bool,
    /// The run's events after the cursor, in order.
    pub events: Vec<EventRecord>,
}

/// An export cursor's move ([`Store::trace_advance`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceAdvance {
    pub run: RunId,
    /// The cursor as read; the move fails if it is no longer there.
    pub from: i64,
    /// The last event whose spans were sent.
    pub to: i64,
    /// The last event read: the run is read again once it has newer ones.
    pub seen: i64,
    pub root_exported: bool,
}

/// What a submit does when its thread is busy: a run of the thread is
/// queued, running, waiting or interrupted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnBusy {
    /// Store the run; no worker claims it before every earlier run of the
    /// thread has finished, failed or been cancelled (submission order).
    #[default]
    Queue,
    /// Store nothing: [`Error::ThreadBusy`] names the busy run.
    Reject,
    /// Cancel the busy runs (recorded, as an operator's cancel) and store
    /// the new one, which starts once they have stopped.
    Interrupt,
}

impl OnBusy {
    pub fn as_str(self) -> &'static str {
        match self {
            OnBusy::Queue => "queue",
            OnBusy::Reject => "reject",
            OnBusy::Interrupt => "interrupt",
        }
    }
}

impl std::str::FromStr for OnBusy {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "queue" => Ok(OnBusy::Queue),
            "reject" => Ok(OnBusy::Reject),
            "interrupt" => Ok(OnBusy::Interrupt),
            other => Err(format!(
                "`{other}` is not an on_busy (queue, reject or interrupt)"
            )),
        }
    }
}

/// The answer to a submit: the run, and whether this call created it.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub run: RunRecord,
    pub created: bool,
}

/// What [`Store::start`] did: the submit, and the claim made with it.
#[derive(Debug, Clone)]
pub struct Started {
    pub submitted: Submitted,
    pub claimed: Option<Claimed>,
}

/// Counts for metrics, read by one call ([`Store::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Runs by status; a status with no run is absent.
    pub runs_by_status: Vec<(RunStatus, u64)>,
    /// Queued runs whose `not_before`, if any, has passed (database clock):
    /// what workers can claim now.
    pub ready: u64,
    /// Lease takeovers in the event log: `run_claimed` events of runs that
    /// were `running` under another lease (a worker claiming an expired
    /// lease, or an operator's `cairn resume`), by every process. Events
    /// removed by retention no longer count.
    pub takeovers: u64,
    /// Runnable runs no live process can execute (`Registry::blocked`);
    /// filled by the engine's `stats`, 0 from `Store::stats`.
    pub blocked: u64,
}

/// Which runs to list, oldest first, a page at a time.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    /// Runs of the crew with this name.
    pub crew: Option<String>,
    /// Runs of this thread.
    pub thread: Option<String>,
    /// Runs of this tenant (`cairn_core::tenant`).
    pub tenant: Option<String>,
    /// Children of this run (runs its `children` steps started).
    pub parent: Option<RunId>,
    /// Keyset paging: only runs after this one (by creation time, then
    /// id). A run that does not exist is [`Error::RunNotFound`].
    pub after: Option<RunId>,
    pub limit: Option<u32>,
    /// Newest first (and `after` pages towards older runs); oldest first
    /// by default.
    pub newest_first: bool,
}

/// A move to another crew version ([`Store::upgrade_crew`]).
#[derive(Debug, Clone)]
pub struct CrewUpgrade {
    pub to: CrewDef,
    /// Move even if the version does not keep the started steps.
    pub force: bool,
    /// The lease the caller holds on the running run (a claim at a step
    /// boundary); `None` for an operator's move of a run that is not
    /// running.
    pub held: Option<LeaseEpoch>,
    pub actor: Actor,
}

/// What [`Store::upgrade_crew`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct CrewMove {
    /// The run as it stands after.
    pub run: RunRecord,
    /// This call moved it; `false`: it was already on the version (another
    /// move, in a transaction before this one, took it there), and nothing
    /// was written.
    pub moved: bool,
}

/// A stored crew version ([`Store::crews`]). The JSON of an entry of
/// `cairn crews list --json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CrewVersion {
    pub name: String,
    pub version: String,
    pub fingerprint: cairn_core::Fingerprint,
    /// When a run was first stored with it.
    pub first_seen: chrono::DateTime<chrono::Utc>,
    /// Its runs that have not ended (queued, running, waiting,
    /// interrupted, failed).
    pub unfinished: u64,
}

/// A journal item to append, fenced by `epoch` like a step commit.
#[derive(Debug, Clone)]
pub struct JournalAppend {
    pub run_id: RunId,
    pub epoch: LeaseEpoch,
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub generation: u32,
    pub kind: JournalKind,
    pub payload: Value,
    /// Recorded in the same transaction.
    pub event: Option<NewEvent>,
}

/// A page of threads: at most `limit`, after thread `after` in their order
/// (by newest run, then id; a thread that gets a new run moves to the
/// end). The default is every thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadPage {
    pub after: Option<String>,
    pub limit: Option<u32>,
}

/// Which waits to list.
#[derive(Debug, Clone, Default)]
pub struct WaitFilter {
    pub run: Option<RunId>,
    pub step: Option<StepIdx>,
    pub status: Option<WaitStatus>,
}

/// An operator action that is a status transition of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `failed → queued`: the failed step runs again (attempt + 1). A
    /// `children` step keeps the children that succeeded at its earlier
    /// attempts and starts only the others.
    Retry,
    /// A retry whose `children` step starts every child again
    /// (`--rerun-children`), recorded as `rerun_children` in `run_retried`.
    RetryRerunningChildren,
    /// `interrupted → queued`: the interrupted step carries on.
    Continue,
    /// `queued | waiting | interrupted | failed → cancelled` at once; a
    /// `running` run gets a cancel request its executor honours.
    Cancel,
}

/// What [`Store::raise_budget`] does once the budget is raised, in the
/// same transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRaise {
    /// Nothing: the raise alone (a running holder reads it before its
    /// next model call).
    Stay,
    /// Carries on what the budget stopped: an `interrupted` run is
    /// continued, a waiting parent's interrupted descendants are; a
    /// `queued` or `running` run, or one waiting for a person, only takes
    /// the raise (it goes on by itself, or at the answer). A finished or
    /// failed run is refused with [`Error::WrongState`], nothing written.
    Continue,
}

/// A request to fork a run.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    /// Steps `0..from_step` are copied; execution starts at `from_step`.
    pub from_step: StepIdx,
    /// A new run input. Only allowed with `from_step = 0`: every copied
    /// output was computed from the old input, so it would be stale.
    pub input: Option<Value>,
    /// The fork's thread; `None` keeps the source run's.
    pub thread_id: Option<String>,
    /// Another version of the run's crew for the fork to run on (a run
    /// that cannot move forked from its last compatible step): refused,
    /// with nothing stored, unless the copied steps keep their roles and
    /// kinds in it (`cairn_core::upgrade::check`); recorded on the fork as
    /// `crew_upgraded` with who and why. `None`: the source run's version.
    pub crew: Option<CrewDef>,
    /// A `children` step the fork runs again starts every child anew
    /// (`--rerun-children`, recorded as `rerun_children` in `run_forked`).
    /// By default it keeps each child of the source's same step that
    /// succeeded with the same key, crew version and input, as a copy
    /// (`children_reused`).
    pub rerun_children: bool,
}

/// A thread's budget (`cairn threads budget`): limits on what its runs and
/// their children spend together, checked before each model call of a run
/// of the thread, and what they spent. The JSON of `cairn threads budget
/// --json` and of `budget` in `cairn threads show --json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadBudget {
    pub thread_id: String,
    pub budget: cairn_core::Budget,
    /// Counted as a run's `spent` is, over every run of the thread.
    pub spent: cairn_core::Spent,
    /// Who set or last raised it, and why.
    pub set_by: String,
    pub reason: Option<String>,
    pub set_at: chrono::DateTime<chrono::Utc>,
}

/// A thread at a glance: its runs and the tokens their steps used
/// ([`Store::threads`], [`Store::thread`]). The JSON of an entry of
/// `cairn threads list --json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadSummary {
    pub thread_id: String,
    /// Runs in the thread, whatever their status.
    pub runs: u64,
    /// Tokens reported by the steps of those runs.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the priced model calls of those steps cost (dollars in JSON;
    /// absent when nothing was priced).
    #[serde(default, skip_serializing_if = "cairn_core::Usd::is_zero")]
    pub cost_usd: cairn_core::Usd,
    /// When the thread's newest run was submitted.
    pub last_run_at: chrono::DateTime<chrono::Utc>,
}

/// The durability contract. Implementations must be safe to share between
/// tasks and processes; every method is one transaction.
#[async_trait]
pub trait Store: Registry + Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Where `llm` steps publish their text as it streams and watchers
    /// subscribe to it (not stored; see [`LiveHub`]).
    fn live(&self) -> &LiveHub;

    /// Creates a queued run, or returns the existing run with the same
    /// idempotency key (and changes nothing). A key reused with a different
    /// crew or input is refused.
    async fn submit(&self, run: NewRun) -> Result<Submitted>;

    /// [`Store::submit`] and, when the run it creates can start at once (no
    /// thread to wait in), [`Store::claim`] of it for `req` in the same
    /// transaction: `cairn run`'s start. A crash before it leaves nothing;
    /// after it, a `running` run that a takeover finishes. A repeated
    /// idempotency key, or a run of a thread, is only submitted (`claimed`
    /// is `None`) and its caller claims it the usual way.
    async fn start(&self, run: NewRun, req: &ClaimRequest) -> Result<Started>;

    /// A run and all its checkpoint rows, sorted by index.
    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)>;

    /// One run without its steps.
    async fn get_run(&self, id: RunId) -> Result<RunRecord>;

    /// Runs oldest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;

    /// Run counts by status, the claimable queue and lease takeovers, for
    /// metrics (aggregates; no run is loaded).
    async fn stats(&self) -> Result<StoreStats>;

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

    /// Up to `max` claims of [`Store::claim_next`] in one transaction, in
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

    /// Extends the lease of a run held at `epoch`, by the database clock,
    /// and says whether a cancel was requested, so one query per beat both
    /// keeps the lease and watches for a cancel. [`Lease::Lost`] if another
    /// claim took the run or it stopped: a zombie cannot extend what it no
    /// longer holds.
    async fn heartbeat(&self, id: RunId, epoch: LeaseEpoch, lease: Duration) -> Result<Lease>;

    /// [`Store::heartbeat`] for every run a process holds, in one
    /// statement: what each beat found, in the order given. A process's
    /// lease upkeep then costs one statement per beat however many runs it
    /// holds; each run is still fenced by its own epoch.
    async fn heartbeat_many(
        &self,
        held: &[(RunId, LeaseEpoch)],
        lease: Duration,
    ) -> Result<Vec<Lease>>;

    /// Fails a run whose stored state does not make sense with error kind
    /// `corruption`, without decoding it, so it never blocks a worker's
    /// queue or takes crash-loop rounds: the run `failed` and its lease
    /// released, a step left `running` failed too, and a `run_failed`
    /// event naming the corruption. With `held`, only while that epoch
    /// holds the run (a worker that claimed it); without, only while it is
    /// queued or running. Whether this call set it aside.
    async fn set_aside(&self, corruption: &Corruption, held: Option<LeaseEpoch>) -> Result<bool>;

    /// Commits the end of a step (see [`StepCommit`]). A stale epoch is
    /// rejected with [`Error::StaleEpoch`] and changes nothing.
    async fn commit_step(&self, commit: &StepCommit) -> Result<()>;

    /// Applies an operator action (see [`Action`]), recording who and why.
    /// Refused with [`Error::WrongState`] when the run's status does not
    /// allow it; nothing is written then.
    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord>;

    /// Merges the JSON object `context` into the input of a run that is not
    /// running (its keys replace the input's), with a `context_added` event
    /// naming `actor`, the context and the values it replaced: for a queued
    /// run; an interrupted one is continued (`queued`) in the same
    /// transaction. Any other status is [`Error::WrongState`], a context or
    /// input that is not an object [`Error::BadContext`]; nothing is written
    /// then. (A resume merges its context in its claim instead,
    /// `ClaimRequest::context`.)
    async fn add_context(
        &self,
        id: RunId,
        context: &serde_json::Value,
        actor: &Actor,
    ) -> Result<RunRecord>;

    /// Creates a new queued run that copies the crew, input and checkpoints
    /// `0..from_step` of `id` and records it as its parent. The source run
    /// is not changed.
    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord>;

    /// Waits, oldest first.
    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>>;

    /// Records a person's answer to an open wait and moves its run on in the
    /// same transaction (see `cairn_core::Answer`). The same answer twice is
    /// a no-op; answering a closed wait otherwise is [`Error::WaitClosed`].
    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &Actor) -> Result<WaitRecord>;

    /// Open waits whose deadline has passed, by the database clock.
    async fn due_waits(&self) -> Result<Vec<WaitRecord>>;

    /// Expires a due wait whose outcome is "fail": the wait `expired`, its
    /// step and run `failed` with error kind `deadline`.
    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord>;

    /// The newest `max_runs` succeeded runs of `thread` created before run
    /// `before`, oldest first, each with its input and final output: the
    /// conversation a run of the thread continues. Older runs are not read.
    async fn thread_history(
        &self,
        thread: &str,
        before: RunId,
        max_runs: u32,
    ) -> Result<Vec<ThreadTurn>>;

    /// All events of a run, by sequence.
    async fn events(&self, id: RunId) -> Result<Vec<EventRecord>>;

    /// The decided join of a `children` step's attempt, with its
    /// children's outcomes; `None` while the join is open or if that
    /// attempt started no children.
    async fn joined(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
    ) -> Result<Option<cairn_core::Joined>>;

    /// Cancels the children of a step's decided join that are still
    /// unfinished (its rule needs them no more: a fail-fast failure, a
    /// first success, a quorum), each in a transaction of its own. The
    /// parent does this when it runs again.
    async fn close_join(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
        actor: &Actor,
    ) -> Result<()>;

    /// Every child of a run (of all its `children` steps), in step and
    /// listing order, with its status and, once it succeeded, its output.
    async fn children(&self, id: RunId) -> Result<Vec<cairn_core::ChildOutcome>>;

    /// The events of a run whose sequence number is greater than `after`
    /// (what a live stream has not sent yet), by sequence.
    async fn events_after(&self, id: RunId, after: i64) -> Result<Vec<EventRecord>>;

    /// The journal of step `idx`, by `seq`: one generation, or all of them.
    async fn journal(
        &self,
        id: RunId,
        idx: StepIdx,
        generation: Option<u32>,
    ) -> Result<Vec<JournalEntry>>;

    /// Appends one journal item (and its event) in one transaction, at the
    /// step's next `seq`, if the run is `running` at `epoch`; otherwise
    /// [`Error::StaleEpoch`] or [`Error::WrongState`] and nothing is written.
    async fn append_journal(&self, item: &JournalAppend) -> Result<JournalEntry>;

    /// Appends events to a run held at `epoch` (fenced like a journal item).
    async fn record_events(&self, id: RunId, epoch: LeaseEpoch, events: &[NewEvent]) -> Result<()>;

    /// Threads (runs with a thread id), the one whose newest run is oldest
    /// first (aggregates; no run is loaded): every one, or a page
    /// ([`ThreadPage`]). A cursor thread no run belongs to is
    /// [`Error::ThreadNotFound`].
    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>>;

    /// One thread's summary and its runs, oldest first, from one snapshot.
    /// A thread with no run is [`Error::ThreadNotFound`].
    async fn thread(&self, id: &str) -> Result<(ThreadSummary, Vec<RunRecord>)>;

    /// Removes what `policy` names (or, dry, counts it), never what an
    /// unfinished run needs, in small batches; the rows removed by table.
    async fn compact(&self, policy: &CompactPolicy) -> Result<Compacted>;

    /// Gives the space compaction freed back: SQLite rewrites the file
    /// (`VACUUM`, then a truncating checkpoint of its write-ahead log), so
    /// it shrinks; PostgreSQL vacuums Cairn's tables (`VACUUM`), which
    /// makes the space reusable without shrinking the files. Runs beside
    /// other work, waiting for writers; no transaction may hold it.
    async fn vacuum(&self) -> Result<()>;

    /// The database's own integrity check: SQLite's `PRAGMA quick_check`,
    /// the problems it found (none when healthy). PostgreSQL checks its
    /// pages itself; nothing to report.
    async fn check(&self) -> Result<Vec<String>>;

    /// Takes periodic `task` for this interval if it is due (by the
    /// database clock) and nobody took it yet: `true` for exactly one
    /// caller across processes, which then does the work; the task is due
    /// again after `every`.
    async fn claim_task(&self, task: &str, every: Duration, owner: &str) -> Result<bool>;

    /// How long calls on provider key `key` must still wait, if it is
    /// paused (database clock; `cairn_core::keys`).
    async fn paused_for(&self, key: &str) -> Result<Option<Duration>>;

    /// Pauses a provider key for every run; a longer pause already standing
    /// wins, and a provider's is held to the key's `max_pause_ms`
    /// (`cairn_core::DEFAULT_MAX_PAUSE` without one). Answers how long the
    /// pause that stands has left, and the reason recorded.
    async fn pause_key(&self, pause: &KeyPause) -> Result<cairn_core::Paused>;

    /// Ends a key's pause, and makes the queued runs deferred on it
    /// claimable now. `KeyNotFound` if no pause ever named it.
    async fn resume_key(&self, key: &str) -> Result<KeyState>;

    /// Every provider key ever paused or limited, by name, with its limits,
    /// permits in use and queue.
    async fn keys(&self) -> Result<Vec<KeyState>>;

    /// Before a model call: whether it may start on its key now. A key
    /// without limits needs one read (its pause); a key with limits locks
    /// its row, counts the permits held by live leases, refills and takes
    /// from its buckets, and grants a permit tied to the run's lease
    /// (`cairn_core::keys`). A run holds at most one permit: asking again
    /// drops any it still held.
    async fn admit(&self, ask: &KeyAsk) -> Result<Admission>;

    /// After the call: drops the permit, gives back the tokens reserved
    /// but not `used` (or takes the excess), and wakes one run deferred on
    /// the key when it limits calls in flight.
    async fn release(&self, permit: &Permit, used: u64) -> Result<()>;

    /// Replaces `key`'s limits (none: unlimited), creating the key if it is
    /// new; its buckets start full.
    async fn set_limits(&self, key: &str, limits: &KeyLimits) -> Result<KeyState>;

    /// Drops `key`'s limits, an operator's included: its next admission
    /// applies the limits its crew or process declares, if any
    /// (`cairn_core::declared`).
    async fn reset_limits(&self, key: &str) -> Result<KeyState>;

    /// What the run's model calls have spent, from its journal
    /// (`cairn_core::budget`).
    async fn spent(&self, id: RunId) -> Result<cairn_core::Spent>;

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

    /// Before a model call of child run `id` (held under `epoch`): each of
    /// its budgeted ancestors weighs what its tree spent and what the
    /// calls of its other runs hold now; `Go` holds this call's estimate
    /// until [`Store::release_budget`] or the end of the lease
    /// (`cairn_core::budget`). One write transaction, serialized per tree.
    async fn reserve_budget(
        &self,
        id: RunId,
        epoch: LeaseEpoch,
        ask: &cairn_core::BudgetAsk,
    ) -> Result<cairn_core::TreeAnswer>;

    /// Drops what run `id`'s call held, and wakes a run of its tree that
    /// waits for room.
    async fn release_budget(&self, id: RunId) -> Result<()>;

    /// Raises the run's budget by `by` (its own limits, or its crew's where
    /// it has none), recorded as a `budget_raised` event with who and why,
    /// then does what `then` says, all in one transaction: a refusal of
    /// either part writes nothing. Refused for a finished run. The run as
    /// it stands after.
    async fn raise_budget(
        &self,
        id: RunId,
        by: &cairn_core::Budget,
        then: AfterRaise,
        actor: &Actor,
    ) -> Result<RunRecord>;

    /// Moves an unfinished run to another version of its crew, recorded as
    /// a `crew_upgraded` event with both versions and fingerprints and who
    /// and why, at a step boundary: a run that is not running, or one the
    /// caller holds at `held` and has claimed at a boundary. Refused with
    /// [`Error::Incompatible`] when the version does not keep the steps the
    /// run has started (`cairn_core::upgrade::check`; with `force`, only
    /// what `check_forced` refuses: a move that would leave the run
    /// unreadable), and with [`Error::WrongState`] for a running run held
    /// by another. A run already on the version is left as it is, and
    /// [`CrewMove::moved`] says which happened.
    async fn upgrade_crew(&self, id: RunId, req: &CrewUpgrade) -> Result<CrewMove>;

    /// Every crew version a run was stored with, by name then first seen,
    /// with its unfinished runs.
    async fn crews(&self) -> Result<Vec<CrewVersion>>;

    /// The stored crew version with `fingerprint`.
    async fn crew_version(&self, fingerprint: &cairn_core::Fingerprint) -> Result<Option<CrewDef>>;

    /// Up to `limit` sampled runs with events past their export cursor.
    async fn trace_pending(&self, limit: usize) -> Result<Vec<TraceWork>>;

    /// Moves a run's export cursor after its spans were sent; `false` if
    /// another exporter moved it first (both sent that batch).
    async fn trace_advance(&self, advance: &TraceAdvance) -> Result<bool>;
}
