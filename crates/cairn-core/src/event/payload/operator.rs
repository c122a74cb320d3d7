//! The payloads of what operators (and forced resumes) do to a run: retry,
//! continue, cancel, fork, move or force its crew, add context. Each names
//! who did it and why ([`Actor`], flattened: `by`, `reason`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::crew::Fingerprint;
use crate::event::Actor;
use crate::ids::{RunId, StepIdx};
use crate::status::RunStatus;

/// `run_retried`, `run_continued`, `run_cancel_requested`, and the
/// operator's `run_cancelled` (`plan::plan_action`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorAction {
    /// Who, and why (`reason` written as `null` when none was given).
    #[serde(flatten)]
    pub actor: Actor,
    /// The run's status when the action was taken.
    pub from_status: RunStatus,
    /// The run's cursor: the step it carries on from.
    pub step: StepIdx,
    /// A retry that starts the failed `children` step's children again
    /// instead of keeping those that succeeded (`run_retried` only;
    /// written only when true).
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub rerun_children: bool,
}

/// `run_cancelled`: two writers with disjoint shapes, told apart by
/// `by` (an operator's always has it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RunCancelled {
    /// An operator cancelled a run that was not running (queued, waiting,
    /// interrupted or failed).
    ByOperator(OperatorAction),
    /// The running step stopped for a requested cancel (`outcome.rs`,
    /// after its `step_cancelled`).
    AtStep {
        /// The step that was running.
        idx: StepIdx,
    },
}

/// `run_forked`: the first event of a run forked from another
/// (`plan::fork_event`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunForked {
    /// The source run.
    pub parent: RunId,
    /// The step the fork starts at (earlier ones are copied).
    pub from_step: StepIdx,
    /// The fork runs on a new input.
    pub input_changed: bool,
    /// Whether a `children` step it runs again starts all its children
    /// (not keeping copies of the source's). Absent before commit ff99bb1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_children: Option<bool>,
    /// The fork's thread (`null` for none).
    pub thread_id: Option<String>,
    #[serde(flatten)]
    pub actor: Actor,
}

/// `crew_forced`: a resume with a different crew fingerprint was forced
/// (`Scheduler::resume` with `force_crew`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrewForced {
    /// The fingerprint the run was stored with.
    pub stored: Fingerprint,
    /// The fingerprint of the crew it resumes with.
    pub offered: Fingerprint,
    /// The process that forced it (its owner name).
    pub by: String,
}

/// `crew_upgraded`: the run moved to another version of its crew at a step
/// boundary (`script/crews.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrewUpgraded {
    pub from: CrewAt,
    pub to: CrewAt,
    #[serde(flatten)]
    pub actor: Actor,
    /// The move was forced past a compatibility check.
    pub forced: bool,
    /// What the forced move overrode, as people read it (`null` unless
    /// forced).
    pub overridden: Option<String>,
}

/// A crew version, as `crew_upgraded` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrewAt {
    pub version: String,
    pub fingerprint: Fingerprint,
}

/// `context_added`: a resume merged more context into the run's input for
/// the steps still to run (`NewEvent::context_added`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextAdded {
    #[serde(flatten)]
    pub actor: Actor,
    /// The context merged in (an object).
    pub context: Value,
    /// The earlier values of the input's keys it overwrote.
    pub replaced: Map<String, Value>,
}
