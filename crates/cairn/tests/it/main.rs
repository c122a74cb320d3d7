//! DESIGN.md's invariants through the library facade, each on a real SQLite
//! file and a real PostgreSQL schema. A killed process is modelled here by
//! aborting the task that drives a run mid-step (for storage, the same as a
//! SIGKILL); `crates/cairn-cli/tests` repeats the crash tests with real
//! processes and signals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Notify;

use cairn::{
    async_trait, Agent, Crew, Engine, Error, ErrorInfo, ErrorKind, EventKind, ExecutorConfig,
    OpenOptions, ResumeOptions, RunId, RunStatus, StepContext, StepIdx, StepOutput, StepStatus,
    Stop, SubmitOptions,
};
use cairn_testkit::{both, Kind, TestDb};

mod agents;
mod children;
mod codemap;
mod context;
mod contract;
mod cost;
mod fanout;
mod hardening;
mod keys;
mod limits;
mod operators;
mod processes;
mod published;
mod raise;
mod retry;
mod rollup;
mod threads;
mod tidy;
mod versions;
mod waits;

/// Every execution of every step, as (idx, attempt).
pub(crate) type Log = Arc<Mutex<Vec<(u32, u32)>>>;

/// Records its execution and answers with what it saw.
struct Recorder(Log);

#[async_trait]
impl Agent for Recorder {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.0
            .lock()
            .unwrap()
            .push((cx.step.idx.get(), cx.step.attempt.get()));
        Ok(StepOutput::new(json!({
            "idx": cx.step.idx,
            "input": cx.input,
            "saw": cx.previous.iter().map(|p| json!([p.idx, p.role, p.output["idx"]])).collect::<Vec<_>>(),
        })))
    }
}

/// Records its execution, says so, then waits for a release that may never come.
pub(crate) struct Gate {
    pub(crate) log: Log,
    pub(crate) entered: Arc<Notify>,
    pub(crate) release: Arc<Notify>,
}

impl Gate {
    /// A gate logging to `log`, with the notifies that say it was entered
    /// and that release it.
    pub(crate) fn agent(log: &Log) -> (Arc<dyn Agent>, Arc<Notify>, Arc<Notify>) {
        let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let gate = Gate {
            log: log.clone(),
            entered: entered.clone(),
            release: release.clone(),
        };
        (Arc::new(gate), entered, release)
    }
}

#[async_trait]
impl Agent for Gate {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.log
            .lock()
            .unwrap()
            .push((cx.step.idx.get(), cx.step.attempt.get()));
        self.entered.notify_one();
        self.release.notified().await;
        Ok(StepOutput::new(json!({"idx": cx.step.idx, "by": "gate"})))
    }
}

struct Fail;

#[async_trait]
impl Agent for Fail {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        Err(ErrorInfo::new(ErrorKind::Agent, "the model said no", true).into())
    }
}

struct Sleep;

#[async_trait]
impl Agent for Sleep {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(StepOutput::new("late"))
    }
}

/// Asserts that `text` contains `part`, printing `text` if not.
#[track_caller]
pub(crate) fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{}", text);
}

/// The events of `kind` among `events`.
pub(crate) fn of_kind(events: &[cairn::EventRecord], kind: EventKind) -> Vec<&cairn::EventRecord> {
    events.iter().filter(|e| e.kind == kind).collect()
}

/// `engine.run(crew, input)` with the default options, which must not err.
pub(crate) async fn ran(engine: &Engine, crew: &Crew, input: Value) -> cairn::Driven {
    engine
        .run(crew, input, SubmitOptions::default())
        .await
        .unwrap()
}

/// `engine.submit(crew, input)` with the default options: the run's id.
pub(crate) async fn submitted(engine: &Engine, crew: &Crew, input: Value) -> RunId {
    engine
        .submit(crew, input, SubmitOptions::default())
        .await
        .unwrap()
        .run
        .id
}

/// The waits of run `id`.
pub(crate) async fn waits_of(engine: &Engine, id: RunId) -> Vec<cairn::WaitRecord> {
    let filter = cairn::WaitFilter {
        run: Some(id),
        ..Default::default()
    };
    engine.waits(&filter).await.unwrap()
}

/// The open waits of run `id`.
pub(crate) async fn open_waits(engine: &Engine, id: RunId) -> Vec<cairn::WaitRecord> {
    let filter = cairn::WaitFilter {
        run: Some(id),
        step: None,
        status: Some(cairn::WaitStatus::Open),
    };
    engine.waits(&filter).await.unwrap()
}

/// A crew `name` of one template step.
pub(crate) fn template_crew(name: &str, role: &str, template: &str) -> Crew {
    Crew::builder(name, "1")
        .template(role, template)
        .build()
        .unwrap()
}

/// [`killed_during`] a run of `n` steps at step `at`, its crew registered
/// again (as the next process would): the log and the run.
pub(crate) async fn killed_and_registered(engine: &Engine, n: u32, at: u32) -> (Log, RunId) {
    let log = Log::default();
    let id = killed_during(engine, n, at, &log).await;
    engine.register(&crew(n, &log, None));
    (log, id)
}

/// A new database and engine, with a run of `n` steps [`killed_during`]
/// step `at`: the database, the engine, the log and the run.
pub(crate) async fn killed_in_new_engine(
    kind: Kind,
    n: u32,
    at: u32,
) -> (TestDb, Engine, Log, RunId) {
    let (db, engine) = opened(kind).await;
    let log = Log::default();
    let id = killed_during(&engine, n, at, &log).await;
    (db, engine, log, id)
}

/// Runs `crew` on `{}`; the run fails: its view.
pub(crate) async fn ran_to_failure(engine: &Engine, crew: &Crew) -> cairn::RunView {
    let done = ran(engine, crew, json!({})).await;
    assert_eq!(done.run.status, RunStatus::Failed);
    engine.show(done.run.id).await.unwrap()
}

pub(crate) async fn engine(db: &TestDb) -> Engine {
    Engine::open_with(&db.url, &OpenOptions::default(), ExecutorConfig::default())
        .await
        .unwrap()
}

/// The workspace's root directory.
pub(crate) fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A new database of `kind` and an engine on it; the caller keeps the
/// database alive for as long as it uses the engine.
pub(crate) async fn opened(kind: Kind) -> (TestDb, Engine) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db).await;
    (db, engine)
}

/// A crew of `n` steps, all handled as "worker"; `special` replaces step `at`.
pub(crate) fn crew(n: u32, log: &Log, special: Option<(u32, Arc<dyn Agent>)>) -> Crew {
    let mut special = special;
    let mut b = Crew::builder("invariants", "1");
    for i in 0..n {
        let role = format!("r{i}");
        b = match special.take_if(|(at, _)| *at == i) {
            Some((_, agent)) => b.agent_named(role, "worker", Shared(agent)),
            None => b.agent_named(role, "worker", Recorder(log.clone())),
        };
    }
    b.build().unwrap()
}

/// Adapts an `Arc<dyn Agent>` to the builder, which takes agents by value.
struct Shared(Arc<dyn Agent>);

#[async_trait]
impl Agent for Shared {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        self.0.run(cx).await
    }
}

pub(crate) fn executions(log: &Log, idx: u32) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(i, _)| *i == idx)
        .count()
}

/// A resume of a run whose holder this test killed: its lease is still
/// live, with no one behind it, so the resume takes it over explicitly.
pub(crate) fn after_kill() -> ResumeOptions {
    ResumeOptions {
        takeover: true,
        ..ResumeOptions::default()
    }
}

/// Leaves a run exactly as a process killed during step `at` leaves it:
/// steps before `at` committed, step `at` marked running.
pub(crate) async fn killed_during(engine: &Engine, n: u32, at: u32, log: &Log) -> RunId {
    let (gate, entered, _release) = Gate::agent(log);
    let crew = crew(n, log, Some((at, gate)));
    let submitted = engine
        .submit(&crew, json!({"topic": "t"}), SubmitOptions::default())
        .await
        .unwrap();
    let id = submitted.run.id;
    let driver = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.resume(id, ResumeOptions::with_crew(crew)).await })
    };
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the gated step never started");
    driver.abort();
    assert!(driver.await.unwrap_err().is_cancelled());
    id
}

both!(
    each_step_sees_the_run_input_and_all_earlier_outputs,
    a_failed_step_parks_the_run_and_resume_refuses_it,
    resume_of_a_finished_run_executes_nothing,
    resume_after_a_kill_starts_at_the_first_pending_step,
    submitting_twice_with_one_key_runs_once,
    a_changed_crew_is_refused_unless_forced,
    a_missing_checkpoint_is_corruption,
    a_cursor_that_disagrees_with_the_rows_is_corruption,
    a_zombie_cannot_commit_after_a_takeover,
    readers_never_see_a_cursor_that_disagrees_with_the_rows,
    a_step_past_its_timeout_fails_retryably,
    a_rust_crew_resumes_from_its_stored_definition,
);

async fn each_step_sees_the_run_input_and_all_earlier_outputs(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let log = Log::default();
    let done = engine
        .run(
            &crew(4, &log, None),
            json!({"topic": "ctx"}),
            SubmitOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert_eq!(done.executed, (0..4).map(StepIdx).collect::<Vec<_>>());
    let view = engine.show(done.run.id).await.unwrap();
    for step in &view.steps {
        let out = step.output.as_ref().unwrap();
        assert_eq!(out["input"], json!({"topic": "ctx"}));
        let want: Vec<Value> = (0..step.idx.get())
            .map(|j| json!([j, format!("r{j}"), j]))
            .collect();
        assert_eq!(out["saw"], Value::Array(want), "step {}", step.idx);
    }
}

async fn a_failed_step_parks_the_run_and_resume_refuses_it(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let log = Log::default();
    let crew = crew(4, &log, Some((2, Arc::new(Fail) as Arc<dyn Agent>)));
    let view = ran_to_failure(&engine, &crew).await;
    assert_eq!(view.steps.len(), 3, "step 3 never ran, so it has no row");
    assert!(view.steps[..2]
        .iter()
        .all(|s| s.status == StepStatus::Succeeded));
    let failed = &view.steps[2];
    assert_eq!(failed.status, StepStatus::Failed);
    assert_eq!(failed.attempt.get(), 3, "the default policy: 3 attempts");
    assert_eq!(failed.error.as_ref().unwrap().message, "the model said no");
    match engine.resume(view.run.id, ResumeOptions::default()).await {
        Err(Error::Executor(cairn_scheduler::Error::RunFailed { run, .. })) => {
            assert_eq!(run, view.run.id)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        engine.show(view.run.id).await.unwrap().steps,
        view.steps,
        "untouched"
    );
}

async fn resume_of_a_finished_run_executes_nothing(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let log = Log::default();
    let done = ran(&engine, &crew(3, &log, None), json!({})).await;
    let events = engine.store().events(done.run.id).await.unwrap();
    let again = engine
        .resume(done.run.id, ResumeOptions::default())
        .await
        .unwrap();
    assert!(again.executed.is_empty());
    assert_eq!(again.run.status, RunStatus::Succeeded);
    assert_eq!(log.lock().unwrap().len(), 3, "no step ran again");
    assert_eq!(
        engine.store().events(done.run.id).await.unwrap(),
        events,
        "nothing written"
    );
}

async fn resume_after_a_kill_starts_at_the_first_pending_step(kind: Kind) {
    let (db, engine, log, id) = killed_in_new_engine(kind, 6, 3).await;
    let stranded = engine.show(id).await.unwrap();
    assert_eq!(stranded.run.status, RunStatus::Running);
    assert_eq!(stranded.run.cursor, StepIdx(3));
    assert_eq!(stranded.steps[3].status, StepStatus::Running);

    // A new process: a new engine on the same database, the crew from storage.
    let fresh = self::engine(&db).await;
    fresh.register(&crew(6, &log, None));
    let resumed = fresh.resume(id, after_kill()).await.unwrap();
    assert!(resumed.took_over);
    assert_eq!(resumed.executed, (3..6).map(StepIdx).collect::<Vec<_>>());
    assert_eq!(resumed.run.status, RunStatus::Succeeded);
    for i in [0, 1, 2, 4, 5] {
        assert_eq!(executions(&log, i), 1, "step {i}");
    }
    assert_eq!(executions(&log, 3), 2, "the in-flight step ran again");
    let view = fresh.show(id).await.unwrap();
    assert_eq!(view.steps[3].takeovers, 1);
    assert_eq!(
        view.steps[3].attempt.get(),
        1,
        "a takeover is not a new attempt"
    );
    // The resumed step saw exactly the outputs committed before the kill.
    let saw = &view.steps[3].output.as_ref().unwrap()["saw"];
    assert_eq!(saw, &json!([[0, "r0", 0], [1, "r1", 1], [2, "r2", 2]]));
}

async fn submitting_twice_with_one_key_runs_once(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let log = Log::default();
    let crew = crew(2, &log, None);
    let opts = SubmitOptions {
        idempotency_key: Some("order-42".into()),
        ..SubmitOptions::default()
    };
    let a = engine
        .run(&crew, json!({"n": 1}), opts.clone())
        .await
        .unwrap();
    let b = engine.run(&crew, json!({"n": 1}), opts).await.unwrap();
    assert_eq!(a.run.id, b.run.id);
    assert!(b.executed.is_empty());
    assert_eq!(log.lock().unwrap().len(), 2);
    assert_eq!(engine.list(&Default::default()).await.unwrap().len(), 1);
}

async fn a_changed_crew_is_refused_unless_forced(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let log = Log::default();
    let original = crew(2, &log, None);
    let id = submitted(&engine, &original, json!({})).await;
    let changed = crew(3, &log, None);
    let before = engine.show(id).await.unwrap();
    let err = engine
        .resume(id, ResumeOptions::with_crew(changed.clone()))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(original.fingerprint().as_str())
            && msg.contains(changed.fingerprint().as_str()),
        "{msg}"
    );
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(
        engine.show(id).await.unwrap().run,
        before.run,
        "nothing written"
    );

    let forced = engine
        .resume(
            id,
            ResumeOptions {
                force: true,
                ..ResumeOptions::with_crew(changed.clone())
            },
        )
        .await
        .unwrap();
    assert_eq!(forced.run.status, RunStatus::Succeeded);
    assert_eq!(forced.executed.len(), 3);
    assert_eq!(&forced.run.crew_fingerprint, changed.fingerprint());
    let events = engine.store().events(id).await.unwrap();
    assert!(events.iter().any(|e| e.kind == EventKind::CrewForced));
}

/// Resumes `id`, which must be refused: the error, as text.
async fn refused_resume(engine: &Engine, id: RunId) -> String {
    let err = engine.resume(id, ResumeOptions::default()).await;
    err.unwrap_err().to_string()
}

async fn a_missing_checkpoint_is_corruption(kind: Kind) {
    let (db, engine, log, id) = killed_in_new_engine(kind, 5, 3).await;
    db.exec("DELETE FROM steps WHERE idx = 1").await;
    let events = engine.store().events(id).await.unwrap();
    engine.register(&crew(5, &log, None));
    let msg = refused_resume(&engine, id).await;
    assert!(
        msg.contains(&id.to_string()) && msg.contains("step 1 is missing"),
        "{msg}"
    );
    assert_eq!(executions(&log, 3), 1, "nothing dispatched");
    assert_eq!(
        engine.store().events(id).await.unwrap(),
        events,
        "nothing written"
    );
}

async fn a_cursor_that_disagrees_with_the_rows_is_corruption(kind: Kind) {
    let (db, engine, log, id) = killed_in_new_engine(kind, 5, 3).await;
    db.exec("UPDATE runs SET cursor = 1").await;
    engine.register(&crew(5, &log, None));
    let msg = refused_resume(&engine, id).await;
    assert!(msg.contains(&format!("run {id} is corrupt")), "{msg}");
    assert_eq!(log.lock().unwrap().len(), 4, "nothing dispatched");
}

async fn a_zombie_cannot_commit_after_a_takeover(kind: Kind) {
    let db = TestDb::of(kind).await;
    let log = Log::default();
    let (gate, entered, release) = Gate::agent(&log);
    let zombie_crew = crew(3, &log, Some((1, gate)));
    let zombie = engine(&db).await;
    let id = submitted(&zombie, &zombie_crew, json!({})).await;
    let zombie_task = {
        let zombie = zombie.clone();
        tokio::spawn(async move {
            zombie
                .resume(id, ResumeOptions::with_crew(zombie_crew))
                .await
        })
    };
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the gated step never started");
    // The zombie is paused mid-step. An operator takes the run over.
    let operator = engine(&db).await;
    let done = operator
        .resume(
            id,
            ResumeOptions {
                crew: Some(crew(3, &log, None)),
                ..after_kill()
            },
        )
        .await
        .unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    let after = operator.show(id).await.unwrap();
    // The zombie wakes up and tries to commit its step.
    release.notify_one();
    // Refused either way: at the commit (a stale epoch), or earlier, when
    // its lease guard's beat found the run taken over (a lost lease).
    match zombie_task.await.unwrap() {
        Err(e) => assert!(
            matches!(
                e.store_error(),
                Some(cairn_checkpoint::Error::StaleEpoch { .. })
            ) || matches!(
                e,
                Error::Executor(cairn_scheduler::Error::LeaseLost { run }) if run == id
            ),
            "{e}"
        ),
        Ok(d) => panic!("the zombie committed: {d:?}"),
    }
    let end = operator.show(id).await.unwrap();
    assert_eq!(end.steps, after.steps, "the zombie changed nothing");
    assert_ne!(end.steps[1].output.as_ref().unwrap()["by"], "gate");
}

async fn readers_never_see_a_cursor_that_disagrees_with_the_rows(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let log = Log::default();
    let crew = crew(30, &log, None);
    let id = submitted(&engine, &crew, json!({})).await;
    let writer = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.resume(id, ResumeOptions::with_crew(crew)).await })
    };
    let mut snapshots = 0;
    loop {
        let (run, steps) = engine.store().load(id).await.unwrap();
        cairn_core::rebuild(&run, &steps).unwrap_or_else(|e| panic!("snapshot {snapshots}: {e}"));
        let succeeded = steps
            .iter()
            .filter(|s| s.status == StepStatus::Succeeded)
            .count();
        assert_eq!(
            succeeded,
            run.cursor.as_usize(),
            "cursor agrees with the rows"
        );
        snapshots += 1;
        if run.status == RunStatus::Succeeded || writer.is_finished() {
            break;
        }
    }
    let done = writer.await.unwrap().unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert!(snapshots > 1);
}

async fn a_step_past_its_timeout_fails_retryably(kind: Kind) {
    let (_db, engine) = opened(kind).await;
    let crew = Crew::builder("slow", "1")
        .agent("sleeper", Sleep)
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let done = ran(&engine, &crew, json!({})).await;
    assert_eq!(done.run.status, RunStatus::Failed);
    let err = done.run.error.unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.retryable);
}

async fn a_rust_crew_resumes_from_its_stored_definition(kind: Kind) {
    let db = TestDb::of(kind).await;
    let log = Log::default();
    let id = killed_during(&engine(&db).await, 3, 1, &log).await;
    // A process that does not provide the crew's Rust agents says so.
    let bare = engine(&db).await;
    let err = bare.resume(id, ResumeOptions::default()).await.unwrap_err();
    assert!(matches!(err, Error::MissingHandler { .. }), "{err}");
    assert!(err.to_string().contains("`worker`"));
    // One that registered them resumes with no crew offered.
    bare.register(&crew(3, &log, None));
    let done = bare.resume(id, after_kill()).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
}
