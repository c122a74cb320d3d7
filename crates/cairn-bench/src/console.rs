//! `--console`: the console's pages on a database of 100,000 runs
//! (`CAIRN_BENCH_CONSOLE_RUNS`), SQLite (a temporary file): the runs page
//! (`GET /`, its newest 50), filtered runs pages (one matching no run: a
//! scan of all of them), and a run's page, each
//! rendered through `cairn serve`'s router (handler, database reads,
//! rendering; no socket). Median and p90 of 30 requests each. Issue 11's
//! aim: the runs page under 200 ms on this machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

use cairn::{Engine, ExecutorConfig, Store};
use cairn_server::{AppState, Crews};

use crate::{median, ms, round2, Target};

const DEFAULT_RUNS: u64 = 100_000;
const REPS: usize = 30;

fn p90(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * 9) / 10).copied().unwrap_or_default()
}

async fn time_get(app: &axum::Router, uri: &str) -> Result<Vec<Duration>> {
    let mut took = Vec::with_capacity(REPS);
    for _ in 0..REPS + 2 {
        took.push(get(app, uri).await?);
    }
    // The first two warm the pool and the statement cache.
    Ok(took.split_off(2))
}

/// One page through the router (handler, reads, rendering; no socket):
/// its time, once it answered 200 with a body.
pub(crate) async fn get(app: &axum::Router, uri: &str) -> Result<Duration> {
    let t = Instant::now();
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty())?)
        .await?;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
    let took = t.elapsed();
    ensure!(status == StatusCode::OK, "{uri}: {status}");
    ensure!(!body.is_empty(), "{uri}: empty page");
    Ok(took)
}

pub async fn run() -> Result<()> {
    let n = std::env::var("CAIRN_BENCH_CONSOLE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RUNS);
    let dir = tempfile::tempdir()?;
    let target = Target::Sqlite(dir.path().join("console.db"));
    let (store, raw) = target.open().await?;
    eprintln!("[console] filling {n} runs (SQLite) …");
    let (fill, _) = crate::retention::fill(&store, &raw, n).await?;
    eprintln!("[console] {} runs, {} steps", fill.runs, fill.steps);
    let newest = store
        .list_runs(&cairn::RunFilter {
            limit: Some(1),
            newest_first: true,
            ..Default::default()
        })
        .await?;
    let one = newest
        .first()
        .map(|r| r.id)
        .ok_or_else(|| anyhow::anyhow!("no runs"))?;
    let engine = Engine::with_store(store.clone() as Arc<dyn Store>, ExecutorConfig::default());
    // The pages need no crews.
    let app = cairn_server::router(AppState::new(engine, Crews::default()));

    let pages = [
        ("runs page (newest 50)", "/".to_owned()),
        (
            "runs page, status=succeeded",
            "/?status=succeeded".to_owned(),
        ),
        (
            "runs page, status=failed (none)",
            "/?status=failed".to_owned(),
        ),
        ("a run's page", format!("/runs/{one}")),
    ];
    println!();
    println!("Console pages on {n} stored runs (SQLite), {REPS} requests each through the router:");
    let mut out = Map::new();
    for (i, (what, uri)) in pages.iter().enumerate() {
        let took = time_get(&app, uri).await?;
        println!(
            "  {what:<32} median {:>7.2} ms  p90 {:>7.2} ms",
            ms(median(&took)),
            ms(p90(&took))
        );
        let key = [
            "console_runs_page_ms",
            "console_filtered_page_ms",
            "console_empty_filter_page_ms",
            "console_run_page_ms",
        ][i];
        out.insert(key.into(), Value::from(round2(ms(median(&took)))));
    }
    out.insert("console_runs".into(), json!(n));
    raw.close().await;
    println!("{}", Value::Object(out));
    Ok(())
}
