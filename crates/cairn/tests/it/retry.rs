//! Retries: per-agent policies, retryable versus permanent errors, timeouts,
//! and the durable back-off timer (a `not_before` time in the database, by
//! the database clock), including a process that dies during the back-off.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use cairn::{
    async_trait, Agent, Crew, ErrorInfo, ErrorKind, EventKind, ResumeOptions, RetryPolicy,
    RunStatus, StepContext, StepOutput, StepStatus, Stop, SubmitOptions,
};
use cairn_testkit::{both, Kind};

/// Fails (retryably, or not) until it has failed `failures` times.
struct Flaky {
    failures: u32,
    retryable: bool,
    calls: Arc<AtomicU32>,
    at: Arc<Mutex<Vec<DateTime<Utc>>>>,
}

impl Flaky {
    fn new(failures: u32, retryable: bool) -> Flaky {
        Flaky {
            failures,
            retryable,
            calls: Arc::default(),
            at: Arc::default(),
        }
    }
}

#[async_trait]
impl Agent for Flaky {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.at.lock().unwrap().push(Utc::now());
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.failures {
            return Err(
                ErrorInfo::new(ErrorKind::Agent, format!("flake {n}"), self.retryable).into(),
            );
        }
        Ok(StepOutput::new(json!({"attempt": cx.step.attempt})))
    }
}

fn policy(max_attempts: u32, initial_delay_ms: u64) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_delay_ms,
        multiplier: 2.0,
        max_delay_ms: 10_000,
        jitter: 0.0,
    }
}

fn crew_with(agent: Flaky, retry: RetryPolicy) -> Crew {
    Crew::builder("retries", "1")
        .template("first", "ok")
        .agent_named("flaky", "flaky", agent)
        .retry(retry)
        .build()
        .unwrap()
}

/// Runs [`crew_with`] `flaky` under `retry` to its end, which must be
/// `want`: the run's status and how often the flaky step was called.
async fn ran_flaky(
    engine: &cairn::Engine,
    flaky: Flaky,
    retry: RetryPolicy,
    want: (RunStatus, u32),
) -> cairn::Driven {
    let calls = flaky.calls.clone();
    let crew = crew_with(flaky, retry);
    let done = engine.run(&crew, json!({}), SubmitOptions::default()).await;
    let done = done.unwrap();
    assert_eq!(done.run.status, want.0);
    assert_eq!(calls.load(Ordering::SeqCst), want.1);
    done
}

both!(
    a_flaky_step_is_retried_after_its_back_off_until_it_succeeds,
    when_attempts_run_out_the_run_is_parked_failed,
    a_permanent_error_is_not_retried,
    a_timed_out_step_is_retried,
    a_process_killed_during_the_back_off_keeps_the_schedule,
);

async fn a_flaky_step_is_retried_after_its_back_off_until_it_succeeds(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let flaky = Flaky::new(2, true);
    let done = ran_flaky(&engine, flaky, policy(3, 150), (RunStatus::Succeeded, 3)).await;
    let view = engine.show(done.run.id).await.unwrap();
    assert_eq!(view.steps[1].attempt.get(), 3);
    assert_eq!(view.steps[1].output, Some(json!({"attempt": 3})));
    assert_eq!(
        view.steps[1].error.as_ref().map(|e| e.message.as_str()),
        Some("flake 2"),
        "last error kept"
    );
    assert_eq!(view.steps[0].attempt.get(), 1, "the first step ran once");

    // Each back-off is an event, and the next claim came no earlier than it allowed.
    let events = engine.events(done.run.id).await.unwrap();
    let scheduled = crate::of_kind(&events, EventKind::StepRetryScheduled);
    assert_eq!(scheduled.len(), 2);
    let failed = events
        .iter()
        .filter(|e| e.kind == EventKind::StepFailed)
        .count();
    assert_eq!(failed, 2);
    for (s, want_ms) in scheduled.iter().zip([150, 300]) {
        assert_eq!(s.data["delay_ms"], want_ms);
        let next_claim = events
            .iter()
            .find(|e| e.seq > s.seq && e.kind == EventKind::RunClaimed)
            .unwrap();
        let waited = (next_claim.at - s.at).num_milliseconds();
        assert!(
            waited >= want_ms - 2,
            "claimed after {waited} ms, back-off was {want_ms} ms"
        );
    }
}

async fn when_attempts_run_out_the_run_is_parked_failed(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let flaky = Flaky::new(u32::MAX, true);
    let done = ran_flaky(&engine, flaky, policy(2, 10), (RunStatus::Failed, 2)).await;
    let view = engine.show(done.run.id).await.unwrap();
    assert_eq!(view.steps[1].status, StepStatus::Failed);
    assert_eq!(view.steps[1].attempt.get(), 2);
    assert_eq!(done.run.error.unwrap().message, "flake 2");
    assert_eq!(view.steps[0].status, StepStatus::Succeeded, "nothing lost");
}

async fn a_permanent_error_is_not_retried(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let flaky = Flaky::new(1, false);
    let done = ran_flaky(&engine, flaky, policy(3, 10), (RunStatus::Failed, 1)).await;
    let events = engine.events(done.run.id).await.unwrap();
    assert!(!events
        .iter()
        .any(|e| e.kind == EventKind::StepRetryScheduled));
}

async fn a_timed_out_step_is_retried(kind: Kind) {
    struct SlowOnce(AtomicU32);
    #[async_trait]
    impl Agent for SlowOnce {
        async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Ok(StepOutput::new("in time"))
        }
    }
    let (_db, engine) = super::opened(kind).await;
    let crew = Crew::builder("slow", "1")
        .agent("slow", SlowOnce(AtomicU32::new(0)))
        .timeout(Duration::from_millis(100))
        .retry(policy(2, 10))
        .build()
        .unwrap();
    let done = crate::ran(&engine, &crew, json!({})).await;
    assert_eq!(done.run.status, RunStatus::Succeeded);
    let view = engine.show(done.run.id).await.unwrap();
    assert_eq!(view.steps[0].attempt.get(), 2);
    assert_eq!(
        view.steps[0].error.as_ref().unwrap().kind,
        ErrorKind::Timeout
    );
}

async fn a_process_killed_during_the_back_off_keeps_the_schedule(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let flaky = Flaky::new(1, true);
    let (calls, at) = (flaky.calls.clone(), flaky.at.clone());
    let crew = crew_with(flaky, policy(3, 1500));
    let id = crate::submitted(&engine, &crew, json!({})).await;
    let driver = {
        let (engine, crew) = (engine.clone(), crew.clone());
        tokio::spawn(async move { engine.resume(id, ResumeOptions::with_crew(crew)).await })
    };
    // Wait for the failed attempt's commit, then "kill" the process mid back-off.
    let queued = loop {
        let run = engine.store().get_run(id).await.unwrap();
        if run.status == RunStatus::Queued && run.not_before.is_some() {
            break run;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    driver.abort();
    let _ = driver.await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let not_before = queued.not_before.unwrap();

    let fresh = super::engine(&db).await;
    fresh.register(&crew);
    let done = fresh.resume(id, ResumeOptions::default()).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried exactly once");
    let second = at.lock().unwrap()[1];
    assert!(
        second >= not_before,
        "retried at {second}, before its not_before {not_before}"
    );
    assert_eq!(done.run.not_before, None);
}
