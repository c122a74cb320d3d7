//! `--journal`: what durability inside an agent step costs. One journal
//! item (`JournalStore::append_journal`: a fenced, one-transaction insert) next to
//! a raw commit of the same size on the same database, interleaved; and a
//! whole `llm` step (scripted model, a no-op Rust tool) of 10 turns with 2
//! tool calls each, so 82 journal items, through `Engine::run`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use cairn::agent::{LlmAgent, Tool, ToolResult, Toolbox};
use cairn::llm::{ScriptedProvider, ToolSpec};
use cairn::{async_trait, Crew, Engine, ExecutorConfig, LlmDef, ProviderKind, SubmitOptions};
use cairn_checkpoint::{ClaimRequest, JournalAppend};
use cairn_core::{Attempt, JournalKind, StepIdx};

use crate::{mean, median, round2, us, PgSchema, Target, ROW_BYTES};

const ITEMS: usize = 300;
const ROUNDS: usize = 5;
const STEP_RUNS: usize = 10;
const TURNS: usize = 10;

/// A tool that does nothing, at once.
struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn idempotent(&self) -> bool {
        true
    }
    async fn execute(&self, _: Value, _: &str) -> ToolResult {
        Ok("ok".into())
    }
}

pub(crate) fn agent_crew() -> Result<Crew> {
    let mut script = String::new();
    for t in 0..TURNS {
        script.push_str(&format!(
            "[[responses]]\ntext = \"turn {t}\"\ntool_calls = [{{ name = \"noop\" }}, {{ name = \"noop\" }}]\n\n"
        ));
    }
    script.push_str("[[responses]]\ntext = \"done\"\n");
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Noop(ToolSpec {
        name: "noop".into(),
        description: "Does nothing.".into(),
        parameters: json!({"type": "object"}),
    }))];
    let agent = LlmAgent::new(
        LlmDef {
            max_turns: Some(100),
            ..LlmDef::new(ProviderKind::Scripted, "scripted")
        },
        Arc::new(ScriptedProvider::parse(&script)?),
        Toolbox::new(tools).map_err(|e| anyhow::anyhow!("{e:?}"))?,
    );
    Ok(Crew::builder("journal-bench", "1")
        .agent_named("agent", "bench-agent", agent)
        .build()?)
}

struct Numbers {
    item_mean_us: f64,
    item_median_us: f64,
    raw_mean_us: f64,
    raw_median_us: f64,
    step_ms: f64,
    items_per_step: usize,
}

async fn measure(target: &Target, url: &str) -> Result<Numbers> {
    let (store, raw) = target.open().await?;
    raw.setup().await?;
    let crew = agent_crew()?;
    let run = store.submit(crate::new_run(&crew, json!({}))).await?.run;
    let claimed = store
        .claim(
            run.id,
            &ClaimRequest::new("bench", Duration::from_secs(600), 3),
        )
        .await?;
    let payload = json!({"call_id": "c", "content": "x".repeat(ROW_BYTES - 60), "is_error": false});
    let text = "x".repeat(ROW_BYTES);
    let (mut items, mut raws) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for _ in 0..ITEMS / ROUNDS {
            let t = Instant::now();
            store
                .append_journal(&JournalAppend {
                    run_id: run.id,
                    fence: claimed.fence.clone(),
                    idx: StepIdx(0),
                    attempt: Attempt::FIRST,
                    generation: 0,
                    kind: JournalKind::ToolResult,
                    payload: payload.clone(),
                    event: None,
                })
                .await?;
            items.push(t.elapsed());
        }
        for _ in 0..ITEMS / ROUNDS {
            let t = Instant::now();
            raw.commit(&text).await?;
            raws.push(t.elapsed());
        }
    }
    raw.close().await;
    let engine = Engine::open_with(url, &Default::default(), ExecutorConfig::default()).await?;
    let mut steps = Vec::new();
    let mut items_per_step = 0;
    for i in 0..=STEP_RUNS {
        let t = Instant::now();
        let done = engine
            .run(&crew, json!({"i": i}), SubmitOptions::default())
            .await?;
        let took = t.elapsed();
        anyhow::ensure!(
            done.run.status == cairn::RunStatus::Succeeded,
            "the agent step failed"
        );
        if i > 0 {
            steps.push(took);
        } else {
            items_per_step = engine.journal(done.run.id, Some(0)).await?.len();
        }
    }
    Ok(Numbers {
        item_mean_us: us(mean(&items)),
        item_median_us: us(median(&items)),
        raw_mean_us: us(mean(&raws)),
        raw_median_us: us(median(&raws)),
        step_ms: mean(&steps).as_secs_f64() * 1e3,
        items_per_step,
    })
}

pub async fn run(pg_url: &str) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let path = dir.path().join("journal.db");
    let sqlite_url = format!("sqlite://{}", path.display());
    let sqlite = measure(&Target::Sqlite(path), &sqlite_url)
        .await
        .context("SQLite")?;
    let postgres = PgSchema::measured(pg_url, async |schema: &PgSchema| {
        let target = Target::Postgres(Box::new(schema.options.clone()));
        measure(&target, &schema.url).await
    })
    .await?;
    println!(
        "{:<10} {:>14} {:>16} {:>10} {:>12} {:>16}",
        "backend", "item µs (med)", "raw µs (med)", "item/raw", "agent step", "items per step"
    );
    let mut out = serde_json::Map::new();
    for (name, n) in [("sqlite", Some(&sqlite)), ("postgres", postgres.as_ref())] {
        let Some(n) = n else { continue };
        println!(
            "{name:<10} {:>6.1} ({:>5.1}) {:>7.1} ({:>5.1}) {:>9.2}× {:>9.1} ms {:>16}",
            n.item_mean_us,
            n.item_median_us,
            n.raw_mean_us,
            n.raw_median_us,
            n.item_mean_us / n.raw_mean_us,
            n.step_ms,
            n.items_per_step
        );
        out.insert(
            format!("{name}_journal_item_us"),
            json!(round2(n.item_mean_us)),
        );
        out.insert(
            format!("{name}_journal_raw_commit_us"),
            json!(round2(n.raw_mean_us)),
        );
        out.insert(
            format!("{name}_journal_item_ratio"),
            json!(round2(n.item_mean_us / n.raw_mean_us)),
        );
        out.insert(format!("{name}_agent_step_ms"), json!(round2(n.step_ms)));
        out.insert(format!("{name}_agent_step_items"), json!(n.items_per_step));
    }
    println!("{}", Value::Object(out));
    Ok(())
}
