//! Waits for people: listing, answering and expiring them.

use async_trait::async_trait;
use cairn_core::{Actor, Answer, WaitId, WaitRecord};

use crate::{Result, WaitFilter};

/// Waits for people: listing, answering and expiring them.
#[async_trait]
pub trait WaitStore: Send + Sync + 'static {
    /// Waits, oldest first.
    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>>;

    /// Records a person's answer to an open wait and moves its run on in the
    /// same transaction (see `cairn_core::Answer`). The same answer twice is
    /// a no-op; answering a closed wait otherwise is [`Error::WaitClosed`].
    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &Actor) -> Result<WaitRecord>;

    /// Open waits whose deadline has passed, by the database clock.
    async fn due_waits(&self) -> Result<Vec<WaitRecord>>;

    /// Expires a due wait whose outcome is "fail": the wait `expired`, its
    /// step and run `failed` with error kind `deadline`.
    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord>;
}
