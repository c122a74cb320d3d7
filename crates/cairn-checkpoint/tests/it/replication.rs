//! A throwaway cluster with a streaming standby (`cairn_testkit::PgCluster`,
//! never the shared server): the test kit's standby replays the primary's
//! rows and takes writes once promoted; the store reads the replication
//! setup (`MaintenanceStore::replication`) as it is, asynchronous,
//! synchronous, given up by `?durability=process`, and a read-only flip;
//! and the fault campaign's database faults are real (a skewed standby
//! answers an hour ahead once promoted, a paused cluster answers nothing).

use std::time::Instant;

use cairn_checkpoint::{open, OpenOptions, Replication, Store};
use cairn_testkit::PgCluster;
use tokio::task::block_in_place;

fn cluster() -> PgCluster {
    let t = Instant::now();
    let c = block_in_place(PgCluster::start)
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    eprintln!("cluster on port {} up in {:?}", c.port(), t.elapsed());
    c
}

fn standby_of(primary: &PgCluster) -> (PgCluster, String) {
    let t = Instant::now();
    let standby = block_in_place(|| primary.standby())
        .unwrap_or_else(|e| panic!("cannot make a standby: {e}"));
    let name = standby.standby_name().unwrap().to_owned();
    eprintln!(
        "standby {name} on port {} up in {:?}",
        standby.port(),
        t.elapsed()
    );
    (standby, name)
}

async fn replication(url: &str) -> Replication {
    let store = open(url, &OpenOptions::default()).await.unwrap();
    replication_of(&*store).await
}

async fn replication_of(store: &dyn Store) -> Replication {
    store.replication().await.unwrap().expect("PostgreSQL's")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_of_a_cluster_replays_its_rows_and_takes_writes_once_promoted() {
    let mut primary = cluster();
    let (mut standby, name) = standby_of(&primary);
    block_in_place(|| {
        primary.wait_streaming(&name, false).unwrap();
        primary
            .sql("CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
            .unwrap();
        primary.wait_replayed(&name).unwrap();
        assert_eq!(standby.sql("SELECT x FROM t").unwrap(), "1");
        assert!(
            standby.sql("INSERT INTO t VALUES (2)").is_err(),
            "a standby refuses writes"
        );
        primary.stop_immediate().unwrap();
        let took = standby.promote().unwrap();
        eprintln!("promoted in {took:?}");
        standby.sql("INSERT INTO t VALUES (2)").unwrap();
        assert_eq!(
            standby
                .sql("SELECT string_agg(x::text, ',' ORDER BY x) FROM t")
                .unwrap(),
            "1,2"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_reads_a_clusters_standby_asynchronous_synchronous_and_read_only() {
    let primary = cluster();
    let alone = replication(&primary.url()).await;
    assert!(alone.writable() && alone.standbys.is_empty(), "{alone:?}");
    assert!(!alone.synchronous(), "{alone:?}");

    let (_standby, name) = standby_of(&primary);
    block_in_place(|| primary.wait_streaming(&name, false)).unwrap();
    let store = open(&primary.url(), &OpenOptions::default()).await.unwrap();
    let async_ = replication_of(&*store).await;
    assert_eq!(async_.standbys.len(), 1, "{async_:?}");
    assert_eq!(async_.standbys[0].application_name, name);
    assert_eq!(async_.standbys[0].state.as_deref(), Some("streaming"));
    assert_eq!(async_.standbys[0].sync_state.as_deref(), Some("async"));
    assert_eq!(async_.synchronous_standby_names, "");
    assert!(!async_.synchronous(), "{async_:?}");

    block_in_place(|| {
        primary.set_synchronous(Some(&name))?;
        primary.wait_streaming(&name, true)
    })
    .unwrap();
    let sync = replication_of(&*store).await;
    assert_eq!(
        sync.synchronous_standby_names,
        format!("FIRST 1 (\"{name}\")")
    );
    assert_eq!(sync.standbys[0].sync_state.as_deref(), Some("sync"));
    assert!(sync.synchronous() && sync.writable(), "{sync:?}");
    // `synchronous_commit = off` on Cairn's connections waits for no
    // standby, whatever the server lists.
    let process = replication(&format!("{}?durability=process", primary.url())).await;
    assert_eq!(process.synchronous_commit, "off");
    assert!(!process.synchronous(), "{process:?}");

    // A read-only flip reaches the connections Cairn holds.
    block_in_place(|| {
        primary.sql("ALTER SYSTEM SET default_transaction_read_only = on")?;
        primary.sql("SELECT pg_reload_conf()")
    })
    .unwrap();
    let mut flipped = replication_of(&*store).await;
    for _ in 0..40 {
        if flipped.read_only {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        flipped = replication_of(&*store).await;
    }
    assert!(flipped.read_only && !flipped.in_recovery, "{flipped:?}");
    assert!(!flipped.writable());
}

/// The campaign's skewed standby (libfaketime preloaded into its server)
/// answers `now()` an hour ahead once promoted, while the primary answers
/// the true time: the fault the campaign deals is real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_standby_of_a_cluster_answers_an_hour_ahead_once_promoted() {
    let primary = cluster();
    let Some(standby) = block_in_place(|| primary.skewed_standby("+1h")) else {
        return cairn_testkit::skip(
            "a skewed standby",
            "libfaketime is not installed (apt-get install faketime)",
        );
    };
    let mut standby = standby.unwrap_or_else(|e| panic!("cannot make a skewed standby: {e}"));
    block_in_place(|| standby.promote()).unwrap();
    let ahead = |cluster: &PgCluster| -> f64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let theirs: f64 = block_in_place(|| cluster.sql("SELECT extract(epoch FROM now())"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        theirs - now
    };
    let skew = ahead(&standby);
    assert!((3500.0..3700.0).contains(&skew), "{skew} s ahead");
    let skew = ahead(&primary);
    assert!(skew.abs() < 60.0, "the primary is {skew} s off");
}

/// A paused cluster (every server process SIGSTOPped) accepts no query
/// until it is continued, then answers as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_answers_nothing_until_continued() {
    let primary = cluster();
    let url = primary.url();
    let query = || async {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&url).await?;
        sqlx::query_scalar::<_, i32>("SELECT 1")
            .fetch_one(&mut conn)
            .await
    };
    assert_eq!(query().await.unwrap(), 1);
    primary.pause().unwrap();
    let paused = tokio::time::timeout(std::time::Duration::from_secs(1), query()).await;
    assert!(paused.is_err(), "a paused server answered: {paused:?}");
    primary.resume().unwrap();
    assert_eq!(query().await.unwrap(), 1);
}
