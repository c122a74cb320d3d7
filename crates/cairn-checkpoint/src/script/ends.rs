//! A run's end and what follows from it, in the transaction that ends it:
//! an operator's action (`act_in`: retry, continue, cancel), a child's end
//! counted once against its parent's join (`ended_in`), the parent woken
//! when that decides the join or the next held sibling released, the
//! leftovers of a decided join and the children of an ended parent
//! cancelled, and a child stopped `interrupted` recorded on its parent.
//! One module because these call each other: a cancel ends a run, an end
//! cancels children, their ends settle joins. Spawning children and
//! reading joins is `children.rs`; the other operator actions are
//! `operator.rs`.
//!
//! Cost: a child's end is a bounded number of statements (its flag, its
//! join's counters, and on a decision the parent's row), so N children
//! settling cost O(N) in all, never a scan of the siblings per child.

use cairn_core::event::payload::{ChildEnded, ChildInterrupted, ChildrenJoined};
use cairn_core::{
    Actor, Attempt, Corruption, EventData, JoinCounts, JoinRule, JoinState, NewEvent, RunId,
    RunRecord, RunStatus, StepIdx,
};

use crate::plan::plan_action;
use crate::sql::{query, Conn, Row};
use crate::{Action, Error, Result};

use super::rows::{append_events, fetch_run};

/// A run ended (succeeded, failed or cancelled), in the transaction that
/// ended it: if it is a child, its parent's join counts it; its own
/// unfinished children whose join says so are cancelled.
pub(crate) async fn ended_in(c: &mut Conn<'_>, run: RunId) -> Result<()> {
    settle_in(c, run).await?;
    cascade_in(c, run).await
}

/// A child stopped `interrupted` (its budget, its tree's, a turn limit):
/// its parent, which waits for it, records why (`child_interrupted`), so
/// whoever follows the parent learns that an operator must continue it.
pub(super) async fn interrupted_in(
    c: &mut Conn<'_>,
    run: RunId,
    error: &cairn_core::ErrorInfo,
) -> Result<()> {
    let Some(row) = c
        .fetch_optional(
            query(
                "SELECT parent_run_id, parent_step_idx, child_key FROM runs \
                 WHERE id = :run AND child_key IS NOT NULL",
            )
            .bind("run", run),
        )
        .await?
    else {
        return Ok(());
    };
    let Some(parent) = row.opt_uuid("parent_run_id", run, "a child's parent")? else {
        return Ok(());
    };
    let idx = row.opt_int("parent_step_idx")?;
    let event = NewEvent::typed(EventData::ChildInterrupted(ChildInterrupted {
        child: run,
        key: row.text("child_key")?,
        idx: idx.and_then(|i| u32::try_from(i).ok()).map(StepIdx),
        kind: error.kind,
        message: error.message.clone(),
    }));
    append_events(c, RunId::from_uuid(parent), &[event]).await
}

/// Counts a child's end against its parent's join, once; wakes the parent
/// if that decides the join, or releases the next held sibling if not.
async fn settle_in(c: &mut Conn<'_>, run: RunId) -> Result<()> {
    let Some(child) = c
        .fetch_optional(
            query(
                "UPDATE runs SET join_settled = TRUE WHERE id = :run AND child_key IS NOT NULL \
                 AND NOT join_settled AND status IN ('succeeded', 'failed', 'cancelled') \
                 RETURNING parent_run_id, parent_step_idx, parent_attempt, status, child_key, \
                 error",
            )
            .bind("run", run),
        )
        .await?
    else {
        return Ok(());
    };
    let parent = JoinRef::of(run, &child)?;
    let ok = child.text("status")? == "succeeded";
    let Some(row) = c
        .fetch_optional(
            query(
                "UPDATE joins SET settled = settled + 1, ok = ok + :ok \
                 WHERE run_id = :run AND step_idx = :idx AND attempt = :attempt \
                 RETURNING rule, quorum, total, settled, ok, status",
            )
            .bind("ok", i64::from(ok))
            .bind("run", parent.run)
            .bind("idx", parent.idx.get())
            .bind("attempt", parent.attempt.get()),
        )
        .await?
    else {
        // The parent is gone (retention removed it): nothing to wake.
        return Ok(());
    };
    if row.text("status")? != "open" {
        return Ok(());
    }
    ended_event_in(c, &parent, run, &child).await?;
    let counts = counts_of(parent.run, &row)?;
    match counts.state() {
        JoinState::Open => release_next(c, &parent).await,
        state => decide_in(c, &parent, counts, state, run).await,
    }
}

/// `child_ended` on the parent whose open join counted a child's end:
/// whoever follows the parent (`runs watch`, `cairn run`) sees each child
/// end while the parent waits.
async fn ended_event_in(c: &mut Conn<'_>, parent: &JoinRef, child: RunId, row: &Row) -> Result<()> {
    let error: Option<cairn_core::ErrorInfo> = row
        .opt_json("error", child, "run error")?
        .and_then(|e| serde_json::from_value(e).ok());
    let status: RunStatus = row
        .text("status")?
        .parse()
        .map_err(|e: String| Corruption::new(child, e))?;
    let event = NewEvent::typed(EventData::ChildEnded(ChildEnded {
        child,
        key: row.text("child_key")?,
        idx: parent.idx,
        status,
        kind: error.as_ref().map(|e| e.kind),
        message: error.map(|e| e.message),
    }));
    append_events(c, parent.run, &[event]).await
}

/// A parent's step and attempt, as a child's row names them.
pub(super) struct JoinRef {
    pub(super) run: RunId,
    pub(super) idx: StepIdx,
    pub(super) attempt: Attempt,
}

impl JoinRef {
    fn of(child: RunId, row: &Row) -> Result<JoinRef> {
        let number = |col: &str| -> Result<u32> {
            let n = row.int(col)?;
            u32::try_from(n)
                .map_err(|_| cairn_core::Corruption::new(child, format!("{col} is {n}")).into())
        };
        let parent = row
            .opt_uuid("parent_run_id", child, "parent run id")?
            .ok_or_else(|| cairn_core::Corruption::new(child, "a child run has no parent"))?;
        Ok(JoinRef {
            run: RunId::from_uuid(parent),
            idx: StepIdx(number("parent_step_idx")?),
            attempt: Attempt(number("parent_attempt")?),
        })
    }
}

pub(super) fn counts_of(parent: RunId, row: &Row) -> Result<JoinCounts> {
    let rule = row.text("rule")?;
    let n = |col: &str| -> Result<u32> { Ok(u32::try_from(row.int(col)?).unwrap_or(0)) };
    Ok(JoinCounts {
        rule: JoinRule::parse(&rule).ok_or_else(|| {
            cairn_core::Corruption::new(parent, format!("join rule `{rule}` is unknown"))
        })?,
        quorum: n("quorum")?,
        total: n("total")?,
        settled: n("settled")?,
        ok: n("ok")?,
    })
}

/// The next held child of the join (in listing order) becomes claimable;
/// one locked by another transaction (being cancelled) is passed over.
async fn release_next(c: &mut Conn<'_>, parent: &JoinRef) -> Result<()> {
    let released = c
        .fetch_optional(
            query(
                "UPDATE runs SET held = FALSE WHERE id = (SELECT id FROM runs \
                 WHERE parent_run_id = :run AND parent_step_idx = :idx \
                 AND parent_attempt = :attempt AND child_key IS NOT NULL AND held \
                 AND status = 'queued' ORDER BY child_ord LIMIT 1 {skip_locked}) RETURNING id",
            )
            .bind("run", parent.run)
            .bind("idx", parent.idx.get())
            .bind("attempt", parent.attempt.get()),
        )
        .await?;
    if let Some(row) = released {
        let id = row
            .opt_uuid("id", parent.run, "a child's id")?
            .map(RunId::from_uuid);
        if let Some(id) = id {
            c.notify_runnable(id).await?;
        }
    }
    Ok(())
}

/// The join is decided: recorded once, the parent queued (if it still
/// waits at that step), and the children still unfinished cancelled.
pub(super) async fn decide_in(
    c: &mut Conn<'_>,
    parent: &JoinRef,
    counts: JoinCounts,
    state: JoinState,
    by: RunId,
) -> Result<()> {
    let met = state == JoinState::Met;
    c.execute(
        query(
            "UPDATE joins SET status = :status, decided_at = {now} \
             WHERE run_id = :run AND step_idx = :idx AND attempt = :attempt AND status = 'open'",
        )
        .bind("status", if met { "met" } else { "failed" })
        .bind("run", parent.run)
        .bind("idx", parent.idx.get())
        .bind("attempt", parent.attempt.get()),
    )
    .await?;
    let woken = c
        .execute(
            query(
                "UPDATE runs SET status = 'queued', updated_at = {now} WHERE id = :run \
                 AND status = 'waiting' AND cursor = :idx AND EXISTS (SELECT 1 FROM steps \
                 WHERE run_id = :run AND idx = :idx AND attempt = :attempt \
                 AND status = 'waiting')",
            )
            .bind("run", parent.run)
            .bind("idx", parent.idx.get())
            .bind("attempt", parent.attempt.get()),
        )
        .await?;
    let event = NewEvent::typed(EventData::ChildrenJoined(ChildrenJoined {
        idx: parent.idx,
        attempt: parent.attempt,
        met,
        rule: counts.rule,
        settled: counts.settled,
        ok: counts.ok,
        total: counts.total,
        by,
    }));
    append_events(c, parent.run, &[event]).await?;
    if woken == 1 {
        c.notify_runnable(parent.run).await?;
    }
    // The children still unfinished are cancelled by the parent when it
    // runs again (`ChildStore::close_join`), each in a transaction of its own:
    // cancelling them here would lock sibling rows while holding the
    // join's, against a sibling's own commit that holds its row and waits
    // for the join's (a deadlock on PostgreSQL).
    Ok(())
}

/// Cancels the unfinished children of one join that says
/// `on_parent_close = "cancel"` (the parent's end, in its transaction):
/// queued, held, waiting or interrupted at once, running by a cancel
/// request their holder honours. Every child row is locked first, in id
/// order, before any join row, the order a child's own commit keeps too.
async fn cancel_children_in(c: &mut Conn<'_>, parent: &JoinRef) -> Result<()> {
    let rows = c
        .fetch_all(
            query(
                "SELECT r.id FROM runs r JOIN joins j ON j.run_id = r.parent_run_id \
                 AND j.step_idx = r.parent_step_idx AND j.attempt = r.parent_attempt \
                 WHERE r.parent_run_id = :run AND r.parent_step_idx = :idx \
                 AND r.parent_attempt = :attempt AND r.child_key IS NOT NULL \
                 AND r.status IN ('queued', 'running', 'waiting', 'interrupted') \
                 AND r.cancel_requested_at IS NULL AND j.on_parent_close = 'cancel' \
                 ORDER BY r.id {for_update}",
            )
            .bind("run", parent.run)
            .bind("idx", parent.idx.get())
            .bind("attempt", parent.attempt.get()),
        )
        .await?;
    let actor = Actor::new("cairn").because(format!("parent run {} closed the join", parent.run));
    for row in rows {
        let Some(id) = row.opt_uuid("id", parent.run, "a child's id")? else {
            continue;
        };
        // Boxed: a child's cancel may cascade to its own children.
        let cancelled = Box::pin(super::ends::act_in(
            c,
            RunId::from_uuid(id),
            Action::Cancel,
            &actor,
        ))
        .await;
        match cancelled {
            Ok(_) | Err(Error::WrongState { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A run ended: the unfinished children of each of its joins that say
/// `on_parent_close = "cancel"` are cancelled (a decided join's leftovers
/// were already).
async fn cascade_in(c: &mut Conn<'_>, run: RunId) -> Result<()> {
    let joins = c
        .fetch_all(
            query(
                "SELECT step_idx, attempt FROM joins WHERE run_id = :run \
                 AND on_parent_close = 'cancel' AND status = 'open'",
            )
            .bind("run", run),
        )
        .await?;
    for row in joins {
        let parent = JoinRef {
            run,
            idx: StepIdx(u32::try_from(row.int("step_idx")?).unwrap_or(0)),
            attempt: Attempt(u32::try_from(row.int("attempt")?).unwrap_or(0)),
        };
        cancel_children_in(c, &parent).await?;
    }
    Ok(())
}

/// Locks a run's unfinished descendants (its children, theirs, …), in id
/// order, before a cancel locks the run itself: a descendant's own commit
/// locks its row, then its parent's join, then (to wake it) its parent, so
/// a cancel that held the parent first and then waited for a child could
/// deadlock with it on PostgreSQL. SQLite's write lock already excludes
/// every other writer.
pub(super) async fn lock_descendants(c: &mut Conn<'_>, run: RunId) -> Result<()> {
    if c.dialect() == crate::sql::Dialect::Sqlite {
        return Ok(());
    }
    c.fetch_all(
        query(
            "WITH RECURSIVE sub(id) AS (SELECT id FROM runs WHERE parent_run_id = :run \
               AND child_key IS NOT NULL \
             UNION SELECT r.id FROM runs r JOIN sub ON r.parent_run_id = sub.id \
               AND r.child_key IS NOT NULL) \
             SELECT id FROM runs WHERE id IN (SELECT id FROM sub) \
             AND status IN ('queued', 'running', 'waiting', 'interrupted') \
             ORDER BY id {for_update}",
        )
        .bind("run", run),
    )
    .await?;
    Ok(())
}

/// An operator action inside the caller's transaction (see `OperatorStore::act`).
pub(super) async fn act_in(
    c: &mut Conn<'_>,
    id: RunId,
    action: Action,
    actor: &Actor,
) -> Result<RunRecord> {
    if action == Action::Cancel {
        super::ends::lock_descendants(c, id).await?;
    }
    if action == Action::Continue && fetch_run(c, id, false).await?.status == RunStatus::Waiting {
        return continue_tree_in(c, id, actor).await;
    }
    let run = fetch_run(c, id, true).await?;
    let plan = plan_action(&run, action, actor)?;
    c.execute(
        query(
            "UPDATE runs SET status = :to, \
             error = CASE WHEN :clear THEN NULL ELSE error END, \
             not_before = CASE WHEN :clear THEN NULL ELSE not_before END, \
             finished_at = CASE WHEN :finish THEN {now} ELSE finished_at END, \
             cancel_requested_at = CASE WHEN :cancel THEN {now} ELSE cancel_requested_at END, \
             lease_owner = CASE WHEN :to = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN :to = 'running' THEN lease_expires_at END, \
             updated_at = {now} WHERE id = :id",
        )
        .bind("id", id)
        .bind("to", plan.to.as_str())
        .bind("clear", plan.clears_error())
        .bind("finish", plan.finishes())
        .bind("cancel", plan.request_cancel),
    )
    .await?;
    if plan.finishes() {
        // A step paused at the cursor ends with its run.
        c.execute(
            query(
                "UPDATE steps SET status = 'cancelled', finished_at = {now} \
                 WHERE run_id = :run AND idx = :idx AND status IN ('waiting', 'interrupted')",
            )
            .bind("run", id)
            .bind("idx", run.cursor.get()),
        )
        .await?;
        c.execute(
            query("UPDATE waits SET status = 'cancelled' WHERE run_id = :run AND status = 'open'")
                .bind("run", id),
        )
        .await?;
        super::ends::ended_in(c, id).await?;
    }
    append_events(c, id, std::slice::from_ref(&plan.event)).await?;
    if !run.status.is_live() && !plan.finishes() {
        // An ended run sent on again: its spans are exported again.
        super::traces::reopen_in(c, id).await?;
    }
    if plan.to == RunStatus::Queued {
        c.notify_runnable(id).await?;
    }
    fetch_run(c, id, false).await
}

/// The interrupted descendants of run `:run`, oldest id first.
pub(super) const STOPPED: &str = concat!(
    super::journal::tree_cte!(),
    "SELECT id FROM runs WHERE id IN (SELECT id FROM tree) AND id <> :run \
     AND status = 'interrupted' ORDER BY id"
);

/// A continue of a run waiting for its children: each interrupted
/// descendant (a child stopped at the tree's budget, say) is continued,
/// descendants locked first as a cancel locks them; with none, refused
/// as a continue of a waiting run always was.
async fn continue_tree_in(c: &mut Conn<'_>, id: RunId, actor: &Actor) -> Result<RunRecord> {
    super::ends::lock_descendants(c, id).await?;
    let run = fetch_run(c, id, true).await?;
    if run.status != RunStatus::Waiting {
        // It moved on before the lock: an ordinary continue.
        return Box::pin(act_in(c, id, Action::Continue, actor)).await;
    }
    let stopped = c.fetch_all(query(STOPPED).bind("run", id)).await?;
    if stopped.is_empty() {
        // Refused, as a continue of a waiting run is.
        plan_action(&run, Action::Continue, actor)?;
    }
    for row in stopped {
        if let Some(child) = row.opt_uuid("id", id, "a descendant's id")? {
            // Boxed: a continue is an action like any other.
            Box::pin(act_in(c, RunId::from_uuid(child), Action::Continue, actor)).await?;
        }
    }
    fetch_run(c, id, false).await
}
