//! The worker loop, the one `cairn worker` and `cairn serve` both run
//! ([`Engine::work`]): claim runnable runs (queued and due, or running under
//! an expired lease) up to a concurrency, drive each to its next stop with
//! heartbeats, apply wait deadlines, sleep until woken or the poll, and on
//! shutdown give runs in flight a grace period. [`WorkHooks`] lets a
//! service watch it (the server's metrics); [`WakeUp`] lets it wake the
//! loop when it queues a run in its own process.
//!
//! It never stops over a run or the database: every error is logged (once
//! until it recovers) and tried again at the next tick, so a database
//! restart needs no operator. A run whose drive failed stays `running`
//! under a lease nobody extends; once it expires it is taken over again,
//! and the crash-loop cap ends a run that keeps failing that way.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::{RunId, RunRecord};
use cairn_scheduler::Driven;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::{Claimed, Engine, ErrorChain, Result};

/// The most runs a worker claims in one transaction: a dead worker's 500
/// runs are taken over in 32 transactions (and connections), not 500,
/// while one batch still holds SQLite's write lock only briefly.
const CLAIM_BATCH: usize = 16;

/// How a worker works.
#[derive(Clone)]
pub struct WorkOptions {
    /// Runs executed at once (at least one).
    pub concurrency: usize,
    /// How long to wait between looks when nothing is runnable.
    pub poll: Duration,
    /// On shutdown, how long runs in flight get to reach their next stop.
    pub shutdown_grace: Duration,
    /// Wakes the worker before its next poll (PostgreSQL's notifications
    /// already do, from any process).
    pub wake: Option<WakeUp>,
    /// Told about claims, drives and the runs in flight.
    pub hooks: Option<Arc<dyn WorkHooks>>,
    /// A retention pass with this policy every this long, in one process
    /// at a time across all workers of the database.
    pub compact: Option<(crate::CompactPolicy, Duration)>,
}

impl Default for WorkOptions {
    fn default() -> Self {
        WorkOptions {
            concurrency: 4,
            poll: Duration::from_millis(500),
            shutdown_grace: Duration::from_secs(30),
            wake: None,
            hooks: None,
            compact: None,
        }
    }
}

impl std::fmt::Debug for WorkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkOptions")
            .field("concurrency", &self.concurrency)
            .field("poll", &self.poll)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("wake", &self.wake.is_some())
            .field("hooks", &self.hooks.is_some())
            .finish()
    }
}

/// Wakes a worker at once instead of at its next poll: a service that
/// queues runs in its own process (on SQLite, the only way). A wake-up
/// while the worker is busy is kept for its next wait. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct WakeUp(Arc<Notify>);

impl WakeUp {
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// What a worker tells a service as it works. Every method does nothing
/// unless implemented.
#[crate::async_trait]
pub trait WorkHooks: Send + Sync {
    /// A run was claimed; `took_over`: it was running under another lease
    /// that had expired.
    fn claimed(&self, _run: &RunRecord, _took_over: bool) {}

    /// A drive ended: the run reached its next stop, or the drive failed
    /// (the run is taken over once its lease expires). Called in the
    /// drive's task, before its slot is freed.
    async fn driven(&self, _engine: &Engine, _run: RunId, _result: &Result<Driven>) {}

    /// The number of runs being driven changed.
    fn in_flight(&self, _runs: usize) {}

    /// A retention pass of this process finished.
    fn compacted(&self, _removed: &crate::Compacted) {}
}

/// How often a process fires due schedules.
const FIRE_EVERY: Duration = Duration::from_secs(1);

/// How often a worker deletes signals nobody consumed in time.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

impl Engine {
    /// A worker: applies wait deadlines, then claims runnable runs and
    /// drives up to `opts.concurrency` of them at once, looking again when
    /// one stops, when woken, or after `opts.poll`, until `shutdown`
    /// resolves; then stops claiming and gives runs in flight
    /// `opts.shutdown_grace` to reach their next stop. Runs still executing
    /// after that are dropped mid-step: their leases expire and another
    /// worker takes them over from their last checkpoint.
    pub async fn work(
        &self,
        opts: WorkOptions,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut worker = Worker {
            engine: self.clone(),
            concurrency: opts.concurrency.max(1),
            hooks: opts.hooks.clone(),
            tasks: JoinSet::new(),
            driving: HashMap::new(),
            claim_failing: false,
            expire_failing: false,
            next_prune: tokio::time::Instant::now() + PRUNE_EVERY,
            beat_failing: false,
        };
        let wake = opts.wake.clone().unwrap_or_default();
        let mut retention = Retention::new(opts.compact.clone());
        let mut next_expiry = tokio::time::Instant::now();
        let mut next_beat = tokio::time::Instant::now();
        let mut next_fire = tokio::time::Instant::now();
        loop {
            retention.tick(self, &worker.hooks);
            // Deadlines once per poll interval, however often the loop
            // turns (a busy worker turns once per finished run).
            // This process's offers before anything judges runs blocked.
            // Blocked runs at the beat's cadence too: a read a beat, not a
            // read a poll, so an idle fleet's statements stay few.
            if tokio::time::Instant::now() >= next_beat {
                worker.beat().await;
                worker.sweep_blocked().await;
                next_beat = tokio::time::Instant::now() + self.beat_every();
            }
            // Schedules once a second, whatever the poll: slots are whole
            // seconds, and an idle fleet pays one read a second for them.
            if tokio::time::Instant::now() >= next_fire {
                worker.fire_schedules().await;
                worker.time_out_signal_waits().await;
                next_fire = tokio::time::Instant::now() + FIRE_EVERY;
            }
            if tokio::time::Instant::now() >= next_expiry {
                worker.expire_waits().await;
                next_expiry = tokio::time::Instant::now() + opts.poll;
            }
            // Out of runs, or every slot busy: either way nothing more can
            // be claimed until a run ends, a wake, a notification or the
            // poll (a full worker that looked again at once would spin).
            worker.launch().await;
            let pause = opts.poll;
            let store = self.store().clone();
            tokio::select! {
                Some(done) = worker.tasks.join_next_with_id(), if !worker.tasks.is_empty() => {
                    worker.finished(done);
                }
                _ = wake.0.notified() => {}
                // Woken at once by a submit, retry or answer on PostgreSQL.
                () = store.wait_for_work(pause) => {}
                _ = &mut shutdown => break,
            }
        }
        worker.shut_down(opts.shutdown_grace).await;
        retention.stop();
        if let Err(e) = self.leave().await {
            tracing::warn!(error = %ErrorChain(&e), "worker: cannot leave the process registry; its entry expires with its lease");
        }
        Ok(())
    }
}

/// Periodic retention: at most one pass at a time in this process, and
/// one per interval across processes (`MaintenanceStore::claim_task`).
struct Retention {
    every: Option<(crate::CompactPolicy, Duration)>,
    next: tokio::time::Instant,
    pass: Option<tokio::task::JoinHandle<()>>,
    owner: String,
}

impl Retention {
    fn new(every: Option<(crate::CompactPolicy, Duration)>) -> Self {
        Retention {
            every,
            next: tokio::time::Instant::now(),
            pass: None,
            owner: format!("{}:{}", hostname(), std::process::id()),
        }
    }

    /// Starts a pass in the background if one is due here and no pass of
    /// this process still runs; it runs only if no other process took
    /// this interval's.
    fn tick(&mut self, engine: &Engine, hooks: &Option<Arc<dyn WorkHooks>>) {
        let Some((policy, every)) = &self.every else {
            return;
        };
        let now = tokio::time::Instant::now();
        if now < self.next || self.pass.as_ref().is_some_and(|p| !p.is_finished()) {
            return;
        }
        self.next = now + *every;
        let (engine, hooks) = (engine.clone(), hooks.clone());
        let (policy, every, owner) = (policy.clone(), *every, self.owner.clone());
        self.pass = Some(tokio::spawn(async move {
            match engine.store().claim_task("compact", every, &owner).await {
                Ok(true) => {}
                Ok(false) => return, // another process has this interval's pass
                Err(e) => {
                    tracing::warn!(error = %ErrorChain(&e), "worker: cannot schedule retention");
                    return;
                }
            }
            match engine.compact(&policy).await {
                Ok(removed) => {
                    tracing::info!(
                        runs = removed.runs,
                        steps = removed.steps,
                        events = removed.events,
                        journal_items = removed.journal_items,
                        waits = removed.waits,
                        "worker: retention pass"
                    );
                    if let Some(hooks) = &hooks {
                        hooks.compacted(&removed);
                    }
                }
                Err(e) => tracing::warn!(error = %ErrorChain(&e), "worker: retention pass failed"),
            }
        }));
    }

    fn stop(&mut self) {
        if let Some(pass) = self.pass.take() {
            pass.abort();
        }
    }
}

/// This machine's name: `HOSTNAME`, else the kernel's, else `worker`.
pub(crate) fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into())
}

/// The loop's state.
struct Worker {
    engine: Engine,
    concurrency: usize,
    hooks: Option<Arc<dyn WorkHooks>>,
    tasks: JoinSet<()>,
    /// The run each drive task drives.
    driving: HashMap<tokio::task::Id, RunId>,
    claim_failing: bool,
    expire_failing: bool,
    next_prune: tokio::time::Instant,
    beat_failing: bool,
}

impl Worker {
    /// Applies the deadline outcome of every open wait past its deadline.
    async fn expire_waits(&mut self) {
        match self.engine.expire_due_waits().await {
            Ok(done) => {
                if self.expire_failing {
                    tracing::info!("worker: wait deadlines are applied again");
                    self.expire_failing = false;
                }
                for wait in done {
                    tracing::info!(wait = %wait.id, run = %wait.run_id, status = %wait.status, "worker: wait deadline passed");
                }
            }
            Err(e) => {
                if !self.expire_failing {
                    tracing::warn!(error = %ErrorChain(&e), "worker: cannot apply wait deadlines; retrying");
                    self.expire_failing = true;
                }
            }
        }
    }

    /// Fires the due schedules (their runs are queued: claimed below).
    async fn fire_schedules(&mut self) {
        match self.engine.fire_schedules().await {
            Ok(decided) => {
                for slot in decided {
                    tracing::info!(schedule = %slot.schedule, slot = %slot.slot, outcome = slot.outcome.as_str(), run = ?slot.run_id, "worker: schedule slot");
                }
            }
            Err(e) => {
                tracing::warn!(error = %ErrorChain(&e), "worker: cannot fire schedules; retrying at the next poll");
            }
        }
    }

    /// Times out due signal waits (their runs are queued: claimed below),
    /// and now and then deletes signals nobody consumed in time.
    async fn time_out_signal_waits(&mut self) {
        match self.engine.time_out_signal_waits().await {
            Ok(woken) => {
                for run in woken {
                    tracing::info!(run = %run, "worker: a signal wait timed out");
                }
            }
            Err(e) => {
                tracing::warn!(error = %ErrorChain(&e), "worker: cannot time out signal waits; retrying in a second");
            }
        }
        if tokio::time::Instant::now() >= self.next_prune {
            self.next_prune = tokio::time::Instant::now() + PRUNE_EVERY;
            if let Err(e) = self.engine.prune_signals().await {
                tracing::warn!(error = %ErrorChain(&e), "worker: cannot delete expired signals");
            }
        }
    }

    /// Keeps this process live in the registry, with what it offers.
    async fn beat(&mut self) {
        match self.engine.announce(true).await {
            Ok(()) => self.beat_failing = false,
            Err(e) if !self.beat_failing => {
                tracing::warn!(error = %ErrorChain(&e), "worker: cannot beat in the process registry; retrying");
                self.beat_failing = true;
            }
            Err(_) => {}
        }
    }

    /// Writes `run_blocked` once for each run no live process can execute.
    async fn sweep_blocked(&mut self) {
        match self.engine.sweep_blocked().await {
            Ok(newly) => {
                for b in newly {
                    tracing::warn!(run = %b.run, "worker: the run is blocked: {}", b.blocked);
                }
            }
            Err(e) => {
                tracing::warn!(error = %ErrorChain(&e), "worker: cannot look for blocked runs")
            }
        }
    }

    /// Claims runnable runs, a batch per transaction, and starts driving
    /// them while slots are free, until it runs out of runs (or cannot
    /// claim).
    async fn launch(&mut self) {
        while self.driving.len() < self.concurrency {
            let free = self.concurrency - self.driving.len();
            let size = free.min(CLAIM_BATCH);
            match self.engine.claim_batch(size).await {
                Ok(batch) if batch.is_empty() => break,
                Ok(batch) => {
                    if self.claim_failing {
                        tracing::info!("worker: the store answers again");
                        self.claim_failing = false;
                    }
                    let full = batch.len() == size;
                    for claimed in batch {
                        self.start(claimed);
                    }
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    if !self.claim_failing {
                        tracing::warn!(error = %ErrorChain(&e), "worker: cannot claim runs; retrying");
                        self.claim_failing = true;
                    }
                    break;
                }
            }
        }
        self.report_in_flight();
    }

    /// Starts driving a claimed run in a task of its own.
    fn start(&mut self, claimed: Claimed) {
        if let Some(hooks) = &self.hooks {
            hooks.claimed(&claimed.run, claimed.took_over);
        }
        let id = claimed.run.id;
        let engine = self.engine.clone();
        let hooks = self.hooks.clone();
        let handle = self.tasks.spawn(async move {
            tracing::info!(run = %id, took_over = claimed.took_over, "worker: claimed");
            let result = engine.drive_claimed(claimed).await;
            match &result {
                Ok(driven) => {
                    tracing::info!(run = %id, status = %driven.run.status, steps = driven.executed.len(), "worker: run stopped");
                }
                Err(e) if e.corruption().is_some() => {
                    tracing::error!(run = %id, error = %ErrorChain(e), "worker: the run is corrupt; failed it with kind `corruption`");
                }
                Err(e) => {
                    tracing::error!(run = %id, error = %ErrorChain(e), "worker: drive failed; the run is taken over once its lease expires");
                }
            }
            if let Some(hooks) = hooks {
                hooks.driven(&engine, id, &result).await;
            }
        });
        self.driving.insert(handle.id(), id);
    }

    /// Books a finished drive task: frees its slot.
    fn finished(&mut self, done: Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
        let task = match done {
            Ok((task, ())) => task,
            Err(e) => {
                tracing::error!(error = %e, "worker: a drive panicked");
                e.id()
            }
        };
        self.driving.remove(&task);
        self.report_in_flight();
    }

    fn report_in_flight(&self) {
        if let Some(hooks) = &self.hooks {
            hooks.in_flight(self.driving.len());
        }
    }

    /// Waits up to `grace` for the runs in flight, then drops the rest.
    async fn shut_down(mut self, grace: Duration) {
        if !self.tasks.is_empty() {
            tracing::info!(
                runs = self.driving.len(),
                grace_ms = grace.as_millis() as u64,
                "worker stopping: waiting for runs in flight"
            );
            let deadline = tokio::time::Instant::now() + grace;
            loop {
                match tokio::time::timeout_at(deadline, self.tasks.join_next_with_id()).await {
                    Ok(Some(done)) => self.finished(done),
                    Ok(None) => break,
                    Err(_) => {
                        let ids: Vec<String> =
                            self.driving.values().map(|id| id.to_string()).collect();
                        tracing::warn!(
                            runs = ?ids,
                            "worker: abandoning runs still executing at shutdown; they stay `running` until their leases expire and a worker takes them over (or `cairn resume RUN_ID` does)"
                        );
                        self.tasks.shutdown().await;
                        break;
                    }
                }
            }
        }
        self.driving.clear();
        self.report_in_flight();
    }
}
