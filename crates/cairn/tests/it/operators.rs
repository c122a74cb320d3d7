//! Operator actions through the engine, both backends: retry, continue,
//! cancel (at once, and cooperatively for a running step, whose late result
//! is discarded), fork, and every refused transition.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;

use cairn::{
    async_trait, Actor, Agent, Crew, Engine, ErrorInfo, ErrorKind, EventKind, ForkRequest,
    ResumeOptions, RetryPolicy, RunId, RunStatus, StepContext, StepIdx, StepOutput, StepStatus,
    Stop, SubmitOptions,
};
use cairn_testkit::{both, Kind};

/// Counts executions; fails while `fail` is set.
#[derive(Clone, Default)]
struct Switch {
    calls: Arc<AtomicU32>,
    fail: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait]
impl Agent for Switch {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(ErrorInfo::new(ErrorKind::Agent, "switched off", true).into());
        }
        Ok(StepOutput::new(
            json!({"idx": cx.step.idx, "attempt": cx.step.attempt}),
        ))
    }
}

/// Signals when entered; finishes only when released.
#[derive(Clone, Default)]
struct Held {
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

#[async_trait]
impl Agent for Held {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        self.entered.notify_one();
        self.release.notified().await;
        Ok(StepOutput::new("late result"))
    }
}

fn ops() -> Actor {
    Actor::new("ops@example").because("test")
}

fn crew(agents: &[(&str, Arc<dyn Agent>)]) -> Crew {
    struct Shared(Arc<dyn Agent>);
    #[async_trait]
    impl Agent for Shared {
        async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
            self.0.run(cx).await
        }
    }
    let mut b = Crew::builder("operators", "1");
    for (role, agent) in agents {
        b = b
            .agent_named(*role, *role, Shared(agent.clone()))
            .retry(RetryPolicy::never());
    }
    b.build().unwrap()
}

async fn failed_run(engine: &Engine, switch: &Switch) -> RunId {
    switch.fail.store(true, Ordering::SeqCst);
    let ok = Switch::default();
    let crew = crew(&[
        ("a", Arc::new(ok)),
        ("b", Arc::new(switch.clone())),
        ("c", Arc::new(Switch::default())),
    ]);
    let done = crate::ran(engine, &crew, json!({})).await;
    assert_eq!(done.run.status, RunStatus::Failed);
    done.run.id
}

both!(
    retry_runs_the_failed_step_again_and_records_who_and_why,
    actions_in_the_wrong_state_are_refused_and_change_nothing,
    continue_carries_on_an_interrupted_run,
    cancel_of_a_queued_run_is_immediate,
    cancel_of_a_running_step_stops_it,
    cancel_discards_a_result_that_arrives_after_the_request,
    fork_copies_exactly_the_steps_before_it_and_leaves_the_source_alone,
    fork_with_a_new_input_must_start_at_step_zero,
);

async fn retry_runs_the_failed_step_again_and_records_who_and_why(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let switch = Switch::default();
    let id = failed_run(&engine, &switch).await;
    switch.fail.store(false, Ordering::SeqCst);
    let queued = engine.retry(id, &ops()).await.unwrap();
    assert_eq!(queued.status, RunStatus::Queued);
    assert_eq!(queued.error, None);
    let events = engine.events(id).await.unwrap();
    let retried = events
        .iter()
        .find(|e| e.kind == EventKind::RunRetried)
        .unwrap();
    assert_eq!(retried.data["by"], "ops@example");
    assert_eq!(retried.data["reason"], "test");
    assert_eq!(retried.data["step"], 1);

    let done = engine.execute(id).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert_eq!(
        done.executed,
        vec![StepIdx(1), StepIdx(2)],
        "resumed at the failed step"
    );
    let view = engine.show(id).await.unwrap();
    assert_eq!(view.steps[1].attempt.get(), 2);
    assert_eq!(view.steps[0].attempt.get(), 1);
    assert_eq!(switch.calls.load(Ordering::SeqCst), 2);
}

async fn actions_in_the_wrong_state_are_refused_and_change_nothing(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let switch = Switch::default();
    let failed = failed_run(&engine, &switch).await;
    switch.fail.store(false, Ordering::SeqCst);
    let ok = engine
        .run(
            &crew(&[("a", Arc::new(Switch::default()))]),
            json!({}),
            SubmitOptions::default(),
        )
        .await
        .unwrap()
        .run
        .id;
    let cases: [(RunId, &str, &str); 4] = [
        (ok, "retry", "`succeeded`: cannot retry it"),
        (ok, "cancel", "`succeeded`: cannot cancel it"),
        (ok, "continue", "`succeeded`: cannot continue it"),
        (failed, "continue", "`failed`: cannot continue it"),
    ];
    for (id, action, want) in cases {
        let before = engine.show(id).await.unwrap();
        let events = engine.events(id).await.unwrap();
        let err = match action {
            "retry" => engine.retry(id, &ops()).await,
            "cancel" => engine.cancel(id, &ops()).await,
            _ => engine.continue_run(id, &ops()).await,
        }
        .unwrap_err();
        assert!(err.to_string().contains(want), "{action}: {err}");
        assert_eq!(engine.show(id).await.unwrap().run, before.run);
        assert_eq!(engine.events(id).await.unwrap(), events);
    }
}

async fn continue_carries_on_an_interrupted_run(kind: Kind) {
    let (db, engine) = super::opened(kind).await;
    let switch = Switch::default();
    let id = failed_run(&engine, &switch).await;
    switch.fail.store(false, Ordering::SeqCst);
    // Nothing in this slice interrupts a step yet (limits arrive with LLM
    // agents), so put the run in that state as a limit would leave it.
    db.exec("UPDATE runs SET status = 'interrupted', error = NULL")
        .await;
    db.exec("UPDATE steps SET status = 'interrupted' WHERE idx = 1")
        .await;
    let queued = engine.continue_run(id, &ops()).await.unwrap();
    assert_eq!(queued.status, RunStatus::Queued);
    let done = engine.execute(id).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    let view = engine.show(id).await.unwrap();
    assert_eq!(view.steps[1].attempt.get(), 1, "continue keeps the attempt");
    let events = engine.events(id).await.unwrap();
    assert!(events.iter().any(|e| e.kind == EventKind::RunContinued));
}

async fn cancel_of_a_queued_run_is_immediate(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let switch = Switch::default();
    let c = crew(&[("a", Arc::new(switch.clone()))]);
    let id = crate::submitted(&engine, &c, json!({})).await;
    let cancelled = engine.cancel(id, &ops()).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    assert!(cancelled.finished_at.is_some());
    let again = engine.resume(id, ResumeOptions::default()).await.unwrap();
    assert!(again.executed.is_empty());
    assert_eq!(switch.calls.load(Ordering::SeqCst), 0);
}

/// Starts a run whose step 1 is `held`, and returns once that step runs.
async fn running_at_held_step(
    engine: &Engine,
    held: &Held,
) -> (RunId, tokio::task::JoinHandle<cairn::Result<cairn::Driven>>) {
    let c = crew(&[
        ("a", Arc::new(Switch::default())),
        ("b", Arc::new(held.clone())),
        ("c", Arc::new(Switch::default())),
    ]);
    let id = crate::submitted(engine, &c, json!({})).await;
    let task = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.resume(id, ResumeOptions::with_crew(c)).await })
    };
    tokio::time::timeout(Duration::from_secs(30), held.entered.notified())
        .await
        .unwrap();
    (id, task)
}

/// Waits for the run's `task` to end, then checks it ended cancelled at
/// step 1, that step's late result discarded.
async fn assert_cancelled_at_step_1(
    engine: &Engine,
    id: RunId,
    task: tokio::task::JoinHandle<cairn::Result<cairn::Driven>>,
) {
    let done = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(done.run.status, RunStatus::Cancelled);
    let view = engine.show(id).await.unwrap();
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(view.steps.len(), 2, "step 2 never started");
    let step = &view.steps[1];
    assert_eq!(step.status, StepStatus::Cancelled);
    assert_eq!(step.output, None, "the late result was discarded");
    assert_eq!(step.error.as_ref().unwrap().kind, ErrorKind::Cancelled);
    let kinds: Vec<EventKind> = engine
        .events(id)
        .await
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&EventKind::RunCancelRequested));
    assert_eq!(kinds.last(), Some(&EventKind::RunCancelled));
}

async fn cancel_of_a_running_step_stops_it(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let held = Held::default();
    let (id, task) = running_at_held_step(&engine, &held).await;
    let requested = engine.cancel(id, &ops()).await.unwrap();
    assert_eq!(requested.status, RunStatus::Running);
    assert!(requested.cancel_requested_at.is_some());
    // Never released: the executor notices the request and drops the step.
    assert_cancelled_at_step_1(&engine, id, task).await;
}

async fn cancel_discards_a_result_that_arrives_after_the_request(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let held = Held::default();
    let (id, task) = running_at_held_step(&engine, &held).await;
    engine.cancel(id, &ops()).await.unwrap();
    // The step finishes right after the request, before the executor's
    // next check: its commit is refused and the run ends cancelled.
    held.release.notify_one();
    assert_cancelled_at_step_1(&engine, id, task).await;
}

/// A fork from step `from_step`, with a new `input` or the source's.
fn fork_at(from_step: u32, input: Option<serde_json::Value>) -> ForkRequest {
    ForkRequest {
        from_step: StepIdx(from_step),
        input,
        thread_id: None,
        crew: None,
        rerun_children: false,
    }
}

async fn fork_copies_exactly_the_steps_before_it_and_leaves_the_source_alone(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let counters: Vec<Switch> = (0..4).map(|_| Switch::default()).collect();
    let agents: Vec<(&str, Arc<dyn Agent>)> = ["a", "b", "c", "d"]
        .into_iter()
        .zip(&counters)
        .map(|(r, s)| (r, Arc::new(s.clone()) as Arc<dyn Agent>))
        .collect();
    let source = engine
        .run(
            &crew(&agents),
            json!({"topic": "fork"}),
            SubmitOptions::default(),
        )
        .await
        .unwrap()
        .run
        .id;
    let before = engine.show(source).await.unwrap();
    let source_events = engine.events(source).await.unwrap();

    let req = fork_at(2, None);
    let child = engine.fork(source, &req, &ops()).await.unwrap();
    assert_ne!(child.id, source);
    assert_eq!(
        (child.status, child.cursor),
        (RunStatus::Queued, StepIdx(2))
    );
    assert_eq!(
        (child.parent_run_id, child.parent_step_idx),
        (Some(source), Some(StepIdx(2)))
    );
    assert_eq!(child.input, json!({"topic": "fork"}));
    let copied = engine.show(child.id).await.unwrap().steps;
    assert_eq!(copied.len(), 2);
    assert_eq!(copied[..], before.steps[..2], "rows 0..2 copied verbatim");

    let done = engine.execute(child.id).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert_eq!(done.executed, vec![StepIdx(2), StepIdx(3)]);
    let calls: Vec<u32> = counters
        .iter()
        .map(|c| c.calls.load(Ordering::SeqCst))
        .collect();
    assert_eq!(calls, [1, 1, 2, 2], "the fork ran only steps 2 and 3");
    assert_eq!(
        engine.show(source).await.unwrap(),
        before,
        "the source is unchanged"
    );
    assert_eq!(engine.events(source).await.unwrap(), source_events);
    let forked = engine.events(child.id).await.unwrap();
    assert_eq!(forked[0].kind, EventKind::RunForked);
    assert_eq!(forked[0].data["parent"], json!(source));

    let too_far = fork_at(5, None);
    assert!(engine
        .fork(source, &too_far, &ops())
        .await
        .unwrap_err()
        .to_string()
        .contains("past the crew's 4 steps"));
}

async fn fork_with_a_new_input_must_start_at_step_zero(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let switch = Switch::default();
    let id = failed_run(&engine, &switch).await;
    let refused = fork_at(1, Some(json!({"new": true})));
    let err = engine.fork(id, &refused, &ops()).await.unwrap_err();
    assert!(err.to_string().contains("(--from-step 0)"), "{err}");
    let past_failure = fork_at(2, None);
    let err = engine.fork(id, &past_failure, &ops()).await.unwrap_err();
    assert!(err.to_string().contains("at step 1 at most"), "{err}");
    let fresh = fork_at(0, Some(json!({"new": true})));
    let child = engine.fork(id, &fresh, &ops()).await.unwrap();
    assert_eq!(child.input, json!({"new": true}));
    assert!(engine.show(child.id).await.unwrap().steps.is_empty());
}
