//! The engine's reads: a run and its view, events, journals, the doctor's
//! checkup, listings and threads. A run no live process can execute is
//! marked blocked here (`RunRecord::blocked`, from the process registry).

use cairn_checkpoint::{RunFilter, StoreStats};
use cairn_core::{EventRecord, RunId, RunRecord};

use super::{Checkup, CorruptRun, RunView};
use crate::{Engine, Result};

impl Engine {
    /// A run without its steps.
    pub async fn get_run(&self, id: RunId) -> Result<RunRecord> {
        Ok(self.store().get_run(id).await?)
    }

    /// Counts for monitoring: runs by status, runs ready to claim, lease
    /// takeovers, blocked runs.
    pub async fn stats(&self) -> Result<StoreStats> {
        let mut stats = self.store().stats().await?;
        stats.blocked = self.blocked().await?.len() as u64;
        Ok(stats)
    }

    pub async fn show(&self, id: RunId) -> Result<RunView> {
        let (mut run, steps) = self.store().load(id).await?;
        self.mark_blocked(std::slice::from_mut(&mut run)).await?;
        // Only a run with a `children` step has children to read.
        let children = match run.crew_definition.starts_children() {
            true => self.store().children(id).await?,
            false => vec![],
        };
        let budget = cairn_core::Budget::in_force(run.budget, run.crew_definition.budget);
        let spent = match budget {
            Some(_) => Some(self.store().spent(id).await?),
            None => None,
        };
        // Only a run of a crew with a `signal` step waits for signals.
        let signals = match run.crew_definition.listens() {
            true => self.run_signals(id).await?,
            false => crate::RunSignals::default(),
        };
        Ok(RunView {
            scheduled: crate::schedules::Scheduled::of(&run),
            run,
            steps,
            children,
            spent,
            signals: signals.signals,
            listening: signals.listening,
        })
    }

    /// A run's event log, by sequence.
    pub async fn events(&self, id: RunId) -> Result<Vec<EventRecord>> {
        Ok(self.store().events(id).await?)
    }

    /// The events of a run after sequence number `after` (what a live
    /// stream has not sent yet), by sequence.
    pub async fn events_after(&self, id: RunId, after: i64) -> Result<Vec<EventRecord>> {
        Ok(self.store().events_after(id, after).await?)
    }

    /// The journals of a run's agent steps (one step, or all), every
    /// generation, by step and `seq`.
    pub async fn journal(
        &self,
        id: RunId,
        step: Option<u32>,
    ) -> Result<Vec<crate::StepJournalEntry>> {
        let run = self.store().get_run(id).await?;
        let steps = match step {
            // No step has index u32::MAX (indices are below a u32 count).
            Some(s) => s..s.saturating_add(1),
            None => 0..run.step_count,
        };
        let mut out = Vec::new();
        for idx in steps {
            let idx = cairn_core::StepIdx(idx);
            for entry in self.store().journal(id, idx, None).await? {
                out.push(crate::StepJournalEntry { idx, entry });
            }
        }
        Ok(out)
    }

    /// Checks the database (SQLite's `quick_check`) and every run's rows
    /// (do they decode, and agree with the run, as a resume would judge
    /// them): what `cairn doctor` prints. Reads only.
    pub async fn doctor(&self) -> Result<Checkup> {
        let integrity = self.store().check().await?;
        let mut checkup = Checkup {
            integrity,
            runs: 0,
            corrupt_runs: vec![],
            replication: self.replication().await?,
        };
        let mut after = None;
        loop {
            // The store's page: the doctor judges rows, not the registry.
            let page = self
                .store()
                .list_runs(&RunFilter {
                    after,
                    limit: Some(500),
                    ..RunFilter::default()
                })
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            for run in &page {
                checkup.runs += 1;
                let judged = match self.store().load(run.id).await {
                    Ok((record, steps)) => cairn_core::rebuild(&record, &steps).map(drop),
                    Err(cairn_checkpoint::Error::Corruption(c)) => Err(c),
                    Err(e) => return Err(e.into()),
                };
                if let Err(c) = judged {
                    checkup.corrupt_runs.push(CorruptRun {
                        run: c.run,
                        detail: c.detail,
                    });
                }
            }
        }
        Ok(checkup)
    }

    /// The database's replication setup as this engine's connections see
    /// it: whether the server takes writes, and whether commits wait for a
    /// streaming standby (`None` on SQLite). Reads only.
    pub async fn replication(&self) -> Result<Option<crate::Replication>> {
        Ok(self.store().replication().await?)
    }

    /// Runs as `filter` selects them, each marked if it is blocked.
    pub async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let mut runs = self.store().list_runs(filter).await?;
        self.mark_blocked(&mut runs).await?;
        Ok(runs)
    }

    /// Removes what `policy` names (or, with `dry_run`, counts it), never
    /// what an unfinished run needs; the rows removed, by table.
    /// A policy's `thread` must be a valid thread id
    /// ([`crate::Error::BadThreadId`]).
    pub async fn compact(&self, policy: &crate::CompactPolicy) -> Result<crate::Compacted> {
        crate::thread::check(policy.thread.clone())?;
        Ok(self.store().compact(policy).await?)
    }

    /// Gives the space compaction freed back to the filesystem (SQLite: the
    /// file shrinks) or to PostgreSQL's tables ([`MaintenanceStore::vacuum`]).
    pub async fn vacuum(&self) -> Result<()> {
        Ok(self.store().vacuum().await?)
    }

    /// Every thread, the one whose newest run is oldest first.
    pub async fn threads(&self) -> Result<Vec<crate::ThreadSummary>> {
        self.threads_page(&crate::ThreadPage::default()).await
    }

    /// A page of threads in the order of [`Engine::threads`]: at most
    /// `page.limit`, after thread `page.after` (which must have a run, or
    /// it is not found).
    pub async fn threads_page(
        &self,
        page: &crate::ThreadPage,
    ) -> Result<Vec<crate::ThreadSummary>> {
        if let Some(after) = &page.after {
            crate::ThreadId::new(after)?;
        }
        Ok(self.store().threads(page).await?)
    }

    /// One thread: its runs, oldest first, and their totals. A thread no
    /// run belongs to is not found.
    pub async fn thread(&self, id: &str) -> Result<crate::ThreadView> {
        let id = crate::ThreadId::new(id)?;
        let (summary, runs) = self.store().thread(id.as_str()).await?;
        Ok(crate::ThreadView {
            thread_id: summary.thread_id,
            runs,
            totals: crate::ThreadTotals {
                runs: summary.runs,
                input_tokens: summary.input_tokens,
                output_tokens: summary.output_tokens,
                cost_usd: summary.cost_usd,
            },
            budget: self.store().thread_budget(id.as_str()).await?,
        })
    }

    /// Sets thread `id`'s budget: the limits `budget` names replace those
    /// it had; with `raise`, each raises one it has (refused, nothing
    /// written, for one it lacks). Checked before each model call of the
    /// thread's runs, over what they and their children spent. The thread
    /// need not have a run yet.
    pub async fn set_thread_budget(
        &self,
        id: &str,
        budget: &cairn_core::Budget,
        raise: bool,
        actor: &crate::Actor,
    ) -> Result<crate::ThreadBudget> {
        let id = crate::ThreadId::new(id)?;
        Ok(self
            .store()
            .set_thread_budget(id.as_str(), budget, raise, actor)
            .await?)
    }
}
