//! The journal and meter the executor gives each step: `Store`'s journal
//! and meter methods bound to the run, step, attempt, generation and lease that
//! dispatched it, so an agent journals without knowing storage and a
//! process that lost the run cannot write.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_checkpoint::{failpoint, Error as StoreError, JournalAppend, Store};
use cairn_core::{
    Admission, Attempt, Fence, Journal, JournalEntry, JournalError, KeyAsk, KeyPause, Meter,
    NewEvent, NewJournalItem, OutputDelta, Permit, RunId, StepIdx,
};

pub(crate) struct StoreJournal {
    pub store: Arc<dyn Store>,
    pub run: RunId,
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub generation: u32,
    pub fence: Fence,
    pub max_item_bytes: usize,
    /// The step's newest journal `seq`, any generation (0: none yet), as
    /// last read or written: what live text is sent after.
    pub newest: AtomicI64,
}

fn journal_error(e: StoreError) -> JournalError {
    match e {
        StoreError::StaleEpoch { .. } | StoreError::WrongState { .. } => JournalError::LeaseLost,
        StoreError::Corruption(c) => JournalError::Corrupt(c.detail),
        StoreError::Unstorable(u) => JournalError::Unstorable(u),
        other => JournalError::Storage(other.to_string()),
    }
}

#[async_trait]
impl Journal for StoreJournal {
    async fn items(&self) -> Result<Vec<JournalEntry>, JournalError> {
        // Every generation, to learn the newest `seq` (live text is placed
        // after it); the turn sees only its own generation.
        let all = self
            .store
            .journal(self.run, self.idx, None)
            .await
            .map_err(journal_error)?;
        if let Some(last) = all.iter().map(|e| e.seq).max() {
            self.newest.fetch_max(last, Ordering::Relaxed);
        }
        Ok(all
            .into_iter()
            .filter(|e| e.generation == self.generation)
            .collect())
    }

    async fn append(&self, item: NewJournalItem) -> Result<JournalEntry, JournalError> {
        cairn_core::check_size("a journal item", &item.payload, self.max_item_bytes)?;
        cairn_core::check_storable("a journal item", &item.payload)?;
        failpoint::step("before_journal", self.idx);
        let appended = self
            .store
            .append_journal(&JournalAppend {
                run_id: self.run,
                fence: self.fence.clone(),
                idx: self.idx,
                attempt: self.attempt,
                generation: self.generation,
                kind: item.kind,
                payload: item.payload,
                event: item.event,
            })
            .await
            .map_err(journal_error);
        failpoint::step("after_journal", self.idx);
        if let Ok(entry) = &appended {
            self.newest.fetch_max(entry.seq, Ordering::Relaxed);
        }
        appended
    }

    async fn event(&self, event: NewEvent) -> Result<(), JournalError> {
        self.store
            .record_events(self.run, &self.fence, std::slice::from_ref(&event))
            .await
            .map_err(journal_error)
    }

    fn live(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.store.live().publish(OutputDelta {
            run_id: self.run,
            idx: self.idx,
            attempt: self.attempt,
            after_seq: self.newest.load(Ordering::Relaxed),
            text: text.to_owned(),
        });
    }
}

/// The same handle is the step's meter: `Store`'s spending and key
/// methods bound likewise.
#[async_trait]
impl Meter for StoreJournal {
    async fn spent(&self) -> Result<cairn_core::Spent, JournalError> {
        self.store.spent(self.run).await.map_err(journal_error)
    }

    async fn sent(
        &self,
        estimate: &cairn_core::CallEstimate,
    ) -> Result<Option<cairn_core::SentCall>, JournalError> {
        let sent = cairn_core::SentCall {
            epoch: self.fence.epoch.0,
            estimate: *estimate,
        };
        let event = NewEvent::typed(cairn_core::EventData::ModelCallSent(sent.event()));
        self.event(event).await?;
        Ok(Some(sent))
    }

    async fn budget(&self) -> Result<Option<cairn_core::Budget>, JournalError> {
        let run = self.store.get_run(self.run).await.map_err(journal_error)?;
        Ok(crate::budget_of(&run))
    }

    async fn paused_for(&self, key: &str) -> Result<Option<Duration>, JournalError> {
        self.store.paused_for(key).await.map_err(journal_error)
    }

    async fn admit(
        &self,
        key: &str,
        tokens: u64,
        declared: Option<cairn_core::Declared>,
    ) -> Result<Admission, JournalError> {
        let ask = KeyAsk {
            key: key.to_owned(),
            run: self.run,
            epoch: self.fence.epoch,
            tokens,
            declared,
        };
        self.store.admit(&ask).await.map_err(journal_error)
    }

    async fn reserve(
        &self,
        ask: &cairn_core::BudgetAsk,
    ) -> Result<cairn_core::TreeAnswer, JournalError> {
        self.store
            .reserve_budget(self.run, self.fence.epoch, ask)
            .await
            .map_err(journal_error)
    }

    async fn thread_spent(&self, thread: &str) -> Result<cairn_core::Spent, JournalError> {
        let budget = self
            .store
            .thread_budget(thread)
            .await
            .map_err(journal_error)?;
        Ok(budget.map(|b| b.spent).unwrap_or_default())
    }

    async fn unreserve(&self) -> Result<(), JournalError> {
        self.store
            .release_budget(self.run)
            .await
            .map_err(journal_error)
    }

    async fn release(&self, permit: &Permit, used: u64) -> Result<(), JournalError> {
        self.store
            .release(permit, used)
            .await
            .map_err(journal_error)
    }

    async fn pause(
        &self,
        key: &str,
        wait: Duration,
        reason: &str,
    ) -> Result<cairn_core::Paused, JournalError> {
        let pause = KeyPause {
            key: key.to_owned(),
            wait,
            reason: reason.to_owned(),
            by: KeyPause::PROVIDER.into(),
        };
        self.store.pause_key(&pause).await.map_err(journal_error)
    }
}
