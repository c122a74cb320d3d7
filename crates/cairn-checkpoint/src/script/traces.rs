//! Trace export cursors (`cairn_core::trace`): a sampled run gets one at
//! submit; the exporter reads the runs whose events went past their
//! cursor, sends their spans, and moves the cursor only if nobody moved it
//! meanwhile. Spans are built from stored events, so a process killed after
//! a commit loses none of them.

use async_trait::async_trait;
use cairn_core::RunId;

use crate::contract::TraceStore;
use crate::raw::nil_run;
use crate::sql::{query, Conn};
use crate::{Error, Result, TraceAdvance, TraceWork};

use super::boundary::{bounded, placed};
use super::rows::{events_in, fetch_run};
use super::{ScriptHost, TxKind};

/// Starts run `id`'s export cursor (its submit's transaction).
pub(super) async fn start_in(c: &mut Conn<'_>, id: RunId) -> Result<()> {
    c.execute(query("INSERT INTO trace_exports (run_id) VALUES (:run)").bind("run", id))
        .await?;
    Ok(())
}

/// Fork `id` of a traced run: its own trace, and a cursor if `sampled`.
pub(super) async fn trace_fork_in(c: &mut Conn<'_>, id: RunId, sampled: bool) -> Result<()> {
    let trace = cairn_core::TraceContext::root(id, sampled);
    c.execute(
        query("UPDATE runs SET trace = :trace WHERE id = :run")
            .bind("trace", serde_json::json!(trace).to_string())
            .bind("run", id),
    )
    .await?;
    if sampled {
        start_in(c, id).await?;
    }
    Ok(())
}

/// The trace of `parent`'s children from the parent's stored trace, if it
/// is traced: the parent's trace, under the parent run's span.
pub(super) fn of_children(
    parent: RunId,
    stored: Option<String>,
) -> Option<cairn_core::TraceContext> {
    stored
        .and_then(|t| serde_json::from_str::<cairn_core::TraceContext>(&t).ok())
        .map(|t| cairn_core::TraceContext {
            parent: Some(cairn_core::SpanId::of_run(parent)),
            ..t
        })
}

/// Starts the export cursors of a spawn's children (`{rows:children}`).
pub(super) async fn start_children_in(
    c: &mut Conn<'_>,
    children: &serde_json::Value,
) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO trace_exports (run_id) SELECT (j.value->>'id'){uuid} FROM {rows:children}",
        )
        .bind("children", children.clone()),
    )
    .await?;
    Ok(())
}

/// An ended run an operator sent on again: its export cursor is live
/// again (no row: an untraced run, nothing to do).
pub(super) async fn reopen_in(c: &mut Conn<'_>, id: RunId) -> Result<()> {
    c.execute(query("UPDATE trace_exports SET done = FALSE WHERE run_id = :run").bind("run", id))
        .await?;
    Ok(())
}

/// `TraceStore::trace_pending`: up to `limit` runs with events past their cursor.
pub(super) async fn pending_in(c: &mut Conn<'_>, limit: usize) -> Result<Vec<TraceWork>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT t.run_id AS id, t.seq, CASE WHEN t.root_exported THEN 1 ELSE 0 END AS root \
                 FROM trace_exports t JOIN runs r ON r.id = t.run_id \
                 WHERE NOT t.done AND r.event_seq > t.seen ORDER BY r.updated_at LIMIT :limit",
            )
            .bind("limit", i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await?;
    let mut work = Vec::with_capacity(rows.len());
    for row in rows {
        let id = RunId::from_uuid(
            row.opt_uuid("id", nil_run(), "trace_exports.run_id")?
                .ok_or_else(|| Error::Statement("a trace cursor without a run".into()))?,
        );
        let after = row.int("seq")?;
        let run = fetch_run(c, id, false).await?;
        let trace = run
            .trace
            .ok_or_else(|| Error::Statement(format!("run {id} has a trace cursor and no trace")))?;
        work.push(TraceWork {
            run,
            trace,
            after,
            root_exported: row.int("root")? == 1,
            events: events_in(c, id, after).await?,
        });
    }
    Ok(work)
}

/// `TraceStore::trace_advance`: moves a run's cursor unless another exporter
/// moved it first (then `false`). The cursor is done once the run has
/// ended and its last event is exported.
pub(super) async fn advance_in(c: &mut Conn<'_>, a: &TraceAdvance) -> Result<bool> {
    let moved = c
        .execute(
            query(
                "UPDATE trace_exports SET seq = :to, seen = :seen, root_exported = :root, \
                 done = (SELECT r.status IN ('succeeded','failed','cancelled') AND r.event_seq = :to \
                         FROM runs r WHERE r.id = :run) \
                 WHERE run_id = :run AND seq = :from",
            )
            .bind("run", a.run)
            .bind("from", a.from)
            .bind("to", a.to)
            .bind("seen", a.seen)
            .bind("root", a.root_exported),
        )
        .await?;
    Ok(moved == 1)
}

/// `TraceStore::trace_pending` on any backend.
pub(super) async fn pending<H: ScriptHost>(host: &H, limit: usize) -> Result<Vec<TraceWork>> {
    let read = host.tx(TxKind::Read, script!(|c| pending_in(c, limit).await));
    placed(host.target(), None, read).await
}

/// `TraceStore::trace_advance` on any backend.
pub(super) async fn advance<H: ScriptHost>(host: &H, a: &TraceAdvance) -> Result<bool> {
    let (a, id) = (a.clone(), a.run);
    let write = host.tx(TxKind::Single, script!(|c| advance_in(c, &a).await));
    bounded("trace_advance", host.target(), Some(id), write).await
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> TraceStore for H {
    async fn trace_pending(&self, limit: usize) -> Result<Vec<crate::TraceWork>> {
        pending(self, limit).await
    }

    async fn trace_advance(&self, advance: &crate::TraceAdvance) -> Result<bool> {
        self::advance(self, advance).await
    }
}
