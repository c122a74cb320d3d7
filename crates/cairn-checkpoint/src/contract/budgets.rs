//! Budgets: what a run has spent, reservations while calls are in flight,
//! raises.

use async_trait::async_trait;
use cairn_core::{Actor, LeaseEpoch, RunId, RunRecord};

use crate::{AfterRaise, Result};

/// Budgets: what a run has spent, reservations while calls are in flight,
/// raises.
#[async_trait]
pub trait BudgetStore: Send + Sync + 'static {
    /// What the run's model calls have spent, from its journal
    /// (`cairn_core::meter::budget`).
    async fn spent(&self, id: RunId) -> Result<cairn_core::Spent>;

    /// Before a model call of child run `id` (held under `epoch`): each of
    /// its budgeted ancestors weighs what its tree spent and what the
    /// calls of its other runs hold now; `Go` holds this call's estimate
    /// until [`BudgetStore::release_budget`] or the end of the lease
    /// (`cairn_core::meter::budget`). One write transaction, serialized per tree.
    async fn reserve_budget(
        &self,
        id: RunId,
        epoch: LeaseEpoch,
        ask: &cairn_core::BudgetAsk,
    ) -> Result<cairn_core::TreeAnswer>;

    /// Drops what run `id`'s call held, and wakes a run of its tree that
    /// waits for room.
    async fn release_budget(&self, id: RunId) -> Result<()>;

    /// Raises the run's budget by `by` (its own limits, or its crew's where
    /// it has none), recorded as a `budget_raised` event with who and why,
    /// then does what `then` says, all in one transaction: a refusal of
    /// either part writes nothing. Refused for a finished run. The run as
    /// it stands after.
    async fn raise_budget(
        &self,
        id: RunId,
        by: &cairn_core::Budget,
        then: AfterRaise,
        actor: &Actor,
    ) -> Result<RunRecord>;
}
