//! The embedded workers: a background task that claims runnable runs the
//! way `cairn worker` does (`Engine::claim_next`: queued and due, or running
//! under an expired lease, `FOR UPDATE SKIP LOCKED` on PostgreSQL) and drives
//! each with `Engine::drive_claimed`, which keeps its lease with heartbeats
//! fenced by the epoch. At most `concurrency` runs at a time. It wakes at
//! once when the API queues a run (an in-process wake-up, which also covers
//! SQLite), on PostgreSQL when any process does (`LISTEN/NOTIFY`), and
//! otherwise every `poll`.
//!
//! It never crashes the server over a run or the database: every error is
//! logged once and the loop tries again at the next tick, so a database
//! restart needs no operator. A run whose drive failed stays `running`
//! under a lease nobody extends; once it expires it is taken over again,
//! and the crash-loop cap ends a run that keeps failing that way.
//!
//! On every tick it also applies the deadlines of human waits
//! (`Engine::expire_due_waits`) before it claims runs, so a wait answered by
//! its deadline default is driven in the same tick.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cairn::{Engine, RunId};
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
            claim_failing: false,
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

struct Loop {
    engine: Engine,
    opts: RunnerOptions,
    waker: Waker,
    stop: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    tasks: JoinSet<()>,
    by_task: HashMap<tokio::task::Id, RunId>,
    driving: HashSet<RunId>,
    claim_failing: bool,
    expire_failing: bool,
}

impl Loop {
    async fn run(mut self) {
        tracing::info!(
            concurrency = self.opts.concurrency,
            "runner started: claiming runnable runs"
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
            let store = self.engine.store().clone();
            let finished = tokio::select! {
                changed = self.stop.changed() => {
                    if changed.is_err() {
                        // Nobody can ask us to stop any more: the server is gone.
                        break;
                    }
                    None
                }
                _ = notify.notified() => None,
                // Another process made a run runnable (PostgreSQL), or the poll.
                () = store.wait_for_work(self.opts.poll) => None,
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

    /// Claims runnable runs and starts driving them, while slots are free.
    async fn launch(&mut self) {
        while self.driving.len() < self.opts.concurrency {
            match self.engine.claim_next().await {
                Ok(Some(claimed)) => {
                    if self.claim_failing {
                        tracing::info!("runner: the store answers again");
                        self.claim_failing = false;
                    }
                    if claimed.took_over {
                        self.metrics.record_takeover();
                    }
                    let id = claimed.run.id;
                    let engine = self.engine.clone();
                    let metrics = self.metrics.clone();
                    let handle = self.tasks.spawn(drive(engine, metrics, claimed));
                    self.by_task.insert(handle.id(), id);
                    self.driving.insert(id);
                }
                Ok(None) => break,
                Err(e) => {
                    if !self.claim_failing {
                        tracing::warn!(error = %ErrorChain(&e), "runner: cannot claim runs; retrying");
                        self.claim_failing = true;
                    }
                    break;
                }
            }
        }
        self.metrics.set_in_flight(self.driving.len());
    }

    /// Books a finished drive: frees its slot.
    fn finished(&mut self, done: Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
        let task = match done {
            Ok((task, ())) => task,
            Err(e) => {
                tracing::error!(error = %e, "runner: a drive panicked");
                e.id()
            }
        };
        if let Some(id) = self.by_task.remove(&task) {
            self.driving.remove(&id);
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

/// Drives one claimed run to its next stop and books it in the metrics.
async fn drive(engine: Engine, metrics: Arc<Metrics>, claimed: cairn_checkpoint::Claimed) {
    let id = claimed.run.id;
    tracing::debug!(run = %id, took_over = claimed.took_over, "runner: driving");
    match engine.drive_claimed(claimed).await {
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
        }
        Err(e) => {
            tracing::error!(run = %id, error = %ErrorChain(&e), "runner: drive failed; the run is taken over once its lease expires");
            metrics.record_drive("error", 0, &[]);
        }
    }
}
