//! OpenTelemetry for the CLI's processes: the `OTEL_*` variables, read
//! once; an exporter per process (`cairn::otel`), stopped at exit so a
//! `cairn run` sends what it finished.

use std::sync::Mutex;

use cairn::otel::{OtelConfig, TraceExporter};
use cairn::Engine;

use crate::input::usage;

static EXPORTER: Mutex<Option<TraceExporter>> = Mutex::new(None);

/// The trace export the environment asks for (`None`: off); a variable
/// Cairn cannot honour is a usage error (exit 2).
pub fn config() -> anyhow::Result<Option<OtelConfig>> {
    OtelConfig::from_env(|k| std::env::var(k).ok()).map_err(|e| usage(e.to_string()))
}

/// `engine`, tracing the runs it submits when the environment configures
/// traces.
pub fn traced(engine: Engine) -> anyhow::Result<Engine> {
    Ok(match config()? {
        Some(config) => engine.traced(config.sampler),
        None => engine,
    })
}

/// Exports spans from this process until [`finish`], when the environment
/// configures traces: for the commands that execute runs.
pub fn export(engine: &Engine) -> anyhow::Result<()> {
    let Some(config) = config()? else {
        return Ok(());
    };
    let mut slot = EXPORTER.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(TraceExporter::start(engine, config));
    }
    Ok(())
}

/// Stops this process's exporter after a last pass.
pub async fn finish() {
    let exporter = EXPORTER.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(exporter) = exporter {
        exporter.stop().await;
    }
}
