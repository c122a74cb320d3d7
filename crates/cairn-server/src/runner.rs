//! The embedded runner: a background task that executes queued runs through
//! `Engine::execute` (the one executor, with the crew stored on each run,
//! never taking over a run another process holds), at most `concurrency` at
//! a time. It polls the store and wakes early when the API submits a run.
//!
//! This is a stand-in for lease-based workers: it lists queued runs and
//! drives them; the claim inside `execute` settles races with other
//! processes. It never crashes the server over a run: every error is
//! logged, and a run whose drive fails is retried later with a growing
//! back-off rather than in a tight loop.
//!
//! On every tick it also applies the deadlines of human waits
//! (`Engine::expire_due_waits`) before it looks for queued runs, so a wait
//! answered by its deadline default is driven in the same tick.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::{Engine, RunFilter, RunId, RunStatus};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

use crate::error::ErrorChain;
use crate::metrics::Metrics;

/// How the runner behaves.
#[derive(Debug, Clone)]
pub(crate) struct RunnerOptions {
    /// Runs driven at the same time.
    pub concurrency: usize,
    /// How often the store is polled for queued runs.
    pub poll: Duration,
    /// On shutdown, how long runs in flight may take to reach a stop before
    /// they are abandoned (they stay `running`; `cairn resume` takes them over).
    pub grace: Duration,
}

/// Wakes the runner before its next poll (after a submit).
#[derive(Debug, Clone, Default)]
pub(crate) struct Waker(Arc<Notify>);

impl Waker {
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// A running runner. Dropping it leaves the task running; call [`Runner::stop`].
pub(crate) struct Runner {
    task: tokio::task::JoinHandle<()>,
}

impl Runner {
    /// Starts the runner task. It stops launching runs once `stop` becomes
    /// `true`, then waits up to `opts.grace` for the runs in flight.
    pub fn start(
        engine: Engine,
        opts: RunnerOptions,
        waker: Waker,
        stop: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> Runner {
        let state = Loop {
            engine,
            opts,
            waker,
            stop,
            metrics,
            tasks: JoinSet::new(),
            by_task: HashMap::new(),
            driving: HashSet::new(),
            backoff: HashMap::new(),
            list_failing: false,
            expire_failing: false,
        };
        Runner {
            task: tokio::spawn(state.run()),
        }
    }

    /// Waits for the runner to finish its shutdown (trigger it first through
    /// the `stop` channel given to [`Runner::start`]).
    pub async fn stopped(self) {
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the runner task panicked");
        }
    }
}

/// A run whose drive failed: not tried again before `until`.
struct Backoff {
    failures: u32,
    until: Instant,
}

struct Loop {
    engine: Engine,
    opts: RunnerOptions,
    waker: Waker,
    stop: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    tasks: JoinSet<bool>,
    by_task: HashMap<tokio::task::Id, RunId>,
    driving: HashSet<RunId>,
    backoff: HashMap<RunId, Backoff>,
    list_failing: bool,
    expire_failing: bool,
}

impl Loop {
    async fn run(mut self) {
        tracing::info!(
            concurrency = self.opts.concurrency,
            "runner started: executing queued runs"
        );
        loop {
            if *self.stop.borrow() {
                break;
            }
            self.expire_waits().await;
            if self.driving.len() < self.opts.concurrency {
                self.launch().await;
            }
            let notify = self.waker.0.clone();
            let finished = tokio::select! {
                changed = self.stop.changed() => {
                    if changed.is_err() {
                        // Nobody can ask us to stop any more: the server is gone.
                        break;
                    }
                    None
                }
                _ = notify.notified() => None,
                _ = tokio::time::sleep(self.opts.poll) => None,
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => Some(done),
            };
            if let Some(done) = finished {
                self.finished(done);
            }
        }
        self.shut_down().await;
    }

    /// Applies the deadline outcome of every open wait past its deadline.
    /// A failure is logged (once until it recovers) and tried next tick.
    async fn expire_waits(&mut self) {
        match self.engine.expire_due_waits().await {
            Ok(done) => {
                if self.expire_failing {
                    tracing::info!("runner: wait deadlines are applied again");
                    self.expire_failing = false;
                }
                for wait in done {
                    tracing::info!(wait = %wait.id, run = %wait.run_id, status = %wait.status, "runner: wait deadline passed");
                }
            }
            Err(e) => {
                if !self.expire_failing {
                    tracing::warn!(error = %ErrorChain(&e), "runner: cannot apply wait deadlines; retrying");
                    self.expire_failing = true;
                }
            }
        }
    }

    /// Lists queued runs and starts driving as many as there are free slots.
    async fn launch(&mut self) {
        let queued = self
            .engine
            .list(&RunFilter {
                status: Some(RunStatus::Queued),
                ..RunFilter::default()
            })
            .await;
        let queued = match queued {
            Ok(runs) => {
                if self.list_failing {
                    tracing::info!("runner: the store answers again");
                    self.list_failing = false;
                }
                runs
            }
            Err(e) => {
                if !self.list_failing {
                    tracing::warn!(error = %ErrorChain(&e), "runner: cannot list queued runs; retrying");
                    self.list_failing = true;
                }
                return;
            }
        };
        let now = Instant::now();
        let wall_now = chrono::Utc::now();
        // Forget the failures of runs that left the queue.
        let ids: HashSet<RunId> = queued.iter().map(|r| r.id).collect();
        self.backoff.retain(|id, _| ids.contains(id));
        for run in queued {
            if self.driving.len() >= self.opts.concurrency {
                break;
            }
            if self.driving.contains(&run.id) {
                continue;
            }
            // A run waiting out a retry back-off would only occupy a slot
            // sleeping; leave it until its time (approximately: the
            // database's clock decides, and `drive` waits out any rest).
            if run.not_before.is_some_and(|t| t > wall_now) {
                continue;
            }
            if self.backoff.get(&run.id).is_some_and(|b| b.until > now) {
                continue;
            }
            self.spawn(run.id);
        }
        self.metrics.set_in_flight(self.driving.len());
    }

    fn spawn(&mut self, id: RunId) {
        let engine = self.engine.clone();
        let metrics = self.metrics.clone();
        let handle = self.tasks.spawn(drive(engine, metrics, id));
        self.by_task.insert(handle.id(), id);
        self.driving.insert(id);
    }

    /// Books a finished drive: frees its slot, and backs off a failed run.
    fn finished(&mut self, done: Result<(tokio::task::Id, bool), tokio::task::JoinError>) {
        let (task, ok) = match done {
            Ok((task, ok)) => (task, ok),
            Err(e) => {
                tracing::error!(error = %e, "runner: a drive panicked");
                (e.id(), false)
            }
        };
        if let Some(id) = self.by_task.remove(&task) {
            self.driving.remove(&id);
            if ok {
                self.backoff.remove(&id);
            } else {
                let b = self.backoff.entry(id).or_insert(Backoff {
                    failures: 0,
                    until: Instant::now(),
                });
                b.failures += 1;
                // 1 s, 2 s, 4 s, … at most 5 min.
                let wait = Duration::from_secs(1 << b.failures.min(9).saturating_sub(1))
                    .min(Duration::from_secs(300));
                b.until = Instant::now() + wait;
            }
        }
        self.metrics.set_in_flight(self.driving.len());
    }

    async fn shut_down(mut self) {
        if self.tasks.is_empty() {
            tracing::info!("runner stopped");
            return;
        }
        tracing::info!(
            runs = self.driving.len(),
            grace_ms = self.opts.grace.as_millis() as u64,
            "runner stopping: waiting for runs in flight"
        );
        let deadline = tokio::time::Instant::now() + self.opts.grace;
        loop {
            match tokio::time::timeout_at(deadline, self.tasks.join_next_with_id()).await {
                Ok(Some(done)) => self.finished(done),
                Ok(None) => break,
                Err(_) => {
                    let ids: Vec<String> = self.driving.iter().map(|id| id.to_string()).collect();
                    tracing::warn!(
                        runs = ?ids,
                        "runner: abandoning runs still executing at shutdown; they stay `running` until resumed (`cairn resume RUN_ID` takes them over)"
                    );
                    self.tasks.shutdown().await;
                    break;
                }
            }
        }
        self.metrics.set_in_flight(0);
        tracing::info!("runner stopped");
    }
}

/// Drives one run to its next stop; `true` unless the drive failed in a way
/// worth backing off from (another process taking the run is not one).
async fn drive(engine: Engine, metrics: Arc<Metrics>, id: RunId) -> bool {
    tracing::debug!(run = %id, "runner: driving");
    match engine.execute(id).await {
        Ok(driven) => {
            let status = driven.run.status;
            tracing::info!(run = %id, status = %status, steps = driven.executed.len(), "runner: run stopped");
            let steps = if driven.executed.is_empty() {
                vec![]
            } else {
                match engine.show(id).await {
                    Ok(view) => view.steps,
                    Err(e) => {
                        tracing::warn!(run = %id, error = %ErrorChain(&e), "runner: cannot read the steps for metrics");
                        vec![]
                    }
                }
            };
            let executed: Vec<_> = steps
                .iter()
                .filter(|s| driven.executed.contains(&s.idx))
                .collect();
            metrics.record_drive(status.as_str(), driven.executed.len(), &executed);
            true
        }
        Err(e) if taken_elsewhere(&e) => {
            tracing::debug!(run = %id, error = %ErrorChain(&e), "runner: another process took the run");
            true
        }
        Err(e) => {
            tracing::error!(run = %id, error = %ErrorChain(&e), "runner: drive failed");
            metrics.record_drive("error", 0, &[]);
            false
        }
    }
}

/// The run left the queue between our listing and our claim (another
/// process claimed, cancelled or finished it): nothing went wrong.
fn taken_elsewhere(e: &cairn::Error) -> bool {
    matches!(
        e,
        cairn::Error::Executor(cairn_scheduler::Error::Leased { .. })
            | cairn::Error::Executor(cairn_scheduler::Error::NotResumable { .. })
    ) || matches!(
        e.store_error(),
        Some(cairn_checkpoint::Error::WrongState { .. })
    )
}
