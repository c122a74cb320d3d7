//! Durability modes: `?durability=process` (or `OpenOptions::durability`)
//! sets what a commit waits for, on the store's own connections only, and a
//! store opened either way reads and writes alike.

use cairn_checkpoint::prelude::*;
use std::str::FromStr;

use cairn_checkpoint::{Durability, OpenOptions, PgStore, SqliteStore};
use sqlx::postgres::PgConnectOptions;
use sqlx::Connection;

use super::*;

fn with(durability: Durability) -> OpenOptions {
    OpenOptions {
        durability,
        ..OpenOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_process_durability_is_synchronous_normal() {
    let db = TestDb::sqlite();
    let path = db.dir().join("cairn.db");
    for (durability, want) in [(Durability::Sync, 2i64), (Durability::Process, 1)] {
        let store = SqliteStore::open_with(&path, &with(durability))
            .await
            .unwrap();
        // FULL is 2, NORMAL 1; every connection of the pool carries it.
        for _ in 0..3 {
            let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert_eq!(level, want, "{durability}");
        }
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(
            mode, "wal",
            "NORMAL is only safe for a process's death in WAL mode"
        );
        let run = store.submit(new_run(1, None)).await.unwrap().run;
        assert_eq!(store.get_run(run.id).await.unwrap().id, run.id);
        store.pool().close().await;
    }
    // The URL says it too, and wins over the options.
    let url = format!("{}?durability=process", db.url);
    let store = open(&url, &with(Durability::Sync)).await.unwrap();
    assert_eq!(
        store.list_runs(&RunFilter::default()).await.unwrap().len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_process_durability_turns_off_synchronous_commit_for_cairn_only() {
    let db = TestDb::postgres().await;
    let options = PgConnectOptions::from_str(&db.url).unwrap();
    for (durability, want) in [(Durability::Sync, "on"), (Durability::Process, "off")] {
        let store = PgStore::connect_with(options.clone(), &with(durability))
            .await
            .unwrap();
        let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(setting, want, "{durability}");
        // The replication facts read Cairn's own setting: `off` gives up
        // waiting for a synchronous standby too.
        let replication = store.replication().await.unwrap().unwrap();
        assert_eq!(replication.synchronous_commit, want, "{durability}");
        // The schema (search_path) is kept beside the new setting.
        let run = store.submit(new_run(1, None)).await.unwrap().run;
        assert_eq!(store.get_run(run.id).await.unwrap().id, run.id);
        store.pool().close().await;
    }
    // Another client of the server keeps its own setting.
    let mut other = sqlx::PgConnection::connect_with(&options).await.unwrap();
    let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(setting, "on");
    let url = format!("{}&durability=process", db.url);
    let store = open(&url, &OpenOptions::default()).await.unwrap();
    assert_eq!(
        store.list_runs(&RunFilter::default()).await.unwrap().len(),
        2
    );
}

#[tokio::test]
async fn an_unknown_durability_is_refused_naming_both() {
    let err = open(
        "sqlite:///tmp/never.db?durability=fast",
        &OpenOptions::default(),
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        err.contains("`fast`") && err.contains("`sync`") && err.contains("`process`"),
        "{err}"
    );
    assert!(
        !std::path::Path::new("/tmp/never.db").exists(),
        "nothing was created"
    );
}
