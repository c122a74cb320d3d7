//! The writer-thread rule (module doc of `script/mod.rs`) held on both
//! backends and every kind of transaction: a script that awaits anything
//! but its connection's statements fails with `Error::ScriptWaited` and
//! keeps nothing it wrote, on PostgreSQL as on SQLite's writer thread, so a
//! script that breaks the rule fails every test that runs it, whichever
//! database the test uses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_testkit::{both, Kind, TestDb};

use super::*;
use crate::open::{parse_url, Target};
use crate::sql::query;
use crate::{Error, OpenOptions, PgStore, SqliteStore};

const KINDS: [TxKind; 5] = [
    TxKind::Write,
    TxKind::Read,
    TxKind::Single,
    TxKind::HotWrite,
    TxKind::HotRead,
];

/// A script of `kind`: a statement (a write in a write transaction), then,
/// if `foreign`, an await of something that is not the connection.
fn script(kind: TxKind, foreign: bool) -> ScriptFn<u64> {
    script!(|c| let n = match kind {
                TxKind::Write | TxKind::HotWrite => {
                    c.execute(
                        query(
                            "INSERT INTO maintenance (task, owner, next_at) \
                             VALUES (:task, NULL, {now})",
                        )
                        .bind("task", format!("{kind:?}")),
                    )
                    .await?
                }
                TxKind::Read | TxKind::HotRead | TxKind::Single => {
                    c.fetch_all(query("SELECT 1 AS one")).await?.len() as u64
                }
            };
            if foreign {
                // Pends once, whatever the runtime: what a sleep, a channel or
                // a call to another store would do.
                tokio::task::yield_now().await;
            }
            Ok(n))
}

async fn holds_the_rule<H: ScriptHost>(host: &H) {
    for kind in KINDS {
        let refused = host.tx(kind, script(kind, true)).await;
        assert!(
            matches!(refused, Err(Error::ScriptWaited)),
            "{kind:?}: a foreign await is refused, got {refused:?}"
        );
        // Nothing of it was kept: the same insert succeeds afterwards.
        let done = host.tx(kind, script(kind, false)).await;
        assert_eq!(done.unwrap(), 1, "{kind:?}: a script of statements runs");
    }
}

async fn a_script_awaits_only_its_connection(kind: Kind) {
    let db = TestDb::of(kind).await;
    let opts = OpenOptions::default();
    match parse_url(&db.url).unwrap().0 {
        Target::Sqlite(path) => {
            holds_the_rule(&SqliteStore::open_with(&path, &opts).await.unwrap()).await
        }
        Target::Postgres(pg, _) => {
            holds_the_rule(&PgStore::connect_hosts(*pg, &opts).await.unwrap()).await
        }
    }
}

both!(a_script_awaits_only_its_connection);
