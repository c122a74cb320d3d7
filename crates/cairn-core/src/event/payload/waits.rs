//! The payloads of a human wait: opened, answered, expired.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoint::ErrorInfo;
use crate::ids::{Attempt, StepIdx};
use crate::wait::{Answer, WaitId, WaitKind};

use super::present;

/// `wait_opened`: a step waits for a person (`outcome.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitOpened {
    pub wait: WaitId,
    /// Review, approval or question.
    pub kind: WaitKind,
    pub idx: StepIdx,
    pub attempt: Attempt,
}

/// `wait_answered`: a person answered (`plan::plan_answer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitAnswered {
    pub wait: WaitId,
    pub kind: WaitKind,
    pub idx: StepIdx,
    /// The answer (`{"decision": …}`).
    pub answer: Answer,
    /// Who answered.
    pub by: String,
    /// Why; written only when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// An edit's: the step's output it replaced (`null` if it had none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub original: Option<Value>,
}

/// `wait_expired`: a wait passed its deadline unanswered, with the outcome
/// "fail" (`plan::plan_expire`; its `step_failed` and `run_failed` follow).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitExpired {
    pub wait: WaitId,
    pub kind: WaitKind,
    pub idx: StepIdx,
    /// The `deadline` error the step and run fail with.
    pub error: ErrorInfo,
}
