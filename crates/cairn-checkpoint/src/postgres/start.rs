//! `RunStore::submit` and `LeaseStore::start` of a fresh run
//! (`script/fresh.rs`) in one statement of data-modifying CTEs, so one
//! round trip and one implicit transaction: the run inserted (to start:
//! already claimed, running at epoch 1 under this process's lease), its
//! crew version remembered, (to start) its first step running, its events
//! (`run_submitted`, then the claim's) and their audit entries, and (a
//! submit) the wake-up of idle workers. The script's way is a transaction
//! of six statements to submit, ten to start: the submit, then the claim
//! reading back the run it just wrote.
//!
//! An idempotency key already taken inserts nothing (`ON CONFLICT DO
//! NOTHING` on the run; everything else is selected from it), and the
//! script's transaction then reads the run that holds the key.

use serde_json::{json, Value};

use cairn_core::{Attempt, RunStatus, StepIdx, StepRecord, StepStatus};

use super::PgStore;
use crate::raw::{decode_run_with, run_cols_but_def};
use crate::script::fresh::{fresh_start, FreshStart};
use crate::script::{ScriptHost, TxKind};
use crate::sql::{Query, RUNNABLE};
use crate::{ClaimRequest, Claimed, LeaseEpoch, NewRun, Result, Started, Submitted};

/// The statement. `notified` is read by nobody: a CTE that modifies
/// nothing (the `pg_notify` of `n`) runs only if referenced, so the last
/// `SELECT` names it.
const START: &str = concat!(
    "WITH r AS ( \
       INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
         idempotency_key, status, cursor, step_count, lease_epoch, lease_owner, \
         lease_expires_at, event_seq, created_at, updated_at, priority, claim_at, budget, \
         trace, upgrade) \
       VALUES (:id, :name, :version, :fingerprint, 'null', :input, :key, \
         CASE WHEN :claim THEN 'running' ELSE 'queued' END, 0, :steps, \
         CASE WHEN :claim THEN 1 ELSE 0 END, :owner, CASE WHEN :claim THEN {lease_until} END, \
         :n_events, {now}, {now}, :priority, {claim_at}, :budget, :trace, :upgrade) \
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING ",
    run_cols_but_def!(),
    "), \
     k AS ( \
       INSERT INTO crews (fingerprint, name, version, definition, first_seen, needs_code) \
       SELECT :fingerprint, :name, :version, :def, {now}, :code FROM r \
       ON CONFLICT (fingerprint) DO NOTHING), \
     s AS ( \
       INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
       SELECT r.id, 0, :role, 'running', 1, {now} FROM r WHERE :claim RETURNING started_at), \
     e AS ( \
       INSERT INTO events (run_id, seq, at, kind, data) \
       SELECT r.id, u.ord, {now}, u.e->>'kind', u.e->'data' \
       FROM r CROSS JOIN jsonb_array_elements(:events::jsonb) WITH ORDINALITY AS u(e, ord)), \
     a AS ( \
       INSERT INTO audit (at, principal, via, token_id, client, action, run_id, detail) \
       SELECT {now}, x.principal, x.via, x.token, x.client, x.action, r.id, x.detail \
       FROM r CROSS JOIN jsonb_to_recordset(:audit::jsonb) \
         AS x(principal text, via text, token text, client text, action text, detail jsonb)), \
     n AS (SELECT pg_notify(:channel, r.id::text) FROM r WHERE NOT :claim) \
     SELECT r.*, (SELECT started_at FROM s) AS step_started_at, \
       (SELECT count(*) FROM n) AS notified FROM r"
);

/// The fast path of [`ScriptHost::start_fresh`] on PostgreSQL.
pub(super) async fn start_fresh(
    store: &PgStore,
    new: &NewRun,
    def: &Value,
    req: Option<&ClaimRequest>,
) -> Result<Option<Started>> {
    let Some(fresh) = fresh_start(new, req) else {
        return Ok(None);
    };
    let q = start_query(new, def, req, &fresh);
    let row = store
        .tx(TxKind::Single, script!(|c| c.fetch_optional(q).await))
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let run = decode_run_with(&row, Some(new.crew.clone()))?;
    let claimed = match (fresh.role, req) {
        (Some(role), Some(req)) => Some(Claimed {
            fence: cairn_core::Fence::new(run.lease_epoch, req.owner.as_str()),
            at_cursor: Some(first_step(
                role,
                row.time("step_started_at", run.id, "the first step's start")?,
            )),
            run: run.clone(),
            took_over: false,
            first_run: true,
        }),
        _ => None,
    };
    // The run as submitted, before the claim in the same statement.
    let submitted = cairn_core::RunRecord {
        status: RunStatus::Queued,
        lease_epoch: LeaseEpoch(0),
        ..run
    };
    Ok(Some(Started {
        submitted: Submitted {
            run: submitted,
            created: true,
        },
        claimed,
    }))
}

/// The first step of a run, as a start inserts it.
fn first_step(role: cairn_core::Role, started_at: chrono::DateTime<chrono::Utc>) -> StepRecord {
    StepRecord {
        idx: StepIdx(0),
        role,
        status: StepStatus::Running,
        attempt: Attempt::FIRST,
        output: None,
        input_tokens: None,
        output_tokens: None,
        cost_usd: None,
        started_at,
        finished_at: None,
        error: None,
        takeovers: 0,
    }
}

/// [`START`] with the run's values bound.
fn start_query(new: &NewRun, def: &Value, req: Option<&ClaimRequest>, fresh: &FreshStart) -> Query {
    let events: Vec<Value> = fresh
        .events
        .iter()
        .map(|e| json!({"kind": e.kind.as_str(), "data": e.data}))
        .collect();
    let audit: Vec<Value> = fresh
        .audit
        .iter()
        .map(|a| {
            json!({"principal": a.principal, "via": a.via.as_str(), "token": a.token,
                   "client": a.client, "action": a.action, "detail": a.detail})
        })
        .collect();
    Query::sized(START, 24)
        .bind("claim", req.is_some())
        .bind("channel", RUNNABLE)
        .bind("id", fresh.id)
        .bind("name", new.crew.name.as_str())
        .bind("version", new.crew.version.as_str())
        .bind("fingerprint", fresh.fingerprint.as_str())
        .bind("input", &new.input)
        .bind("key", &new.idempotency_key)
        .bind("steps", new.crew.step_count())
        .bind("owner", req.map(|r| r.owner.as_str()))
        .bind("lease_secs", req.map_or(0.0, |r| r.lease.as_secs_f64()))
        .bind("n_events", fresh.events.len() as i64)
        .bind("priority", i64::from(new.priority.get()))
        .bind("head", new.priority.head_start_secs() as f64)
        .bind("tenant", None::<&str>)
        .bind("spacing", cairn_core::Tenant::SPACING_SECS)
        .bind("budget", new.budget.map(|b| json!(b)))
        .bind("trace", fresh.trace.map(|t| json!(t).to_string()))
        .bind("upgrade", new.upgrade.map(|u| u.as_str()))
        .bind("def", def)
        .bind("code", cairn_core::upgrade::needs_code(&new.crew))
        .bind("role", fresh.role.as_ref().map(|r| r.as_str()))
        .bind("events", Value::Array(events))
        .bind("audit", Value::Array(audit))
}
