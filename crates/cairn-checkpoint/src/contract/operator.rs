//! An operator's actions on a run: retry, continue, cancel, context, fork.

use async_trait::async_trait;
use cairn_core::{Actor, RunId, RunRecord};

use crate::{Action, ForkRequest, Result};

/// An operator's actions on a run: retry, continue, cancel, context, fork.
#[async_trait]
pub trait OperatorStore: Send + Sync + 'static {
    /// Applies an operator action (see [`Action`]), recording who and why.
    /// Refused with [`Error::WrongState`] when the run's status does not
    /// allow it; nothing is written then.
    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord>;

    /// Merges the JSON object `context` into the input of a run that is not
    /// running (its keys replace the input's), with a `context_added` event
    /// naming `actor`, the context and the values it replaced: for a queued
    /// run; an interrupted one is continued (`queued`) in the same
    /// transaction. Any other status is [`Error::WrongState`], a context or
    /// input that is not an object [`Error::BadContext`]; nothing is written
    /// then. (A resume merges its context in its claim instead,
    /// `ClaimRequest::context`.)
    async fn add_context(
        &self,
        id: RunId,
        context: &serde_json::Value,
        actor: &Actor,
    ) -> Result<RunRecord>;

    /// Creates a new queued run that copies the crew, input and checkpoints
    /// `0..from_step` of `id` and records it as its parent. The source run
    /// is not changed.
    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord>;
}
