//! Database failures: typed, naming the database and the run, said once;
//! a corrupt SQLite file found by `MaintenanceStore::check` and refused when opened
//! after an unclean close.

use cairn_checkpoint::prelude::*;
use std::time::Duration;

use cairn_checkpoint::{open, DbFault, Error, OpenOptions, SqliteStore};
use cairn_core::StepIdx;
use cairn_testkit::{both, Kind, TestDb};
use serde_json::json;

use super::{fresh, new_run};

both!(a_database_error_names_the_database_and_the_run_once);

async fn a_database_error_names_the_database_and_the_run_once(kind: Kind) {
    let (db, store) = fresh(kind).await;
    let id = store.submit(new_run(1, None)).await.unwrap().run.id;
    db.exec("DROP TABLE journal").await;
    let err = store.journal(id, StepIdx(0), None).await.unwrap_err();
    let Error::Db {
        fault,
        target,
        run,
        message,
    } = &err
    else {
        panic!("expected a placed database error, got {err:?}");
    };
    assert_eq!(*fault, DbFault::Other);
    assert_eq!(*run, Some(id));
    match kind {
        Kind::Sqlite => assert!(target.starts_with("SQLite file /"), "{target}"),
        Kind::Postgres => assert!(target.starts_with("PostgreSQL at "), "{target}"),
    }
    let text = err.to_string();
    assert!(text.starts_with(target.as_str()), "{text}");
    assert!(text.contains(&format!("(run {id})")), "{text}");
    assert_eq!(text.matches(message.as_str()).count(), 1, "{text}");
    assert!(
        std::error::Error::source(&err).is_none(),
        "the message is not repeated as a source"
    );
}

/// Overwrites one page in the middle of a closed SQLite file with garbage.
fn damage_a_page(path: &std::path::Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let pages = bytes.len() / 4096;
    assert!(pages > 8, "a file of {pages} pages is too small to damage");
    let at = pages / 2 * 4096;
    for (i, b) in bytes[at..at + 4096].iter_mut().enumerate() {
        *b = (i * 7 + 13) as u8;
    }
    std::fs::write(path, bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_sqlite_file_is_found_by_check_and_refused_after_an_unclean_close() {
    let db = TestDb::sqlite();
    let path = db.dir().join("cairn.db");
    assert_eq!(db.url, format!("sqlite://{}", path.display()));
    {
        let store = SqliteStore::open(&path, true, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(
            store.check().await.unwrap().is_empty(),
            "a new file is healthy"
        );
        for i in 0..200 {
            let mut run = new_run(2, None);
            run.input = json!({"i": i, "pad": "x".repeat(400)});
            store.submit(run).await.unwrap();
        }
        // Closed cleanly: the write-ahead log folded in and emptied first
        // (the last connection's own checkpoint at close runs after sqlx's
        // `close()` returned, or not at all if a connection lingers; a log
        // left with pages in it would later overwrite the damage below).
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(store.pool())
            .await
            .unwrap();
        store.pool().close().await;
    }
    damage_a_page(&path);
    // The second half works on a copy nothing else has open: a pool closes
    // its last connection after sqlx's `close()` returned, and that
    // connection deletes the file's log, which would race with the log
    // this test leaves behind (the test was flaky).
    let copy = db.dir().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    // No log left behind: the file usually opens and a check finds the
    // damage. If the damaged page is one opening reads (where a page lands
    // depends on the random ids), opening itself refuses it: also found.
    match SqliteStore::open_with(&path, &OpenOptions::default()).await {
        Ok(store) => {
            let problems = store.check().await.unwrap();
            assert!(!problems.is_empty(), "quick_check saw nothing wrong");
            store.pool().close().await;
        }
        Err(Error::Db {
            fault: DbFault::Corrupt,
            ..
        }) => {}
        Err(e) => panic!("a damaged file gave neither a check finding nor a corruption: {e}"),
    }
    // A log left behind (a process died with the file open): the file is
    // checked before it is trusted with new runs, and refused.
    let mut wal = copy.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::write(&wal, b"left behind by a crash").unwrap();
    match open(
        &format!("sqlite://{}", copy.display()),
        &OpenOptions::default(),
    )
    .await
    {
        Err(Error::Db {
            fault: DbFault::Corrupt,
            target,
            ..
        }) => assert_eq!(target, format!("SQLite file {}", copy.display())),
        Err(e) => panic!("expected a corrupt file, got {e}"),
        Ok(_) => panic!("a corrupt file was opened after an unclean close"),
    }
}

/// A full disk (a small tmpfs filled to the last byte) refuses writes as
/// `DiskFull`, and once it is freed every pooled connection writes again.
/// Before the pool's check, a write whose `COMMIT` failed on the full disk
/// left its connection counting an open transaction (SQLite had rolled
/// back, so sqlx's `ROLLBACK` failed), and every later write on it failed
/// for good with "attempted to call begin_with at non-zero transaction
/// depth": the fault campaign's workers never recovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sqlite_disk_refuses_writes_as_disk_full_and_every_connection_writes_again_once_freed(
) {
    let disk = match cairn_testkit::SmallDisk::mount(16) {
        Ok(disk) => disk,
        Err(e) => return cairn_testkit::skip("a full SQLite disk", &e.to_string()),
    };
    let db = TestDb::sqlite_in(disk.path());
    let store = super::store(&db).await;
    let run = store.submit(new_run(1, None)).await.unwrap().run.id;
    let signal = |i: usize, payload: serde_json::Value| cairn_checkpoint::NewSignal {
        target: cairn_core::Target::Run(run),
        name: format!("s{i}"),
        payload,
        id: None,
        by: cairn_core::Actor::new("hook"),
        start: None,
        traceparent: None,
        tenants: vec![],
    };
    let big = json!("x".repeat(1 << 20));
    disk.fill();
    // More writes than the pool has connections, each larger than any
    // room SQLite kept: every connection meets the full disk.
    for i in 0..12 {
        let err = store
            .send_signal(&signal(i, big.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Db {
                    fault: DbFault::DiskFull,
                    ..
                }
            ),
            "write {i} on a full disk: {err:?}"
        );
    }
    disk.free();
    for i in 0..12 {
        let sent = store.send_signal(&signal(100 + i, json!(i))).await;
        assert!(sent.is_ok(), "write {i} once the disk is freed: {sent:?}");
    }
    drop(store);
    drop(db);
}
