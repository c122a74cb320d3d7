//! Issue 13's defects, each through the engine on both databases: values
//! with a NUL character, corrupt runs in a worker's queue, finished runs
//! whose rows disagree with them, resumes that race, and `run` racing a
//! worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use cairn::{
    async_trait, Agent, Crew, ErrorClass, ErrorKind, RunStatus, StepContext, StepOutput,
    StepStatus, Stop, SubmitOptions,
};
use cairn_testkit::{both, Kind, TestDb};

use super::{after_kill, crew, engine, executions, Gate, Log};

both!(
    a_nul_in_the_input_is_bad_input_and_stores_nothing,
    a_step_output_with_a_nul_fails_the_step_once_and_for_all,
    a_run_marked_succeeded_halfway_is_corruption,
    a_corrupt_run_is_set_aside_and_never_blocks_the_queue_or_listing,
    a_worker_fails_a_corrupt_claimed_run_as_corruption_at_once,
    resume_refuses_a_live_lease_unless_told_to_take_it_over,
    run_racing_a_worker_reports_the_runs_real_outcome,
    doctor_names_every_corrupt_run,
);

/// Answers with a NUL in its output, counting its executions.
struct Nul(Arc<AtomicUsize>);

#[async_trait]
impl Agent for Nul {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(StepOutput::new(json!({"bytes": "a\u{0}b"})))
    }
}

async fn a_nul_in_the_input_is_bad_input_and_stores_nothing(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let crew = crate::template_crew("nul", "t", "ok");
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
    let (_db, engine) = super::opened(kind).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let crew = Crew::builder("nul", "1")
        .agent_named("emit", "nul", Nul(runs.clone()))
        .template("after", "never")
        .build()
        .unwrap();
    let view = crate::ran_to_failure(&engine, &crew).await;
    let step = &view.steps[0];
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(step.output, None);
    let error = step.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Unstorable);
    assert!(!error.retryable);
    crate::assert_contains(&error.message, "the step's output contains a NUL");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "executed once, not retried");
    assert_eq!(
        view.run.error.as_ref().map(|e| e.kind),
        Some(ErrorKind::Unstorable)
    );
}

async fn a_run_marked_succeeded_halfway_is_corruption(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let (log, id) = crate::killed_and_registered(&engine, 6, 3).await;
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

async fn a_corrupt_run_is_set_aside_and_never_blocks_the_queue_or_listing(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let log = Log::default();
    let crew = crew(2, &log, None);
    let bad = crate::submitted(&engine, &crew, json!({"n": 1})).await;
    let good = crate::submitted(&engine, &crew, json!({"n": 2})).await;
    db.exec(&format!(
        r#"UPDATE runs SET crew_def = '{{"not": "a crew"}}' WHERE id = '{bad}'"#
    ))
    .await;
    // The worker's claim sets the corrupt run aside and takes the next.
    let driven = engine
        .work_one()
        .await
        .unwrap()
        .expect("the healthy run was claimed");
    assert_eq!(driven.run.id, good);
    assert_eq!(driven.run.status, RunStatus::Succeeded);
    assert!(
        engine.work_one().await.unwrap().is_none(),
        "nothing left to claim"
    );
    // Listing answers, and names the corrupt run with its corruption.
    let listed = engine.list(&Default::default()).await.unwrap();
    assert_eq!(listed.len(), 2);
    let corrupt = listed.iter().find(|r| r.id == bad).unwrap();
    assert_eq!(corrupt.status, RunStatus::Failed);
    let error = corrupt.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Corruption);
    crate::assert_contains(&error.message, "crew definition");
    // The setting aside is an event, readable although the run does not decode.
    let events = engine.events(bad).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, cairn::EventKind::RunFailed);
    assert_eq!(last.data["error"]["kind"], "corruption");
    // Showing it is still a loud corruption, not a guess.
    let err = engine.show(bad).await.unwrap_err();
    assert!(err.corruption().is_some(), "{err}");
}

async fn a_worker_fails_a_corrupt_claimed_run_as_corruption_at_once(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let (log, id) = crate::killed_and_registered(&engine, 4, 2).await;
    // A missing checkpoint, and a lease that expired: a worker takes it over.
    db.exec("DELETE FROM steps WHERE idx = 1").await;
    db.exec("UPDATE runs SET lease_expires_at = '2000-01-01T00:00:00Z'")
        .await;
    let err = engine.work_one().await.unwrap_err();
    assert!(err.corruption().is_some(), "{err}");
    let run = engine.get_run(id).await.unwrap();
    assert_eq!(
        run.status,
        RunStatus::Failed,
        "failed at once, not after takeovers"
    );
    let error = run.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Corruption);
    crate::assert_contains(&error.message, "step 1 is missing");
    assert!(
        engine.work_one().await.unwrap().is_none(),
        "never claimed again"
    );
    assert_eq!(executions(&log, 2), 1, "the step did not run again");
}

async fn resume_refuses_a_live_lease_unless_told_to_take_it_over(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let (log, id) = crate::killed_and_registered(&engine, 3, 1).await;
    let events = engine.events(id).await.unwrap();
    // Its lease is live: a plain resume is refused, naming holder and expiry.
    let err = engine.resume(id, Default::default()).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Busy, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("live lease held by `pid:") && msg.contains(" until 20"),
        "{msg}"
    );
    // The library names no command line (the CLI adds the whole one).
    assert!(msg.contains("take it over explicitly"), "{msg}");
    assert!(!msg.contains("--takeover"), "{msg}");
    assert_eq!(engine.events(id).await.unwrap(), events, "nothing written");
    assert_eq!(executions(&log, 1), 1, "the step did not run again");

    // An explicit takeover holds the run while its step runs; a second
    // resume at that moment is refused instead of running the step too.
    let (gate, entered, release) = Gate::agent(&log);
    let gated = crew(3, &log, Some((1, gate)));
    let first = {
        let engine = engine.clone();
        let opts = cairn::ResumeOptions {
            crew: Some(gated),
            ..after_kill()
        };
        tokio::spawn(async move { engine.resume(id, opts).await })
    };
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the taken-over step never started");
    let second = super::engine(&db).await;
    second.register(&crew(3, &log, None));
    let err = second.resume(id, Default::default()).await.unwrap_err();
    assert!(
        matches!(err.store_error(), Some(cairn::StoreError::LeaseHeld { .. })),
        "{err}"
    );
    release.notify_one();
    let done = first.await.unwrap().unwrap();
    assert!(done.took_over);
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert_eq!(
        executions(&log, 1),
        2,
        "the killed attempt and the takeover, no third"
    );
}

async fn run_racing_a_worker_reports_the_runs_real_outcome(kind: Kind) {
    let db = TestDb::of(kind).await;
    let log = Log::default();
    let (gate, entered, release) = Gate::agent(&log);
    // A worker claims the run first and is in its step.
    let worker = engine(&db).await;
    let gated = crew(2, &log, Some((0, gate)));
    let opts = || SubmitOptions {
        idempotency_key: Some("race".into()),
        ..SubmitOptions::default()
    };
    let id = worker
        .submit(&gated, json!({}), opts())
        .await
        .unwrap()
        .run
        .id;
    let working = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.work_one().await })
    };
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the worker never started the step");
    // `run` of the same submission in another process: it follows the
    // worker to the end instead of failing because the run is taken.
    let cli = engine(&db).await;
    let releaser = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        release.notify_one();
    });
    let done = cli
        .run(&crew(2, &log, None), json!({}), opts())
        .await
        .unwrap();
    assert_eq!(done.run.id, id);
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert!(
        done.executed.is_empty(),
        "the worker executed it: {:?}",
        done.executed
    );
    releaser.await.unwrap();
    let worked = working.await.unwrap().unwrap().unwrap();
    assert_eq!(worked.executed.len(), 2);
    assert_eq!(executions(&log, 0), 1);
    assert_eq!(executions(&log, 1), 1);
}

async fn doctor_names_every_corrupt_run(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let log = Log::default();
    let done = crate::ran(&engine, &crew(3, &log, None), json!({}))
        .await
        .run
        .id;
    let checkup = engine.doctor().await.unwrap();
    assert!(checkup.is_healthy(), "{checkup:?}");
    assert_eq!(checkup.runs, 1);
    let undecodable = engine
        .submit(
            &crew(3, &log, None),
            json!({"n": 2}),
            SubmitOptions::default(),
        )
        .await
        .unwrap()
        .run
        .id;
    db.exec(&format!(
        r#"UPDATE runs SET crew_def = '{{"not": "a crew"}}' WHERE id = '{undecodable}'"#
    ))
    .await;
    db.exec(&format!(
        "DELETE FROM steps WHERE run_id = '{done}' AND idx = 1"
    ))
    .await;
    let checkup = engine.doctor().await.unwrap();
    assert!(!checkup.is_healthy());
    assert!(checkup.integrity.is_empty(), "the database itself is fine");
    assert_eq!(checkup.runs, 2);
    let mut named: Vec<_> = checkup.corrupt_runs.iter().map(|c| c.run).collect();
    named.sort();
    let mut want = vec![done, undecodable];
    want.sort();
    assert_eq!(named, want, "{checkup:?}");
}
