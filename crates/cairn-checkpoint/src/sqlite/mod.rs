//! The SQLite backend: one file, WAL, `synchronous=FULL` (`NORMAL` with
//! `Durability::Process`). Every operation
//! but one is the storage script's (`script/`); this file opens the file
//! (surviving two processes that create it at once) and sends step commits
//! to the writer thread (`writer.rs`: SQLite's C interface, group commit).

mod writer;

pub use writer::GroupStats;
use writer::{Outcome, Writer};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use cairn_core::{Corruption, RunStatus};

use crate::plan::refused_commit;
use crate::script::{pool_tx, HostParts, ScriptFn, ScriptHost, TxKind};
use crate::sql::Pool;
use crate::{Error, Result, StepCommit};

/// A Cairn store in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    /// What the script reads: the same pool as the script takes it, and
    /// `SQLite file PATH` for messages among them.
    parts: HostParts,
    pool: SqlitePool,
    path: PathBuf,
    /// The thread that writes step commits (`writer.rs`).
    writer: Arc<Writer>,
    durability: crate::Durability,
}

impl SqliteStore {
    /// Opens (and, with `create`, creates) the file and applies migrations.
    pub async fn open(path: &Path, create: bool, timeout: Duration) -> Result<Self> {
        let opts = crate::OpenOptions {
            create,
            connect_timeout: timeout,
            ..Default::default()
        };
        Self::open_with(path, &opts).await
    }

    /// [`SqliteStore::open`] with all the options (durability included).
    pub async fn open_with(path: &Path, opts: &crate::OpenOptions) -> Result<Self> {
        let (create, timeout) = (opts.create, opts.connect_timeout);
        if !create && !path.exists() {
            return Err(Error::MissingFile(path.to_owned()));
        }
        // A write-ahead log left behind: the last process did not close the
        // file cleanly (or another one has it open: this cannot tell). A
        // command that writes checks the file before trusting it with new
        // runs; `PRAGMA quick_check` reads it all (2.3 s for 100,000 runs,
        // 268 MiB, measured), so read-only commands leave it to `cairn doctor`.
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let unclean = create && std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match opts.durability {
                crate::Durability::Sync => SqliteSynchronous::Full,
                crate::Durability::Process => SqliteSynchronous::Normal,
            })
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let target = format!("SQLite file {}", path.display());
        // SQLite has no lock across processes for what `open` does to a new
        // file: two processes opening it at once can collide while one
        // switches it to WAL ("database is locked" at connect, which the
        // busy timeout does not cover) or both try the same migration (the
        // loser's transaction fails, "table … already exists", and rolls
        // back). Trying again finds the winner's work done.
        let mut tries = 0u32;
        let pool = loop {
            let attempt = async {
                // No ping before each use: a file has no server to lose,
                // and the ping is a worker-thread round trip on every commit.
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .test_before_acquire(false)
                    .before_acquire(|conn, _| Box::pin(not_left_in_a_transaction(conn)))
                    .acquire_timeout(timeout)
                    .connect_with(options.clone())
                    .await
                    .map_err(|e| {
                        // SQLITE_BUSY or SQLITE_LOCKED (any extended code):
                        // another process holds the new file.
                        let busy = e
                            .as_database_error()
                            .and_then(|d| d.code())
                            .and_then(|c| c.parse::<i32>().ok())
                            .is_some_and(|c| matches!(c & 0xff, 5 | 6));
                        (
                            busy,
                            Error::Unreachable {
                                target: target.clone(),
                                reason: e.to_string(),
                            },
                        )
                    })?;
                match sqlx::migrate!("../../migrations/sqlite").run(&pool).await {
                    Ok(()) => Ok(pool),
                    Err(source) => {
                        let raced = matches!(
                            source,
                            sqlx::migrate::MigrateError::Execute(_)
                                | sqlx::migrate::MigrateError::ExecuteMigration(..)
                        );
                        pool.close().await;
                        Err((
                            raced,
                            Error::Migrate {
                                target: target.clone(),
                                source,
                            },
                        ))
                    }
                }
            };
            match attempt.await {
                Ok(pool) => break pool,
                Err((true, _)) if tries < 10 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(tries))).await;
                }
                Err((_, e)) => return Err(e),
            }
        };
        if unclean {
            let mut conn = pool
                .acquire()
                .await
                .map_err(|e| Error::from(e).placed(&target, None))?;
            let checked = crate::script::quick_check(&mut crate::sql::Conn::Sqlite(&mut conn))
                .await
                .map_err(|e| e.placed(&target, None));
            // Refused either way (a check that fails outright is a damaged
            // file too): the pool is closed here, not left to close in the
            // background after the caller has moved on.
            let refused = match checked {
                Ok(problems) if problems.is_empty() => None,
                Ok(problems) => Some(Error::Db {
                    fault: crate::DbFault::Corrupt,
                    target: target.clone(),
                    run: None,
                    message: problems.join("; "),
                }),
                Err(e) => Some(e),
            };
            if let Some(e) = refused {
                drop(conn);
                pool.close().await;
                return Err(e);
            }
        }
        // Crew versions stored under an earlier release's fingerprint.
        let db = Pool::Sqlite(pool.clone());
        if let Err(e) = crate::script::refingerprint(&db).await {
            pool.close().await;
            return Err(e.placed(&target, None));
        }
        let writer = match Writer::open(path, opts.durability, &target, true) {
            Ok(writer) => Arc::new(writer),
            Err(e) => {
                pool.close().await;
                return Err(e);
            }
        };
        Ok(SqliteStore {
            parts: HostParts {
                db,
                target,
                live: crate::LiveHub::local(),
                expiry: Default::default(),
                retry_for: opts.retry_for,
            },
            pool,
            path: path.to_owned(),
            writer,
            durability: opts.durability,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The same store with every step commit in a transaction of its own,
    /// as before the group commit: for the benchmark's comparison only.
    pub fn without_group_commit(mut self) -> Result<Self> {
        self.writer = Arc::new(Writer::open(
            &self.path,
            self.durability,
            self.target(),
            false,
        )?);
        Ok(self)
    }

    /// What the group commit did so far: transactions and the step commits
    /// they carried.
    pub fn group_stats(&self) -> GroupStats {
        self.writer.stats()
    }
}

#[async_trait]
impl ScriptHost for SqliteStore {
    fn parts(&self) -> &HostParts {
        &self.parts
    }

    /// Step commits go to the writer thread (`writer.rs`): alone, one
    /// transaction; with other runs' commits queued, one transaction and one
    /// flush for all of them.
    async fn commit_step(&self, c: &StepCommit) -> Result<()> {
        match self.writer.commit(c).await? {
            Outcome::Committed => Ok(()),
            Outcome::NotApplied => Err(self.refusal(c).await),
        }
    }

    /// The hot path's transactions on the writer thread's connection: a
    /// claim or a submit is one hop there instead of one to sqlx's thread
    /// per statement, and shares the group commit's flush; a resume's
    /// `load` of 1,000 step rows is one hop, and the rows need no JSON
    /// packing. Everything else on sqlx's pool.
    async fn tx<T: Send + 'static>(&self, kind: TxKind, f: ScriptFn<T>) -> Result<T> {
        match kind {
            TxKind::HotWrite => self.writer.script(f, true).await,
            TxKind::HotRead => self.writer.script(f, false).await,
            TxKind::Write | TxKind::Read | TxKind::Single => pool_tx(self.db(), kind, f).await,
        }
    }

    /// On the writer's connection if it is idle (`Writer::read_here`), else
    /// on the pool: a read never waits for a batch's flush.
    async fn read_now<T: Send + 'static>(&self, f: ScriptFn<T>) -> Result<T> {
        match self.writer.read_here(f) {
            Ok(read) => read,
            Err(f) => pool_tx(self.db(), TxKind::Single, f).await,
        }
    }
}

/// An error of the writer thread's connection, placed in `target`.
pub(crate) fn direct_error(target: &str, e: &rusqlite::Error) -> Error {
    writer::db_error(target, None, e)
}

impl SqliteStore {
    /// Why a commit whose statements did not all apply (`outcome`, rolled
    /// back) was refused: a stale epoch, a cancel or a finished run (read
    /// from the run as it is now), or, if the run matched, its step.
    pub(crate) async fn refusal(&self, c: &StepCommit) -> Error {
        let (run, owner) = match crate::script::run_and_owner(self, c.run_id).await {
            Ok(found) => found,
            Err(e) => return e,
        };
        if run.lease_epoch == c.fence.epoch
            && owner.as_deref() == Some(&*c.fence.owner)
            && run.status == RunStatus::Running
            && run.cancel_requested_at.is_none()
        {
            // The run matched; the step or the insert did not.
            return Corruption::new(
                c.run_id,
                format!(
                    "step {} attempt {} is not running, so its result cannot be committed",
                    c.idx, c.attempt
                ),
            )
            .into();
        }
        refused_commit(&run, owner.as_deref(), c)
    }
}

/// Whether a pooled connection may be handed out: sqlx counts the
/// transactions it opened on a connection, and a `ROLLBACK` that fails
/// because SQLite rolled back already (it does after a full disk,
/// `SQLITE_FULL`) leaves that count above zero for good, so every later
/// `BEGIN` on the connection fails ("attempted to call begin_with at
/// non-zero transaction depth"; sqlx #3742). An idle connection is never
/// inside a transaction: one that still counts one after its queued
/// rollback ran (the ping waits for it) is closed, which rolls back
/// whatever SQLite still holds, and the pool opens a fresh one. Costs one
/// atomic read on every acquire.
async fn not_left_in_a_transaction(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<bool> {
    use sqlx::{Connection, TransactionManager};
    type Manager = <sqlx::Sqlite as sqlx::Database>::TransactionManager;
    if Manager::get_transaction_depth(conn) == 0 {
        return Ok(true);
    }
    Ok(conn.ping().await.is_ok() && Manager::get_transaction_depth(conn) == 0)
}
