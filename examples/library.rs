//! The library API end to end: a crew of a Rust agent and a template, run on
//! embedded SQLite, then resumed (which executes nothing: it is finished).
//!
//! `cargo run -p cairn --example library`

use cairn::{async_trait, Agent, Crew, Engine, ResumeOptions, StepContext, StepOutput, Stop};

/// A Rust agent: a function of its context alone.
struct Researcher;

#[async_trait]
impl Agent for Researcher {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        let topic = cx.input["topic"].as_str().unwrap_or("nothing");
        Ok(StepOutput::new(serde_json::json!({
            "facts": [format!("{topic} is durable"), format!("{topic} resumes")]
        })))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
    let engine = Engine::open(&url).await?;

    let crew = Crew::builder("research", "1")
        .agent("researcher", Researcher)
        .template(
            "writer",
            "{{ input.topic }}: {{ outputs.researcher.facts | join('; ') }}",
        )
        .build()?;

    let input = serde_json::json!({"topic": "cairn"});
    let done = engine.run(&crew, input, Default::default()).await?;
    println!(
        "run {} {} after {} steps",
        done.run.id,
        done.run.status,
        done.executed.len()
    );

    let view = engine.show(done.run.id).await?;
    for step in &view.steps {
        println!(
            "  {} {} -> {}",
            step.idx,
            step.role,
            step.output.clone().unwrap_or_default()
        );
    }

    // Resuming a finished run returns its stored result and executes nothing.
    let again = engine.resume(done.run.id, ResumeOptions::default()).await?;
    assert!(again.executed.is_empty());
    println!(
        "resume of a finished run executed {} steps",
        again.executed.len()
    );
    Ok(())
}
