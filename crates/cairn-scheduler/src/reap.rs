//! After a takeover, before any step runs again: what the run's dead holder
//! left running is ended. The executor knows no processes; the [`Reaper`]
//! it is given does (`cairn` hands it `cairn_steps::reap`, which ends the
//! process groups of `command` steps whose engine died).

use std::sync::Arc;

use cairn_core::{EventRecord, RunId};

use crate::{Executor, Result};

/// Ends what a run's earlier holders left running, judged from the run's
/// events. Called on a blocking thread, once per takeover claim.
pub trait Reaper: Send + Sync {
    fn reap(&self, run: RunId, events: &[EventRecord]);
}

impl Executor {
    /// Ends what the run's dead holder left running (nothing without a
    /// [`Reaper`]): called right after a claim that took the run over.
    pub(crate) async fn reap(&self, run: RunId) -> Result<()> {
        let Some(reaper) = self.reaper.clone() else {
            return Ok(());
        };
        // Only what the reaper reads: a 1,000-step run has thousands of
        // other events.
        let events = self
            .store
            .events_of_kind(run, cairn_core::EventKind::ProgramStarted)
            .await?;
        let reaped = tokio::task::spawn_blocking(move || reaper.reap(run, &events)).await;
        if let Err(e) = reaped {
            tracing::warn!(run = %run, error = %e, "ending what a dead holder left running failed");
        }
        Ok(())
    }

    /// The same executor, ending what a dead holder left running at each
    /// takeover with `reaper`.
    pub fn with_reaper(mut self, reaper: Arc<dyn Reaper>) -> Self {
        self.reaper = Some(reaper);
        self
    }
}
