//! This process in the registry (`cairn_checkpoint::WorkerStore`): the crew
//! versions it can execute, written before it claims (so a claim takes a
//! run with Rust agents only where they are registered), kept live by the
//! worker loop's beat and removed when the loop stops. Also the reads of
//! the registry: the processes (`cairn workers`) and the blocked runs.

use std::sync::Mutex;
use std::time::Instant;

use cairn_checkpoint::{BlockedRun, ProcessBeat, ProcessRecord};
use cairn_core::{CrewDef, RunRecord};

use crate::{Engine, Result};

/// What this process has written to the registry.
#[derive(Debug, Default)]
pub(crate) struct Presence {
    /// Crew versions registered since the last beat.
    pending: Mutex<Vec<CrewDef>>,
    /// When a beat last wrote this process's row.
    beaten: Mutex<Option<Instant>>,
}

impl Presence {
    /// A crew version registered in this process, to offer at the next beat.
    pub(crate) fn offer(&self, def: &CrewDef) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(def.clone());
    }

    fn take(&self) -> Vec<CrewDef> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn beaten(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.beaten.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn put_back(&self, mut offers: Vec<CrewDef>) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        offers.append(&mut pending);
        *pending = offers;
    }
}

impl Engine {
    /// Writes this process's row and the crew versions registered since its
    /// last beat: always when `beat`, else (before a claim) only if there is
    /// something new or the last beat is a beat interval old, so a process
    /// that claims in a loop of its own (`work_one`) stays live too. A
    /// failed beat keeps what it had to offer.
    pub(crate) async fn announce(&self, beat: bool) -> Result<()> {
        let offers = self.presence.take();
        let fresh = self
            .presence
            .beaten()
            .is_some_and(|at| at.elapsed() < self.beat_every());
        if !beat && offers.is_empty() && fresh {
            return Ok(());
        }
        let config = self.executor.config();
        let req = ProcessBeat {
            id: config.owner.clone(),
            host: crate::work::hostname(),
            pid: std::process::id(),
            ttl: config.lease,
            offers: (!offers.is_empty()).then(|| offers.clone()),
        };
        match self.store().beat_process(&req).await {
            Ok(()) => {
                *self.presence.beaten() = Some(Instant::now());
                Ok(())
            }
            Err(e) => {
                self.presence.put_back(offers);
                Err(e.into())
            }
        }
    }

    /// How often a worker beats in the registry: its lease heartbeat's
    /// cadence, so a process is live for a lease after its last beat.
    pub(crate) fn beat_every(&self) -> std::time::Duration {
        self.executor.config().heartbeat
    }

    /// Removes this process from the registry (a worker stopping): runs
    /// only it could execute show as blocked at once.
    pub(crate) async fn leave(&self) -> Result<()> {
        let owner = self.executor.config().owner.clone();
        self.store().leave(&owner).await?;
        *self.presence.beaten() = None;
        // Offered again at the next claim, should this engine work again.
        let crews = self.crews.read().unwrap_or_else(|p| p.into_inner());
        for crew in crews.values() {
            self.presence.offer(crew.def());
        }
        Ok(())
    }

    /// Every registered process, live or expired within the last hour, with
    /// the crew versions it offers and the runs it holds.
    pub async fn workers(&self) -> Result<Vec<ProcessRecord>> {
        Ok(self.store().processes().await?)
    }

    /// Runnable runs whose crew version has Rust agents no live process
    /// offers, oldest first.
    pub async fn blocked(&self) -> Result<Vec<BlockedRun>> {
        Ok(self.store().blocked().await?)
    }

    /// Writes `run_blocked` once for each run newly blocked (a worker's
    /// poll); the runs it wrote it for.
    pub(crate) async fn sweep_blocked(&self) -> Result<Vec<BlockedRun>> {
        let found = self.store().blocked().await?;
        if found.iter().all(|b| b.evented) {
            return Ok(vec![]);
        }
        Ok(self.store().sweep_blocked().await?)
    }

    /// Marks the runs in `runs` that are blocked; reads the registry only
    /// when one of them could be (queued, or running).
    pub(crate) async fn mark_blocked(&self, runs: &mut [RunRecord]) -> Result<()> {
        use cairn_core::RunStatus::{Queued, Running};
        if !runs.iter().any(|r| matches!(r.status, Queued | Running)) {
            return Ok(());
        }
        let blocked = self.blocked().await?;
        for run in runs.iter_mut() {
            run.blocked = blocked
                .iter()
                .find(|b| b.run == run.id)
                .map(|b| b.blocked.clone());
        }
        Ok(())
    }
}
