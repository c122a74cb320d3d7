//! Size caps: a run input, a step output or an answer over its cap is a
//! typed error naming the cap and the size, and nothing of it is stored.

use serde_json::json;

use cairn::{
    Answer, Crew, Engine, ErrorKind, ExecutorConfig, OpenOptions, RunFilter, StepStatus,
    SubmitOptions, WaitStatus,
};
use cairn_core::Limits;
use cairn_testkit::{both, Kind, TestDb};

/// An engine on `url` with these limits.
async fn engine_with(url: &str, limits: Limits) -> Engine {
    let config = ExecutorConfig {
        limits,
        ..ExecutorConfig::default()
    };
    Engine::open_with(url, &OpenOptions::default(), config)
        .await
        .unwrap()
}

async fn small_engine(db: &TestDb) -> Engine {
    let limits = Limits {
        max_input_bytes: 64,
        max_output_bytes: 64,
        max_answer_bytes: 64,
        ..Limits::default()
    };
    engine_with(&db.url, limits).await
}

both!(
    an_input_over_its_cap_is_refused_and_nothing_is_stored,
    an_output_over_its_cap_fails_the_step_without_storing_it,
    an_answer_over_its_cap_is_refused_and_the_wait_stays_open,
    a_threads_history_is_windowed_by_runs_and_bytes,
    a_model_answer_over_the_journal_cap_fails_as_too_large,
);

/// A model's answer over the journal item cap fails the step as
/// `too_large` (not retried), as an output over its cap does, not as a
/// generic agent failure.
async fn a_model_answer_over_the_journal_cap_fails_as_too_large(kind: Kind) {
    use std::sync::Arc;
    let db = TestDb::of(kind).await;
    let limits = Limits {
        max_journal_item_bytes: 100,
        ..Limits::default()
    };
    let engine = engine_with(&db.url, limits).await;
    let script = format!("[[responses]]\ntext = \"{}\"\n", "x".repeat(300));
    let agent = cairn::agent::LlmAgent::new(
        cairn::LlmDef::new(cairn::ProviderKind::Scripted, "scripted"),
        Arc::new(cairn::llm::ScriptedProvider::parse(&script).unwrap()),
        cairn::agent::Toolbox::new(vec![]).unwrap(),
    );
    let crew = Crew::builder("long", "1")
        .agent_named("talker", "talker-v1", agent)
        .build()
        .unwrap();
    let view = crate::ran_to_failure(&engine, &crew).await;
    let error = view.steps[0].error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::TooLarge, "{error:?}");
    assert!(!error.retryable);
}

/// A step of a thread is given at most the newest `thread_history_runs`
/// earlier runs, and of those the newest that fit in
/// `thread_history_bytes` (whole runs).
async fn a_threads_history_is_windowed_by_runs_and_bytes(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = |runs: u32, bytes: usize| {
        let limits = Limits {
            thread_history_runs: runs,
            thread_history_bytes: bytes,
            ..Limits::default()
        };
        engine_with(&db.url, limits)
    };
    let crew = crate::template_crew(
        "history",
        "t",
        "{% for t in thread %}{{ t.input.n }} {% endfor %}",
    );
    let run = |engine: Engine, n: u32| {
        let crew = crew.clone();
        async move {
            let opts = SubmitOptions {
                thread_id: Some("t".into()),
                ..SubmitOptions::default()
            };
            let done = engine.run(&crew, json!({"n": n}), opts).await.unwrap();
            engine.show(done.run.id).await.unwrap().steps[0]
                .output
                .clone()
                .unwrap()
        }
    };
    let wide = engine(50, 1 << 20).await;
    for n in 0..4 {
        run(wide.clone(), n).await;
    }
    // Four earlier runs: the newest two by count.
    assert_eq!(run(engine(2, 1 << 20).await, 4).await, json!("2 3 "));
    // The newest earlier run is {"n":4} with output "2 3 " (13 bytes as
    // compact JSON), the one before {"n":3} with "0 1 2 " (15): a cap of
    // 18 fits the newest alone, and no part of the other.
    let newest = json!({"n": 4}).to_string().len() + json!("2 3 ").to_string().len();
    assert_eq!(
        run(engine(50, newest + 5).await, 5).await,
        json!("4 "),
        "only the newest run fits"
    );
}

async fn an_input_over_its_cap_is_refused_and_nothing_is_stored(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = small_engine(&db).await;
    let crew = crate::template_crew("caps", "t", "ok");
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
    let crew = crate::template_crew("caps", "big", "{% for i in range(100) %}x{% endfor %}");
    let view = crate::ran_to_failure(&engine, &crew).await;
    let step = &view.steps[0];
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(step.output, None, "nothing partial is stored");
    let error = step.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::TooLarge);
    assert!(!error.retryable);
    crate::assert_contains(&error.message, "over the cap of 64 bytes");
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
    let id = crate::ran(&engine, &crew, json!({})).await.run.id;
    let wait = crate::waits_of(&engine, id).await.remove(0);
    let edit = Answer::Edit {
        output: json!("y".repeat(100)),
    };
    let err = engine.answer(wait.id, &edit, "alice").await.unwrap_err();
    assert!(err.to_string().contains("the answer is"), "{err}");
    let after = crate::waits_of(&engine, id).await.remove(0);
    assert_eq!(after.status, WaitStatus::Open);
}
