//! Errors of the domain model: corrupt checkpoints here, refused transitions
//! beside their tables in `status` (re-exported, so `error::TransitionError`
//! still names it). Both are typed so the CLI and API can map them to exit
//! codes and statuses.

use crate::ids::RunId;

pub use crate::status::TransitionError;

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
