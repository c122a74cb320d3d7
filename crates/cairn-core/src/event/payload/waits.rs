//! The payloads of a human wait: opened, answered, expired.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoint::ErrorInfo;
use crate::event::Actor;
use crate::ids::{Attempt, StepIdx};
use crate::people::approvers::{Approvers, CastVote};
use crate::people::Origin;
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
    /// The agent's approver policy, copied when the wait opened (so an
    /// upgrade of the crew never changes who may answer); written only
    /// when the agent has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Approvers>,
}

/// `wait_voted`: an eligible principal voted on a wait whose policy needs
/// more votes; the wait stays open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitVoted {
    pub wait: WaitId,
    pub kind: WaitKind,
    pub idx: StepIdx,
    /// `approve` or `reject`.
    pub decision: String,
    /// Who voted, why and where from (flattened: `by`, `reason`, `via`…).
    #[serde(flatten)]
    pub actor: Actor,
    /// Approvals so far, rejects so far, and the approvals the policy needs.
    pub approvals: u32,
    pub rejects: u32,
    pub required: u32,
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
    /// Where the answer came from (`via`, `token`, `client`, `note`),
    /// flattened; written only when known.
    #[serde(flatten)]
    pub origin: Origin,
    /// The votes that decided it, when the wait had an approver policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<CastVote>,
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
