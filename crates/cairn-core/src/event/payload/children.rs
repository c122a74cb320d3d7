//! The payloads of a `children` step (and of an `llm` agent's `delegate`
//! calls): its children spawned, reused, ended, interrupted, joined.

use serde::{Deserialize, Serialize};

use crate::checkpoint::ErrorKind;
use crate::children::JoinRule;
use crate::ids::{Attempt, RunId, StepIdx};
use crate::status::RunStatus;

/// `children_spawned`: the step started its children (`outcome::spawn`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildrenSpawned {
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// How they join (`all` for a delegation).
    pub join: JoinRule,
    /// A `quorum` join's count (`null` otherwise).
    pub quorum: Option<u32>,
    /// How many children (reused ones included).
    pub children: u32,
    /// The crew of the step (a delegation's: its first child's).
    pub crew: String,
    /// Every crew its children run, `crew` first. Absent before commit
    /// 61fce1c (one crew then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crews: Vec<String>,
    /// How many run at once (`null`: all).
    pub concurrency: Option<u32>,
}

/// `children_joined`: the step's join was decided (`script/ends.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildrenJoined {
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// The join rule was met (`false`: it failed).
    pub met: bool,
    pub rule: JoinRule,
    /// Children ended, of them succeeded, and all.
    pub settled: u32,
    pub ok: u32,
    pub total: u32,
    /// The child whose end decided it.
    pub by: RunId,
}

/// `children_reused`: a retry of the step kept the children that succeeded
/// at its earlier attempts, or a fork running it again kept copies of its
/// source's (`script/reuse.rs`); only the others start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildrenReused {
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// The kept children, in the spawn's order.
    pub reused: Vec<ReusedChild>,
}

/// A child kept by `children_reused`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReusedChild {
    pub key: String,
    /// The child run (a copy's new id).
    pub run_id: RunId,
    /// A copy's: the source's child it copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<RunId>,
}

/// `child_interrupted`, on the parent that waits for the child: the child
/// stopped `interrupted` (its budget or its tree's, a turn limit), and an
/// operator must continue it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildInterrupted {
    pub child: RunId,
    /// The child's key.
    pub key: String,
    /// The parent's step (`null` if the child's row had none).
    pub idx: Option<StepIdx>,
    /// The child's error: its kind and message.
    pub kind: ErrorKind,
    pub message: String,
}

/// `child_ended`, on the parent, in the transaction that counted the end
/// against its open join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildEnded {
    pub child: RunId,
    pub key: String,
    /// The parent's step.
    pub idx: StepIdx,
    /// `succeeded`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// The child's error, when it did not succeed and has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
