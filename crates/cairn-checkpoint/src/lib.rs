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

/// A transaction's work, as [`script::ScriptFn`] takes it:
/// `script!(|c| statements…; value)` for `Box::new(move |c|
/// Box::pin(async move { statements…; value }))`. Before the modules, so
/// every one of them may use it.
macro_rules! script {
    (|$c:ident| $($body:tt)*) => {
        Box::new(move |$c| Box::pin(async move { $($body)* }))
    };
}

mod claims;
mod commit;
mod contract;
pub mod counters;
mod error;
pub mod failpoint;
mod live;
mod open;
mod plan;
mod postgres;
mod raw;
#[doc(hidden)]
pub use raw::forget_decoded_crews;
mod script;
mod sql;
mod sqlite;

use cairn_core::{
    Actor, Attempt, CrewDef, EventRecord, Fence, JournalKind, LeaseEpoch, NewEvent, RunId,
    RunRecord, RunStatus, StepIdx, WaitStatus,
};
use serde_json::Value;

pub use claims::{ClaimRequest, Claimed, Lease, Takeover};
pub use commit::{NewChild, Next, SpawnCommit, StepCommit, StepRows, StepTransition};
pub use contract::{
    AuditStore, BudgetStore, ChildStore, CrewStore, JournalStore, KeyStore, LeaseStore,
    MaintenanceStore, OperatorStore, PeopleStore, RunStore, Store, ThreadStore, TraceStore,
    WaitStore,
};
pub use contract::{BlockedRun, Offered, ProcessBeat, ProcessRecord, WorkerStore};
pub use contract::{Credential, NewSession, SessionRecord, TokenDigest};
pub use contract::{HookStore, NewHook};
pub use contract::{LinkRecord, NewLink, NoticeAttempt, NoticeStore};
pub use contract::{Listening, NewSignal, Sent, SignalStore, StartWith};
pub use contract::{NewSchedule, ScheduleStore, Slot};
pub use error::{DbFault, Error, Kind};
pub use live::LiveHub;

/// The contract's traits, for callers of their methods: `use
/// cairn_checkpoint::prelude::*;`.
pub mod prelude {
    pub use crate::{
        AuditStore, BudgetStore, ChildStore, CrewStore, JournalStore, KeyStore, LeaseStore,
        MaintenanceStore, NoticeStore, OperatorStore, PeopleStore, RunStore, ScheduleStore,
        SignalStore, Store, ThreadStore, TraceStore, WaitStore, WorkerStore,
    };
}
pub use script::replication::{Replication, Standby};
pub use script::retention::{CompactPolicy, Compacted, RunsByRule};

pub use open::{
    open, pg_options, Backend, Durability, OpenOptions, Pooler, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_RETRY_FOR,
};
pub use postgres::{PgHosts, PgStore, SessionAttrs};
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
    /// priority (`cairn_core::meter::tenant`).
    pub tenant: Option<cairn_core::Tenant>,
    /// The run's own limits on model use, over its crew's.
    pub budget: Option<cairn_core::Budget>,
    /// The run's trace (`cairn_core::trace`): stored with it; a sampled
    /// run's spans are exported from its events (`TraceStore::trace_pending`).
    pub trace: Option<cairn_core::Tracing>,
    /// The run's own upgrade policy (`None`: its crew's).
    pub upgrade: Option<cairn_core::upgrade::UpgradePolicy>,
    /// Who submits it (recorded on `run_submitted`; audited when it names
    /// a channel).
    pub by: Option<Actor>,
}

impl NewRun {
    /// A run of `crew` on `input` as a plain submit makes it: no key, no
    /// thread, default priority, no tenant, budget, trace or policy of its
    /// own. Set the others with struct update syntax.
    pub fn new(crew: CrewDef, input: Value) -> NewRun {
        NewRun {
            crew,
            input,
            idempotency_key: None,
            thread_id: None,
            on_busy: OnBusy::default(),
            priority: cairn_core::Priority::default(),
            tenant: None,
            budget: None,
            trace: None,
            upgrade: None,
            by: None,
        }
    }
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

/// An export cursor's move ([`TraceStore::trace_advance`]).
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

/// What [`RunStore::start`] did: the submit, and the claim made with it.
#[derive(Debug, Clone)]
pub struct Started {
    pub submitted: Submitted,
    pub claimed: Option<Claimed>,
}

/// Counts for metrics, read by one call ([`RunStore::stats`]).
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
    /// Runnable runs no live process can execute (`WorkerStore::blocked`);
    /// filled by the engine's `stats`, 0 from `RunStore::stats`.
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
    /// Runs of this tenant (`cairn_core::meter::tenant`).
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

/// A move to another crew version ([`CrewStore::upgrade_crew`]).
#[derive(Debug, Clone)]
pub struct CrewUpgrade {
    pub to: CrewDef,
    /// Move even if the version does not keep the started steps.
    pub force: bool,
    /// The lease the caller holds on the running run (a claim at a step
    /// boundary); `None` for an operator's move of a run that is not
    /// running.
    pub held: Option<Fence>,
    pub actor: Actor,
}

/// What [`CrewStore::upgrade_crew`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct CrewMove {
    /// The run as it stands after.
    pub run: RunRecord,
    /// This call moved it; `false`: it was already on the version (another
    /// move, in a transaction before this one, took it there), and nothing
    /// was written.
    pub moved: bool,
}

/// A stored crew version ([`CrewStore::crews`]). The JSON of an entry of
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

/// A journal item to append, fenced by `fence` like a step commit.
#[derive(Debug, Clone)]
pub struct JournalAppend {
    pub run_id: RunId,
    pub fence: Fence,
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

/// What [`BudgetStore::raise_budget`] does once the budget is raised, in the
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
/// ([`ThreadStore::threads`], [`ThreadStore::thread`]). The JSON of an entry of
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
