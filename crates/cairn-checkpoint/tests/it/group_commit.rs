//! SQLite's group commit (`sqlite/writer.rs`): step commits of concurrent
//! runs that queue while a flush is under way share the next transaction,
//! and a commit refused by fencing in such a batch changes nothing while
//! the rest of its batch commits. Submits and claims queued with them share
//! it too, each undone alone if it fails. A commit that finds the writer
//! idle is written on the caller's thread, unless another connection holds
//! the write lock or the runtime has one thread.

use std::time::Duration;

use cairn_checkpoint::{GroupStats, OnBusy, SqliteStore, Store};
use sqlx::{Connection, Executor};

use super::*;

async fn open_store(path: &std::path::Path) -> (Arc<SqliteStore>, Arc<dyn Store>) {
    let store = Arc::new(
        SqliteStore::open(path, true, Duration::from_secs(5))
            .await
            .unwrap(),
    );
    let shared: Arc<dyn Store> = store.clone();
    (store, shared)
}

/// `n` submitted runs of two steps, each claimed.
async fn claimed_runs(store: &Arc<dyn Store>, n: usize) -> Vec<Claimed> {
    let mut claimed = vec![];
    for _ in 0..n {
        claimed.push(submitted_and_claimed(store, 2).await);
    }
    claimed
}

/// Another connection holding the write lock: the writer's first
/// transaction waits in `BEGIN IMMEDIATE` while what follows queues.
async fn write_locked(path: &std::path::Path) -> sqlx::SqliteConnection {
    let mut blocker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    blocker.execute("BEGIN IMMEDIATE").await.unwrap();
    blocker
}

/// Step 0's commit of each run, sent 20 ms apart: the first one waits
/// alone for the lock; the rest queue behind it.
async fn commits_queued(
    store: &Arc<dyn Store>,
    claimed: &[Claimed],
) -> Vec<tokio::task::JoinHandle<cairn_checkpoint::Result<()>>> {
    let mut tasks = vec![];
    for c in claimed {
        let (store, id, epoch) = (store.clone(), c.run.id, c.run.lease_epoch);
        tasks.push(tokio::spawn(async move {
            store.commit_step(&success(id, epoch, 0, 2)).await
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tasks
}

/// A new SQLite store: its database, its file, the store and the same as
/// a `dyn Store`.
async fn sqlite_store() -> (TestDb, std::path::PathBuf, Arc<SqliteStore>, Arc<dyn Store>) {
    let db = TestDb::sqlite();
    let path = db.dir().join("cairn.db");
    let (store, shared) = open_store(&path).await;
    (db, path, store, shared)
}

/// A claimed run of `steps` steps committed one step after another on a
/// new store, to its success: the store's group statistics before and
/// after.
async fn committed_one_by_one(steps: u32) -> (GroupStats, GroupStats) {
    let (_db, _path, store, shared) = sqlite_store().await;
    let c = submitted_and_claimed(&shared, steps as usize).await;
    let before = store.group_stats();
    for i in 0..steps {
        shared
            .commit_step(&success(c.run.id, c.run.lease_epoch, i, steps))
            .await
            .unwrap();
    }
    let after = store.group_stats();
    assert_eq!(
        shared.get_run(c.run.id).await.unwrap().status,
        RunStatus::Succeeded
    );
    (before, after)
}

/// `commit` sent while another connection holds the write lock: still
/// waiting after `ms` milliseconds. The lock's holder and the commit.
async fn commit_behind_a_lock(
    shared: &Arc<dyn Store>,
    path: &std::path::Path,
    commit: StepCommit,
    ms: u64,
) -> (
    sqlx::SqliteConnection,
    tokio::task::JoinHandle<cairn_checkpoint::Result<()>>,
) {
    let blocker = write_locked(path).await;
    let task = {
        let store = shared.clone();
        tokio::spawn(async move { store.commit_step(&commit).await })
    };
    tokio::time::sleep(Duration::from_millis(ms)).await;
    assert!(!task.is_finished(), "the commit did not wait for the lock");
    (blocker, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_commit_in_a_batch_is_refused_and_the_rest_of_its_batch_commits() {
    let (_db, path, store, shared) = sqlite_store().await;
    let claimed = claimed_runs(&shared, 10).await;
    // One more run, claimed again by "another process": the first claim's
    // epoch is stale.
    let zombie = submitted_and_claimed(&shared, 2).await;
    let taken = shared.claim(zombie.run.id, &claim_req(true)).await.unwrap();
    assert!(taken.run.lease_epoch > zombie.run.lease_epoch);
    let before = store.group_stats();

    let mut blocker = write_locked(&path).await;
    let tasks = commits_queued(&shared, &claimed).await;
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
        step_0_committed(&shared, c.run.id).await;
    }
    match stale.await.unwrap() {
        Err(Error::StaleEpoch { run, .. }) => assert_eq!(run, zombie.run.id),
        other => panic!("the stale commit was not refused as stale: {other:?}"),
    }
    // The refused commit wrote nothing: the run is as the takeover left it.
    as_taken_over(&shared, zombie.run.id, taken.run.lease_epoch).await;
    let events = shared.events(zombie.run.id).await.unwrap();
    assert!(
        events.iter().all(|e| e.kind != EventKind::StepSucceeded),
        "{events:?}"
    );

    // Two transactions: the first leader's commit alone, then the other
    // nine with the stale one.
    grouped(&before, &store.group_stats(), 2, 11, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_at_a_time_commits_alone() {
    let (before, after) = committed_one_by_one(3).await;
    assert_eq!(after.batches - before.batches, 3);
    assert_eq!(after.commits - before.commits, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_and_claims_share_a_batch_and_a_failed_one_is_undone_alone() {
    let (_db, path, store, shared) = sqlite_store().await;
    let claimed = claimed_runs(&shared, 3).await;
    let queued = shared.submit(new_run(2, None)).await.unwrap().run;
    // A queued run on thread `t`: a submit that rejects a busy thread
    // inserts its run, finds `t` busy and fails.
    let mut busy = new_run(1, None);
    busy.thread_id = Some("t".into());
    shared.submit(busy).await.unwrap();
    let runs_before = shared.list_runs(&RunFilter::default()).await.unwrap();
    let before = store.group_stats();

    let mut blocker = write_locked(&path).await;
    let commits = commits_queued(&shared, &claimed).await;
    let claim = {
        let store = shared.clone();
        tokio::spawn(async move { store.claim(queued.id, &claim_req(false)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let rejected = {
        let store = shared.clone();
        let mut run = new_run(1, Some("rejected"));
        run.thread_id = Some("t".into());
        run.on_busy = OnBusy::Reject;
        tokio::spawn(async move { store.submit(run).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let submitted = {
        let store = shared.clone();
        tokio::spawn(async move { store.submit(new_run(1, Some("accepted"))).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    blocker.execute("ROLLBACK").await.unwrap();

    for (t, c) in commits.into_iter().zip(&claimed) {
        t.await.unwrap().unwrap();
        assert_eq!(shared.get_run(c.run.id).await.unwrap().cursor, StepIdx(1));
    }
    let claim = claim.await.unwrap().unwrap();
    assert_eq!(claim.run.lease_epoch, LeaseEpoch(1));
    assert_eq!(
        shared.get_run(queued.id).await.unwrap().status,
        RunStatus::Running
    );
    match rejected.await.unwrap() {
        Err(Error::ThreadBusy { thread, .. }) => assert_eq!(thread, "t"),
        other => panic!("expected ThreadBusy, got {other:?}"),
    }
    let accepted = submitted.await.unwrap().unwrap();
    assert!(accepted.created);
    let runs_after = shared.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(
        runs_after.len(),
        runs_before.len() + 1,
        "the accepted submit's run, and nothing of the rejected one"
    );
    assert!(runs_after.iter().any(|r| r.id == accepted.run.id));

    // Two transactions: the first commit alone, then two commits with the
    // claim and both submits.
    let after = store.group_stats();
    assert_eq!(after.batches - before.batches, 2, "{before:?} → {after:?}");
    assert_eq!(after.commits - before.commits, 3, "{before:?} → {after:?}");
    assert_eq!(
        after.shared_scripts - before.shared_scripts,
        3,
        "{before:?} → {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_writer_lets_the_caller_write_and_a_held_lock_sends_the_commit_to_the_thread() {
    let (_db, path, store, shared) = sqlite_store().await;
    let c = submitted_and_claimed(&shared, 3).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    let before = store.group_stats();
    shared.commit_step(&success(id, epoch, 0, 3)).await.unwrap();
    let here = store.group_stats();
    assert_eq!(here.here - before.here, 1, "{before:?} → {here:?}");
    assert_eq!(here.commits - before.commits, 1, "{before:?} → {here:?}");

    // Another connection holds the write lock: the caller does not wait
    // for it on its own thread; the writer thread waits, then commits.
    let (mut blocker, commit) =
        commit_behind_a_lock(&shared, &path, success(id, epoch, 1, 3), 150).await;
    blocker.execute("ROLLBACK").await.unwrap();
    commit.await.unwrap().unwrap();
    let after = store.group_stats();
    assert_eq!(after.here, here.here, "{here:?} → {after:?}");
    assert_eq!(after.commits - here.commits, 1, "{here:?} → {after:?}");
    let (run, steps) = shared.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(2), "{run:?}");
    assert_eq!(steps[1].status, StepStatus::Succeeded);
}

#[tokio::test(flavor = "current_thread")]
async fn a_runtime_of_one_thread_sends_every_commit_to_the_writer_thread() {
    let (before, after) = committed_one_by_one(2).await;
    assert_eq!(after.commits - before.commits, 2, "{before:?} → {after:?}");
    assert_eq!(after.here, before.here, "{before:?} → {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_a_run_never_waits_for_the_writer() {
    let (_db, path, _store, shared) = sqlite_store().await;
    let c = submitted_and_claimed(&shared, 2).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    // The writer thread takes the commit and waits for the write lock.
    let (mut blocker, commit) =
        commit_behind_a_lock(&shared, &path, success(id, epoch, 0, 2), 100).await;
    let run = tokio::time::timeout(Duration::from_secs(5), shared.get_run(id))
        .await
        .expect("get_run waited for the writer")
        .unwrap();
    assert_eq!(run.cursor, StepIdx(0), "{run:?}");
    blocker.execute("ROLLBACK").await.unwrap();
    commit.await.unwrap().unwrap();
    // The writer idle again: the read sees the commit.
    assert_eq!(shared.get_run(id).await.unwrap().cursor, StepIdx(1));
}
