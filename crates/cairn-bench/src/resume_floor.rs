//! The floor under `postgres_resume_1000_ms`: a resume of the same parked
//! 1,000-step run written by hand in Cairn's data model, on a connection
//! opened for it (a new server process, as a fresh engine's), then again
//! on the same connection (warm). By hand means: one read transaction for
//! the run, its crew definition and its step rows (decoded to JSON values,
//! as a resume needs the outputs); then the takeover as one fenced
//! statement (the run row, the cursor's step, one event). No crew checks,
//! no plan, no typed decoding: what any resume in this schema must do.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::types::Json;
use sqlx::{Connection, Row};

use cairn_core::RunId;

/// A fresh connection's hand-written resume of `id`, then a warm one.
pub(crate) async fn hand_resume(
    options: &PgConnectOptions,
    id: RunId,
) -> Result<(Duration, Duration)> {
    let mut conn = PgConnection::connect_with(options)
        .await
        .context("connecting for the hand-written resume")?;
    let t = Instant::now();
    resume_once(&mut conn, id).await?;
    let fresh = t.elapsed();
    let t = Instant::now();
    resume_once(&mut conn, id).await?;
    let warm = t.elapsed();
    conn.close().await?;
    Ok((fresh, warm))
}

/// Read the run and its rows, then take its lease over.
async fn resume_once(conn: &mut PgConnection, id: RunId) -> Result<()> {
    let id = id.as_uuid();
    let mut tx = conn
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    let run = sqlx::query(
        "SELECT r.lease_epoch, r.cursor, r.input, \
         COALESCE(NULLIF(r.crew_def, 'null'), k.definition) AS def \
         FROM runs r LEFT JOIN crews k ON k.fingerprint = r.crew_fingerprint WHERE r.id = $1",
    )
    .bind(id)
    .fetch_one(&mut *tx)
    .await?;
    let epoch: i64 = run.try_get("lease_epoch")?;
    let Json(def): Json<Value> = run.try_get("def")?;
    let Json(_input): Json<Value> = run.try_get("input")?;
    let steps = sqlx::query(
        "SELECT idx, status, attempt, output FROM steps WHERE run_id = $1 ORDER BY idx",
    )
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut outputs = Vec::with_capacity(steps.len());
    for row in &steps {
        let _idx: i32 = row.try_get("idx")?;
        let _status: &str = row.try_get("status")?;
        let _attempt: i32 = row.try_get("attempt")?;
        let output: Option<Json<Value>> = row.try_get("output")?;
        outputs.push(output.map(|Json(v)| v));
    }
    ensure!(
        def.get("agents").is_some() && outputs.len() > 1,
        "the hand-written resume read no run"
    );
    let claimed = sqlx::query(
        "WITH r AS (UPDATE runs SET lease_epoch = lease_epoch + 1, lease_owner = 'hand', \
           lease_expires_at = clock_timestamp() + interval '30 seconds', \
           event_seq = event_seq + 1, updated_at = clock_timestamp() \
           WHERE id = $1 AND lease_epoch = $2 RETURNING id, cursor, event_seq), \
         s AS (UPDATE steps SET takeovers = takeovers + 1, started_at = clock_timestamp() \
           FROM r WHERE steps.run_id = r.id AND steps.idx = r.cursor RETURNING steps.idx) \
         INSERT INTO events (run_id, seq, at, kind, data) \
         SELECT r.id, r.event_seq, clock_timestamp(), 'run_claimed', $3::jsonb FROM r, s",
    )
    .bind(id)
    .bind(epoch)
    .bind(serde_json::json!({"owner": "hand", "epoch": epoch + 1}))
    .execute(&mut *conn)
    .await?;
    ensure!(
        claimed.rows_affected() == 1,
        "the hand-written claim took nothing"
    );
    Ok(())
}
