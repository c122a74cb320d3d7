//! Trace export (OpenTelemetry). A sampled run's spans are built from the
//! events it stored (`cairn_core::trace::spans`) and sent by whichever
//! process runs an exporter: one at a time across processes per interval
//! (`MaintenanceStore::claim_task`), each run's export cursor moved only after the
//! collector took the batch. A process killed after a commit loses none of
//! its spans; a collector that is down delays spans, never a run.

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::{Store, TraceAdvance, TraceWork};
use cairn_core::trace::{capture, spans, SpanRecord, StepContent, TracedRun};
pub use cairn_otel::{Config as OtelConfig, ConfigError as OtelConfigError, SendError};
use cairn_otel::{Gauges, Tally};
use std::collections::BTreeSet;

use crate::{Engine, ErrorChain};

impl Engine {
    /// Traces the runs this engine submits from now on: each stores its
    /// trace context, and a sampled run's spans are exported from its
    /// events by whichever process runs an exporter (`crate::otel`).
    pub fn traced(mut self, sampler: cairn_core::Sampler) -> Engine {
        self.sampler = Some(sampler);
        self
    }

    /// How a run submitted with `parent` (a caller's `traceparent`) is
    /// traced: as this engine samples, or as its caller decided when this
    /// engine traces nothing; not at all without either.
    pub(crate) fn tracing(
        &self,
        parent: Option<cairn_core::TraceContext>,
    ) -> Option<cairn_core::Tracing> {
        match (self.sampler, parent) {
            (None, None) => None,
            (sampler, parent) => Some(cairn_core::Tracing {
                sampler: sampler.unwrap_or_default(),
                parent,
            }),
        }
    }
}

/// Runs read per round of a pass.
const BATCH: usize = 64;

/// What stopped a pass (it is tried again at the next interval).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] cairn_checkpoint::Error),
    #[error(transparent)]
    Send(#[from] SendError),
}

/// A background exporter; stop it with [`TraceExporter::stop`] to send
/// what the last moments stored.
pub struct TraceExporter {
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::watch::Sender<bool>,
    shared: Arc<Shared>,
}

/// What the background task and the last pass share.
struct Shared {
    store: Arc<dyn Store>,
    exporter: cairn_otel::Exporter,
    /// The calls and steps whose spans this process sent since its last
    /// metrics export.
    tally: std::sync::Mutex<Tally>,
    owner: String,
}

impl TraceExporter {
    /// Starts exporting the spans of every sampled run in `engine`'s store,
    /// a pass every `config.interval`, and metrics every
    /// `config.metrics_interval`.
    pub fn start(engine: &Engine, config: OtelConfig) -> TraceExporter {
        let shared = Arc::new(Shared {
            store: engine.store().clone(),
            exporter: cairn_otel::Exporter::new(config),
            tally: std::sync::Mutex::new(Tally::new(chrono::Utc::now())),
            owner: crate::holder::owner("otel"),
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(passes(shared.clone(), stopped));
        TraceExporter { task, stop, shared }
    }

    /// Stops the background passes (letting one under way finish, so no
    /// batch is sent twice) and makes a last one, then sends the metrics
    /// it counted; bounded by the exporter's timeout and at most 3 s: a
    /// `cairn run` that ends sends its run's end; a collector that does not
    /// answer delays the exit that long, and a later exporter sends what
    /// was left.
    pub async fn stop(self) {
        let shared = &self.shared;
        let bound = shared.exporter.config().timeout.min(Duration::from_secs(3));
        let _ = self.stop.send(true);
        let last = async {
            let _ = self.task.await;
            report(shared.pass().await);
            if let Err(e) = shared.metrics(true).await {
                tracing::warn!(error = %ErrorChain(&e), "metrics: the last export failed");
            }
        };
        if tokio::time::timeout(bound, last).await.is_err() {
            tracing::warn!("traces: the last export timed out; a later exporter sends it");
        }
    }
}

/// A pass every interval, when this process wins the interval across
/// processes, and metrics every metrics interval, until `stopped`.
async fn passes(shared: Arc<Shared>, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let every = shared.exporter.config().interval;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let metrics_every = shared.exporter.config().metrics_interval;
    let start = tokio::time::Instant::now() + metrics_every;
    let mut metrics_tick = tokio::time::interval_at(start, metrics_every);
    // After a failed pass, the next waits twice as long (up to a minute):
    // a collector that is down costs a read of the pending runs per wait.
    let (mut backoff, mut next) = (every, tokio::time::Instant::now());
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = metrics_tick.tick() => {
                if let Err(e) = shared.metrics(false).await {
                    tracing::warn!(error = %ErrorChain(&e), "metrics: export failed");
                }
                continue;
            }
            _ = stopped.changed() => return,
        }
        if tokio::time::Instant::now() < next {
            continue;
        }
        let done = match shared
            .store
            .claim_task("trace_export", every, &shared.owner)
            .await
        {
            Ok(true) => shared.pass().await,
            Ok(false) => Ok(0),
            Err(err) => Err(err.into()),
        };
        backoff = match done {
            Ok(_) => every,
            Err(_) => (backoff * 2).min(Duration::from_secs(60)),
        };
        next = tokio::time::Instant::now() + backoff.saturating_sub(every);
        report(done);
    }
}

fn report(done: Result<usize, ExportError>) {
    match done {
        Ok(0) => {}
        Ok(n) => tracing::debug!(spans = n, "traces: exported"),
        Err(e) => {
            tracing::warn!(error = %ErrorChain(&e), "traces: export failed; retried at the next interval")
        }
    }
}

impl Shared {
    /// Exports every sampled run's settled spans: reads, sends, then moves
    /// each cursor, and counts what was sent for the metrics. The spans
    /// sent.
    async fn pass(&self) -> Result<usize, ExportError> {
        let mut sent = 0;
        loop {
            let work = self.store.trace_pending(BATCH).await?;
            let (mut batch, moves) = build(&work);
            if self.exporter.config().capture_content {
                self.capture(&work, &mut batch).await?;
            }
            self.exporter.send(&batch).await?;
            self.tally
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .observe(&batch);
            for m in &moves {
                self.store.trace_advance(m).await?;
            }
            sent += batch.len();
            if work.len() < BATCH {
                return Ok(sent);
            }
        }
    }

    /// Adds the content an operator asked for to `batch`: each run's steps
    /// that have a tool span or a succeeded step span in it, read from the
    /// store (their output and journal).
    async fn capture(
        &self,
        work: &[TraceWork],
        batch: &mut [SpanRecord],
    ) -> Result<(), ExportError> {
        for w in work {
            let run_id = w.run.id.to_string();
            let of_run = |s: &SpanRecord| s.text("cairn.run.id").as_deref() == Some(&run_id);
            let idxs: BTreeSet<i64> = batch
                .iter()
                .filter(|s| of_run(s))
                .filter_map(|s| s.int("cairn.step.idx"))
                .collect();
            if idxs.is_empty() {
                continue;
            }
            let (_, rows) = self.store.load(w.run.id).await?;
            let mut steps = Vec::with_capacity(idxs.len());
            for idx in idxs {
                let Some(row) = rows.iter().find(|r| i64::from(r.idx.get()) == idx) else {
                    continue;
                };
                steps.push(StepContent {
                    idx,
                    output: row.output.clone(),
                    journal: self.store.journal(w.run.id, row.idx, None).await?,
                });
            }
            let limit = self.exporter.config().content_limit;
            for span in batch.iter_mut().filter(|s| of_run(s)) {
                capture(std::slice::from_mut(span), &steps, limit);
            }
        }
        Ok(())
    }

    /// Sends the histograms counted since the last export and, in one
    /// process per interval, the database's gauges; a process's `last`
    /// export sends them whatever the interval (a snapshot sent once more
    /// is harmless, and a `cairn run` that ends then shows its run's end).
    /// Best effort: a failed send drops that interval's histograms.
    async fn metrics(&self, last: bool) -> Result<(), ExportError> {
        let config = self.exporter.config();
        if config.metrics_endpoint.is_none() {
            return Ok(());
        }
        let every = config.metrics_interval;
        let gauges = match last
            || self
                .store
                .claim_task("metric_gauges", every, &self.owner)
                .await?
        {
            true => Some(gauges(&self.store.stats().await?)),
            false => None,
        };
        let now = chrono::Utc::now();
        let tally = self
            .tally
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(now);
        if tally.is_empty() && gauges.is_none() {
            return Ok(());
        }
        let req = cairn_otel::metrics_request(config, &tally, gauges.as_ref(), now);
        Ok(self.exporter.send_metrics(&req).await?)
    }
}

fn gauges(stats: &cairn_checkpoint::StoreStats) -> Gauges {
    Gauges {
        runs: stats
            .runs_by_status
            .iter()
            .map(|(s, n)| (s.as_str().to_owned(), *n))
            .collect(),
        ready: stats.ready,
    }
}

/// The spans of `work`, and the cursor moves once they are sent.
fn build(work: &[TraceWork]) -> (Vec<SpanRecord>, Vec<TraceAdvance>) {
    let mut all = Vec::new();
    let mut moves = Vec::with_capacity(work.len());
    for w in work {
        let b = spans(&traced(w), w.after, &w.events);
        all.extend(b.spans);
        moves.push(TraceAdvance {
            run: w.run.id,
            from: w.after,
            to: b.through,
            seen: w.events.last().map_or(w.after, |e| e.seq),
            root_exported: b.root_exported,
        });
    }
    (all, moves)
}

fn traced(w: &TraceWork) -> TracedRun {
    let run = &w.run;
    TracedRun {
        id: run.id,
        crew: run.crew.clone(),
        version: run.crew_version.clone(),
        roles: run
            .crew_definition
            .agents
            .iter()
            .map(|a| a.role.to_string())
            .collect(),
        thread: run.thread_id.clone(),
        parent_run: run.parent_run_id,
        created_at: run.created_at,
        trace: w.trace,
        root_exported: w.root_exported,
    }
}
