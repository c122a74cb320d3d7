//! SQLite's group commit (`sqlite/group.rs`): step commits of concurrent
//! runs that queue while a flush is under way share the next transaction,
//! and a commit refused by fencing in such a batch changes nothing while
//! the rest of its batch commits.

use std::time::Duration;

use cairn_checkpoint::{SqliteStore, Store};
use sqlx::{Connection, Executor};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_commit_in_a_batch_is_refused_and_the_rest_of_its_batch_commits() {
    let db = TestDb::sqlite();
    let path = db.dir().join("cairn.db");
    let store = Arc::new(
        SqliteStore::open(&path, true, Duration::from_secs(5))
            .await
            .unwrap(),
    );
    let shared: Arc<dyn Store> = store.clone();
    let mut claimed = vec![];
    for _ in 0..10 {
        claimed.push(submitted_and_claimed(&shared, 2).await);
    }
    // One more run, claimed again by "another process": the first claim's
    // epoch is stale.
    let zombie = submitted_and_claimed(&shared, 2).await;
    let taken = shared.claim(zombie.run.id, &claim_req(true)).await.unwrap();
    assert!(taken.run.lease_epoch > zombie.run.lease_epoch);
    let before = store.group_stats();

    // Another connection holds the write lock, so the first leader waits
    // in BEGIN IMMEDIATE while every other commit queues behind it.
    let mut blocker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    blocker.execute("BEGIN IMMEDIATE").await.unwrap();
    let mut tasks = vec![];
    for c in &claimed {
        let (store, id, epoch) = (shared.clone(), c.run.id, c.run.lease_epoch);
        tasks.push(tokio::spawn(async move {
            store.commit_step(&success(id, epoch, 0, 2)).await
        }));
        // The first one leads (alone); the rest queue behind it.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stale = {
        let (store, id, epoch) = (shared.clone(), zombie.run.id, zombie.run.lease_epoch);
        tokio::spawn(async move { store.commit_step(&success(id, epoch, 0, 2)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    blocker.execute("ROLLBACK").await.unwrap();

    for (t, c) in tasks.into_iter().zip(&claimed) {
        t.await
            .unwrap()
            .unwrap_or_else(|e| panic!("run {}: {e}", c.run.id));
        let (run, steps) = shared.load(c.run.id).await.unwrap();
        assert_eq!(run.cursor, StepIdx(1), "{run:?}");
        assert_eq!(steps[0].status, StepStatus::Succeeded);
        assert_eq!(steps[1].status, StepStatus::Running);
    }
    match stale.await.unwrap() {
        Err(Error::StaleEpoch { run, .. }) => assert_eq!(run, zombie.run.id),
        other => panic!("the stale commit was not refused as stale: {other:?}"),
    }
    // The refused commit wrote nothing: the run is as the takeover left it.
    let (run, steps) = shared.load(zombie.run.id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(0));
    assert_eq!(run.lease_epoch, taken.run.lease_epoch);
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].status, StepStatus::Running);
    let events = shared.events(zombie.run.id).await.unwrap();
    assert!(
        events.iter().all(|e| e.kind != EventKind::StepSucceeded),
        "{events:?}"
    );

    // Two transactions: the first leader's commit alone, then the other
    // nine with the stale one.
    let after = store.group_stats();
    assert_eq!(after.batches - before.batches, 2, "{before:?} → {after:?}");
    assert_eq!(after.commits - before.commits, 11, "{before:?} → {after:?}");
    assert_eq!(after.largest, 10, "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_at_a_time_commits_alone() {
    let db = TestDb::sqlite();
    let store = Arc::new(
        SqliteStore::open(&db.dir().join("cairn.db"), true, Duration::from_secs(5))
            .await
            .unwrap(),
    );
    let shared: Arc<dyn Store> = store.clone();
    let c = submitted_and_claimed(&shared, 3).await;
    let before = store.group_stats();
    for i in 0..3 {
        shared
            .commit_step(&success(c.run.id, c.run.lease_epoch, i, 3))
            .await
            .unwrap();
    }
    let after = store.group_stats();
    assert_eq!(after.batches - before.batches, 3);
    assert_eq!(after.commits - before.commits, 3);
    assert_eq!(
        shared.get_run(c.run.id).await.unwrap().status,
        RunStatus::Succeeded
    );
}
