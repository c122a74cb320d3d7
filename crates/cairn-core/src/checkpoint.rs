//! The durable records: a run row and its checkpoint (step) rows, as every
//! part of Cairn sees them. Their serde form is the JSON contract of
//! `cairn runs show --json` and of the HTTP API: extend it, never rename.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crew::{CrewDef, Fingerprint};
use crate::ids::{Attempt, ChildOf, LeaseEpoch, Role, RunId, StepIdx};
use crate::status::{RunStatus, StepStatus};

/// Tokens a step spent, and what its model calls cost, summed into its
/// checkpoint row (`input_tokens`, `output_tokens`, `cost_nanos`). Here,
/// not beside `Agent`, so the records need nothing from the executor's
/// contract.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Its priced model calls' cost (`crate::meter::price`); 0 when none was
    /// priced. In dollars in JSON, absent when 0.
    #[serde(default, skip_serializing_if = "crate::Usd::is_zero")]
    pub cost_usd: crate::Usd,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cost_usd: self.cost_usd.saturating_add(other.cost_usd),
        }
    }
}

/// What went wrong in a step or run: one shape everywhere. A step that
/// stops for another reason (a question, children, a provider key) says
/// so with [`crate::Stop`], not with an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub kind: ErrorKind,
    pub message: String,
    pub retryable: bool,
    /// Tokens the failed or interrupted step spent, summed into its row.
    /// Not stored in the error itself.
    #[serde(skip)]
    pub usage: Option<Usage>,
    /// The least wait before a retry, when the failure said (a provider's
    /// `retry-after`); the retry policy's back-off applies if longer.
    #[serde(skip)]
    pub retry_after: Option<std::time::Duration>,
}

impl ErrorInfo {
    pub fn new(kind: ErrorKind, message: impl Into<String>, retryable: bool) -> Self {
        ErrorInfo {
            kind,
            message: message.into(),
            retryable,
            usage: None,
            retry_after: None,
        }
    }

    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// The class of a stored error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A command exited non-zero or was killed by a signal.
    ExitStatus,
    /// A command could not be started or talked to.
    Spawn,
    /// A step ran past its `timeout_ms`.
    Timeout,
    /// A template failed to render.
    Template,
    /// A Rust agent returned an error.
    Agent,
    /// The crew cannot execute this run (e.g. an unknown Rust handler).
    Crew,
    /// The same attempt killed its process too many times.
    CrashLoop,
    /// The run was cancelled.
    Cancelled,
    /// A person rejected a step at its approval.
    Rejected,
    /// A wait's deadline passed with the outcome "fail".
    Deadline,
    /// A step's output was over the output cap.
    TooLarge,
    /// A step stopped at a limit (an agent's `max_turns`); `continue`
    /// carries on from its journal. The step and run become `interrupted`.
    Interrupted,
    /// A model provider failed (retryable: rate limit, 5xx, timeout,
    /// dropped stream; not: 4xx, configuration).
    Provider,
    /// A model kept answering without progress; stopped instead of looping.
    NoProgress,
    /// A step's output (or a journal item) holds what storage refuses (a NUL
    /// character); not retried, since a retry would produce it again.
    Unstorable,
    /// The run's stored state does not make sense (design invariant 10);
    /// set aside by a worker instead of being retried or taken over.
    Corruption,
    /// A `children` step could not start its children (a limit, a map
    /// over something that is not an array), or its join rule failed.
    Children,
    /// A model provider answered "too many requests" with a time to wait
    /// (or the step found its provider key paused): the step is deferred
    /// to the pause's end, the same attempt, and spends no retry.
    RateLimited,
    /// A model call would pass the run's budget (tokens or model calls):
    /// the step and run are `interrupted`; `runs continue --budget` raises
    /// it and carries on.
    BudgetExceeded,
}

/// A run row, with the crew definition it started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    /// The crew's name.
    pub crew: String,
    pub crew_version: String,
    pub crew_fingerprint: Fingerprint,
    pub status: RunStatus,
    /// Index of the next pending step (= number of succeeded steps).
    pub cursor: StepIdx,
    pub step_count: u32,
    pub input: Value,
    pub idempotency_key: Option<String>,
    pub thread_id: Option<String>,
    /// Claim order: higher first, with ageing (`crate::priority`).
    #[serde(default)]
    pub priority: crate::Priority,
    /// Whose run it is (`crate::meter::tenant`); children and forks inherit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<crate::Tenant>,
    /// The run's own limits on model use, over its crew's `[budget]`
    /// (`crate::meter::budget`); raised by an operator's continue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::Budget>,
    /// The run's trace (`crate::trace`), when it is traced: its trace id
    /// finds it in a tracing backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::TraceContext>,
    /// The run's own upgrade policy, over its crew's (`crate::upgrade`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<crate::crew::upgrade_policy::UpgradePolicy>,
    /// Set when the run is runnable but no live process can execute its
    /// crew version (`Blocked`); filled by the engine's
    /// reads (`runs list`, `runs show`), never stored on the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Blocked>,
    pub lease_epoch: LeaseEpoch,
    /// A queued run waits until this time (database clock): a durable
    /// back-off between attempts.
    pub not_before: Option<DateTime<Utc>>,
    /// A cancel was requested while the run was running; the executor stops
    /// the step cooperatively and ends the run `cancelled`.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// The run this one was forked from, and the step it starts at.
    pub parent_run_id: Option<RunId>,
    pub parent_step_idx: Option<StepIdx>,
    /// Set on a run a `children` step started: its parent, step, attempt,
    /// key and depth (`parent_run_id` names the same parent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildOf>,
    pub error: Option<ErrorInfo>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The crew definition this run started with; `cairn resume` needs no file.
    pub crew_definition: CrewDef,
}

impl RunRecord {
    /// Run `id` of `crew` as a submit stores it at `at`: queued at its
    /// first step, at lease epoch 0, with nothing else set.
    pub fn submitted(id: RunId, crew: CrewDef, input: Value, at: DateTime<Utc>) -> RunRecord {
        RunRecord {
            id,
            crew: crew.name.clone(),
            crew_version: crew.version.clone(),
            crew_fingerprint: crew.fingerprint(),
            status: RunStatus::Queued,
            cursor: StepIdx(0),
            step_count: crew.step_count(),
            input,
            idempotency_key: None,
            thread_id: None,
            priority: Default::default(),
            tenant: None,
            budget: None,
            trace: None,
            upgrade: None,
            blocked: None,
            lease_epoch: LeaseEpoch(0),
            not_before: None,
            cancel_requested_at: None,
            parent_run_id: None,
            parent_step_idx: None,
            child: None,
            error: None,
            created_at: at,
            updated_at: at,
            finished_at: None,
            crew_definition: crew,
        }
    }
}

/// A checkpoint row: the durable record of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub idx: StepIdx,
    pub role: Role,
    pub status: StepStatus,
    pub attempt: Attempt,
    pub output: Option<Value>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// What its priced model calls cost (its children's included, as its
    /// tokens are); absent when none was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<crate::Usd>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<ErrorInfo>,
    /// How often this attempt was taken over after its process vanished.
    pub takeovers: u32,
}

impl StepRecord {
    pub fn duration_ms(&self) -> Option<i64> {
        self.finished_at
            .map(|f| (f - self.started_at).num_milliseconds())
    }
}

/// Why a runnable run waits: its crew version has Rust agents (code), and
/// no live process registered that version (`cairn workers`). Shown on the
/// run (`RunRecord::blocked`) and evented once (`run_blocked`); it clears
/// itself when a process offering the version starts and claims the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// The crew and version no live process offers.
    pub crew: String,
    pub version: String,
    pub fingerprint: crate::crew::Fingerprint,
    /// The handlers of its Rust agents: what a process must register.
    pub handlers: Vec<String>,
}

impl Blocked {
    /// What a run of `def` waits for, when no live process offers it.
    pub fn of(def: &CrewDef, fingerprint: crate::crew::Fingerprint) -> Blocked {
        let handlers = def
            .agents
            .iter()
            .filter_map(|a| match &a.kind {
                crate::crew::AgentKind::Rust { handler } => Some(handler.clone()),
                _ => None,
            })
            .collect();
        Blocked {
            crew: def.name.clone(),
            version: def.version.clone(),
            fingerprint,
            handlers,
        }
    }
}
