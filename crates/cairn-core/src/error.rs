//! Errors of the domain model: refused transitions and corrupt checkpoints.
//! Both are typed so the CLI and API can map them to exit codes and statuses.

use crate::ids::RunId;
use crate::status::{RunStatus, StepStatus};

/// A state change that DESIGN.md's tables do not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The run is in a state that cannot become `to`.
    #[error("a run that is `{from}` cannot become `{to}`")]
    Run { from: RunStatus, to: RunStatus },
    /// The step is in a state that cannot become `to` (`None`: never ran).
    #[error("a step that is `{}` cannot become `{to}`", from.map(|s| s.as_str()).unwrap_or("not started"))]
    Step {
        from: Option<StepStatus>,
        to: StepStatus,
    },
}

/// Stored state of a run that does not make sense: a missing or undecodable
/// checkpoint, or a cursor that disagrees with the step rows. Never skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run {run} is corrupt: {detail}")]
pub struct Corruption {
    pub run: RunId,
    pub detail: String,
}

impl Corruption {
    pub fn new(run: RunId, detail: impl Into<String>) -> Self {
        Corruption {
            run,
            detail: detail.into(),
        }
    }
}
