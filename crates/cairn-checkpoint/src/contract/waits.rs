//! Waits for people: listing, answering and expiring them.

use async_trait::async_trait;
use cairn_core::{Actor, Answer, Ballot, WaitId, WaitRecord};

use crate::{Result, WaitFilter};

/// Waits for people: listing, answering and expiring them.
#[async_trait]
pub trait WaitStore: Send + Sync + 'static {
    /// Waits, oldest first.
    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>>;

    /// Records a person's answer to an open wait and moves its run on in the
    /// same transaction (see `cairn_core::Answer`). The same answer twice is
    /// a no-op; answering a closed wait otherwise is [`Error::WaitClosed`].
    /// A wait whose agent has an approver policy takes it as `by`'s vote:
    /// [`Error::Ineligible`] (nothing stored) for a voter the policy does
    /// not admit or a second, different vote; the wait is answered by the
    /// vote that meets the rule, and stays open after the others.
    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &Actor) -> Result<WaitRecord>;

    /// A wait's approver policy (copied when it opened) and the votes cast
    /// on it so far. [`Error::WaitNotFound`] for an unknown wait.
    async fn ballot(&self, id: WaitId) -> Result<Ballot>;

    /// Open waits whose deadline has passed, by the database clock.
    async fn due_waits(&self) -> Result<Vec<WaitRecord>>;

    /// Expires a due wait whose outcome is "fail": the wait `expired`, its
    /// step and run `failed` with error kind `deadline`.
    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord>;
}
