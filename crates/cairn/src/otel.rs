//! Trace export (OpenTelemetry). A sampled run's spans are built from the
//! events it stored (`cairn_core::trace::spans`) and sent by whichever
//! process runs an exporter: one at a time across processes per interval
//! (`Store::claim_task`), each run's export cursor moved only after the
//! collector took the batch. A process killed after a commit loses none of
//! its spans; a collector that is down delays spans, never a run.

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::{Store, TraceAdvance, TraceWork};
use cairn_core::trace::{spans, SpanRecord, TracedRun};
pub use cairn_otel::{Config as OtelConfig, ConfigError as OtelConfigError, SendError};

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
    store: Arc<dyn Store>,
    exporter: cairn_otel::Exporter,
}

impl TraceExporter {
    /// Starts exporting the spans of every sampled run in `engine`'s store,
    /// a pass every `config.interval`.
    pub fn start(engine: &Engine, config: OtelConfig) -> TraceExporter {
        let store = engine.store().clone();
        let exporter = cairn_otel::Exporter::new(config);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(passes(store.clone(), exporter.clone(), stopped));
        TraceExporter {
            task,
            stop,
            store,
            exporter,
        }
    }

    /// Stops the background passes (letting one under way finish, so no
    /// batch is sent twice) and makes a last one, bounded by the
    /// exporter's timeout and at most 3 s: a `cairn run` that ends sends
    /// its run's end; a collector that does not answer delays the exit that
    /// long, and a later exporter sends what was left.
    pub async fn stop(self) {
        let bound = self.exporter.config().timeout.min(Duration::from_secs(3));
        let _ = self.stop.send(true);
        let last = async {
            let _ = self.task.await;
            pass(self.store.as_ref(), &self.exporter).await
        };
        match tokio::time::timeout(bound, last).await {
            Ok(done) => report(done),
            Err(_) => {
                tracing::warn!("traces: the last export timed out; a later exporter sends it")
            }
        }
    }
}

/// A pass every interval, when this process wins the interval across
/// processes, until `stopped`.
async fn passes(
    store: Arc<dyn Store>,
    exporter: cairn_otel::Exporter,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let owner = crate::holder::owner("otel");
    let every = exporter.config().interval;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // After a failed pass, the next waits twice as long (up to a minute):
    // a collector that is down costs a read of the pending runs per wait.
    let (mut backoff, mut next) = (every, tokio::time::Instant::now());
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        if tokio::time::Instant::now() < next {
            continue;
        }
        let done = match store.claim_task("trace_export", every, &owner).await {
            Ok(true) => pass(store.as_ref(), &exporter).await,
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

/// Exports every sampled run's settled spans: reads, sends, then moves
/// each cursor. The spans sent.
pub async fn pass(
    store: &dyn Store,
    exporter: &cairn_otel::Exporter,
) -> Result<usize, ExportError> {
    let mut sent = 0;
    loop {
        let work = store.trace_pending(BATCH).await?;
        let (batch, moves) = build(&work);
        exporter.send(&batch).await?;
        for m in &moves {
            store.trace_advance(m).await?;
        }
        sent += batch.len();
        if work.len() < BATCH {
            return Ok(sent);
        }
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
