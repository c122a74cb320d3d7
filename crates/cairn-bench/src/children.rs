//! `--children`: a `children` step with 1,000 children (a map over the
//! input, each child one template step), driven by one process through
//! `Engine::run` on SQLite and PostgreSQL, a few rounds each. From the
//! parent's events (database clock): the spawn (`children_spawned` to the
//! last child's `run_submitted`, both written by the one transaction that
//! stores 1,000 runs), the children (from there to `children_joined`: each
//! claimed, run and committed, eight at once, each end counted against the
//! join), and the wake (`children_joined` to the step's success: the
//! parent claimed again, the join read, the step committed).

use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};

use cairn::{
    Crew, Engine, EventData, EventKind, ExecutorConfig, OpenOptions, RunStatus, SubmitOptions,
};

use crate::{mean, round2, PgSchema};

const CHILDREN: usize = 1_000;
const ROUNDS: usize = 3;

struct Numbers {
    spawn_ms: f64,
    children_ms: f64,
    wake_ms: f64,
    total_ms: f64,
}

fn crew(dir: &std::path::Path) -> Result<Crew> {
    std::fs::write(
        dir.join("child.toml"),
        "name = \"child\"\nversion = \"1\"\n[[agents]]\nrole = \"echo\"\nkind = \"template\"\n\
         template = \"{{ input.item }}\"\n",
    )?;
    std::fs::write(
        dir.join("parent.toml"),
        "name = \"parent\"\nversion = \"1\"\n[[agents]]\nrole = \"fan\"\nkind = \"children\"\n\
         crew = \"child.toml\"\nover = \"input.items\"\n[[agents]]\nrole = \"count\"\n\
         kind = \"template\"\ntemplate = \"{{ outputs.fan | length }}\"\n",
    )?;
    Ok(Crew::from_file(dir.join("parent.toml"))?)
}

async fn measure(url: &str, dir: &std::path::Path) -> Result<Numbers> {
    let engine = Engine::open_with(url, &OpenOptions::default(), ExecutorConfig::default()).await?;
    let crew = crew(dir)?;
    let items: Vec<usize> = (0..CHILDREN).collect();
    let (mut spawn, mut children, mut wake, mut total) = (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let driven = engine
            .run(&crew, json!({ "items": items }), SubmitOptions::default())
            .await?;
        total.push(started.elapsed());
        ensure!(
            driven.run.status == RunStatus::Succeeded,
            "the parent ended {}",
            driven.run.status
        );
        let events = engine.events(driven.run.id).await?;
        let at = |kind: EventKind| {
            events
                .iter()
                .find(|e| e.kind == kind)
                .map(|e| e.at)
                .with_context(|| format!("no {} event", kind.as_str()))
        };
        let spawned = at(EventKind::ChildrenSpawned)?;
        // The spawn's last write: the last child's own first event.
        let view = engine.show(driven.run.id).await?;
        let last = view.children.last().context("no children")?;
        let stored = engine
            .events(last.run_id)
            .await?
            .first()
            .map(|e| e.at)
            .context("the last child has no event")?;
        let joined = at(EventKind::ChildrenJoined)?;
        let stepped = events
            .iter()
            .find(|e| matches!(e.payload(), Ok(EventData::StepSucceeded(s)) if s.idx.get() == 0))
            .map(|e| e.at)
            .context("no step_succeeded for the children step")?;
        let us = [stored - spawned, joined - stored, stepped - joined]
            .map(|d| d.num_microseconds().unwrap_or(0) as f64 / 1e3);
        spawn.push(us[0]);
        children.push(us[1]);
        wake.push(us[2]);
    }
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    Ok(Numbers {
        spawn_ms: avg(&spawn),
        children_ms: avg(&children),
        wake_ms: avg(&wake),
        total_ms: mean(&total).as_secs_f64() * 1e3,
    })
}

pub async fn run(pg_url: &str) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let sqlite_url = format!("sqlite://{}", dir.path().join("children.db").display());
    let sqlite = measure(&sqlite_url, dir.path()).await.context("SQLite")?;
    let postgres = PgSchema::measured(pg_url, async |schema: &PgSchema| {
        measure(&schema.url, dir.path()).await
    })
    .await?;
    println!(
        "{:<10} {:>10} {:>14} {:>10} {:>12} {:>14}",
        "backend", "spawn ms", "children ms", "wake ms", "total ms", "µs per child"
    );
    let mut out = serde_json::Map::new();
    for (name, n) in [("sqlite", Some(&sqlite)), ("postgres", postgres.as_ref())] {
        let Some(n) = n else { continue };
        let per_child = n.children_ms * 1e3 / CHILDREN as f64;
        println!(
            "{name:<10} {:>10.1} {:>14.1} {:>10.2} {:>12.1} {:>14.1}",
            n.spawn_ms, n.children_ms, n.wake_ms, n.total_ms, per_child
        );
        for (key, v) in [
            ("spawn_ms", n.spawn_ms),
            ("children_ms", n.children_ms),
            ("wake_ms", n.wake_ms),
            ("total_ms", n.total_ms),
            ("per_child_us", per_child),
        ] {
            out.insert(format!("{name}_children_1000_{key}"), json!(round2(v)));
        }
    }
    println!("{}", Value::Object(out));
    Ok(())
}
