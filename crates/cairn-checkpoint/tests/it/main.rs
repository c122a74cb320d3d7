//! The store conformance suite: every test runs on a real SQLite file and on
//! a real PostgreSQL schema, through the `Store` contract only (raw SQL is
//! used solely to damage a database on purpose, or to age a run the test
//! cannot wait for).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::{
    open, ClaimRequest, Claimed, Error, NewRun, Next, OpenOptions, RunFilter, StepCommit,
    StepTransition, Store,
};
use cairn_core::{
    Attempt, CrewDef, ErrorInfo, ErrorKind, EventKind, LeaseEpoch, NewEvent, RunId, RunStatus,
    StepIdx, StepRecord, StepStatus, Usage,
};
use cairn_testkit::{both, Kind, TestDb};
use serde_json::json;

/// Each of `calls` (store calls on something deleted: reading it, deleting
/// it again) fails with `gone`.
macro_rules! assert_gone {
    ($gone:pat, $($call:expr),+ $(,)?) => {
        $(assert!(matches!($call.await, Err($gone)));)+
    };
}

mod contract;
mod differential;
mod durability;
mod event_fixtures;
mod faults;
mod fences;
mod fuzz_journal;
mod group_commit;
mod group_commit_pg;
mod hosts;
mod journal;
mod leases;
mod nul;
mod on_busy;
mod permits;
mod replication;
mod restart;
mod retention;
mod threads;

/// An event of `kind` as its writers store it: `data` filled out to the
/// kind's payload (`cairn_testkit::events`), as the store checks in a
/// debug build.
fn event(kind: EventKind, data: serde_json::Value) -> NewEvent {
    NewEvent::new(kind, cairn_testkit::events::complete(kind.as_str(), data))
}

/// One field (`f`) of each item of a listing, in its order.
pub(crate) fn each<T, U>(listed: Vec<T>, f: impl FnMut(T) -> U) -> Vec<U> {
    listed.into_iter().map(f).collect()
}

fn crew(steps: usize) -> CrewDef {
    let mut toml = String::from("name = \"conformance\"\nversion = \"1\"\n");
    for i in 0..steps {
        toml.push_str(&format!(
            "[[agents]]\nrole = \"r{i}\"\nkind = \"template\"\ntemplate = \"{i}\"\n"
        ));
    }
    CrewDef::from_toml(&toml).unwrap()
}

pub(crate) async fn store(db: &TestDb) -> Arc<dyn Store> {
    open(&db.url, &OpenOptions::default()).await.unwrap()
}

/// A new database of `kind` and a store on it; the caller keeps the
/// database alive for as long as it uses the store.
pub(crate) async fn fresh(kind: Kind) -> (TestDb, Arc<dyn Store>) {
    let db = TestDb::of(kind).await;
    let store = store(&db).await;
    (db, store)
}

/// A new wait of `kind` asking `prompt`: no question id, no deadline.
pub(crate) fn new_wait(
    kind: cairn_core::WaitKind,
    prompt: serde_json::Value,
) -> cairn_core::NewWait {
    cairn_core::NewWait {
        id: cairn_core::WaitId::new(),
        kind,
        prompt,
        question_id: None,
        deadline_ms: None,
        on_deadline: None,
    }
}

pub(crate) fn new_run(steps: usize, key: Option<&str>) -> NewRun {
    NewRun {
        idempotency_key: key.map(str::to_owned),
        ..NewRun::new(crew(steps), json!({"topic": "conformance"}))
    }
}

pub(crate) fn claim_req(takeover: bool) -> ClaimRequest {
    ClaimRequest::new(OWNER, Duration::from_secs(30), 3).forced(takeover)
}

/// Who the tests' claims are by, unless a test says otherwise.
pub(crate) const OWNER: &str = "test";

/// The fence of a lease [`OWNER`] holds at `epoch`.
pub(crate) fn fence(epoch: LeaseEpoch) -> cairn_core::Fence {
    cairn_core::Fence::new(epoch, OWNER)
}

/// The commit that finishes step `idx` of a `steps`-step run successfully,
/// by [`OWNER`] at `epoch`.
pub(crate) fn success(run: RunId, epoch: LeaseEpoch, idx: u32, steps: u32) -> StepCommit {
    let last = idx + 1 == steps;
    StepCommit {
        run_id: run,
        fence: fence(epoch),
        idx: StepIdx(idx),
        attempt: Attempt(1),
        usage: Some(Usage {
            input_tokens: 10 + u64::from(idx),
            output_tokens: 1,
            cost_usd: Default::default(),
        }),
        events: vec![event(EventKind::StepSucceeded, json!({"idx": idx}))],
        transition: StepTransition::Succeeded {
            output: json!({"out": idx}),
            next: match last {
                true => Next::RunSucceeded,
                false => Next::Step(cairn_core::Role::new(format!("r{}", idx + 1))),
            },
        },
        child: false,
    }
}

/// Since `before`, `batches` flushes carried `commits` step commits, the
/// most in one `largest`.
#[track_caller]
pub(crate) fn grouped(
    before: &cairn_checkpoint::GroupStats,
    after: &cairn_checkpoint::GroupStats,
    batches: u64,
    commits: u64,
    largest: usize,
) {
    assert_eq!(
        after.batches - before.batches,
        batches,
        "{before:?} → {after:?}"
    );
    assert_eq!(
        after.commits - before.commits,
        commits,
        "{before:?} → {after:?}"
    );
    assert_eq!(after.largest, largest, "{after:?}");
}

/// Run `id` after its step 0 committed: cursor 1, step 0 succeeded, step
/// 1 running. Its steps.
pub(crate) async fn step_0_committed(store: &Arc<dyn Store>, id: RunId) -> Vec<StepRecord> {
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(1), "{run:?}");
    assert_eq!(steps[0].status, StepStatus::Succeeded);
    assert_eq!(steps[1].status, StepStatus::Running);
    steps
}

/// Run `id` as a takeover at `epoch` left it (a stale commit wrote
/// nothing): cursor 0, one running step.
pub(crate) async fn as_taken_over(store: &Arc<dyn Store>, id: RunId, epoch: LeaseEpoch) {
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(0));
    assert_eq!(run.lease_epoch, epoch);
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].status, StepStatus::Running);
}

pub(crate) async fn submitted_and_claimed(store: &Arc<dyn Store>, steps: usize) -> Claimed {
    let run = store.submit(new_run(steps, None)).await.unwrap().run;
    store.claim(run.id, &claim_req(false)).await.unwrap()
}

both!(
    submit_creates_a_queued_run_with_its_crew_and_an_event,
    submit_with_the_same_idempotency_key_returns_the_same_run,
    reusing_a_key_with_another_input_is_refused,
    claim_bumps_the_epoch_and_marks_the_cursor_step_running,
    claim_of_a_running_run_needs_takeover,
    commit_writes_row_cursor_next_step_and_event_together,
    stale_epoch_commit_is_rejected_and_changes_nothing,
    commit_of_a_step_that_is_not_running_changes_nothing,
    failed_step_keeps_error_and_earlier_steps,
    crash_loop_cap_fails_the_run,
    list_is_oldest_first_and_filters,
    list_pages_by_keyset_with_crew_and_thread_filters,
    events_after_returns_only_newer_events,
    events_of_kind_returns_that_kind_alone,
    unknown_run_is_not_found,
    undecodable_crew_definition_is_corruption,
    committed_steps_survive_closing_and_reopening,
);

async fn submit_creates_a_queued_run_with_its_crew_and_an_event(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let s = store.submit(new_run(3, None)).await.unwrap();
    assert!(s.created);
    assert_eq!(s.run.status, RunStatus::Queued);
    assert_eq!(s.run.cursor, StepIdx(0));
    assert_eq!(s.run.step_count, 3);
    assert_eq!(s.run.crew_definition, crew(3));
    assert_eq!(s.run.crew_fingerprint, crew(3).fingerprint());
    assert_eq!(s.run.input, json!({"topic": "conformance"}));
    let (_, steps) = store.load(s.run.id).await.unwrap();
    assert!(steps.is_empty());
    let events = store.events(s.run.id).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::RunSubmitted);
    assert_eq!(events[0].seq, 1);
}

async fn submit_with_the_same_idempotency_key_returns_the_same_run(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let a = store.submit(new_run(2, Some("k1"))).await.unwrap();
    let b = store.submit(new_run(2, Some("k1"))).await.unwrap();
    assert!(a.created && !b.created);
    assert_eq!(a.run.id, b.run.id);
    assert_eq!(
        store.list_runs(&RunFilter::default()).await.unwrap().len(),
        1
    );
    assert_eq!(
        store.events(a.run.id).await.unwrap().len(),
        1,
        "no second event"
    );
    let other = store.submit(new_run(2, Some("k2"))).await.unwrap();
    assert_ne!(other.run.id, a.run.id);
}

async fn reusing_a_key_with_another_input_is_refused(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let a = store.submit(new_run(2, Some("k"))).await.unwrap();
    let mut changed = new_run(2, Some("k"));
    changed.input = json!({"topic": "other"});
    match store.submit(changed).await {
        Err(Error::IdempotencyConflict { run, what, .. }) => {
            assert_eq!(run, a.run.id);
            assert_eq!(what, "input");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    match store.submit(new_run(3, Some("k"))).await {
        Err(Error::IdempotencyConflict { what, .. }) => assert_eq!(what, "crew"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        store.list_runs(&RunFilter::default()).await.unwrap().len(),
        1
    );
}

async fn claim_bumps_the_epoch_and_marks_the_cursor_step_running(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let run = store.submit(new_run(3, None)).await.unwrap().run;
    assert_eq!(run.lease_epoch, LeaseEpoch(0));
    let c = store.claim(run.id, &claim_req(false)).await.unwrap();
    assert_eq!(c.run.status, RunStatus::Running);
    assert_eq!(c.run.lease_epoch, LeaseEpoch(1));
    assert!(!c.took_over);
    let step = c.at_cursor.unwrap();
    assert_eq!(
        (step.idx, step.status, step.attempt),
        (StepIdx(0), StepStatus::Running, Attempt(1))
    );
    assert_eq!(step.role.as_str(), "r0");
    let events = store.events(run.id).await.unwrap();
    assert_eq!(events.last().unwrap().kind, EventKind::RunClaimed);
}

async fn claim_of_a_running_run_needs_takeover(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let first = submitted_and_claimed(&store, 2).await;
    let id = first.run.id;
    match store.claim(id, &claim_req(false)).await {
        Err(Error::WrongState { status, .. }) => assert_eq!(status, RunStatus::Running),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let second = store.claim(id, &claim_req(true)).await.unwrap();
    assert!(second.took_over);
    assert_eq!(second.run.lease_epoch, LeaseEpoch(2));
    let step = second.at_cursor.unwrap();
    assert_eq!(
        (step.attempt, step.takeovers),
        (Attempt(1), 1),
        "same attempt, one takeover"
    );
}

async fn commit_writes_row_cursor_next_step_and_event_together(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 3).await;
    let id = c.run.id;
    let events_before = store.events(id).await.unwrap().len();
    store
        .commit_step(&success(id, c.run.lease_epoch, 0, 3))
        .await
        .unwrap();
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(1));
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(steps.len(), 2);
    let s0 = &steps[0];
    assert_eq!(s0.status, StepStatus::Succeeded);
    assert_eq!(s0.output, Some(json!({"out": 0})));
    assert_eq!((s0.input_tokens, s0.output_tokens), (Some(10), Some(1)));
    assert!(s0.finished_at.is_some_and(|f| f >= s0.started_at));
    assert_eq!(
        (steps[1].idx, steps[1].status),
        (StepIdx(1), StepStatus::Running)
    );
    let events = store.events(id).await.unwrap();
    assert_eq!(events.len(), events_before + 1);
    assert_eq!(events.last().unwrap().kind, EventKind::StepSucceeded);
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as i64).collect::<Vec<_>>(),
        "contiguous sequence"
    );
    // Rows agree with the cursor at every commit.
    cairn_core::rebuild(&run, &steps).unwrap();
    store
        .commit_step(&success(id, c.run.lease_epoch, 1, 3))
        .await
        .unwrap();
    store
        .commit_step(&success(id, c.run.lease_epoch, 2, 3))
        .await
        .unwrap();
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert!(run.finished_at.is_some());
    assert_eq!(steps.len(), 3);
    cairn_core::rebuild(&run, &steps).unwrap();
}

async fn stale_epoch_commit_is_rejected_and_changes_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let zombie = submitted_and_claimed(&store, 3).await;
    let id = zombie.run.id;
    // Another process takes the run over: epoch 2.
    let fresh = store.claim(id, &claim_req(true)).await.unwrap();
    let before = store.load(id).await.unwrap();
    let events_before = store.events(id).await.unwrap();
    match store
        .commit_step(&success(id, zombie.run.lease_epoch, 0, 3))
        .await
    {
        Err(Error::StaleEpoch { held, current, .. }) => {
            assert_eq!((held, current), (LeaseEpoch(1), LeaseEpoch(2)));
        }
        other => panic!("expected StaleEpoch, got {other:?}"),
    }
    assert_eq!(store.load(id).await.unwrap(), before, "nothing changed");
    assert_eq!(store.events(id).await.unwrap(), events_before);
    // The current holder commits fine.
    store
        .commit_step(&success(id, fresh.run.lease_epoch, 0, 3))
        .await
        .unwrap();
}

async fn commit_of_a_step_that_is_not_running_changes_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 3).await;
    let id = c.run.id;
    let before = store.load(id).await.unwrap();
    let mut wrong = success(id, c.run.lease_epoch, 0, 3);
    wrong.attempt = Attempt(2);
    match store.commit_step(&wrong).await {
        Err(Error::Corruption(c)) => assert_eq!(c.run, id),
        other => panic!("expected a corruption error, got {other:?}"),
    }
    assert_eq!(store.load(id).await.unwrap(), before, "nothing changed");
}

async fn failed_step_keeps_error_and_earlier_steps(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 3).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    store.commit_step(&success(id, epoch, 0, 3)).await.unwrap();
    let error = ErrorInfo::new(ErrorKind::ExitStatus, "exit 3: boom", true);
    store
        .commit_step(&StepCommit {
            usage: None,
            transition: StepTransition::Failed {
                error: error.clone(),
            },
            events: vec![event(EventKind::StepFailed, json!({}))],
            ..success(id, epoch, 1, 3)
        })
        .await
        .unwrap();
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error, Some(error.clone()));
    assert_eq!(steps.len(), 2, "no row for a step that never ran");
    assert_eq!(steps[0].status, StepStatus::Succeeded);
    assert_eq!(steps[1].status, StepStatus::Failed);
    assert_eq!(steps[1].error, Some(error));
    assert_eq!(steps[1].attempt, Attempt(1));
    cairn_core::rebuild(&run, &steps).unwrap();
}

async fn crash_loop_cap_fails_the_run(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let id = c.run.id;
    for n in 1..=3 {
        let t = store.claim(id, &claim_req(true)).await.unwrap();
        assert_eq!(t.run.status, RunStatus::Running);
        assert_eq!(t.at_cursor.unwrap().takeovers, n);
    }
    let last = store.claim(id, &claim_req(true)).await.unwrap();
    assert_eq!(last.run.status, RunStatus::Failed);
    let err = last.run.error.unwrap();
    assert_eq!(err.kind, ErrorKind::CrashLoop);
    assert!(!err.retryable);
    let step = last.at_cursor.unwrap();
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(step.error.unwrap().kind, ErrorKind::CrashLoop);
}

async fn list_is_oldest_first_and_filters(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut ids = vec![];
    for _ in 0..3 {
        ids.push(store.submit(new_run(1, None)).await.unwrap().run.id);
    }
    store.claim(ids[1], &claim_req(false)).await.unwrap();
    let all: Vec<RunId> = each(store.list_runs(&RunFilter::default()).await.unwrap(), |r| {
        r.id
    });
    assert_eq!(all, ids);
    let running = store
        .list_runs(&RunFilter {
            status: Some(RunStatus::Running),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        running.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![ids[1]]
    );
    let limited = store
        .list_runs(&RunFilter {
            limit: Some(2),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        limited.iter().map(|r| r.id).collect::<Vec<_>>(),
        ids[..2].to_vec()
    );
}

async fn unknown_run_is_not_found(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = RunId::new();
    assert!(matches!(store.load(id).await, Err(Error::RunNotFound(x)) if x == id));
    assert!(matches!(
        store.get_run(id).await,
        Err(Error::RunNotFound(_))
    ));
    assert!(matches!(store.events(id).await, Err(Error::RunNotFound(_))));
    assert!(matches!(
        store.claim(id, &claim_req(true)).await,
        Err(Error::RunNotFound(_))
    ));
}

async fn undecodable_crew_definition_is_corruption(kind: Kind) {
    let (db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    db.exec(r#"UPDATE runs SET crew_def = '{"not": "a crew"}'"#)
        .await;
    match store.load(id).await {
        Err(Error::Corruption(c)) => {
            assert_eq!(c.run, id);
            assert!(c.detail.contains("crew definition"), "{}", c.detail);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    if kind == Kind::Sqlite {
        // A checkpoint whose output is not JSON (possible in a TEXT column).
        let c = {
            db.exec("DELETE FROM runs").await;
            submitted_and_claimed(&store, 2).await
        };
        store
            .commit_step(&success(c.run.id, c.run.lease_epoch, 0, 2))
            .await
            .unwrap();
        db.exec("UPDATE steps SET output = '{truncated' WHERE idx = 0")
            .await;
        match store.load(c.run.id).await {
            Err(Error::Corruption(e)) => {
                assert!(e.detail.contains("step 0 output"), "{}", e.detail)
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}

async fn committed_steps_survive_closing_and_reopening(kind: Kind) {
    let db = TestDb::of(kind).await;
    let id = {
        let store = store(&db).await;
        let c = submitted_and_claimed(&store, 3).await;
        store
            .commit_step(&success(c.run.id, c.run.lease_epoch, 0, 3))
            .await
            .unwrap();
        c.run.id
    };
    let store = store(&db).await;
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(1));
    assert_eq!(steps[0].output, Some(json!({"out": 0})));
}

#[test]
fn migrations_of_both_dialects_stay_in_step() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let versions = |d: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let sqlite = versions("sqlite");
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, versions("postgres"));
}

/// Processes that open a new SQLite file at once race to migrate it; the
/// losers try again instead of failing ("table … already exists").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_opens_of_a_new_sqlite_file_all_succeed() {
    for _ in 0..5 {
        let db = TestDb::sqlite();
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let url = db.url.clone();
                tokio::spawn(async move { open(&url, &OpenOptions::default()).await.map(drop) })
            })
            .collect();
        for o in opens {
            o.await.unwrap().unwrap();
        }
    }
}

async fn list_pages_by_keyset_with_crew_and_thread_filters(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut ids = vec![];
    for i in 0..5 {
        let mut run = new_run(1 + i % 2, None);
        run.thread_id = Some(format!("t{}", i % 2));
        ids.push(store.submit(run).await.unwrap().run.id);
    }
    let page = |after: Option<RunId>, thread: Option<&str>| {
        let store = store.clone();
        let filter = RunFilter {
            after,
            thread: thread.map(str::to_owned),
            limit: Some(2),
            ..RunFilter::default()
        };
        async move {
            let runs = store.list_runs(&filter).await.unwrap();
            runs.iter().map(|r| r.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None, None).await, ids[..2].to_vec());
    assert_eq!(page(Some(ids[1]), None).await, ids[2..4].to_vec());
    assert_eq!(page(Some(ids[3]), None).await, ids[4..].to_vec());
    assert_eq!(page(Some(ids[0]), Some("t0")).await, vec![ids[2], ids[4]]);
    // Crews are told apart by name: the two-step crew has the same name,
    // so filter by one that exists and one that does not.
    let by_crew = |crew: &str| RunFilter {
        crew: Some(crew.to_owned()),
        ..RunFilter::default()
    };
    assert_eq!(
        store
            .list_runs(&by_crew("conformance"))
            .await
            .unwrap()
            .len(),
        5
    );
    assert!(store.list_runs(&by_crew("other")).await.unwrap().is_empty());
    let unknown = RunFilter {
        after: Some(RunId::new()),
        ..RunFilter::default()
    };
    assert!(matches!(
        store.list_runs(&unknown).await,
        Err(Error::RunNotFound(_))
    ));
}

/// A run of two steps whose first committed, and its events.
async fn first_step_committed(store: &Arc<dyn Store>) -> (RunId, Vec<cairn_core::EventRecord>) {
    let c = submitted_and_claimed(store, 2).await;
    store
        .commit_step(&success(c.run.id, c.run.lease_epoch, 0, 2))
        .await
        .unwrap();
    (c.run.id, store.events(c.run.id).await.unwrap())
}

async fn events_after_returns_only_newer_events(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (id, all) = first_step_committed(&store).await;
    assert!(all.len() >= 3, "{all:?}");
    let newer = store.events_after(id, all[0].seq).await.unwrap();
    assert_eq!(
        newer.iter().map(|e| e.seq).collect::<Vec<_>>(),
        all[1..].iter().map(|e| e.seq).collect::<Vec<_>>()
    );
    let last = all.last().map_or(0, |e| e.seq);
    assert!(store.events_after(id, last).await.unwrap().is_empty());
    assert!(matches!(
        store.events_after(RunId::new(), 0).await,
        Err(Error::RunNotFound(_))
    ));
}

async fn events_of_kind_returns_that_kind_alone(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (id, all) = first_step_committed(&store).await;
    let claims = store
        .events_of_kind(id, EventKind::RunClaimed)
        .await
        .unwrap();
    let want: Vec<i64> = all
        .iter()
        .filter(|e| e.kind == EventKind::RunClaimed)
        .map(|e| e.seq)
        .collect();
    assert_eq!(claims.iter().map(|e| e.seq).collect::<Vec<_>>(), want);
    assert!(!want.is_empty() && want.len() < all.len(), "{all:?}");
    let none = store.events_of_kind(id, EventKind::KeyPaused).await;
    assert!(none.unwrap().is_empty());
    assert!(matches!(
        store
            .events_of_kind(RunId::new(), EventKind::RunClaimed)
            .await,
        Err(Error::RunNotFound(_))
    ));
}
