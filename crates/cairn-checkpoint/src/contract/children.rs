//! Child runs: a join's decision and the outcomes of a run's children.

use async_trait::async_trait;
use cairn_core::{Actor, RunId, StepIdx};

use crate::Result;

/// Child runs: a join's decision and the outcomes of a run's children.
#[async_trait]
pub trait ChildStore: Send + Sync + 'static {
    /// The decided join of a `children` step's attempt, with its
    /// children's outcomes; `None` while the join is open or if that
    /// attempt started no children.
    async fn joined(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
    ) -> Result<Option<cairn_core::Joined>>;

    /// Cancels the children of a step's decided join that are still
    /// unfinished (its rule needs them no more: a fail-fast failure, a
    /// first success, a quorum), each in a transaction of its own. The
    /// parent does this when it runs again.
    async fn close_join(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
        actor: &Actor,
    ) -> Result<()>;

    /// Every child of a run (of all its `children` steps), in step and
    /// listing order, with its status and, once it succeeded, its output.
    async fn children(&self, id: RunId) -> Result<Vec<cairn_core::ChildOutcome>>;
}
