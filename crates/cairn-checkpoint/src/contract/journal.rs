//! The journal inside a step, and its live text.

use async_trait::async_trait;
use cairn_core::{JournalEntry, RunId, StepIdx};

use crate::{JournalAppend, LiveHub, Result};

/// The journal inside a step, and its live text.
#[async_trait]
pub trait JournalStore: Send + Sync + 'static {
    /// Where `llm` steps publish their text as it streams and watchers
    /// subscribe to it (not stored; see [`LiveHub`]).
    fn live(&self) -> &LiveHub;

    /// The journal of step `idx`, by `seq`: one generation, or all of them.
    async fn journal(
        &self,
        id: RunId,
        idx: StepIdx,
        generation: Option<u32>,
    ) -> Result<Vec<JournalEntry>>;

    /// Appends one journal item (and its event) in one transaction, at the
    /// step's next `seq`, if the run is `running` at `epoch`; otherwise
    /// [`Error::StaleEpoch`] or [`Error::WrongState`] and nothing is written.
    async fn append_journal(&self, item: &JournalAppend) -> Result<JournalEntry>;
}
