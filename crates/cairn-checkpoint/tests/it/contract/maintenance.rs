//! Maintenance: `vacuum` gives back the space a compaction freed (SQLite's
//! file shrinks and its write-ahead log is truncated; PostgreSQL vacuums
//! Cairn's tables), beside other work, and leaves every run as it was and
//! the database healthy by its own `check`; `replication` reads the
//! setup of PostgreSQL (a standby's in `crates/cairn-checkpoint/tests/it/replication.rs`).

use std::time::Duration;

use cairn_checkpoint::{Action, CompactPolicy};
use cairn_testkit::{both, Kind, TestDb};
use serde_json::json;

use super::{operator, Db};
use crate::{fresh, new_run};

both!(
    vacuum_gives_back_what_compaction_freed_and_keeps_every_run,
    replication_is_postgres_only_and_reads_a_writable_server,
);

/// SQLite has no replication; the test server is a writable primary whose
/// commits wait for no standby (no test sets one up on it).
async fn replication_is_postgres_only_and_reads_a_writable_server(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let replication = store.replication().await.unwrap();
    let Some(r) = replication else {
        assert_eq!(kind, Kind::Sqlite, "PostgreSQL reports its setup");
        return;
    };
    assert_eq!(kind, Kind::Postgres);
    assert!(!r.in_recovery && !r.read_only && r.writable(), "{r:?}");
    assert_eq!(r.synchronous_commit, "on", "Cairn's default durability");
    assert!(!r.synchronous(), "no synchronous standby streams: {r:?}");
}

/// Bytes of the SQLite file and of its write-ahead log (0 when absent).
fn sqlite_sizes(db: &TestDb) -> (u64, u64) {
    let size = |name: &str| std::fs::metadata(db.dir().join(name)).map_or(0, |m| m.len());
    (size("cairn.db"), size("cairn.db-wal"))
}

/// `n` cancelled runs with 30 KB inputs: what a compaction removes.
async fn cancelled_bulk(store: &Db, n: usize) {
    let bulk = "x".repeat(30_000);
    for i in 0..n {
        let mut run = new_run(1, None);
        run.input = json!({"bulk": bulk, "i": i});
        let id = store.submit(run).await.unwrap().run.id;
        store
            .act(id, Action::Cancel, &operator("ops"))
            .await
            .unwrap();
    }
}

/// When PostgreSQL last vacuumed the schema's `runs` table, as text; with
/// `settle`, waits up to 2 s for it (before version 15 the statistics
/// arrive a moment after the vacuum).
async fn last_vacuum(db: &TestDb, settle: bool) -> Option<String> {
    for _ in 0..20 {
        let at = db
            .scalar(
                "SELECT last_vacuum::text FROM pg_stat_user_tables \
                 WHERE relname = 'runs' AND schemaname = current_schema()",
            )
            .await;
        if at.is_some() || !settle {
            return at;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

async fn vacuum_gives_back_what_compaction_freed_and_keeps_every_run(kind: Kind) {
    let (db, store) = fresh(kind).await;
    let kept = store.submit(new_run(2, None)).await.unwrap().run.id;
    cancelled_bulk(&store, 40).await;
    let policy = CompactPolicy {
        finished_older_than: Some(Duration::ZERO),
        ..CompactPolicy::default()
    };
    assert_eq!(store.compact(&policy).await.unwrap().runs, 40);
    let before = super::stored(&store, kept).await;
    let (file, wal) = sqlite_sizes(&db);
    if kind == Kind::Postgres {
        assert_eq!(last_vacuum(&db, false).await, None, "a new schema");
    }

    // Beside a submit, which waits for it or goes first.
    let (vacuumed, submitted) = tokio::join!(store.vacuum(), store.submit(new_run(1, None)));
    vacuumed.unwrap();
    submitted.unwrap();

    match kind {
        Kind::Sqlite => {
            let (file_after, wal_after) = sqlite_sizes(&db);
            assert!(
                (file_after + wal_after) * 4 < file + wal,
                "shrunk: {file} + {wal} bytes, then {file_after} + {wal_after}"
            );
            assert!(wal_after < wal, "the log truncated: {wal} then {wal_after}");
        }
        Kind::Postgres => {
            assert!(last_vacuum(&db, true).await.is_some(), "runs was vacuumed");
        }
    }
    let after = super::stored(&store, kept).await;
    assert_eq!(after, before, "the unfinished run is as it was");
    assert_eq!(store.list_runs(&Default::default()).await.unwrap().len(), 2);
    assert_eq!(
        store.check().await.unwrap(),
        Vec::<String>::new(),
        "healthy"
    );
}
