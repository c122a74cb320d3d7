//! The SQLite backend: one file, WAL, `synchronous=FULL` (`NORMAL` with
//! `Durability::Process`). Every operation
//! but one is the storage script's (`script.rs`); this file opens the file
//! (surviving two processes that create it at once) and keeps the step
//! commit's fast path.

mod group;

pub use group::GroupStats;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use cairn_core::{Corruption, RunStatus};

use crate::plan::refused_commit;
use crate::raw::error_json;
use crate::script::Backend;
use crate::sql::{query, Pool};
use crate::{Error, Result, StepCommit, Store};

/// A Cairn store in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// The same pool, as the storage script takes it.
    db: Pool,
    path: PathBuf,
    /// `SQLite file PATH`, for messages.
    target: String,
    /// Step commits waiting for the next flush (`group.rs`).
    group: Arc<group::Group>,
    /// Off only to measure what the group commit buys.
    grouping: bool,
    live: crate::LiveHub,
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
        Ok(SqliteStore {
            db: Pool::Sqlite(pool.clone()),
            pool,
            path: path.to_owned(),
            target,
            group: Arc::default(),
            grouping: true,
            live: crate::LiveHub::local(),
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
    pub fn without_group_commit(mut self) -> Self {
        self.grouping = false;
        self
    }
}

#[async_trait]
impl Backend for SqliteStore {
    fn db(&self) -> &Pool {
        &self.db
    }

    fn target(&self) -> &str {
        &self.target
    }

    fn live(&self) -> &crate::LiveHub {
        &self.live
    }

    /// Step commits go through the group commit (`group.rs`): alone, one
    /// transaction as below; with other runs' commits waiting, one
    /// transaction and one flush for all of them.
    async fn commit_step(&self, c: &StepCommit) -> Result<()> {
        match self.grouping {
            true => self.group_commit(c).await,
            false => self.commit_one(c).await,
        }
    }
}

impl SqliteStore {
    /// The fast path: the whole step in one multi-statement round trip
    /// (one hop to SQLite's thread instead of five), each statement
    /// running only if the one before changed what it had to, and the row
    /// count it must change. Measured in `cairn-bench` against the
    /// script's transaction of separate statements.
    fn commit_query(c: &StepCommit) -> Result<(crate::sql::Query, u64)> {
        let finished = matches!(
            c.run_status,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
        );
        let events = serde_json::to_string(
            &c.events
                .iter()
                .map(|e| serde_json::json!({"kind": e.kind.as_str(), "data": e.data}))
                .collect::<Vec<_>>(),
        )
        .map_err(|e| Corruption::new(c.run_id, format!("event data: {e}")))?;
        // One round trip for the whole step: each statement runs only if the
        // one before changed what it had to (`changes()`), and the summed row
        // count tells whether all of it applied; if not, roll back. The
        // dialect layer binds one `?` per use of a name, in textual order
        // (sqlx-sqlite 0.8 misbinds `?NNN` in such a batch).
        let seconds = |d: Duration| format!("+{:.3} seconds", d.as_secs_f64());
        let wait = c.open_wait.as_ref();
        let batch = query(
            "UPDATE runs SET status = :status, cursor = :cursor, error = :run_error, \
             event_seq = event_seq + :n_events, updated_at = {now}, \
             finished_at = CASE WHEN :finished THEN {now} ELSE finished_at END, \
             lease_owner = CASE WHEN :status = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN :status = 'running' THEN lease_expires_at END, \
             not_before = CASE WHEN :retry IS NULL THEN NULL \
               ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', :retry) END \
             WHERE id = :run AND lease_epoch = :epoch AND status = 'running' \
               AND (cancel_requested_at IS NULL OR :status = 'cancelled'); \
             UPDATE steps SET status = :step_status, output = :output, \
               input_tokens = :input_tokens, output_tokens = :output_tokens, \
               error = COALESCE(:error, error), finished_at = {now} \
             WHERE run_id = :run AND idx = :idx AND attempt = :attempt AND status = 'running' \
               AND changes() = 1; \
             INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
             SELECT :run, :next_idx, :next_role, 'running', 1, {now} \
             WHERE :next_idx IS NOT NULL AND changes() = 1; \
             INSERT INTO events (run_id, seq, at, kind, data) \
             SELECT :run, r.event_seq - :n_events + j.key + 1, {now}, j.value ->> '$.kind', \
               j.value -> '$.data' \
             FROM runs r, json_each(:events) j WHERE r.id = :run AND r.lease_epoch = :epoch \
               AND r.status = :status AND r.cursor = :cursor; \
             INSERT INTO waits (id, run_id, step_idx, attempt, kind, status, prompt, question_id, \
               deadline, on_deadline, created_at) \
             SELECT :wait, :run, :idx, :attempt, :wait_kind, 'open', :prompt, :question, \
               CASE WHEN :deadline IS NULL THEN NULL \
                 ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', :deadline) END, :on_deadline, {now} \
             WHERE :wait IS NOT NULL AND changes() > 0",
        )
        .bind("run", c.run_id)
        .bind("epoch", c.epoch.0)
        .bind("status", c.run_status.as_str())
        .bind("cursor", c.cursor.get())
        .bind("run_error", error_json(&c.run_error))
        .bind("n_events", c.events.len() as i64)
        .bind("finished", finished)
        .bind("retry", c.retry_after.map(seconds))
        .bind("step_status", c.status.as_str())
        .bind("output", c.output.clone())
        .bind("input_tokens", c.usage.map(|u| u.input_tokens as i64))
        .bind("output_tokens", c.usage.map(|u| u.output_tokens as i64))
        .bind("error", error_json(&c.error))
        .bind("idx", c.idx.get())
        .bind("attempt", c.attempt.get())
        .bind("next_idx", c.start_next.as_ref().map(|(i, _)| i.get()))
        .bind("next_role", c.start_next.as_ref().map(|(_, r)| r.as_str()))
        .bind("events", events)
        .bind("wait", wait.map(|w| w.id.as_uuid().to_string()))
        .bind("wait_kind", wait.map(|w| w.kind.as_str()))
        .bind("prompt", wait.map(|w| w.prompt.clone()))
        .bind("question", wait.and_then(|w| w.question_id.clone()))
        .bind(
            "deadline",
            wait.and_then(|w| w.deadline_ms)
                .map(|ms| seconds(Duration::from_millis(ms))),
        )
        .bind(
            "on_deadline",
            wait.and_then(|w| w.on_deadline.as_ref())
                .and_then(|o| serde_json::to_value(o).ok()),
        );
        let expected = 2
            + u64::from(c.start_next.is_some())
            + c.events.len() as u64
            + u64::from(c.open_wait.is_some());
        Ok((batch, expected))
    }

    /// One step commit in a transaction of its own.
    pub(crate) async fn commit_one(&self, c: &StepCommit) -> Result<()> {
        let (batch, expected) = Self::commit_query(c)?;
        let mut tx = self.db.write().await?;
        match tx.conn().execute(batch).await {
            Ok(rows) if rows == expected => tx.commit().await,
            outcome => {
                tx.rollback().await?;
                Err(self.refusal(c, outcome).await)
            }
        }
    }

    /// Why a commit whose statements did not all apply (`outcome`, rolled
    /// back) was refused: a stale epoch, a cancel or a finished run (read
    /// from the run as it is now), or, if the run matched, its step.
    pub(crate) async fn refusal(&self, c: &StepCommit, outcome: Result<u64>) -> Error {
        let run = match Store::get_run(self, c.run_id).await {
            Ok(run) => run,
            Err(e) => return e,
        };
        if run.lease_epoch == c.epoch
            && run.status == RunStatus::Running
            && run.cancel_requested_at.is_none()
        {
            // The run matched; the step or the insert did not.
            if let Err(e) = outcome {
                return e;
            }
            return Corruption::new(
                c.run_id,
                format!(
                    "step {} attempt {} is not running, so its result cannot be committed",
                    c.idx, c.attempt
                ),
            )
            .into();
        }
        refused_commit(&run, c)
    }
}
