//! `cairn-bench --workers`, its SQLite part: one process, one SQLite file,
//! one run at a time against 64 runs in flight (issue 12: ≥ 5× the step
//! rate). A single run waits for one flush per step; runs in flight share
//! flushes through the group commit (`cairn-checkpoint/src/sqlite/writer.rs`),
//! whose batches are counted here too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use serde_json::json;

use cairn::{Crew, Engine, ExecutorConfig, RunStatus, Store, SubmitOptions};
use cairn_checkpoint::{GroupStats, SqliteStore};

/// Steps of each run (the same no-op crew as the main benchmark).
const STEPS: u32 = 30;
const ALONE_RUNS: usize = 20;
pub const IN_FLIGHT: usize = 64;
/// Runs each of the `IN_FLIGHT` tasks executes one after the other.
const RUNS_PER_TASK: usize = 4;

pub struct Concurrency {
    pub alone_steps_per_s: f64,
    pub in_flight_steps_per_s: f64,
    /// The same runs in flight with each step commit on its own flush.
    pub ungrouped_steps_per_s: f64,
    /// Group commit during the runs in flight.
    pub batches: u64,
    pub commits: u64,
    pub largest: usize,
}

impl Concurrency {
    pub fn ratio(&self) -> f64 {
        self.in_flight_steps_per_s / self.alone_steps_per_s
    }
}

async fn one_run(engine: &Engine, crew: &Crew, i: usize) -> Result<()> {
    let done = engine
        .run(crew, json!({"run": i}), SubmitOptions::default())
        .await?;
    ensure!(
        done.run.status == RunStatus::Succeeded,
        "run {} ended {}",
        done.run.id,
        done.run.status
    );
    Ok(())
}

/// Steps/s of `IN_FLIGHT` tasks running `RUNS_PER_TASK` runs each.
async fn in_flight(engine: &Engine, crew: &Crew) -> Result<f64> {
    let t = Instant::now();
    let mut tasks = Vec::with_capacity(IN_FLIGHT);
    for task in 0..IN_FLIGHT {
        let (engine, crew) = (engine.clone(), crew.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..RUNS_PER_TASK {
                one_run(&engine, &crew, task * RUNS_PER_TASK + i).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let total = (IN_FLIGHT * RUNS_PER_TASK) as f64 * f64::from(STEPS);
    Ok(total / t.elapsed().as_secs_f64())
}

pub async fn measure() -> Result<Concurrency> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.db");
    let sqlite = Arc::new(SqliteStore::open(&path, true, Duration::from_secs(10)).await?);
    let store: Arc<dyn Store> = sqlite.clone();
    let engine = Engine::with_store(store, ExecutorConfig::default());
    let crew = crate::noop_crew("bench-concurrent", STEPS, None)?;
    let ungrouped = SqliteStore::open(&path, true, Duration::from_secs(10))
        .await?
        .without_group_commit()?;
    let ungrouped = Engine::with_store(Arc::new(ungrouped), ExecutorConfig::default());
    for i in 0..2 {
        one_run(&engine, &crew, i).await?;
    }

    let t = Instant::now();
    for i in 0..ALONE_RUNS {
        one_run(&engine, &crew, i).await?;
    }
    let alone = (ALONE_RUNS as f64 * f64::from(STEPS)) / t.elapsed().as_secs_f64();

    let before: GroupStats = sqlite.group_stats();
    let grouped = in_flight(&engine, &crew).await?;
    let after = sqlite.group_stats();
    let ungrouped = in_flight(&ungrouped, &crew).await?;
    Ok(Concurrency {
        alone_steps_per_s: alone,
        in_flight_steps_per_s: grouped,
        ungrouped_steps_per_s: ungrouped,
        batches: after.batches - before.batches,
        commits: after.commits - before.commits,
        largest: after.largest,
    })
}
