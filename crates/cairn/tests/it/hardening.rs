//! Issue 13's defects, each through the engine on both databases: values
//! with a NUL character, corrupt runs in a worker's queue, finished runs
//! whose rows disagree with them, resumes that race, and `run` racing a
//! worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;

use cairn::{
    async_trait, Agent, Crew, ErrorClass, ErrorInfo, ErrorKind, RunStatus, StepContext, StepOutput,
    StepStatus, SubmitOptions,
};
use cairn_testkit::{both, Kind, TestDb};

use super::{crew, engine, executions, killed_during, Log};

both!(
    a_nul_in_the_input_is_bad_input_and_stores_nothing,
    a_step_output_with_a_nul_fails_the_step_once_and_for_all,
    a_run_marked_succeeded_halfway_is_corruption,
);

/// Answers with a NUL in its output, counting its executions.
struct Nul(Arc<AtomicUsize>);

#[async_trait]
impl Agent for Nul {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, ErrorInfo> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(StepOutput::new(json!({"bytes": "a\u{0}b"})))
    }
}

async fn a_nul_in_the_input_is_bad_input_and_stores_nothing(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db).await;
    let crew = Crew::builder("nul", "1")
        .template("t", "ok")
        .build()
        .unwrap();
    let err = engine
        .run(&crew, json!({"text": "\u{0}"}), SubmitOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    assert_eq!(err.code(), "unstorable");
    assert!(
        err.to_string().starts_with("the run input contains a NUL"),
        "{err}"
    );
    let opts = SubmitOptions {
        idempotency_key: Some("k\u{0}".into()),
        ..SubmitOptions::default()
    };
    let err = engine.run(&crew, json!({}), opts).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::BadInput, "{err}");
    assert!(err.to_string().starts_with("the idempotency key"), "{err}");
    assert!(engine.list(&Default::default()).await.unwrap().is_empty());
}

async fn a_step_output_with_a_nul_fails_the_step_once_and_for_all(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let crew = Crew::builder("nul", "1")
        .agent_named("emit", "nul", Nul(runs.clone()))
        .template("after", "never")
        .build()
        .unwrap();
    let done = engine
        .run(&crew, json!({}), SubmitOptions::default())
        .await
        .unwrap();
    assert_eq!(done.run.status, RunStatus::Failed);
    let view = engine.show(done.run.id).await.unwrap();
    let step = &view.steps[0];
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(step.output, None);
    let error = step.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Unstorable);
    assert!(!error.retryable);
    assert!(
        error.message.contains("the step's output contains a NUL"),
        "{}",
        error.message
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "executed once, not retried");
    assert_eq!(
        view.run.error.as_ref().map(|e| e.kind),
        Some(ErrorKind::Unstorable)
    );
}

async fn a_run_marked_succeeded_halfway_is_corruption(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db).await;
    let log = Log::default();
    let id = killed_during(&engine, 6, 3, &log).await;
    engine.register(&crew(6, &log, None));
    // Hand-edited: the status alone, then the cursor too.
    for edit in [
        "UPDATE runs SET status = 'succeeded'",
        "UPDATE runs SET status = 'succeeded', cursor = 6",
    ] {
        db.exec(edit).await;
        let events = engine.store().events(id).await.unwrap();
        let err = engine.resume(id, Default::default()).await.unwrap_err();
        assert!(
            err.to_string().contains(&format!("run {id} is corrupt")),
            "{edit}: {err}"
        );
        // A resume that offers no crew judges the rows the same way.
        let fresh = super::engine(&db).await;
        let err = fresh.resume(id, Default::default()).await.unwrap_err();
        assert!(err.to_string().contains("is corrupt"), "{edit}: {err}");
        assert_eq!(engine.store().events(id).await.unwrap(), events);
    }
    assert_eq!(executions(&log, 4), 0, "nothing after step 3 ran");
    assert_eq!(executions(&log, 3), 1);
}
