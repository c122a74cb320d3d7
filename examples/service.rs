//! A service that owns its crews and picks its runs up again after a crash:
//! at start-up it registers every crew it defines (its Rust agents live in
//! this process, not in the database), resumes the runs a previous instance
//! of it left behind, then works the queue until Ctrl-C.
//!
//! `cargo run -p cairn --example service -- DIR` twice: the first start
//! submits a run and is killed in its slow step (as a crash would); the
//! second resumes that run from its last checkpoint (the finished step is
//! not run again) at once, since the killed process is gone.

use std::time::Duration;

use cairn::{
    async_trait, Agent, Crew, Engine, ResumeOptions, RunFilter, RunStatus, StepContext, StepOutput,
    Stop, WorkOptions,
};

/// A step that takes a while (a model call, say).
struct Slow;

#[async_trait]
impl Agent for Slow {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(StepOutput::new(format!("drafted {}", cx.input["topic"])))
    }
}

/// Every crew this service runs: registered at every start.
fn crews() -> anyhow::Result<Vec<Crew>> {
    Ok(vec![Crew::builder("articles", "1")
        .template("outline", "Outline of {{ input.topic }}")
        .agent_named("draft", "draft-v1", Slow)
        .build()?])
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "service-data".into());
    std::fs::create_dir_all(&dir)?;
    let engine = Engine::open(&format!("sqlite://{dir}/cairn.db")).await?;
    for crew in crews()? {
        engine.register(&crew);
    }

    // Runs a previous instance was executing when it died: resumed now. A
    // holder that was a process of this machine and is gone is taken over
    // at once; one elsewhere once its lease expires (`work` below).
    let running = RunFilter {
        status: Some(RunStatus::Running),
        ..RunFilter::default()
    };
    let left = engine.list(&running).await?;
    for run in &left {
        match engine.resume(run.id, ResumeOptions::default()).await {
            Ok(done) => println!("resumed run {}: {}", run.id, done.run.status),
            Err(e) => println!("run {} stays for later: {e}", run.id),
        }
    }

    if left.is_empty() && engine.list(&RunFilter::default()).await?.is_empty() {
        // The first start: submit a run, and die in its slow step.
        let crew = &crews()?[0];
        let run = engine.submit(
            crew,
            serde_json::json!({"topic": "leases"}),
            Default::default(),
        );
        let id = run.await?.run.id;
        println!("submitted run {id}; crashing in its second step, start me again");
        let engine2 = engine.clone();
        tokio::spawn(async move { engine2.resume(id, ResumeOptions::default()).await });
        tokio::time::sleep(Duration::from_millis(800)).await;
        std::process::exit(137);
    }

    // Then the queue: new runs, and runs whose holder's lease expired.
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    println!("working the queue; Ctrl-C to stop");
    tokio::select! {
        r = engine.work(WorkOptions::default(), shutdown) => r?,
        () = tokio::time::sleep(Duration::from_secs(3)) => println!("(example: stopping after 3 s)"),
    }
    Ok(())
}
