//! The payloads of signals (`crate::signal`): received by a run, a step
//! waiting for one, one consumed, a wait that timed out; and of a value a
//! run published for its callers (`crate::published`).

use serde::{Deserialize, Serialize};

use crate::event::Actor;
use crate::ids::{Attempt, StepIdx};

/// `signal_received`: a signal for the run was stored (buffered until a
/// step consumes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalReceived {
    /// Its idempotency id.
    pub id: String,
    pub name: String,
    /// Who sent it, and where from (flattened: `by`, `reason`, `via`…).
    #[serde(flatten)]
    pub actor: Actor,
    /// It woke the run, which was waiting for it.
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub woke: bool,
    /// The sender's W3C `traceparent`, when it sent one: the run's trace
    /// links its span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// `signal_wait_opened`: a `signal` step waits for one of `names`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalWaitOpened {
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub names: Vec<String>,
    /// Its timeout, from the first time it opened at this attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `signal_consumed`: a step's commit consumed the signal `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalConsumed {
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub id: String,
    pub name: String,
}

/// `signal_timed_out`: a `signal` step's wait passed its timeout with no
/// signal; the step outputs its default or fails (`deadline`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalTimedOut {
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub names: Vec<String>,
}

/// `value_published`: a step set `key` to `value` for the run's callers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValuePublished {
    pub key: String,
    pub value: serde_json::Value,
    pub idx: StepIdx,
    pub attempt: Attempt,
}
