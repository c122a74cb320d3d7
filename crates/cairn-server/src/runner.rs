//! The embedded runner: `cairn worker`'s loop ([`cairn::Engine::work`]:
//! claim runnable runs, drive them with heartbeats, apply wait deadlines,
//! never crash over a run or the database) in a background task, with the
//! server's additions through the loop's hooks: an in-process wake-up when
//! the API queues a run (which also covers SQLite), and the metrics (runs
//! in flight, drives and their steps, lease takeovers).

use std::sync::Arc;
use std::time::Duration;

use cairn::{Driven, Engine, RunId, RunRecord, WakeUp, WorkHooks, WorkOptions};
use tokio::sync::watch;

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
    /// Periodic retention (see `ServeOptions::compact`).
    pub compact: Option<(cairn::CompactPolicy, Duration)>,
}

/// A running runner. Dropping it leaves the task running; call [`Runner::stopped`].
pub(crate) struct Runner {
    task: tokio::task::JoinHandle<()>,
}

impl Runner {
    /// Starts the runner task. It stops launching runs once `stop` becomes
    /// `true` (or its sender is gone), then waits up to `opts.grace` for
    /// the runs in flight.
    pub fn start(
        engine: Engine,
        opts: RunnerOptions,
        wake: WakeUp,
        mut stop: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> Runner {
        let work = WorkOptions {
            concurrency: opts.concurrency,
            poll: opts.poll,
            shutdown_grace: opts.grace,
            wake: Some(wake),
            hooks: Some(Arc::new(Hooks(metrics))),
            compact: opts.compact.clone(),
        };
        let task = tokio::spawn(async move {
            tracing::info!(
                concurrency = opts.concurrency,
                "runner started: claiming runnable runs"
            );
            let stopping = async move {
                // An error: nobody can ask us to stop any more, the server is gone.
                let _ = stop.wait_for(|stop| *stop).await;
            };
            if let Err(e) = engine.work(work, stopping).await {
                tracing::error!(error = %ErrorChain(&e), "the runner stopped with an error");
            }
            tracing::info!("runner stopped");
        });
        Runner { task }
    }

    /// Waits for the runner to finish its shutdown (trigger it first through
    /// the `stop` channel given to [`Runner::start`]).
    pub async fn stopped(self) {
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the runner task panicked");
        }
    }
}

/// The runner's hooks: they book what the worker loop does in the metrics.
struct Hooks(Arc<Metrics>);

#[cairn::async_trait]
impl WorkHooks for Hooks {
    fn compacted(&self, removed: &cairn::Compacted) {
        self.0.record_compaction(removed);
    }

    fn claimed(&self, _run: &RunRecord, took_over: bool) {
        if took_over {
            self.0.record_takeover();
        }
    }

    /// Books a drive with the steps it executed (read back for their durations).
    async fn driven(&self, engine: &Engine, id: RunId, result: &cairn::Result<Driven>) {
        let driven = match result {
            Ok(driven) => driven,
            Err(_) => {
                self.0.record_drive("error", 0, &[]);
                return;
            }
        };
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
        let crew = &driven.run.crew_definition;
        let executed: Vec<_> = steps
            .iter()
            .filter(|s| driven.executed.contains(&s.idx))
            .map(|step| crate::metrics::Spender {
                step,
                crew: crew.name.as_str(),
                model: crew
                    .agents
                    .get(step.idx.get() as usize)
                    .and_then(|a| match &a.kind {
                        cairn::AgentKind::Llm(l) => Some((l.provider.as_str(), l.model.as_str())),
                        _ => None,
                    }),
            })
            .collect();
        self.0
            .record_drive(driven.run.status.as_str(), driven.executed.len(), &executed);
    }

    fn in_flight(&self, runs: usize) {
        self.0.set_in_flight(runs);
    }
}
