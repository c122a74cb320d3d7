//! Size caps: a run input, a step output or an answer over its cap is a
//! typed error naming the cap and the size, and nothing of it is stored.

use serde_json::json;

use cairn::{
    Answer, Crew, Engine, ErrorKind, ExecutorConfig, OpenOptions, RunFilter, RunStatus, StepStatus,
    SubmitOptions, WaitFilter, WaitStatus,
};
use cairn_core::Limits;
use cairn_testkit::{both, Kind, TestDb};

async fn small_engine(db: &TestDb) -> Engine {
    let config = ExecutorConfig {
        limits: Limits {
            max_input_bytes: 64,
            max_output_bytes: 64,
            max_answer_bytes: 64,
            ..Limits::default()
        },
        ..ExecutorConfig::default()
    };
    Engine::open_with(&db.url, &OpenOptions::default(), config)
        .await
        .unwrap()
}

both!(
    an_input_over_its_cap_is_refused_and_nothing_is_stored,
    an_output_over_its_cap_fails_the_step_without_storing_it,
    an_answer_over_its_cap_is_refused_and_the_wait_stays_open,
);

async fn an_input_over_its_cap_is_refused_and_nothing_is_stored(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = small_engine(&db).await;
    let crew = Crew::builder("caps", "1")
        .template("t", "ok")
        .build()
        .unwrap();
    let big = json!({"text": "x".repeat(100)});
    let err = engine
        .run(&crew, big, SubmitOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the run input is 111 bytes, over the cap of 64 bytes"
    );
    assert!(engine.list(&RunFilter::default()).await.unwrap().is_empty());
}

async fn an_output_over_its_cap_fails_the_step_without_storing_it(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = small_engine(&db).await;
    let crew = Crew::builder("caps", "1")
        .template("big", "{% for i in range(100) %}x{% endfor %}")
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
    assert_eq!(step.output, None, "nothing partial is stored");
    let error = step.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::TooLarge);
    assert!(!error.retryable);
    assert!(
        error.message.contains("over the cap of 64 bytes"),
        "{}",
        error.message
    );
    assert_eq!(step.attempt.get(), 1, "an oversized output is not retried");
}

async fn an_answer_over_its_cap_is_refused_and_the_wait_stays_open(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = small_engine(&db).await;
    let crew = Crew::builder("caps", "1")
        .template("t", "ok")
        .review()
        .build()
        .unwrap();
    let id = engine
        .run(&crew, json!({}), SubmitOptions::default())
        .await
        .unwrap()
        .run
        .id;
    let wait = engine
        .waits(&WaitFilter {
            run: Some(id),
            ..Default::default()
        })
        .await
        .unwrap()
        .remove(0);
    let edit = Answer::Edit {
        output: json!("y".repeat(100)),
    };
    let err = engine.answer(wait.id, &edit, "alice").await.unwrap_err();
    assert!(err.to_string().contains("the answer is"), "{err}");
    let after = engine
        .waits(&WaitFilter {
            run: Some(id),
            ..Default::default()
        })
        .await
        .unwrap()
        .remove(0);
    assert_eq!(after.status, WaitStatus::Open);
}
