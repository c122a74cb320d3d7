//! PostgreSQL URLs of several hosts (`postgres/hosts.rs`), on throwaway
//! clusters of the test's own (`cairn_testkit::PgCluster`): at open the
//! hosts are tried in order and the first that fits `target_session_attrs`
//! is used; a store open on them follows a stop or a read-only flip of its
//! host to the next one without being opened again, its `LISTEN` too. The
//! clusters are independent (no replication): which one a write reached is
//! read from each directly.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_checkpoint::{open, DbFault, Error, OpenOptions, Store, DEFAULT_RETRY_FOR};
use cairn_core::{RunId, StepIdx, StepStatus};
use cairn_testkit::PgCluster;
use tokio::task::block_in_place;

use super::restart::{cluster, read_only};
use super::{new_run, submitted_and_claimed, success};

/// `postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/test`, and `query`.
fn url_of(clusters: &[&PgCluster], query: &str) -> String {
    let hosts: Vec<String> = clusters
        .iter()
        .map(|c| format!("127.0.0.1:{}", c.port()))
        .collect();
    format!("postgres://postgres@{}/test{query}", hosts.join(","))
}

async fn store(url: &str) -> Arc<dyn Store> {
    open(url, &OpenOptions::default())
        .await
        .unwrap_or_else(|e| panic!("cannot open a store on {url}: {e}"))
}

/// Whether run `id` is on this cluster, read from it alone (by SQL: a
/// store would migrate first, which a read-only cluster refuses).
async fn holds(cluster: &PgCluster, id: RunId) -> bool {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&cluster.url())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to port {}: {e}", cluster.port()));
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)")
        .bind(id.as_uuid())
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("reading run {id} from port {}: {e}", cluster.port()))
}

/// Submits until one lands on `to`, within the store's retry window; how
/// many were refused meanwhile. A submit is no write boundary the store
/// retries, so the one that meets the fault fails (with a fault that may
/// pass) and the next reaches the host the store moved to. Submits that
/// still land on `from` (a flip that has not reached its sessions yet) are
/// not counted.
async fn submit_until_it_lands(store: &Arc<dyn Store>, from: &PgCluster, to: &PgCluster) -> u32 {
    let t = Instant::now();
    let mut refused = 0;
    while t.elapsed() < DEFAULT_RETRY_FOR {
        match store.submit(new_run(1, None)).await {
            Ok(s) if holds(to, s.run.id).await => {
                eprintln!("a submit landed after {:?}, {refused} refused", t.elapsed());
                return refused;
            }
            Ok(s) => assert!(holds(from, s.run.id).await, "a submit landed nowhere"),
            Err(e @ Error::Db { fault, .. }) if fault.may_pass() => {
                eprintln!("submit refused: {e}");
                refused += 1;
            }
            Err(e) => panic!("submit failed after {:?}: {e:?}", t.elapsed()),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "no submit landed on port {} within the retry window",
        to.port()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_hosts_a_stopped_first_host_is_passed_over_for_the_second() {
    let (mut first, second) = (cluster(), cluster());
    block_in_place(|| first.stop()).unwrap();
    let store = store(&url_of(&[&first, &second], "")).await;
    let id = store.submit(new_run(1, None)).await.unwrap().run.id;
    assert!(
        holds(&second, id).await,
        "the run is not on the second host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_hosts_with_read_write_a_read_only_host_is_passed_over_and_none_fitting_is_named() {
    let (first, second) = (cluster(), cluster());
    // Cairn's tables on the first, so that only its being read-only counts.
    drop(store(&first.url()).await);
    read_only(&first, true).await;
    let url = url_of(&[&first, &second], "?target_session_attrs=read-write");
    let store = store(&url).await;
    let id = store.submit(new_run(1, None)).await.unwrap().run.id;
    assert!(
        holds(&second, id).await,
        "the run is not on the second host"
    );
    assert!(!holds(&first, id).await, "the run is on the read-only host");

    // Neither fits: the error names each host and why.
    read_only(&second, true).await;
    let err = match open(&url, &OpenOptions::default()).await {
        Err(e) => e,
        Ok(_) => panic!("a store opened with no host taking writes"),
    };
    let text = err.to_string();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    for c in [&first, &second] {
        let named = format!("127.0.0.1:{}: read-only", c.port());
        assert!(text.contains(&named), "{named} not in: {text}");
    }
    assert!(text.contains("target_session_attrs=read-write"), "{text}");
}

/// A store on two hosts, writing to the first, which then stops (its
/// connections closed, new ones refused): a step commit (a write boundary
/// the store retries) lands on the second within the retry window, the
/// store not opened again, and the next submit goes there at once. The run
/// it commits was made on the second beforehand (the clusters share no
/// data): only a store that moved can commit it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_hosts_a_store_follows_its_stopped_host_to_the_next_without_reopening() {
    let (mut first, second) = (cluster(), cluster());
    let direct = store(&second.url()).await;
    let c = submitted_and_claimed(&direct, 2).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);

    let store = store(&url_of(&[&first, &second], "")).await;
    let before = store.submit(new_run(1, None)).await.unwrap().run.id;
    assert!(holds(&first, before).await && !holds(&second, before).await);

    block_in_place(|| first.stop()).unwrap();
    let t = Instant::now();
    store.commit_step(&success(id, epoch, 0, 2)).await.unwrap();
    eprintln!("the commit landed {:?} after the stop", t.elapsed());
    assert!(t.elapsed() < DEFAULT_RETRY_FOR);
    let (run, steps) = direct.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(1));
    assert_eq!(steps[0].status, StepStatus::Succeeded);

    let after = store.submit(new_run(1, None)).await.unwrap().run.id;
    assert!(
        holds(&second, after).await,
        "the submit is not on the second host"
    );
}

/// The first host stays up but turns read-only (as a demoted primary):
/// with `read-write` the store moves to the second, retires the
/// connections it had to the first (which still answer reads), and its
/// `LISTEN` follows: a run submitted on the second wakes a worker idle on
/// the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_hosts_a_store_follows_a_read_only_flip_to_the_next_host_listen_included() {
    let (first, second) = (cluster(), cluster());
    let direct = store(&second.url()).await;
    let url = url_of(&[&first, &second], "?target_session_attrs=read-write");
    let store = store(&url).await;
    // The idle worker's LISTEN connection, on the first host.
    store.wait_for_work(Duration::from_millis(10)).await;
    // Connections to the first host in the pool, more than the lanes:
    // submits at once.
    let at_once: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.submit(new_run(1, None)).await })
        })
        .collect();
    for submit in at_once {
        let id = submit.await.unwrap().unwrap().run.id;
        assert!(holds(&first, id).await);
    }

    read_only(&first, true).await;
    // One submit meets the read-only host and is refused; the store then
    // moves, and no connection to the first (pooled or lane) is used again.
    let refused = submit_until_it_lands(&store, &first, &second).await;
    assert_eq!(refused, 1, "submits refused before the store moved");
    // Every later operation goes there, reads included.
    for _ in 0..20 {
        let id = store.submit(new_run(1, None)).await.unwrap().run.id;
        assert!(store.get_run(id).await.is_ok());
        assert!(!holds(&first, id).await);
    }
    match store.submit(new_run(1, None)).await {
        Err(Error::Db {
            fault: DbFault::ReadOnlyServer,
            ..
        }) => panic!("a write reached the read-only host"),
        other => assert!(other.is_ok(), "{other:?}"),
    }

    // The worker's LISTEN is on the second host now.
    let woken = tokio::spawn({
        let store = store.clone();
        async move {
            let t = Instant::now();
            store.wait_for_work(Duration::from_secs(20)).await;
            // The first wait after the move reopens the listener.
            store.wait_for_work(Duration::from_secs(20)).await;
            t.elapsed()
        }
    });
    let t = Instant::now();
    while !woken.is_finished() && t.elapsed() < Duration::from_secs(20) {
        direct.submit(new_run(1, None)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let waited = woken.await.unwrap();
    assert!(
        waited < Duration::from_secs(10),
        "idle waits were not woken by runs submitted on the second host ({waited:?})"
    );
}
