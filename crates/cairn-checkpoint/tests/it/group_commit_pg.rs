//! PostgreSQL's group commit (`postgres/batch.rs`): step commits that queue
//! while the store's flush is under way share one statement; each is
//! fenced on its own (a stale one refused alone while the rest commit), a
//! batch the server refuses whole is sent again commit by commit, and a
//! batched commit writes exactly what the same commit writes alone.

use std::time::Duration;

use cairn_checkpoint::{pg_options, PgStore, StepCommit, WaitFilter};
use cairn_core::{WaitId, WaitKind};
use sqlx::{Connection, Executor};

use super::differential::{commit_for, Commit};
use super::*;

async fn open_pg(db: &TestDb) -> (Arc<PgStore>, Arc<dyn Store>) {
    let store = PgStore::connect_with(pg_options(&db.url).unwrap(), &OpenOptions::default())
        .await
        .unwrap();
    let store = Arc::new(store);
    let shared: Arc<dyn Store> = store.clone();
    (store, shared)
}

/// Sends `commits` so that they queue together: another run's commit
/// takes the store's flush first and waits for its run row, which another
/// connection holds locked, while `commits` are sent one by one behind it.
/// Then the lock goes, and the answers come back in order.
async fn sent_queued(
    db: &TestDb,
    shared: &Arc<dyn Store>,
    commits: Vec<StepCommit>,
) -> Vec<cairn_checkpoint::Result<()>> {
    let leader = submitted_and_claimed(shared, 2).await;
    let mut blocker = sqlx::PgConnection::connect(&db.url).await.unwrap();
    blocker.execute("BEGIN").await.unwrap();
    sqlx::query("SELECT id FROM runs WHERE id = $1 FOR UPDATE")
        .bind(leader.run.id.as_uuid())
        .fetch_all(&mut blocker)
        .await
        .unwrap();
    let spawn = |c: StepCommit| {
        let store = shared.clone();
        tokio::spawn(async move { store.commit_step(&c).await })
    };
    let led = spawn(success(leader.run.id, leader.run.lease_epoch, 0, 2));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut queued = vec![];
    for c in commits {
        queued.push(spawn(c));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    blocker.execute("ROLLBACK").await.unwrap();
    led.await.unwrap().unwrap();
    let mut answers = vec![];
    for q in queued {
        answers.push(q.await.unwrap());
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_stale_commit_in_a_batch_is_refused_alone_and_the_rest_commit() {
    let db = TestDb::postgres().await;
    let (store, shared) = open_pg(&db).await;
    let mut claimed = vec![];
    for _ in 0..6 {
        claimed.push(submitted_and_claimed(&shared, 2).await);
    }
    // One more run, claimed again by "another process": the first claim's
    // epoch is stale.
    let zombie = submitted_and_claimed(&shared, 2).await;
    let taken = shared.claim(zombie.run.id, &claim_req(true)).await.unwrap();
    let mut commits: Vec<StepCommit> = claimed
        .iter()
        .map(|c| success(c.run.id, c.run.lease_epoch, 0, 2))
        .collect();
    commits.insert(3, success(zombie.run.id, zombie.run.lease_epoch, 0, 2));
    let before = store.group_stats();

    let answers = sent_queued(&db, &shared, commits).await;

    for (i, c) in claimed.iter().enumerate() {
        let answer = &answers[if i < 3 { i } else { i + 1 }];
        assert!(answer.is_ok(), "run {}: {answer:?}", c.run.id);
        let steps = step_0_committed(&shared, c.run.id).await;
        assert_eq!(steps[0].output, Some(json!({"out": 0})));
    }
    match &answers[3] {
        Err(Error::StaleEpoch { run, .. }) => assert_eq!(*run, zombie.run.id),
        other => panic!("the stale commit was not refused as stale: {other:?}"),
    }
    as_taken_over(&shared, zombie.run.id, taken.run.lease_epoch).await;

    // The leader alone, then the seven queued in one statement.
    grouped(&before, &store.group_stats(), 2, 8, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_batch_the_guard_refuses_is_sent_again_commit_by_commit() {
    let db = TestDb::postgres().await;
    let (store, shared) = open_pg(&db).await;
    let good = submitted_and_claimed(&shared, 2).await;
    let bad = submitted_and_claimed(&shared, 2).await;
    // The right epoch, but an attempt the step row is not at: the guard
    // aborts the batch's statement, so nothing of it may stay.
    let mut wrong = success(bad.run.id, bad.run.lease_epoch, 0, 2);
    wrong.attempt = Attempt(2);
    let before = store.group_stats();

    let answers = sent_queued(
        &db,
        &shared,
        vec![success(good.run.id, good.run.lease_epoch, 0, 2), wrong],
    )
    .await;

    answers[0].as_ref().unwrap();
    assert_eq!(
        shared.get_run(good.run.id).await.unwrap().cursor,
        StepIdx(1)
    );
    match &answers[1] {
        Err(Error::Corruption(c)) => assert!(c.to_string().contains("not running"), "{c}"),
        other => panic!("expected the guard's refusal, got {other:?}"),
    }
    let (run, steps) = shared.load(bad.run.id).await.unwrap();
    assert_eq!((run.cursor, run.status), (StepIdx(0), RunStatus::Running));
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].status, StepStatus::Running);
    let after = store.group_stats();
    assert_eq!(after.commits - before.commits, 3, "{before:?} → {after:?}");
    assert_eq!(after.largest, 2, "{after:?}");
}

/// Everything stored of one run that a commit writes, ids and times left
/// out.
async fn written(shared: &Arc<dyn Store>, id: RunId) -> String {
    let (r, steps) = shared.load(id).await.unwrap();
    let mut out = format!(
        "{} cursor {} error {:?} not_before {} finished {}\n",
        r.status,
        r.cursor,
        r.error,
        r.not_before.is_some(),
        r.finished_at.is_some()
    );
    for s in steps {
        out += &format!(
            "step {} {} {} attempt {} output {:?} tokens {:?}/{:?} error {:?} finished {}\n",
            s.idx,
            s.role,
            s.status,
            s.attempt,
            s.output,
            s.input_tokens,
            s.output_tokens,
            s.error,
            s.finished_at.is_some()
        );
    }
    for e in shared.events(id).await.unwrap() {
        out += &format!("event {} {:?} {}\n", e.seq, e.kind, e.data);
    }
    let filter = WaitFilter {
        run: Some(id),
        ..WaitFilter::default()
    };
    let waits = shared.list_waits(&filter).await.unwrap();
    for w in &waits {
        out += &format!(
            "wait {:?} {:?} {} {:?} deadline {} {:?}\n",
            w.kind,
            w.status,
            w.prompt,
            w.question_id,
            w.deadline.is_some(),
            w.on_deadline
        );
    }
    waits
        .iter()
        .fold(out.replace(&id.to_string(), "RUN"), |out, w| {
            out.replace(&w.id.to_string(), "WAIT")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_batched_commit_writes_what_the_same_commit_alone_writes() {
    let db = TestDb::postgres().await;
    let (store, shared) = open_pg(&db).await;
    let kinds = |wait: WaitId, other: WaitId| {
        vec![
            (1, Commit::Success),
            (3, Commit::Success),
            (2, Commit::Retry),
            (2, Commit::Fail),
            (2, Commit::Interrupt),
            (2, Commit::Wait(WaitKind::Review, wait, true)),
            (2, Commit::Wait(WaitKind::Question, other, false)),
        ]
    };
    let (mut batched, mut alone) = (vec![], vec![]);
    let queued = kinds(WaitId::new(), WaitId::new());
    for (steps, how) in &queued {
        let c = submitted_and_claimed(&shared, *steps).await;
        batched.push((c.run.id, commit_for(&c.run, Attempt(1), how, false)));
    }
    for (steps, how) in kinds(WaitId::new(), WaitId::new()) {
        let c = submitted_and_claimed(&shared, steps).await;
        alone.push((c.run.id, commit_for(&c.run, Attempt(1), &how, false)));
    }
    let before = store.group_stats();
    let answers = sent_queued(&db, &shared, batched.iter().map(|b| b.1.clone()).collect()).await;
    assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");
    assert_eq!(store.group_stats().largest, queued.len());
    for (_, c) in &alone {
        shared.commit_step(c).await.unwrap();
    }
    assert_eq!(store.group_stats().largest, queued.len());
    let batches = store.group_stats().batches - before.batches;
    assert_eq!(batches, 2 + alone.len() as u64, "each alone commit alone");

    for ((b, _), (a, _)) in batched.iter().zip(&alone) {
        assert_eq!(written(&shared, *b).await, written(&shared, *a).await);
    }
}
