//! The payloads of a step attempt: its end (succeeded, failed, retried,
//! interrupted, cancelled, deferred), and what its program reported.

use serde::{Deserialize, Serialize};

use crate::checkpoint::ErrorInfo;
use crate::ids::{Attempt, Role, StepIdx};

/// `step_succeeded`. Two writers:
/// - a step's commit (`outcome.rs`, and the bench's hand-made commit):
///   `idx`, `role`, `attempt`, `duration_ms`, and `input_tokens` with
///   `output_tokens` when the step reported its usage;
/// - an answer that approved or edited a reviewed step (`plan_answer`):
///   `idx`, `attempt`, `reviewed_by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSucceeded {
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// The step's agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// How long the attempt ran (its process's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The tokens the step spent, when it reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Who approved (or edited) the reviewed step's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_by: Option<String>,
}

/// `step_failed`. Two shapes:
/// - an attempt that failed (`outcome.rs`): `idx`, `role`, `attempt`,
///   `duration_ms`, `error`, `will_retry`;
/// - a failure decided outside the attempt (a crash loop found at a claim,
///   a rejected approval, an expired wait; `plan.rs`): `idx`, `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepFailed {
    pub idx: StepIdx,
    pub error: ErrorInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<Attempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Whether another attempt follows (a `step_retry_scheduled` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub will_retry: Option<bool>,
}

/// `step_retry_scheduled`: a failed attempt will be retried after a
/// durable back-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRetryScheduled {
    pub idx: StepIdx,
    /// The attempt that will run.
    pub next_attempt: Attempt,
    /// The back-off before it (the run's `not_before`).
    pub delay_ms: u64,
}

/// `step_interrupted`: a step stopped at a limit (a turn limit, a budget)
/// and waits for `continue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepInterrupted {
    pub idx: StepIdx,
    pub role: Role,
    pub attempt: Attempt,
    pub duration_ms: u64,
    /// The limit it stopped at (kind `interrupted` or `budget_exceeded`).
    pub error: ErrorInfo,
}

/// `step_cancelled`: the running step stopped for a cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCancelled {
    pub idx: StepIdx,
    pub attempt: Attempt,
}

/// `step_deferred`: a step waits for its provider key's pause (or room in
/// its tree's budget); the run is queued again at its end, the same
/// attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDeferred {
    pub idx: StepIdx,
    pub role: Role,
    pub attempt: Attempt,
    pub duration_ms: u64,
    /// The provider key (or `budget=<root>`) it waits on.
    pub key: String,
    /// How long it waits.
    pub delay_ms: u64,
    /// Its own call was refused (a `key_paused` follows); `false`: it found
    /// the key paused and made no call.
    pub observed: bool,
    /// Why it waits, as people read it (a paused key, a capped
    /// `Retry-After`, no permit free). Absent before commit 83ee8f7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `usage_reported`: a `command` step's program reported the tokens it
/// spent (`cairn-usage:` on its stderr), which count in the run's budget
/// whether it succeeded or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReported {
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// `program_started`: a `command` step's program started in a process
/// group of its own (`cairn_steps::group::ProgramGroup`, flattened beside
/// `idx` and `attempt`). Linux only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramStarted {
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// The group's id: the program's pid.
    pub pgid: i32,
    /// The program's start time, in clock ticks since boot.
    pub start: u64,
    /// The machine: its host name, boot id and pid namespace.
    pub host: String,
    pub boot: String,
    pub pidns: String,
    /// The process that started it (the engine), and its start time.
    pub engine_pid: u32,
    pub engine_start: u64,
}
