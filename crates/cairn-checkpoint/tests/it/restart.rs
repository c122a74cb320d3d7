//! DESIGN.md invariant 1 across a PostgreSQL server crash-restart: committed
//! steps survive `pg_ctl -m immediate restart` on a throwaway cluster of the
//! test's own (`cairn_testkit::PgCluster`, never the shared server), and the
//! store works again afterwards without operator action; a commit sent while
//! the cluster is read-only for a while lands once it takes writes again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_checkpoint::{open, DbFault, Error, OpenOptions, Store};
use cairn_core::{LeaseEpoch, RunStatus, StepIdx, StepStatus};
use cairn_testkit::PgCluster;
use serde_json::json;
use tokio::task::block_in_place;

use super::{claim_req, submitted_and_claimed, success};

/// How long the store may take to work again after the server is back.
const RECOVERY_BUDGET: Duration = Duration::from_secs(10);

pub(crate) fn cluster() -> PgCluster {
    let t = Instant::now();
    let c = block_in_place(PgCluster::start)
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    eprintln!("cluster on port {} up in {:?}", c.port(), t.elapsed());
    c
}

fn restart(cluster: &mut PgCluster) {
    let took = block_in_place(|| cluster.restart_immediate())
        .unwrap_or_else(|e| panic!("immediate restart failed: {e}"));
    eprintln!("immediate restart took {took:?}");
    let log = cluster.log();
    assert!(
        log.contains("not properly shut down") && log.contains("automatic recovery in progress"),
        "the restart was not crash-like (no WAL recovery in the server log):\n{log}"
    );
}

async fn store(url: &str) -> Arc<dyn Store> {
    open(url, &OpenOptions::default())
        .await
        .unwrap_or_else(|e| panic!("cannot open a store on {url}: {e}"))
}

/// An error that says the connection, not the request, failed: retrying is
/// the right answer to it, and only to it.
fn is_connection_error(e: &Error) -> bool {
    match e {
        Error::Unreachable { .. } => true,
        Error::Db {
            fault: DbFault::Connection,
            ..
        } => true,
        Error::Database(
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_),
        ) => true,
        // admin_shutdown, crash_shutdown, cannot_connect_now; connection_exception.
        Error::Database(sqlx::Error::Database(db)) => db
            .code()
            .is_some_and(|c| c.starts_with("57P") || c.starts_with("08")),
        _ => false,
    }
}

/// Calls `f` until it stops failing with connection errors (within
/// [`RECOVERY_BUDGET`]); any other error, or running out of time, fails the
/// test. Returns the value and how many calls it took (1 = first try).
async fn until_reconnected<T, F, Fut>(what: &str, mut f: F) -> (T, u32)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let start = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        match f().await {
            Ok(v) => {
                eprintln!("{what}: ok on try {tries} after {:?}", start.elapsed());
                return (v, tries);
            }
            Err(e) if is_connection_error(&e) && start.elapsed() < RECOVERY_BUDGET => {
                eprintln!("{what}: try {tries} failed with a connection error: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!(
                "{what} still fails {:?} after the restart (try {tries}): {e:?}",
                start.elapsed()
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_store_works_again_after_an_immediate_restart() {
    let mut cluster = cluster();
    let store = store(&cluster.url()).await;
    let c = submitted_and_claimed(&store, 5).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    for i in 0..3 {
        store.commit_step(&success(id, epoch, i, 5)).await.unwrap();
    }
    let before = store.load(id).await.unwrap();
    let events_before = store.events(id).await.unwrap();

    restart(&mut cluster);

    // (a) The pool's connections were severed; the same store recovers.
    // How many tries it takes is reported (`--nocapture`), not pinned: a
    // pooled connection idle for a second or more is pinged before use and
    // replaced if severed (next test); one used more recently is not, so a
    // restart within that second may fail one request per connection.
    let (after, _tries) = until_reconnected("load with the same store", || store.load(id)).await;
    // (b) Every committed row, output and the cursor are there, unchanged.
    assert_eq!(
        after, before,
        "the run or its rows changed across the restart"
    );
    let (run, steps) = &after;
    assert_eq!((run.status, run.cursor), (RunStatus::Running, StepIdx(3)));
    assert_eq!(run.lease_epoch, epoch);
    for i in 0..3 {
        let s = &steps[i as usize];
        assert_eq!((s.idx, s.status), (StepIdx(i), StepStatus::Succeeded));
        assert_eq!(s.output, Some(json!({"out": i})));
    }
    assert_eq!(
        (steps[3].idx, steps[3].status),
        (StepIdx(3), StepStatus::Running)
    );
    cairn_core::rebuild(run, steps).unwrap();
    assert_eq!(store.events(id).await.unwrap(), events_before);

    // (c) The run goes on with the epoch it held before the restart.
    store.commit_step(&success(id, epoch, 3, 5)).await.unwrap();
    store.commit_step(&success(id, epoch, 4, 5)).await.unwrap();
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(steps.len(), 5);
    cairn_core::rebuild(&run, &steps).unwrap();
}

/// The store's pool skips sqlx's ping for connections used within the last
/// second (a round trip saved on every step commit) but still pings one
/// idle for longer: after a restart, the severed connections are found and
/// replaced before use, so the first request succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_past_the_ping_window_is_checked_so_the_first_read_after_a_restart_succeeds(
) {
    let mut cluster = cluster();
    let store = store(&cluster.url()).await;
    let c = submitted_and_claimed(&store, 2).await;
    let last_used = Instant::now();
    restart(&mut cluster);
    // Past the store's window (1 s) of connections taken as alive.
    let idle = Duration::from_millis(1500);
    if let Some(left) = idle.checked_sub(last_used.elapsed()) {
        tokio::time::sleep(left).await;
    }
    let (run, tries) = until_reconnected("get_run after idling", || store.get_run(c.run.id)).await;
    assert_eq!(
        tries, 1,
        "a severed pooled connection was handed out without a check"
    );
    assert_eq!(
        (run.status, run.lease_epoch),
        (RunStatus::Running, c.run.lease_epoch)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_after_the_restart_continues_the_run_and_fencing_holds() {
    let mut cluster = cluster();
    let (id, epoch, before) = {
        let store = store(&cluster.url()).await;
        let c = submitted_and_claimed(&store, 4).await;
        let (id, epoch) = (c.run.id, c.run.lease_epoch);
        store.commit_step(&success(id, epoch, 0, 4)).await.unwrap();
        store.commit_step(&success(id, epoch, 1, 4)).await.unwrap();
        (id, epoch, store.load(id).await.unwrap())
    };

    restart(&mut cluster);

    let url = cluster.url();
    let (store, _tries) = until_reconnected("open a fresh store", || async {
        open(&url, &OpenOptions::default()).await
    })
    .await;
    let after = store.load(id).await.unwrap();
    assert_eq!(
        after, before,
        "the run or its rows changed across the restart"
    );
    cairn_core::rebuild(&after.0, &after.1).unwrap();

    store.commit_step(&success(id, epoch, 2, 4)).await.unwrap();
    // The epoch survived too: a takeover gets the next one, and the old
    // holder is fenced off.
    let taken = store.claim(id, &claim_req(true)).await.unwrap();
    assert_eq!(taken.run.lease_epoch, LeaseEpoch(epoch.0 + 1));
    match store.commit_step(&success(id, epoch, 3, 4)).await {
        Err(Error::StaleEpoch { held, current, .. }) => {
            assert_eq!((held, current), (epoch, taken.run.lease_epoch))
        }
        other => panic!("expected StaleEpoch, got {other:?}"),
    }
    store
        .commit_step(&success(id, taken.run.lease_epoch, 3, 4))
        .await
        .unwrap();
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded);
    cairn_core::rebuild(&run, &steps).unwrap();
}

/// The invariant itself, with the crash landing among commits in flight:
/// every commit that returned `Ok` is there afterwards; the one the crash
/// interrupted (if any) landed whole or not at all, and the writer goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_racing_an_immediate_restart_are_never_lost() {
    const STEPS: u32 = 3000;
    const AFTER: u32 = 20; // commits required once the server is back
    let mut cluster = cluster();
    let store = store(&cluster.url()).await;
    let c = submitted_and_claimed(&store, STEPS as usize).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    let committed = Arc::new(AtomicU32::new(0));
    let restarted = Arc::new(AtomicBool::new(false));

    let writer = tokio::spawn({
        let (store, committed, restarted) = (store.clone(), committed.clone(), restarted.clone());
        async move {
            let mut acked = vec![]; // steps whose commit returned Ok
            let mut interrupted = vec![]; // (step, landed?, error) the crash cut off
            let mut since_restart = 0;
            let mut idx = 0;
            while idx < STEPS && since_restart < AFTER {
                match store.commit_step(&success(id, epoch, idx, STEPS)).await {
                    Ok(()) => {
                        acked.push(idx);
                        idx += 1;
                        committed.store(idx, Ordering::SeqCst);
                        if restarted.load(Ordering::SeqCst) {
                            since_restart += 1;
                        }
                    }
                    Err(e) if is_connection_error(&e) => {
                        // Ambiguous: find out where the run stands, as a
                        // resumed executor would, and go on from there.
                        let ((run, _), _) =
                            until_reconnected("load after a cut-off commit", || store.load(id))
                                .await;
                        assert!(
                            run.cursor == StepIdx(idx) || run.cursor == StepIdx(idx + 1),
                            "cursor {} after a cut-off commit of step {idx}",
                            run.cursor
                        );
                        let landed = run.cursor == StepIdx(idx + 1);
                        interrupted.push((idx, landed, e.to_string()));
                        idx = run.cursor.get();
                    }
                    Err(e) => panic!("commit of step {idx} failed: {e:?}"),
                }
            }
            (acked, interrupted, idx)
        }
    });

    while committed.load(Ordering::SeqCst) < 50 && !writer.is_finished() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at_crash = committed.load(Ordering::SeqCst);
    restart(&mut cluster);
    restarted.store(true, Ordering::SeqCst);
    let (acked, interrupted, next) = writer.await.unwrap();
    eprintln!(
        "crash after ~{at_crash} commits; {} acked in all, next step {next}; \
         commits cut off by the crash (step, landed, error): {interrupted:?}",
        acked.len()
    );
    assert!(
        next < STEPS,
        "the writer ran out of steps before the restart; raise STEPS"
    );

    let (run, steps) = until_reconnected("final load", || store.load(id)).await.0;
    assert_eq!(run.cursor, StepIdx(next));
    assert_eq!(run.status, RunStatus::Running);
    for &i in &acked {
        let s = &steps[i as usize];
        assert_eq!(
            (s.idx, s.status, s.output.clone()),
            (StepIdx(i), StepStatus::Succeeded, Some(json!({"out": i}))),
            "acknowledged step {i} was lost or changed"
        );
    }
    cairn_core::rebuild(&run, &steps).unwrap();
    // One event per landed commit, plus submit and claim: nothing half-done.
    assert_eq!(
        store.events(id).await.unwrap().len(),
        2 + next as usize,
        "events disagree with the cursor"
    );
}

/// Sets the throwaway cluster read-only (`default_transaction_read_only`)
/// or back, for every session at once and without closing any: the
/// server's configuration reloaded, as a failover tool or an operator
/// flips a primary.
pub(crate) async fn read_only(cluster: &PgCluster, on: bool) {
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&cluster.url())
        .await
        .unwrap();
    let set = match on {
        true => "ALTER SYSTEM SET default_transaction_read_only = on",
        false => "ALTER SYSTEM RESET default_transaction_read_only",
    };
    sqlx::query(set).execute(&admin).await.unwrap();
    sqlx::query("SELECT pg_reload_conf()")
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
}

/// A server that refuses writes for a while (SQLSTATE 25006: a standby, a
/// primary being demoted, a read-only flip) is a fault that may pass
/// (`DbFault::ReadOnlyServer`): a step commit sent while the cluster is
/// read-only is refused by the server, tried again within the write
/// boundary's window, and lands once the cluster takes writes again, on
/// the same connections, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_during_a_read_only_flip_of_the_cluster_lands_once_it_ends() {
    let cluster = cluster();
    let store = store(&cluster.url()).await;
    let c = submitted_and_claimed(&store, 3).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    store.commit_step(&success(id, epoch, 0, 3)).await.unwrap();

    read_only(&cluster, true).await;
    // The flip reached the store's sessions: a write is refused as a
    // server that is read-only, not as a lost connection.
    let refused = loop {
        match store.submit(crate::new_run(1, None)).await {
            Err(e) => break e,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert!(
        matches!(
            refused,
            Error::Db {
                fault: DbFault::ReadOnlyServer,
                ..
            }
        ),
        "{refused:?}"
    );
    let commit = success(id, epoch, 1, 3);
    let t = Instant::now();
    let (committed, ()) = tokio::join!(store.commit_step(&commit), async {
        tokio::time::sleep(Duration::from_millis(600)).await;
        read_only(&cluster, false).await;
    });
    committed.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "the commit landed while the cluster was read-only ({:?})",
        t.elapsed()
    );
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!((run.status, run.cursor), (RunStatus::Running, StepIdx(2)));
    assert_eq!(steps[1].status, StepStatus::Succeeded);
    assert_eq!(steps[1].output, Some(json!({"out": 1})));
    let succeeded = store
        .events(id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.as_str() == "step_succeeded")
        .count();
    assert_eq!(succeeded, 2, "each commit's event once");
}
