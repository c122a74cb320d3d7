//! The PostgreSQL backend: many processes on many machines. A step commit is
//! one statement (data-modifying CTEs) so it costs one round trip; times come
//! from the server's `clock_timestamp()`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Connection, PgConnection, Postgres, Row, Transaction};

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
    OpenOptions, Result, RunFilter, StepCommit, Store, StoreStats, Submitted, WaitFilter,
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

/// A Cairn store on a PostgreSQL server.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The `LISTEN cairn_runnable` connection, opened on first use.
    listener: std::sync::Arc<tokio::sync::Mutex<Option<sqlx::postgres::PgListener>>>,
}

/// The channel notified when a run becomes runnable.
const RUNNABLE: &str = "cairn_runnable";

/// Wakes listening workers when `tx` commits.
async fn notify_runnable(tx: &mut Transaction<'static, Postgres>, id: RunId) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(RUNNABLE)
        .bind(id.to_string())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl PgStore {
    /// Connects (failing within `opts.connect_timeout` with the server named)
    /// and applies migrations.
    pub async fn connect_with(pg: PgConnectOptions, opts: &OpenOptions) -> Result<Self> {
        let target = format!(
            "PostgreSQL at {}:{}/{}",
            pg.get_host(),
            pg.get_port(),
            pg.get_database().unwrap_or("(default database)")
        );
        // One direct attempt first: the pool would only say "timed out",
        // while the connection itself names the cause (refused, auth, …).
        let unreachable = |reason: String| Error::Unreachable {
            target: target.clone(),
            reason,
        };
        match tokio::time::timeout(opts.connect_timeout, PgConnection::connect_with(&pg)).await {
            Err(_) => {
                return Err(unreachable(format!(
                    "no answer within {} ms",
                    opts.connect_timeout.as_millis()
                )))
            }
            Ok(Err(e)) => return Err(unreachable(e.to_string())),
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(opts.max_connections)
            .acquire_timeout(opts.connect_timeout)
            .connect_with(pg)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        sqlx::migrate!("../../migrations/postgres")
            .run(&pool)
            .await
            .map_err(|source| Error::Migrate { target, source })?;
        Ok(PgStore {
            pool,
            listener: Default::default(),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

fn decode_run(row: &PgRow) -> Result<RunRecord> {
    let raw = RawRun {
        id: RunId::from_uuid(row.try_get("id")?),
        crew_name: row.try_get("crew_name")?,
        crew_version: row.try_get("crew_version")?,
        crew_fingerprint: row.try_get("crew_fingerprint")?,
        crew_def: row.try_get::<Json<Value>, _>("crew_def")?.0,
        input: row.try_get::<Json<Value>, _>("input")?.0,
        idempotency_key: row.try_get("idempotency_key")?,
        thread_id: row.try_get("thread_id")?,
        status: row.try_get("status")?,
        cursor: i64::from(row.try_get::<i32, _>("cursor")?),
        step_count: i64::from(row.try_get::<i32, _>("step_count")?),
        lease_epoch: row.try_get("lease_epoch")?,
        not_before: row.try_get("not_before")?,
        cancel_requested_at: row.try_get("cancel_requested_at")?,
        parent_run_id: row
            .try_get::<Option<uuid::Uuid>, _>("parent_run_id")?
            .map(RunId::from_uuid),
        parent_step_idx: row
            .try_get::<Option<i32>, _>("parent_step_idx")?
            .map(i64::from),
        error: row.try_get::<Option<Json<Value>>, _>("error")?.map(|j| j.0),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        finished_at: row.try_get("finished_at")?,
    };
    Ok(raw.into_record()?)
}

fn decode_step(run: RunId, row: &PgRow) -> Result<StepRecord> {
    let raw = RawStep {
        idx: i64::from(row.try_get::<i32, _>("idx")?),
        role: row.try_get("role")?,
        status: row.try_get("status")?,
        attempt: i64::from(row.try_get::<i32, _>("attempt")?),
        output: row
            .try_get::<Option<Json<Value>>, _>("output")?
            .map(|j| j.0),
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        error: row.try_get::<Option<Json<Value>>, _>("error")?.map(|j| j.0),
        takeovers: i64::from(row.try_get::<i32, _>("takeovers")?),
    };
    Ok(raw.into_record(run)?)
}

async fn fetch_run(
    tx: &mut Transaction<'static, Postgres>,
    id: RunId,
    lock: bool,
) -> Result<RunRecord> {
    let sql = if lock {
        concat!(
            "SELECT ",
            run_cols!(),
            " FROM runs WHERE id = $1 FOR UPDATE"
        )
    } else {
        concat!("SELECT ", run_cols!(), " FROM runs WHERE id = $1")
    };
    let row = sqlx::query(sql)
        .bind(id.as_uuid())
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(Error::RunNotFound(id))?;
    decode_run(&row)
}

async fn fetch_step(
    tx: &mut Transaction<'static, Postgres>,
    id: RunId,
    idx: u32,
) -> Result<Option<StepRecord>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        step_cols!(),
        " FROM steps WHERE run_id = $1 AND idx = $2"
    ))
    .bind(id.as_uuid())
    .bind(idx as i32)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| decode_step(id, &r)).transpose()
}

macro_rules! wait_cols {
    () => {
        "id, run_id, step_idx, attempt, kind, status, prompt, question_id, deadline, \
         on_deadline, answer, answered_by, answered_at, created_at"
    };
}

fn decode_wait(row: &PgRow) -> Result<WaitRecord> {
    let raw = RawWait {
        id: WaitId::from_uuid(row.try_get("id")?),
        run_id: RunId::from_uuid(row.try_get("run_id")?),
        step_idx: i64::from(row.try_get::<i32, _>("step_idx")?),
        attempt: i64::from(row.try_get::<i32, _>("attempt")?),
        kind: row.try_get("kind")?,
        status: row.try_get("status")?,
        prompt: row.try_get::<Json<Value>, _>("prompt")?.0,
        question_id: row.try_get("question_id")?,
        deadline: row.try_get("deadline")?,
        on_deadline: row
            .try_get::<Option<Json<Value>>, _>("on_deadline")?
            .map(|j| j.0),
        answer: row
            .try_get::<Option<Json<Value>>, _>("answer")?
            .map(|j| j.0),
        answered_by: row.try_get("answered_by")?,
        answered_at: row.try_get("answered_at")?,
        created_at: row.try_get("created_at")?,
    };
    Ok(raw.into_record()?)
}

async fn latest_wait(
    tx: &mut Transaction<'static, Postgres>,
    id: RunId,
    idx: u32,
) -> Result<Option<WaitRecord>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE run_id = $1 AND step_idx = $2 ORDER BY created_at DESC, id DESC LIMIT 1"
    ))
    .bind(id.as_uuid())
    .bind(idx as i32)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| decode_wait(&r)).transpose()
}

async fn fetch_wait(tx: &mut Transaction<'static, Postgres>, id: WaitId) -> Result<WaitRecord> {
    let row = sqlx::query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE id = $1 FOR UPDATE"
    ))
    .bind(id.as_uuid())
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(Error::WaitNotFound(id))?;
    decode_wait(&row)
}

async fn apply_step_change(
    tx: &mut Transaction<'static, Postgres>,
    run: RunId,
    idx: u32,
    change: &StepChange,
) -> Result<()> {
    let (status, output, error) = match change {
        StepChange::Keep => return Ok(()),
        StepChange::Succeed(output) => ("succeeded", Some(Json(output.clone())), None),
        StepChange::Fail(e) => ("failed", None, error_json(&Some(e.clone())).map(Json)),
    };
    sqlx::query(
        "UPDATE steps SET status = $3, output = COALESCE($4, output), error = COALESCE($5, error), \
         finished_at = clock_timestamp() WHERE run_id = $1 AND idx = $2 AND status = 'waiting'",
    )
    .bind(run.as_uuid())
    .bind(idx as i32)
    .bind(status)
    .bind(output)
    .bind(error)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn set_run_after_wait(
    tx: &mut Transaction<'static, Postgres>,
    run: RunId,
    to: RunStatus,
    cursor: cairn_core::StepIdx,
    error: Option<&ErrorInfo>,
) -> Result<()> {
    let finished = matches!(to, RunStatus::Succeeded | RunStatus::Failed);
    sqlx::query(
        "UPDATE runs SET status = $2, cursor = $3, error = $4, updated_at = clock_timestamp(), \
         finished_at = CASE WHEN $5 THEN clock_timestamp() ELSE finished_at END WHERE id = $1",
    )
    .bind(run.as_uuid())
    .bind(to.as_str())
    .bind(cursor.get() as i32)
    .bind(error.map(Json))
    .bind(finished)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn event_arrays(events: &[NewEvent]) -> (Vec<String>, Vec<Json<Value>>) {
    (
        events.iter().map(|e| e.kind.as_str().to_owned()).collect(),
        events.iter().map(|e| Json(e.data.clone())).collect(),
    )
}

async fn append_events(
    tx: &mut Transaction<'static, Postgres>,
    id: RunId,
    events: &[NewEvent],
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let (kinds, datas) = event_arrays(events);
    sqlx::query(
        "WITH r AS (UPDATE runs SET event_seq = event_seq + $2 WHERE id = $1 RETURNING id, event_seq) \
         INSERT INTO events (run_id, seq, at, kind, data) \
         SELECT r.id, r.event_seq - $2 + u.ord, clock_timestamp(), u.kind, u.data \
         FROM r CROSS JOIN unnest($3::text[], $4::jsonb[]) WITH ORDINALITY AS u(kind, data, ord)",
    )
    .bind(id.as_uuid())
    .bind(events.len() as i64)
    .bind(kinds)
    .bind(datas)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Locks the run row and checks that it is `running` at `held`; the lock
/// holds a concurrent claim back until this transaction ends.
async fn check_held(
    tx: &mut Transaction<'static, Postgres>,
    id: RunId,
    held: LeaseEpoch,
) -> Result<()> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT lease_epoch, status FROM runs WHERE id = $1 FOR UPDATE")
            .bind(id.as_uuid())
            .fetch_optional(&mut **tx)
            .await?;
    let (epoch, status) = row.ok_or(Error::RunNotFound(id))?;
    let status: RunStatus = status
        .parse()
        .map_err(|e: String| Corruption::new(id, format!("run status: {e}")))?;
    check_holder(id, status, LeaseEpoch(epoch), held)
}

fn decode_journal(run: RunId, row: &PgRow) -> Result<JournalEntry> {
    let seq: i64 = row.try_get("seq")?;
    let kind: String = row.try_get("kind")?;
    let attempt: i32 = row.try_get("attempt")?;
    let generation: i32 = row.try_get("generation")?;
    Ok(JournalEntry {
        seq,
        attempt: Attempt(attempt as u32),
        generation: generation as u32,
        kind: journal_kind(run, seq, &kind)?,
        payload: row.try_get::<Json<Value>, _>("payload")?.0,
        created_at: row.try_get("created_at")?,
    })
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn submit(&self, new: NewRun) -> Result<Submitted> {
        let id = RunId::new();
        let event = serde_json::json!({
            "crew": new.crew.name,
            "fingerprint": new.crew.fingerprint(),
            "idempotency_key": new.idempotency_key,
            "thread_id": new.thread_id,
        });
        let inserted: i64 = sqlx::query_scalar(
            "WITH r AS ( \
               INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
                 idempotency_key, thread_id, status, cursor, step_count, lease_epoch, event_seq, \
                 created_at, updated_at) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', 0, $9, 0, 1, clock_timestamp(), \
                 clock_timestamp()) \
               ON CONFLICT (idempotency_key) DO NOTHING RETURNING id), \
             e AS (INSERT INTO events (run_id, seq, at, kind, data) \
               SELECT id, 1, clock_timestamp(), 'run_submitted', $10 FROM r) \
             SELECT count(*) FROM r",
        )
        .bind(id.as_uuid())
        .bind(&new.crew.name)
        .bind(&new.crew.version)
        .bind(new.crew.fingerprint().as_str())
        .bind(Json(new.crew.to_json()))
        .bind(Json(&new.input))
        .bind(&new.idempotency_key)
        .bind(&new.thread_id)
        .bind(new.crew.step_count() as i32)
        .bind(Json(event))
        .fetch_one(&self.pool)
        .await?;
        if inserted == 1 {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(RUNNABLE)
                .bind(id.to_string())
                .execute(&self.pool)
                .await?;
        }
        if inserted == 0 {
            let row = sqlx::query(concat!(
                "SELECT ",
                run_cols!(),
                " FROM runs WHERE idempotency_key = $1"
            ))
            .bind(&new.idempotency_key)
            .fetch_one(&self.pool)
            .await?;
            let run = decode_run(&row)?;
            check_same_submission(&run, &new)?;
            return Ok(Submitted {
                run,
                created: false,
            });
        }
        Ok(Submitted {
            run: self.get_run(id).await?,
            created: true,
        })
    }

    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)> {
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await?;
        let run = fetch_run(&mut tx, id, false).await?;
        // All rows as one JSON document: one value to decode instead of a
        // thousand rows of eleven columns.
        let packed: Option<String> = sqlx::query_scalar(
            "SELECT json_agg(json_build_array(idx, role, status, attempt, output, input_tokens, \
             output_tokens, to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.USZ'), \
             to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.USZ'), error, \
             takeovers) ORDER BY idx)::text FROM steps WHERE run_id = $1",
        )
        .bind(id.as_uuid())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        let steps = match packed {
            Some(packed) => unpack_steps(id, &packed)?,
            None => vec![],
        };
        Ok((run, steps))
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord> {
        let row = sqlx::query(concat!("SELECT ", run_cols!(), " FROM runs WHERE id = $1"))
            .bind(id.as_uuid())
            .fetch_optional(&self.pool)
            .await?
            .ok_or(Error::RunNotFound(id))?;
        decode_run(&row)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_cols!(),
            " FROM runs WHERE ($1::text IS NULL OR status = $1) ORDER BY created_at, id LIMIT $2"
        ))
        .bind(filter.status.map(|s| s.as_str()))
        .bind(filter.limit.map(i64::from))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_run).collect()
    }

    async fn stats(&self) -> Result<StoreStats> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
                .fetch_all(&self.pool)
                .await?;
        let (ready, takeovers): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM runs WHERE status = 'queued' \
                     AND (not_before IS NULL OR not_before <= clock_timestamp())), \
                    (SELECT count(*) FROM events WHERE kind = 'run_claimed' \
                     AND data->>'from_status' = 'running')",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(stats_from(rows, ready, takeovers)?)
    }

    async fn claim(&self, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
        let mut tx = self.pool.begin().await?;
        let claimed = claim_in(&mut tx, id, req).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    async fn claim_next(&self, req: &ClaimRequest) -> Result<Option<Claimed>> {
        let mut tx = self.pool.begin().await?;
        // The oldest runnable run: queued and due, or running under an
        // expired lease (its holder died or hung: a takeover).
        let picked: Option<uuid::Uuid> = sqlx::query_scalar(
            "SELECT id FROM runs WHERE (status = 'queued' AND (not_before IS NULL \
                 OR not_before <= clock_timestamp())) \
                 OR (status = 'running' AND lease_expires_at < clock_timestamp()) \
                 ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = picked else {
            tx.commit().await?;
            return Ok(None);
        };
        let id = RunId::from_uuid(id);
        let req = ClaimRequest {
            takeover: true,
            ..req.clone()
        };
        let claimed = claim_in(&mut tx, id, &req).await?;
        tx.commit().await?;
        Ok(Some(claimed))
    }

    async fn wait_for_work(&self, max: Duration) {
        let mut guard = self.listener.lock().await;
        if guard.is_none() {
            match sqlx::postgres::PgListener::connect_with(&self.pool).await {
                Ok(mut listener) => match listener.listen(RUNNABLE).await {
                    Ok(()) => *guard = Some(listener),
                    Err(e) => tracing::debug!(error = %e, "LISTEN failed; polling"),
                },
                Err(e) => tracing::debug!(error = %e, "no listener connection; polling"),
            }
        }
        let Some(listener) = guard.as_mut() else {
            drop(guard);
            tokio::time::sleep(max).await;
            return;
        };
        match tokio::time::timeout(max, listener.recv()).await {
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "listener failed; reconnecting next time");
                *guard = None;
            }
        }
    }

    async fn heartbeat(&self, id: RunId, epoch: LeaseEpoch, lease: Duration) -> Result<Lease> {
        let cancel: Option<bool> = sqlx::query_scalar(
            "UPDATE runs SET lease_expires_at = clock_timestamp() + make_interval(secs => $3) \
             WHERE id = $1 AND lease_epoch = $2 AND status = 'running' \
             RETURNING cancel_requested_at IS NOT NULL",
        )
        .bind(id.as_uuid())
        .bind(epoch.0)
        .bind(lease.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?;
        Ok(Lease::from_beat(cancel))
    }

    async fn commit_step(&self, c: &StepCommit) -> Result<()> {
        let finished = matches!(
            c.run_status,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
        );
        let (kinds, datas) = event_arrays(&c.events);
        let wait = c.open_wait.as_ref();
        let (next_idx, next_role) = match &c.start_next {
            Some((i, r)) => (Some(i.get() as i32), Some(r.as_str())),
            None => (None, None),
        };
        // One statement, one round trip, one implicit transaction. The guard
        // aborts the whole statement if the run matched but its step did not.
        let runs: i64 = sqlx::query_scalar(
            "WITH r AS ( \
               UPDATE runs SET status = $3, cursor = $4, error = $5, event_seq = event_seq + $6, \
                 updated_at = clock_timestamp(), \
                 finished_at = CASE WHEN $7 THEN clock_timestamp() ELSE finished_at END, \
                 lease_owner = CASE WHEN $3 = 'running' THEN lease_owner END, \
                 lease_expires_at = CASE WHEN $3 = 'running' THEN lease_expires_at END, \
                 not_before = CASE WHEN $19::float8 IS NULL THEN NULL \
                   ELSE clock_timestamp() + make_interval(secs => $19::float8) END \
               WHERE id = $1 AND lease_epoch = $2 AND status = 'running' \
                 AND (cancel_requested_at IS NULL OR $3 = 'cancelled') \
               RETURNING id, event_seq), \
             s AS ( \
               UPDATE steps SET status = $10, output = $11, input_tokens = $12, \
                 output_tokens = $13, error = COALESCE($14, steps.error), \
                 finished_at = clock_timestamp() \
               FROM r WHERE steps.run_id = r.id AND steps.idx = $8 AND steps.attempt = $9 \
                 AND steps.status = 'running' \
               RETURNING steps.idx), \
             n AS ( \
               INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
               SELECT r.id, $15, $16, 'running', 1, clock_timestamp() FROM r \
               WHERE $15::int IS NOT NULL), \
             e AS ( \
               INSERT INTO events (run_id, seq, at, kind, data) \
               SELECT r.id, r.event_seq - $6 + u.ord, clock_timestamp(), u.kind, u.data \
               FROM r CROSS JOIN unnest($17::text[], $18::jsonb[]) WITH ORDINALITY AS u(kind, data, ord)), \
             w AS ( \
               INSERT INTO waits (id, run_id, step_idx, attempt, kind, status, prompt, question_id, \
                 deadline, on_deadline, created_at) \
               SELECT $20::uuid, r.id, $8, $9, $21, 'open', $22, $23, \
                 clock_timestamp() + make_interval(secs => $24::float8), $25, clock_timestamp() \
               FROM r WHERE $20::uuid IS NOT NULL) \
             SELECT CASE WHEN (SELECT count(*) FROM r) = 1 AND (SELECT count(*) FROM s) <> 1 \
                 THEN cairn_raise('cairn: step row is not running at the committed attempt') \
                 ELSE (SELECT count(*) FROM r) END",
        )
        .bind(c.run_id.as_uuid())
        .bind(c.epoch.0)
        .bind(c.run_status.as_str())
        .bind(c.cursor.get() as i32)
        .bind(error_json(&c.run_error).map(Json))
        .bind(c.events.len() as i64)
        .bind(finished)
        .bind(c.idx.get() as i32)
        .bind(c.attempt.get() as i32)
        .bind(c.status.as_str())
        .bind(c.output.as_ref().map(Json))
        .bind(c.usage.map(|u| u.input_tokens as i64))
        .bind(c.usage.map(|u| u.output_tokens as i64))
        .bind(error_json(&c.error).map(Json))
        .bind(next_idx)
        .bind(next_role)
        .bind(kinds)
        .bind(datas)
        .bind(c.retry_after.map(|d| d.as_secs_f64()))
        .bind(wait.map(|w| w.id.as_uuid()))
        .bind(wait.map(|w| w.kind.as_str()))
        .bind(wait.map(|w| Json(&w.prompt)))
        .bind(wait.and_then(|w| w.question_id.as_deref()))
        .bind(wait.and_then(|w| w.deadline_ms).map(|ms| ms as f64 / 1000.0))
        .bind(wait.and_then(|w| w.on_deadline.as_ref()).map(Json))
        .fetch_one(&self.pool)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(db) if db.message().starts_with("cairn: ") => {
                cairn_core::Corruption::new(
                    c.run_id,
                    format!(
                        "step {} attempt {} is not running, so its result cannot be committed",
                        c.idx, c.attempt
                    ),
                )
                .into()
            }
            e => Error::Database(e),
        })?;
        if runs == 0 {
            let run = self.get_run(c.run_id).await?;
            return Err(refused_commit(&run, c));
        }
        Ok(())
    }

    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord> {
        let mut tx = self.pool.begin().await?;
        let run = fetch_run(&mut tx, id, true).await?;
        let plan = plan_action(&run, action, actor)?;
        sqlx::query(
            "UPDATE runs SET status = $2, \
             error = CASE WHEN $3 THEN NULL ELSE error END, \
             not_before = CASE WHEN $3 THEN NULL ELSE not_before END, \
             finished_at = CASE WHEN $4 THEN clock_timestamp() ELSE finished_at END, \
             cancel_requested_at = CASE WHEN $5 THEN clock_timestamp() ELSE cancel_requested_at END, \
             lease_owner = CASE WHEN $2 = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN $2 = 'running' THEN lease_expires_at END, \
             updated_at = clock_timestamp() WHERE id = $1",
        )
        .bind(id.as_uuid())
        .bind(plan.to.as_str())
        .bind(plan.clears_error())
        .bind(plan.finishes())
        .bind(plan.request_cancel)
        .execute(&mut *tx)
        .await?;
        if plan.finishes() {
            sqlx::query(
                "UPDATE steps SET status = 'cancelled', finished_at = clock_timestamp() \
                 WHERE run_id = $1 AND idx = $2 AND status IN ('waiting', 'interrupted')",
            )
            .bind(id.as_uuid())
            .bind(run.cursor.get() as i32)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE waits SET status = 'cancelled' WHERE run_id = $1 AND status = 'open'",
            )
            .bind(id.as_uuid())
            .execute(&mut *tx)
            .await?;
        }
        append_events(&mut tx, id, std::slice::from_ref(&plan.event)).await?;
        if plan.to == RunStatus::Queued {
            notify_runnable(&mut tx, id).await?;
        }
        let run = fetch_run(&mut tx, id, false).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord> {
        let mut tx = self.pool.begin().await?;
        let source = fetch_run(&mut tx, id, true).await?;
        check_fork(&source, req)?;
        let child = RunId::new();
        let complete = req.from_step.get() == source.step_count;
        let input = req.input.as_ref().unwrap_or(&source.input);
        sqlx::query(
            "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
             thread_id, status, cursor, step_count, lease_epoch, event_seq, parent_run_id, \
             parent_step_idx, created_at, updated_at, finished_at) \
             SELECT $1, crew_name, crew_version, crew_fingerprint, crew_def, $2, thread_id, $3, $4, \
             step_count, 0, 0, id, $4, clock_timestamp(), clock_timestamp(), \
             CASE WHEN $5 THEN clock_timestamp() END FROM runs WHERE id = $6",
        )
        .bind(child.as_uuid())
        .bind(Json(input))
        .bind(if complete { "succeeded" } else { "queued" })
        .bind(req.from_step.get() as i32)
        .bind(complete)
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO steps (run_id, idx, role, status, attempt, output, input_tokens, \
             output_tokens, started_at, finished_at, error, takeovers) \
             SELECT $1, idx, role, status, attempt, output, input_tokens, output_tokens, \
             started_at, finished_at, error, takeovers FROM steps WHERE run_id = $2 AND idx < $3",
        )
        .bind(child.as_uuid())
        .bind(id.as_uuid())
        .bind(req.from_step.get() as i32)
        .execute(&mut *tx)
        .await?;
        append_events(&mut tx, child, &[fork_event(&source, req, actor)]).await?;
        notify_runnable(&mut tx, child).await?;
        let run = fetch_run(&mut tx, child, false).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            wait_cols!(),
            " FROM waits WHERE ($1::uuid IS NULL OR run_id = $1) \
             AND ($2::int IS NULL OR step_idx = $2) AND ($3::text IS NULL OR status = $3) \
             ORDER BY created_at, id"
        ))
        .bind(filter.run.map(|r| r.as_uuid()))
        .bind(filter.step.map(|s| s.get() as i32))
        .bind(filter.status.map(|s| s.as_str()))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_wait).collect()
    }

    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &str) -> Result<WaitRecord> {
        let mut tx = self.pool.begin().await?;
        let wait = fetch_wait(&mut tx, id).await?;
        let run = fetch_run(&mut tx, wait.run_id, true).await?;
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
        sqlx::query(
            "UPDATE waits SET status = 'answered', answer = $2, answered_by = $3, \
             answered_at = clock_timestamp() WHERE id = $1 AND status = 'open'",
        )
        .bind(id.as_uuid())
        .bind(Json(answer))
        .bind(by)
        .execute(&mut *tx)
        .await?;
        apply_step_change(&mut tx, run.id, wait.step_idx.get(), &change).await?;
        set_run_after_wait(&mut tx, run.id, run_to, cursor_to, run_error.as_ref()).await?;
        if run_to == RunStatus::Queued {
            notify_runnable(&mut tx, run.id).await?;
        }
        append_events(&mut tx, run.id, &events).await?;
        let wait = fetch_wait(&mut tx, id).await?;
        tx.commit().await?;
        Ok(wait)
    }

    async fn due_waits(&self) -> Result<Vec<WaitRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            wait_cols!(),
            " FROM waits WHERE status = 'open' AND deadline IS NOT NULL \
             AND deadline <= clock_timestamp() ORDER BY deadline"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_wait).collect()
    }

    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord> {
        let mut tx = self.pool.begin().await?;
        let wait = fetch_wait(&mut tx, id).await?;
        let (error, events) = plan_expire(&wait)?;
        sqlx::query("UPDATE waits SET status = 'expired' WHERE id = $1")
            .bind(id.as_uuid())
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
        self.get_run(id).await?;
        let rows =
            sqlx::query("SELECT seq, at, kind, data FROM events WHERE run_id = $1 ORDER BY seq")
                .bind(id.as_uuid())
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.try_get("seq")?;
                let kind: String = r.try_get("kind")?;
                Ok(EventRecord {
                    run_id: id,
                    seq,
                    at: r.try_get("at")?,
                    kind: EventKind::parse(&kind).ok_or_else(|| {
                        cairn_core::Corruption::new(
                            id,
                            format!("event {seq} has unknown kind `{kind}`"),
                        )
                    })?,
                    data: r.try_get::<Json<Value>, _>("data")?.0,
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
             WHERE run_id = $1 AND step_idx = $2 AND ($3::int IS NULL OR generation = $3) \
             ORDER BY seq",
        )
        .bind(id.as_uuid())
        .bind(idx.get() as i32)
        .bind(generation.map(|g| g as i32))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| decode_journal(id, r)).collect()
    }

    async fn append_journal(&self, a: &JournalAppend) -> Result<JournalEntry> {
        // One statement, so one round trip: the fence (the run row updated
        // only at the holder's epoch, which also locks it against a claim),
        // the item at the step's next seq, and its event.
        let row = sqlx::query(
            "WITH r AS ( \
               UPDATE runs SET event_seq = event_seq + $8 \
               WHERE id = $1 AND lease_epoch = $7 AND status = 'running' \
               RETURNING id, event_seq), \
             j AS ( \
               INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, \
                 created_at) \
               SELECT r.id, $2, COALESCE((SELECT MAX(seq) FROM journal \
                 WHERE run_id = $1 AND step_idx = $2), 0) + 1, $3, $4, $5, $6, clock_timestamp() \
               FROM r \
               RETURNING seq, attempt, generation, kind, payload, created_at), \
             e AS ( \
               INSERT INTO events (run_id, seq, at, kind, data) \
               SELECT r.id, r.event_seq, clock_timestamp(), $9, $10 FROM r WHERE $8 = 1) \
             SELECT * FROM j",
        )
        .bind(a.run_id.as_uuid())
        .bind(a.idx.get() as i32)
        .bind(a.attempt.get() as i32)
        .bind(a.generation as i32)
        .bind(a.kind.as_str())
        .bind(Json(&a.payload))
        .bind(a.epoch.0)
        .bind(i64::from(a.event.is_some()))
        .bind(a.event.as_ref().map(|e| e.kind.as_str()))
        .bind(a.event.as_ref().map(|e| Json(&e.data)))
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(row) => decode_journal(a.run_id, &row),
            None => {
                // Nothing written: say why.
                let run = self.get_run(a.run_id).await?;
                check_holder(a.run_id, run.status, run.lease_epoch, a.epoch)?;
                Err(Corruption::new(
                    a.run_id,
                    "a journal item matched the run but was not written",
                )
                .into())
            }
        }
    }

    async fn record_events(&self, id: RunId, epoch: LeaseEpoch, events: &[NewEvent]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        check_held(&mut tx, id, epoch).await?;
        append_events(&mut tx, id, events).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The claim of `Store::claim`, inside the caller's transaction.
async fn claim_in(
    tx: &mut Transaction<'static, Postgres>,
    id: RunId,
    req: &ClaimRequest,
) -> Result<Claimed> {
    let mut before = fetch_run(tx, id, true).await?;
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
            "UPDATE runs SET crew_name = $2, crew_version = $3, crew_fingerprint = $4, \
             crew_def = $5, step_count = $6 WHERE id = $1",
        )
        .bind(id.as_uuid())
        .bind(&def.name)
        .bind(&def.version)
        .bind(def.fingerprint().as_str())
        .bind(Json(def.to_json()))
        .bind(def.step_count() as i32)
        .execute(&mut **tx)
        .await?;
        before.step_count = def.step_count();
        before.crew_definition = def.clone();
    }
    if before.not_before.is_some() {
        let wait_ms: i64 = sqlx::query_scalar(
            "SELECT CEIL(EXTRACT(EPOCH FROM (not_before - clock_timestamp())) * 1000)::bigint \
             FROM runs WHERE id = $1",
        )
        .bind(id.as_uuid())
        .fetch_one(&mut **tx)
        .await?;
        if wait_ms > 0 {
            return Err(Error::NotYet {
                run: id,
                wait: std::time::Duration::from_millis(wait_ms as u64),
            });
        }
    }
    let epoch: i64 = sqlx::query_scalar(
        "UPDATE runs SET status = 'running', lease_epoch = lease_epoch + 1, lease_owner = $2, \
         lease_expires_at = clock_timestamp() + make_interval(secs => $3), not_before = NULL, \
         updated_at = clock_timestamp() WHERE id = $1 RETURNING lease_epoch",
    )
    .bind(id.as_uuid())
    .bind(&req.owner)
    .bind(req.lease.as_secs_f64())
    .fetch_one(&mut **tx)
    .await?;
    let epoch = LeaseEpoch(epoch);
    let cursor = before.cursor.get() as i32;
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
            sqlx::query(
                "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                 VALUES ($1, $2, $3, 'running', 1, clock_timestamp())",
            )
            .bind(id.as_uuid())
            .bind(cursor)
            .bind(role.as_str())
            .execute(&mut **tx)
            .await?;
        }
        ClaimStep::Restart {
            attempt,
            takeovers_delta,
        } => {
            sqlx::query(
                "UPDATE steps SET status = 'running', attempt = $3, \
                 takeovers = CASE WHEN $4 = 0 THEN 0 ELSE takeovers + $4 END, \
                 finished_at = NULL, started_at = clock_timestamp() \
                 WHERE run_id = $1 AND idx = $2",
            )
            .bind(id.as_uuid())
            .bind(cursor)
            .bind(*attempt as i32)
            .bind(*takeovers_delta as i32)
            .execute(&mut **tx)
            .await?;
        }
        ClaimStep::CrashLoop { error } => {
            let err = error_json(&Some(error.clone())).map(Json);
            sqlx::query(
                "WITH s AS (UPDATE steps SET status = 'failed', error = $3, \
                   finished_at = clock_timestamp() WHERE run_id = $1 AND idx = $2) \
                 UPDATE runs SET status = 'failed', error = $3, lease_owner = NULL, \
                   lease_expires_at = NULL, finished_at = clock_timestamp() WHERE id = $1",
            )
            .bind(id.as_uuid())
            .bind(cursor)
            .bind(err)
            .execute(&mut **tx)
            .await?;
        }
    }
    let events = claim_events(req, epoch, &before, &plan);
    append_events(tx, id, &events).await?;
    let run = fetch_run(tx, id, false).await?;
    let at_cursor = fetch_step(tx, id, run.cursor.get()).await?;
    Ok(Claimed {
        run,
        at_cursor,
        took_over: plan.took_over,
    })
}
