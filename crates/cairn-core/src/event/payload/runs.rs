//! The payloads of a run's life by the engine: submitted, claimed,
//! succeeded, failed.

use serde::{Deserialize, Serialize};

use crate::checkpoint::ErrorInfo;
use crate::crew::Fingerprint;
use crate::ids::{Attempt, LeaseEpoch, RunId, StepIdx};
use crate::status::RunStatus;

use super::{is_false, present};

/// `run_submitted`, the run's first event. Three writers:
/// - a submit (`RunStore::submit`): `crew`, `fingerprint`,
///   `idempotency_key` and `thread_id`, the last two always written, `null`
///   when the submit had none;
/// - a `children` step starting its children (one SQL insert of every
///   child's first event, `script/children.rs`): `crew`, `fingerprint`,
///   `parent`, and no `idempotency_key` or `thread_id`;
/// - a copy of a child that succeeded, kept by a fork running the step
///   again (`script/reuse.rs`): the same, and `copied_from`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSubmitted {
    /// The crew's name.
    pub crew: String,
    /// The fingerprint of the crew version the run starts on.
    pub fingerprint: Fingerprint,
    /// The submit's idempotency key: `None` for a child (absent),
    /// `Some(None)` for a submit without one (`null`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub idempotency_key: Option<Option<String>>,
    /// The thread the run belongs to, as `idempotency_key`: absent for a
    /// child, `null` for a submit without one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub thread_id: Option<Option<String>>,
    /// A child's: the run, step and attempt that started it, and its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<SubmittedChild>,
    /// A copy's: the child of an earlier run it copies (which succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<RunId>,
    /// Who submitted it (`by`, `reason` and where from, flattened), when
    /// the submit said: the server's principal, or local mode's user.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<crate::event::Actor>,
}

/// Where a child run hangs, as its `run_submitted` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmittedChild {
    /// The parent run.
    pub run_id: RunId,
    /// The parent's `children` step and its attempt that started the child.
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// The child's key among its siblings.
    pub key: String,
}

/// `run_claimed`: a process took the run's lease (`plan::claim_events`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunClaimed {
    /// The claiming process (its `lease_owner`).
    pub owner: String,
    /// The lease epoch the claim took.
    pub epoch: LeaseEpoch,
    /// The run's status before the claim (`queued`, or `running` for a
    /// takeover of an expired lease).
    pub from_status: RunStatus,
    /// The claim took over a step another process was running.
    pub took_over_step: bool,
    /// The run's cursor: the step to run.
    pub cursor: StepIdx,
    /// A takeover of a step whose holder died holding others too: not
    /// counted towards `crash_loop`. Written only when true (absent before
    /// commit 6b04225).
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared_death: bool,
}

/// `run_succeeded`. Written with `steps` at the last step's commit or the
/// answer that approved it; a copy of a child (`script/reuse.rs`) gets its
/// source's `run_succeeded` data, or `{"copied_from": source}` if the
/// source has none, so either field may be alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSucceeded {
    /// The run's step count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// A copy's source, when the copy had no `run_succeeded` data to copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<RunId>,
}

/// `run_failed`. Its writers:
/// - a step's last failed attempt, or a crew with no agent for the next
///   step (`outcome.rs`): `idx`, `attempts`, `error`;
/// - a rejected approval or an expired wait (`plan::failure_events`):
///   `idx`, `error`;
/// - a crash loop found at a claim (`plan::claim_events`): `error` alone;
/// - a corrupt run set aside by a worker (`script/runs.rs`): `error` and
///   `set_aside: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailed {
    /// Why the run failed.
    pub error: ErrorInfo,
    /// The step that failed it, where one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idx: Option<StepIdx>,
    /// The attempts that step made (its last attempt's number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The run was set aside as corrupt, not failed by a step.
    #[serde(default, skip_serializing_if = "is_false")]
    pub set_aside: bool,
}
