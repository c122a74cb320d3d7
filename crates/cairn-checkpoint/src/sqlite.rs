//! The SQLite backend: one file, WAL, `synchronous=FULL`, write transactions
//! taken with `BEGIN IMMEDIATE` so concurrent writers queue on the busy
//! timeout instead of failing mid-transaction. Times come from SQLite's clock.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use uuid::Uuid;

use cairn_core::{
    Actor, Answer, Attempt, Corruption, ErrorInfo, EventKind, EventRecord, JournalEntry,
    LeaseEpoch, NewEvent, RunId, RunRecord, RunStatus, StepIdx, StepRecord, WaitId, WaitRecord,
};

use crate::plan::{
    check_fork, check_holder, claim_events, fork_event, journal_kind, plan_action, plan_answer,
    plan_claim, plan_expire, refused_commit, AnswerPlan, ClaimStep, StepChange,
};
use crate::raw::{
    check_same_submission, error_json, stats_from, unpack_steps, RawRun, RawStep, RawWait,
};
use crate::{
    Action, Backend, ClaimRequest, Claimed, Error, ForkRequest, JournalAppend, Lease, NewRun,
    Result, RunFilter, StepCommit, Store, StoreStats, Submitted, WaitFilter,
};

macro_rules! run_cols {
    () => {
        "id, crew_name, crew_version, crew_fingerprint, crew_def, input, idempotency_key, \
         thread_id, status, cursor, step_count, lease_epoch, not_before, cancel_requested_at, parent_run_id, parent_step_idx, error, created_at, updated_at, \
         finished_at"
    };
}
macro_rules! step_cols {
    () => {
        "idx, role, status, attempt, output, input_tokens, output_tokens, started_at, \
         finished_at, error, takeovers"
    };
}
/// SQLite's clock as RFC 3339 UTC with milliseconds.
macro_rules! now {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ','now')"
    };
}

/// A Cairn store in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (and, with `create`, creates) the file and applies migrations.
    pub async fn open(path: &Path, create: bool, timeout: Duration) -> Result<Self> {
        if !create && !path.exists() {
            return Err(Error::MissingFile(path.to_owned()));
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
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
        Ok(SqliteStore {
            pool,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn write_tx(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

fn nil_run() -> RunId {
    RunId::from_uuid(Uuid::nil())
}

fn json_col(run: RunId, what: &str, text: Option<String>) -> Result<Option<Value>, Corruption> {
    text.map(|t| {
        serde_json::from_str(&t)
            .map_err(|e| Corruption::new(run, format!("{what} is not valid JSON: {e}")))
    })
    .transpose()
}

fn time_col(
    run: RunId,
    what: &str,
    text: Option<String>,
) -> Result<Option<DateTime<Utc>>, Corruption> {
    text.map(|t| {
        DateTime::parse_from_rfc3339(&t)
            .map(|d| d.with_timezone(&Utc))
            .map_err(|e| Corruption::new(run, format!("{what} `{t}` is not a time: {e}")))
    })
    .transpose()
}

fn required<T>(run: RunId, what: &str, v: Option<T>) -> Result<T, Corruption> {
    v.ok_or_else(|| Corruption::new(run, format!("{what} is missing")))
}

fn decode_run(row: &SqliteRow) -> Result<RunRecord> {
    let id_text: String = row.try_get("id")?;
    let id = RunId::from_str(&id_text)
        .map_err(|e| Corruption::new(nil_run(), format!("a run id does not decode: {e}")))?;
    let raw = RawRun {
        id,
        crew_name: row.try_get("crew_name")?,
        crew_version: row.try_get("crew_version")?,
        crew_fingerprint: row.try_get("crew_fingerprint")?,
        crew_def: required(
            id,
            "crew definition",
            json_col(id, "crew definition", row.try_get("crew_def")?)?,
        )?,
        input: required(id, "input", json_col(id, "input", row.try_get("input")?)?)?,
        idempotency_key: row.try_get("idempotency_key")?,
        thread_id: row.try_get("thread_id")?,
        status: row.try_get("status")?,
        cursor: row.try_get("cursor")?,
        step_count: row.try_get("step_count")?,
        lease_epoch: row.try_get("lease_epoch")?,
        not_before: time_col(id, "not_before", row.try_get("not_before")?)?,
        cancel_requested_at: time_col(
            id,
            "cancel_requested_at",
            row.try_get("cancel_requested_at")?,
        )?,
        parent_run_id: row
            .try_get::<Option<String>, _>("parent_run_id")?
            .map(|p| {
                RunId::from_str(&p)
                    .map_err(|e| Corruption::new(id, format!("parent run id does not decode: {e}")))
            })
            .transpose()?,
        parent_step_idx: row.try_get("parent_step_idx")?,
        error: json_col(id, "run error", row.try_get("error")?)?,
        created_at: required(
            id,
            "created_at",
            time_col(id, "created_at", row.try_get("created_at")?)?,
        )?,
        updated_at: required(
            id,
            "updated_at",
            time_col(id, "updated_at", row.try_get("updated_at")?)?,
        )?,
        finished_at: time_col(id, "finished_at", row.try_get("finished_at")?)?,
    };
    Ok(raw.into_record()?)
}

fn decode_step(run: RunId, row: &SqliteRow) -> Result<StepRecord> {
    let idx: i64 = row.try_get("idx")?;
    let what = |col: &str| format!("step {idx} {col}");
    let raw = RawStep {
        idx,
        role: row.try_get("role")?,
        status: row.try_get("status")?,
        attempt: row.try_get("attempt")?,
        output: json_col(run, &what("output"), row.try_get("output")?)?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        started_at: required(
            run,
            &what("started_at"),
            time_col(run, &what("started_at"), row.try_get("started_at")?)?,
        )?,
        finished_at: time_col(run, &what("finished_at"), row.try_get("finished_at")?)?,
        error: json_col(run, &what("error"), row.try_get("error")?)?,
        takeovers: row.try_get("takeovers")?,
    };
    Ok(raw.into_record(run)?)
}

macro_rules! wait_cols {
    () => {
        "id, run_id, step_idx, attempt, kind, status, prompt, question_id, deadline, \
         on_deadline, answer, answered_by, answered_at, created_at"
    };
}

fn decode_wait(row: &SqliteRow) -> Result<WaitRecord> {
    let run_text: String = row.try_get("run_id")?;
    let run = RunId::from_str(&run_text)
        .map_err(|e| Corruption::new(nil_run(), format!("a wait's run id does not decode: {e}")))?;
    let id_text: String = row.try_get("id")?;
    let id = WaitId::from_str(&id_text).map_err(|e| Corruption::new(run, e))?;
    let raw = RawWait {
        id,
        run_id: run,
        step_idx: row.try_get("step_idx")?,
        attempt: row.try_get("attempt")?,
        kind: row.try_get("kind")?,
        status: row.try_get("status")?,
        prompt: required(
            run,
            "wait prompt",
            json_col(run, "wait prompt", row.try_get("prompt")?)?,
        )?,
        question_id: row.try_get("question_id")?,
        deadline: time_col(run, "wait deadline", row.try_get("deadline")?)?,
        on_deadline: json_col(run, "wait on_deadline", row.try_get("on_deadline")?)?,
        answer: json_col(run, "wait answer", row.try_get("answer")?)?,
        answered_by: row.try_get("answered_by")?,
        answered_at: time_col(run, "wait answered_at", row.try_get("answered_at")?)?,
        created_at: required(
            run,
            "wait created_at",
            time_col(run, "wait created_at", row.try_get("created_at")?)?,
        )?,
    };
    Ok(raw.into_record()?)
}

async fn latest_wait(
    tx: &mut Transaction<'static, Sqlite>,
    id: RunId,
    idx: u32,
) -> Result<Option<WaitRecord>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE run_id = ?1 AND step_idx = ?2 ORDER BY created_at DESC, id DESC LIMIT 1"
    ))
    .bind(id.to_string())
    .bind(idx as i64)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| decode_wait(&r)).transpose()
}

async fn fetch_wait(tx: &mut Transaction<'static, Sqlite>, id: WaitId) -> Result<WaitRecord> {
    let row = sqlx::query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE id = ?1"
    ))
    .bind(id.to_string())
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(Error::WaitNotFound(id))?;
    decode_wait(&row)
}

fn opt_json(v: Option<&Value>) -> Option<String> {
    v.map(|v| v.to_string())
}

async fn fetch_run(tx: &mut Transaction<'static, Sqlite>, id: RunId) -> Result<RunRecord> {
    let row = sqlx::query(concat!("SELECT ", run_cols!(), " FROM runs WHERE id = ?1"))
        .bind(id.to_string())
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(Error::RunNotFound(id))?;
    decode_run(&row)
}

async fn fetch_step(
    tx: &mut Transaction<'static, Sqlite>,
    id: RunId,
    idx: u32,
) -> Result<Option<StepRecord>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        step_cols!(),
        " FROM steps WHERE run_id = ?1 AND idx = ?2"
    ))
    .bind(id.to_string())
    .bind(idx as i64)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| decode_step(id, &r)).transpose()
}

/// Appends events at the run's next sequence numbers.
async fn append_events(
    tx: &mut Transaction<'static, Sqlite>,
    id: RunId,
    events: &[NewEvent],
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let last: i64 = sqlx::query_scalar(
        "UPDATE runs SET event_seq = event_seq + ?2 WHERE id = ?1 RETURNING event_seq",
    )
    .bind(id.to_string())
    .bind(events.len() as i64)
    .fetch_one(&mut **tx)
    .await?;
    insert_events(tx, id, last, events).await
}

/// Inserts `events` numbered so the last one is `last_seq`.
async fn insert_events(
    tx: &mut Transaction<'static, Sqlite>,
    id: RunId,
    last_seq: i64,
    events: &[NewEvent],
) -> Result<()> {
    let first = last_seq - events.len() as i64 + 1;
    for (i, e) in events.iter().enumerate() {
        sqlx::query(concat!(
            "INSERT INTO events (run_id, seq, at, kind, data) VALUES (?1, ?2, ",
            now!(),
            ", ?3, ?4)"
        ))
        .bind(id.to_string())
        .bind(first + i as i64)
        .bind(e.kind.as_str())
        .bind(e.data.to_string())
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Checks, inside a write transaction, that the run is `running` at `held`.
async fn check_held(
    tx: &mut Transaction<'static, Sqlite>,
    id: RunId,
    held: LeaseEpoch,
) -> Result<()> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT lease_epoch, status FROM runs WHERE id = ?1")
            .bind(id.to_string())
            .fetch_optional(&mut **tx)
            .await?;
    let (epoch, status) = row.ok_or(Error::RunNotFound(id))?;
    let status: RunStatus = status
        .parse()
        .map_err(|e: String| Corruption::new(id, format!("run status: {e}")))?;
    check_holder(id, status, LeaseEpoch(epoch), held)
}

fn decode_journal(run: RunId, row: &SqliteRow) -> Result<JournalEntry> {
    let seq: i64 = row.try_get("seq")?;
    let kind: String = row.try_get("kind")?;
    let attempt: i64 = row.try_get("attempt")?;
    let generation: i64 = row.try_get("generation")?;
    Ok(JournalEntry {
        seq,
        attempt: Attempt(attempt as u32),
        generation: generation as u32,
        kind: journal_kind(run, seq, &kind)?,
        payload: required(
            run,
            "journal payload",
            json_col(run, "journal payload", row.try_get("payload")?)?,
        )?,
        created_at: required(
            run,
            "journal time",
            time_col(run, "journal time", row.try_get("created_at")?)?,
        )?,
    })
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn submit(&self, new: NewRun) -> Result<Submitted> {
        let id = RunId::new();
        let mut tx = self.write_tx().await?;
        let inserted = sqlx::query(concat!(
            "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
             idempotency_key, thread_id, status, cursor, step_count, lease_epoch, event_seq, \
             created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', 0, ?9, 0, 0, ",
            now!(),
            ", ",
            now!(),
            ") ON CONFLICT (idempotency_key) DO NOTHING"
        ))
        .bind(id.to_string())
        .bind(&new.crew.name)
        .bind(&new.crew.version)
        .bind(new.crew.fingerprint().as_str())
        .bind(new.crew.to_json().to_string())
        .bind(new.input.to_string())
        .bind(&new.idempotency_key)
        .bind(&new.thread_id)
        .bind(new.crew.step_count() as i64)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            let row = sqlx::query(concat!(
                "SELECT ",
                run_cols!(),
                " FROM runs WHERE idempotency_key = ?1"
            ))
            .bind(&new.idempotency_key)
            .fetch_one(&mut *tx)
            .await?;
            let run = decode_run(&row)?;
            check_same_submission(&run, &new)?;
            return Ok(Submitted {
                run,
                created: false,
            });
        }
        let event = NewEvent::new(
            EventKind::RunSubmitted,
            serde_json::json!({
                "crew": new.crew.name,
                "fingerprint": new.crew.fingerprint(),
                "idempotency_key": new.idempotency_key,
                "thread_id": new.thread_id,
            }),
        );
        append_events(&mut tx, id, &[event]).await?;
        let run = fetch_run(&mut tx, id).await?;
        tx.commit().await?;
        Ok(Submitted { run, created: true })
    }

    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)> {
        // One read transaction: a WAL snapshot, so run and steps agree.
        let mut tx = self.pool.begin().await?;
        let run = fetch_run(&mut tx, id).await?;
        // All rows as one JSON document: one hop to the SQLite thread instead
        // of one per row. `json()` refuses a malformed stored value; then the
        // row-by-row path below names the step that holds it.
        let packed: std::result::Result<Option<String>, sqlx::Error> = sqlx::query_scalar(
            "SELECT json_group_array(json_array(idx, role, status, attempt, json(output), \
             input_tokens, output_tokens, started_at, finished_at, json(error), takeovers)) \
             FROM (SELECT * FROM steps WHERE run_id = ?1 ORDER BY idx)",
        )
        .bind(id.to_string())
        .fetch_one(&mut *tx)
        .await;
        if let Ok(Some(packed)) = &packed {
            if let Ok(steps) = unpack_steps(id, packed) {
                tx.commit().await?;
                return Ok((run, steps));
            }
        }
        let rows = sqlx::query(concat!(
            "SELECT ",
            step_cols!(),
            " FROM steps WHERE run_id = ?1 ORDER BY idx"
        ))
        .bind(id.to_string())
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let steps = rows
            .iter()
            .map(|r| decode_step(id, r))
            .collect::<Result<Vec<_>>>()?;
        Ok((run, steps))
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord> {
        let row = sqlx::query(concat!("SELECT ", run_cols!(), " FROM runs WHERE id = ?1"))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::RunNotFound(id))?;
        decode_run(&row)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_cols!(),
            " FROM runs WHERE (?1 IS NULL OR status = ?1) ORDER BY created_at, id LIMIT ?2"
        ))
        .bind(filter.status.map(|s| s.as_str()))
        .bind(filter.limit.map(i64::from).unwrap_or(-1))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_run).collect()
    }

    async fn stats(&self) -> Result<StoreStats> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
                .fetch_all(&self.pool)
                .await?;
        let (ready, takeovers): (i64, i64) = sqlx::query_as(concat!(
            "SELECT (SELECT count(*) FROM runs WHERE status = 'queued' \
                     AND (not_before IS NULL OR not_before <= ",
            now!(),
            ")), (SELECT count(*) FROM events WHERE kind = 'run_claimed' \
                     AND json_extract(data, '$.from_status') = 'running')"
        ))
        .fetch_one(&self.pool)
        .await?;
        Ok(stats_from(rows, ready, takeovers)?)
    }

    async fn claim(&self, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
        let mut tx = self.write_tx().await?;
        let claimed = claim_in(&mut tx, id, req).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    async fn claim_next(&self, req: &ClaimRequest) -> Result<Option<Claimed>> {
        let mut tx = self.write_tx().await?;
        // The oldest runnable run: queued and due, or running under an
        // expired lease (its holder died or hung: a takeover).
        let picked: Option<String> = sqlx::query_scalar(concat!(
            "SELECT id FROM runs WHERE (status = 'queued' AND (not_before IS NULL \
                 OR not_before <= ",
            now!(),
            ")) OR (status = 'running' AND lease_expires_at < ",
            now!(),
            ") ORDER BY created_at, id LIMIT 1"
        ))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = picked else {
            tx.commit().await?;
            return Ok(None);
        };
        let id = RunId::from_str(&id).map_err(|e| Corruption::new(nil_run(), e.to_string()))?;
        let req = ClaimRequest {
            takeover: true,
            ..req.clone()
        };
        let claimed = claim_in(&mut tx, id, &req).await?;
        tx.commit().await?;
        Ok(Some(claimed))
    }

    async fn wait_for_work(&self, max: Duration) {
        tokio::time::sleep(max).await;
    }

    async fn heartbeat(&self, id: RunId, epoch: LeaseEpoch, lease: Duration) -> Result<Lease> {
        let cancel: Option<bool> = sqlx::query_scalar(
            "UPDATE runs SET lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ','now', ?3) \
             WHERE id = ?1 AND lease_epoch = ?2 AND status = 'running' \
             RETURNING cancel_requested_at IS NOT NULL",
        )
        .bind(id.to_string())
        .bind(epoch.0)
        .bind(format!("+{:.3} seconds", lease.as_secs_f64()))
        .fetch_optional(&self.pool)
        .await?;
        Ok(Lease::from_beat(cancel))
    }

    async fn commit_step(&self, c: &StepCommit) -> Result<()> {
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
        // count tells whether all of it applied; if not, roll back.
        let mut tx = self.write_tx().await?;
        // Plain `?` bound in textual order: sqlx-sqlite 0.8 misbinds `?NNN`
        // in a multi-statement query whose statements skip numbers.
        let run_id = c.run_id.to_string();
        let status = c.run_status.as_str();
        let cursor = c.cursor.get() as i64;
        let n_events = c.events.len() as i64;
        let retry = c
            .retry_after
            .map(|d| format!("+{:.3} seconds", d.as_secs_f64()));
        let next_idx = c.start_next.as_ref().map(|(i, _)| i.get() as i64);
        let wait = c.open_wait.as_ref();
        let wait_deadline = wait
            .and_then(|w| w.deadline_ms)
            .map(|ms| format!("+{:.3} seconds", ms as f64 / 1000.0));
        let applied = sqlx::query(concat!(
            "UPDATE runs SET status = ?, cursor = ?, error = ?, event_seq = event_seq + ?, \
             updated_at = ",
            now!(),
            ", finished_at = CASE WHEN ? THEN ",
            now!(),
            " ELSE finished_at END, \
             lease_owner = CASE WHEN ? = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN ? = 'running' THEN lease_expires_at END, \
             not_before = CASE WHEN ? IS NULL THEN NULL \
               ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', ?) END \
             WHERE id = ? AND lease_epoch = ? AND status = 'running' \
               AND (cancel_requested_at IS NULL OR ? = 'cancelled'); \
             UPDATE steps SET status = ?, output = ?, input_tokens = ?, output_tokens = ?, \
             error = COALESCE(?, error), finished_at = ",
            now!(),
            " WHERE run_id = ? AND idx = ? AND attempt = ? AND status = 'running' \
               AND changes() = 1; \
             INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
             SELECT ?, ?, ?, 'running', 1, ",
            now!(),
            " WHERE ? IS NOT NULL AND changes() = 1; \
             INSERT INTO events (run_id, seq, at, kind, data) \
             SELECT ?, r.event_seq - ? + j.key + 1, ",
            now!(),
            ", j.value ->> '$.kind', j.value -> '$.data' \
             FROM runs r, json_each(?) j WHERE r.id = ? AND r.lease_epoch = ? \
               AND r.status = ? AND r.cursor = ?; \
             INSERT INTO waits (id, run_id, step_idx, attempt, kind, status, prompt, question_id, \
               deadline, on_deadline, created_at) \
             SELECT ?, ?, ?, ?, ?, 'open', ?, ?, \
               CASE WHEN ? IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', ?) END, ?, ",
            now!(),
            " WHERE ? IS NOT NULL AND changes() > 0"
        ))
        // UPDATE runs
        .bind(status)
        .bind(cursor)
        .bind(error_json(&c.run_error).map(|v| v.to_string()))
        .bind(n_events)
        .bind(finished)
        .bind(status)
        .bind(status)
        .bind(&retry)
        .bind(&retry)
        .bind(&run_id)
        .bind(c.epoch.0)
        .bind(status)
        // UPDATE steps
        .bind(c.status.as_str())
        .bind(opt_json(c.output.as_ref()))
        .bind(c.usage.map(|u| u.input_tokens as i64))
        .bind(c.usage.map(|u| u.output_tokens as i64))
        .bind(error_json(&c.error).map(|v| v.to_string()))
        .bind(&run_id)
        .bind(c.idx.get() as i64)
        .bind(c.attempt.get() as i64)
        // INSERT next step
        .bind(&run_id)
        .bind(next_idx)
        .bind(c.start_next.as_ref().map(|(_, r)| r.as_str()))
        .bind(next_idx)
        // INSERT events
        .bind(&run_id)
        .bind(n_events)
        .bind(events)
        .bind(&run_id)
        .bind(c.epoch.0)
        .bind(status)
        .bind(cursor)
        // INSERT wait
        .bind(wait.map(|w| w.id.to_string()))
        .bind(&run_id)
        .bind(c.idx.get() as i64)
        .bind(c.attempt.get() as i64)
        .bind(wait.map(|w| w.kind.as_str()))
        .bind(wait.map(|w| w.prompt.to_string()))
        .bind(wait.and_then(|w| w.question_id.clone()))
        .bind(&wait_deadline)
        .bind(&wait_deadline)
        .bind(
            wait.and_then(|w| w.on_deadline.as_ref())
                .map(|o| serde_json::to_string(o).unwrap_or_default()),
        )
        .bind(wait.map(|w| w.kind.as_str()))
        .execute(&mut *tx)
        .await;
        let expected = 2
            + u64::from(c.start_next.is_some())
            + c.events.len() as u64
            + u64::from(c.open_wait.is_some());
        match applied {
            Ok(done) if done.rows_affected() == expected => {
                tx.commit().await?;
                Ok(())
            }
            outcome => {
                tx.rollback().await?;
                let run = self.get_run(c.run_id).await?;
                if run.lease_epoch == c.epoch
                    && run.status == RunStatus::Running
                    && run.cancel_requested_at.is_none()
                {
                    // The run matched; the step or the insert did not.
                    outcome?;
                    return Err(Corruption::new(
                        c.run_id,
                        format!(
                            "step {} attempt {} is not running, so its result cannot be committed",
                            c.idx, c.attempt
                        ),
                    )
                    .into());
                }
                Err(refused_commit(&run, c))
            }
        }
    }

    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord> {
        let mut tx = self.write_tx().await?;
        let run = fetch_run(&mut tx, id).await?;
        let plan = plan_action(&run, action, actor)?;
        sqlx::query(concat!(
            "UPDATE runs SET status = ?2, \
             error = CASE WHEN ?3 THEN NULL ELSE error END, \
             not_before = CASE WHEN ?3 THEN NULL ELSE not_before END, \
             finished_at = CASE WHEN ?4 THEN ",
            now!(),
            " ELSE finished_at END, \
             cancel_requested_at = CASE WHEN ?5 THEN ",
            now!(),
            " ELSE cancel_requested_at END, \
             lease_owner = CASE WHEN ?2 = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN ?2 = 'running' THEN lease_expires_at END, \
             updated_at = ",
            now!(),
            " WHERE id = ?1"
        ))
        .bind(id.to_string())
        .bind(plan.to.as_str())
        .bind(plan.clears_error())
        .bind(plan.finishes())
        .bind(plan.request_cancel)
        .execute(&mut *tx)
        .await?;
        if plan.finishes() {
            // A step paused at the cursor ends with its run.
            sqlx::query(concat!(
                "UPDATE steps SET status = 'cancelled', finished_at = ",
                now!(),
                " WHERE run_id = ?1 AND idx = ?2 AND status IN ('waiting', 'interrupted')"
            ))
            .bind(id.to_string())
            .bind(run.cursor.get() as i64)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE waits SET status = 'cancelled' WHERE run_id = ?1 AND status = 'open'",
            )
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        }
        append_events(&mut tx, id, std::slice::from_ref(&plan.event)).await?;
        let run = fetch_run(&mut tx, id).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord> {
        let mut tx = self.write_tx().await?;
        let source = fetch_run(&mut tx, id).await?;
        check_fork(&source, req)?;
        let child = RunId::new();
        let complete = req.from_step.get() == source.step_count;
        let input = req.input.as_ref().unwrap_or(&source.input);
        sqlx::query(concat!(
            "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
             thread_id, status, cursor, step_count, lease_epoch, event_seq, parent_run_id, \
             parent_step_idx, created_at, updated_at, finished_at) \
             SELECT ?1, crew_name, crew_version, crew_fingerprint, crew_def, ?2, thread_id, ?3, ?4, \
             step_count, 0, 0, id, ?4, ",
            now!(),
            ", ",
            now!(),
            ", CASE WHEN ?5 THEN ",
            now!(),
            " END FROM runs WHERE id = ?6"
        ))
        .bind(child.to_string())
        .bind(input.to_string())
        .bind(if complete { "succeeded" } else { "queued" })
        .bind(req.from_step.get() as i64)
        .bind(complete)
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO steps (run_id, idx, role, status, attempt, output, input_tokens, \
             output_tokens, started_at, finished_at, error, takeovers) \
             SELECT ?1, idx, role, status, attempt, output, input_tokens, output_tokens, \
             started_at, finished_at, error, takeovers FROM steps WHERE run_id = ?2 AND idx < ?3",
        )
        .bind(child.to_string())
        .bind(id.to_string())
        .bind(req.from_step.get() as i64)
        .execute(&mut *tx)
        .await?;
        append_events(&mut tx, child, &[fork_event(&source, req, actor)]).await?;
        let run = fetch_run(&mut tx, child).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            wait_cols!(),
            " FROM waits WHERE (?1 IS NULL OR run_id = ?1) AND (?2 IS NULL OR step_idx = ?2) \
             AND (?3 IS NULL OR status = ?3) ORDER BY created_at, id"
        ))
        .bind(filter.run.map(|r| r.to_string()))
        .bind(filter.step.map(|s| s.get() as i64))
        .bind(filter.status.map(|s| s.as_str()))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_wait).collect()
    }

    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &str) -> Result<WaitRecord> {
        let mut tx = self.write_tx().await?;
        let wait = fetch_wait(&mut tx, id).await?;
        let run = fetch_run(&mut tx, wait.run_id).await?;
        let step = fetch_step(&mut tx, run.id, run.cursor.get()).await?;
        let AnswerPlan::Apply {
            run_to,
            cursor_to,
            step: change,
            run_error,
            events,
        } = plan_answer(&wait, &run, step.as_ref(), answer, by)?
        else {
            return Ok(wait);
        };
        let answer_json = serde_json::to_string(answer).unwrap_or_default();
        sqlx::query(concat!(
            "UPDATE waits SET status = 'answered', answer = ?2, answered_by = ?3, answered_at = ",
            now!(),
            " WHERE id = ?1 AND status = 'open'"
        ))
        .bind(id.to_string())
        .bind(&answer_json)
        .bind(by)
        .execute(&mut *tx)
        .await?;
        apply_step_change(&mut tx, run.id, wait.step_idx.get(), &change).await?;
        set_run_after_wait(&mut tx, run.id, run_to, cursor_to, run_error.as_ref()).await?;
        append_events(&mut tx, run.id, &events).await?;
        let wait = fetch_wait(&mut tx, id).await?;
        tx.commit().await?;
        Ok(wait)
    }

    async fn due_waits(&self) -> Result<Vec<WaitRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            wait_cols!(),
            " FROM waits WHERE status = 'open' AND deadline IS NOT NULL AND deadline <= ",
            now!(),
            " ORDER BY deadline"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_wait).collect()
    }

    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord> {
        let mut tx = self.write_tx().await?;
        let wait = fetch_wait(&mut tx, id).await?;
        let (error, events) = plan_expire(&wait)?;
        sqlx::query("UPDATE waits SET status = 'expired' WHERE id = ?1")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        apply_step_change(
            &mut tx,
            wait.run_id,
            wait.step_idx.get(),
            &StepChange::Fail(error.clone()),
        )
        .await?;
        set_run_after_wait(
            &mut tx,
            wait.run_id,
            RunStatus::Failed,
            wait.step_idx,
            Some(&error),
        )
        .await?;
        append_events(&mut tx, wait.run_id, &events).await?;
        let wait = fetch_wait(&mut tx, id).await?;
        tx.commit().await?;
        Ok(wait)
    }

    async fn events(&self, id: RunId) -> Result<Vec<EventRecord>> {
        let mut tx = self.pool.begin().await?;
        fetch_run(&mut tx, id).await?;
        let rows =
            sqlx::query("SELECT seq, at, kind, data FROM events WHERE run_id = ?1 ORDER BY seq")
                .bind(id.to_string())
                .fetch_all(&mut *tx)
                .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.try_get("seq")?;
                let kind: String = r.try_get("kind")?;
                Ok(EventRecord {
                    run_id: id,
                    seq,
                    at: required(
                        id,
                        "event time",
                        time_col(id, "event time", r.try_get("at")?)?,
                    )?,
                    kind: EventKind::parse(&kind).ok_or_else(|| {
                        Corruption::new(id, format!("event {seq} has unknown kind `{kind}`"))
                    })?,
                    data: required(
                        id,
                        "event data",
                        json_col(id, "event data", r.try_get("data")?)?,
                    )?,
                })
            })
            .collect()
    }

    async fn journal(
        &self,
        id: RunId,
        idx: StepIdx,
        generation: Option<u32>,
    ) -> Result<Vec<JournalEntry>> {
        let rows = sqlx::query(
            "SELECT seq, attempt, generation, kind, payload, created_at FROM journal \
             WHERE run_id = ?1 AND step_idx = ?2 AND (?3 IS NULL OR generation = ?3) ORDER BY seq",
        )
        .bind(id.to_string())
        .bind(idx.get() as i64)
        .bind(generation.map(i64::from))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| decode_journal(id, r)).collect()
    }

    async fn append_journal(&self, a: &JournalAppend) -> Result<JournalEntry> {
        let mut tx = self.write_tx().await?;
        check_held(&mut tx, a.run_id, a.epoch).await?;
        let row = sqlx::query(concat!(
            "INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, \
             created_at) SELECT ?1, ?2, COALESCE(MAX(seq), 0) + 1, ?3, ?4, ?5, ?6, ",
            now!(),
            " FROM journal WHERE run_id = ?1 AND step_idx = ?2 \
             RETURNING seq, attempt, generation, kind, payload, created_at"
        ))
        .bind(a.run_id.to_string())
        .bind(a.idx.get() as i64)
        .bind(a.attempt.get() as i64)
        .bind(i64::from(a.generation))
        .bind(a.kind.as_str())
        .bind(a.payload.to_string())
        .fetch_one(&mut *tx)
        .await?;
        let entry = decode_journal(a.run_id, &row)?;
        if let Some(event) = &a.event {
            append_events(&mut tx, a.run_id, std::slice::from_ref(event)).await?;
        }
        tx.commit().await?;
        Ok(entry)
    }

    async fn record_events(&self, id: RunId, epoch: LeaseEpoch, events: &[NewEvent]) -> Result<()> {
        let mut tx = self.write_tx().await?;
        check_held(&mut tx, id, epoch).await?;
        append_events(&mut tx, id, events).await?;
        tx.commit().await?;
        Ok(())
    }
}

async fn apply_step_change(
    tx: &mut Transaction<'static, Sqlite>,
    run: RunId,
    idx: u32,
    change: &StepChange,
) -> Result<()> {
    let (status, output, error) = match change {
        StepChange::Keep => return Ok(()),
        StepChange::Succeed(output) => ("succeeded", Some(output.to_string()), None),
        StepChange::Fail(e) => (
            "failed",
            None,
            error_json(&Some(e.clone())).map(|v| v.to_string()),
        ),
    };
    sqlx::query(concat!(
        "UPDATE steps SET status = ?3, output = COALESCE(?4, output), error = COALESCE(?5, error), \
         finished_at = ",
        now!(),
        " WHERE run_id = ?1 AND idx = ?2 AND status = 'waiting'"
    ))
    .bind(run.to_string())
    .bind(idx as i64)
    .bind(status)
    .bind(output)
    .bind(error)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn set_run_after_wait(
    tx: &mut Transaction<'static, Sqlite>,
    run: RunId,
    to: RunStatus,
    cursor: cairn_core::StepIdx,
    error: Option<&ErrorInfo>,
) -> Result<()> {
    let finished = matches!(to, RunStatus::Succeeded | RunStatus::Failed);
    sqlx::query(concat!(
        "UPDATE runs SET status = ?2, cursor = ?3, error = ?4, updated_at = ",
        now!(),
        ", finished_at = CASE WHEN ?5 THEN ",
        now!(),
        " ELSE finished_at END WHERE id = ?1"
    ))
    .bind(run.to_string())
    .bind(to.as_str())
    .bind(cursor.get() as i64)
    .bind(error.map(|e| serde_json::to_string(e).unwrap_or_default()))
    .bind(finished)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The claim of `Store::claim`, inside the caller's transaction.
async fn claim_in(
    tx: &mut Transaction<'static, Sqlite>,
    id: RunId,
    req: &ClaimRequest,
) -> Result<Claimed> {
    let mut before = fetch_run(tx, id).await?;
    match before.status {
        RunStatus::Queued => {}
        RunStatus::Running if req.takeover => {}
        status => {
            return Err(Error::WrongState {
                run: id,
                status,
                action: "claim it",
            })
        }
    }
    if let Some(def) = &req.replace_crew {
        sqlx::query(
            "UPDATE runs SET crew_name = ?2, crew_version = ?3, crew_fingerprint = ?4, \
             crew_def = ?5, step_count = ?6 WHERE id = ?1",
        )
        .bind(id.to_string())
        .bind(&def.name)
        .bind(&def.version)
        .bind(def.fingerprint().as_str())
        .bind(def.to_json().to_string())
        .bind(def.step_count() as i64)
        .execute(&mut **tx)
        .await?;
        before.step_count = def.step_count();
        before.crew_definition = def.clone();
    }
    if before.not_before.is_some() {
        let wait_ms: i64 = sqlx::query_scalar(
            "SELECT CAST(ROUND((julianday(not_before) - julianday('now')) * 86400000) AS INTEGER) \
             FROM runs WHERE id = ?1",
        )
        .bind(id.to_string())
        .fetch_one(&mut **tx)
        .await?;
        if wait_ms > 0 {
            return Err(Error::NotYet {
                run: id,
                wait: Duration::from_millis(wait_ms as u64),
            });
        }
    }
    let lease = format!("+{:.3} seconds", req.lease.as_secs_f64());
    let epoch: i64 = sqlx::query_scalar(concat!(
        "UPDATE runs SET status = 'running', lease_epoch = lease_epoch + 1, lease_owner = ?2, \
         lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ','now', ?3), not_before = NULL, \
         updated_at = ",
        now!(),
        " WHERE id = ?1 RETURNING lease_epoch"
    ))
    .bind(id.to_string())
    .bind(&req.owner)
    .bind(&lease)
    .fetch_one(&mut **tx)
    .await?;
    let epoch = LeaseEpoch(epoch);

    let row = fetch_step(tx, id, before.cursor.get()).await?;
    let latest_wait = match &row {
        Some(r) if r.status == cairn_core::StepStatus::Waiting => {
            latest_wait(tx, id, r.idx.get()).await?
        }
        _ => None,
    };
    let plan = plan_claim(&before, row, latest_wait.as_ref(), req)?;

    match &plan.step {
        ClaimStep::Nothing => {}
        ClaimStep::Insert { role } => {
            sqlx::query(concat!(
                "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                 VALUES (?1, ?2, ?3, 'running', 1, ",
                now!(),
                ")"
            ))
            .bind(id.to_string())
            .bind(before.cursor.get() as i64)
            .bind(role.as_str())
            .execute(&mut **tx)
            .await?;
        }
        ClaimStep::Restart {
            attempt,
            takeovers_delta,
        } => {
            sqlx::query(concat!(
                "UPDATE steps SET status = 'running', attempt = ?3, \
                 takeovers = CASE WHEN ?4 = 0 THEN 0 ELSE takeovers + ?4 END, \
                 finished_at = NULL, started_at = ",
                now!(),
                " WHERE run_id = ?1 AND idx = ?2"
            ))
            .bind(id.to_string())
            .bind(before.cursor.get() as i64)
            .bind(i64::from(*attempt))
            .bind(i64::from(*takeovers_delta))
            .execute(&mut **tx)
            .await?;
        }
        ClaimStep::CrashLoop { error } => {
            let err = error_json(&Some(error.clone())).map(|v| v.to_string());
            sqlx::query(concat!(
                "UPDATE steps SET status = 'failed', error = ?3, finished_at = ",
                now!(),
                " WHERE run_id = ?1 AND idx = ?2"
            ))
            .bind(id.to_string())
            .bind(before.cursor.get() as i64)
            .bind(&err)
            .execute(&mut **tx)
            .await?;
            sqlx::query(concat!(
                "UPDATE runs SET status = 'failed', error = ?2, lease_owner = NULL, \
                 lease_expires_at = NULL, finished_at = ",
                now!(),
                " WHERE id = ?1"
            ))
            .bind(id.to_string())
            .bind(&err)
            .execute(&mut **tx)
            .await?;
        }
    }
    let events = claim_events(req, epoch, &before, &plan);
    append_events(tx, id, &events).await?;
    let run = fetch_run(tx, id).await?;
    let at_cursor = fetch_step(tx, id, run.cursor.get()).await?;
    Ok(Claimed {
        run,
        at_cursor,
        took_over: plan.took_over,
    })
}
