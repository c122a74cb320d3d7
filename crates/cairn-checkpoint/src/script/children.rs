//! Child runs: the spawn a `children` step commits (its children and its
//! join, in the step commit's transaction), the settling of a child's end
//! against its parent's join (in the transaction of that end, whichever
//! path ends it), the wake of the parent when the join is decided, the
//! cancel of what is left, and the cascade of a parent's end to its
//! unfinished children. What the counts mean is `JoinCounts::state`
//! (cairn-core), pure.
//!
//! Cost: a child's end is a bounded number of statements (its flag, its
//! join's counters, and on a decision the parent's row), so N children
//! settling cost O(N) in all, never a scan of the siblings per child.

use cairn_core::{
    Actor, Attempt, ChildOutcome, CrewDef, EventKind, Fingerprint, JoinCounts, JoinRule, JoinState,
    Joined, KeyPause, NewEvent, Priority, RunId, RunStatus, StepIdx, Usage,
};
use serde_json::json;

use crate::sql::{query, Conn, Row};
use crate::{Action, Error, NewChild, Result, SpawnCommit, StepCommit, StepTransition};

use super::runs::append_events;

/// What a step commit writes beyond its rows, in its transaction
/// (`StepCommit::follows_up`).
pub(crate) async fn follow_up_in(c: &mut Conn<'_>, commit: &StepCommit) -> Result<()> {
    if let StepTransition::Spawn(spawn) = &commit.transition {
        spawn_in(c, commit, spawn).await?;
    }
    if commit.rows().finishes() {
        ended_in(c, commit.run_id).await?;
    }
    if let (true, StepTransition::Interrupted { error }) = (commit.child, &commit.transition) {
        interrupted_in(c, commit.run_id, error).await?;
    }
    if let StepTransition::Deferred {
        error,
        after,
        key,
        pause,
    } = &commit.transition
    {
        let pause = pause.then(|| KeyPause {
            key: key.clone(),
            wait: *after,
            reason: error.message.clone(),
            by: KeyPause::PROVIDER.into(),
        });
        super::pauses::deferred_in(c, commit.run_id, key, pause).await?;
    }
    Ok(())
}

/// The children and the join of a spawn. The parent's row was fenced and
/// set `waiting` by the commit's rows just before, so a stale or
/// cancelled parent never gets here.
async fn spawn_in(c: &mut Conn<'_>, commit: &StepCommit, spawn: &SpawnCommit) -> Result<()> {
    let (run, idx, attempt) = (commit.run_id, commit.idx, commit.attempt);
    let crews = remember_crews_in(c, spawn).await?;
    let fingerprint = |child: &NewChild| -> String {
        let crew = child.crew.as_deref().unwrap_or(&spawn.crew);
        crews
            .iter()
            .find(|(known, _)| same(known, crew))
            .map_or(String::new(), |(_, f)| f.as_str().to_owned())
    };
    // Children inherit their parent's priority and tenant (in the insert;
    // a spawn's children share their parent's claim-order slot, not
    // spaced as its tenant's submits are), its trace (under the
    // parent run's span) and what is left of its wall time (unless a
    // child's crew sets its own).
    let (priority, trace, age) = match c
        .fetch_optional(
            query("SELECT priority, trace, {age_secs} AS age FROM runs WHERE id = :run")
                .bind("run", run),
        )
        .await?
    {
        Some(row) => (
            Priority::new(row.int("priority")?).unwrap_or_default(),
            super::traces::of_children(run, row.opt_text("trace")?),
            u64::try_from(row.int("age")?).unwrap_or(0),
        ),
        None => (Priority::default(), None, 0),
    };
    let reused = super::reuse::find_in(c, commit, spawn, &fingerprint).await?;
    c.execute(
        query(
            "INSERT INTO joins (run_id, step_idx, attempt, rule, quorum, on_parent_close, total, \
             settled, ok, status, created_at) VALUES (:run, :idx, :attempt, :rule, :quorum, \
             :close, :total, :reused, :reused, 'open', {now})",
        )
        .bind("run", run)
        .bind("idx", idx.get())
        .bind("attempt", attempt.get())
        .bind("rule", spawn.rule.as_str())
        .bind("quorum", spawn.quorum)
        .bind("close", spawn.on_parent_close.as_str())
        .bind("total", spawn.children.len() as i64)
        .bind("reused", reused.len() as i64),
    )
    .await?;
    super::reuse::keep_in(c, commit, spawn, &reused, priority, &fingerprint).await?;
    let left = spawn.wall_time.map(|limit| limit.saturating_sub(age));
    // Every child in one statement, and their first events in another,
    // from one JSON array: a round trip each, however many children.
    // The children to start: those not reused, each with its rank among
    // them (the first `concurrency` are claimable at once).
    let rows: Vec<serde_json::Value> = spawn
        .children
        .iter()
        .enumerate()
        .filter(|(_, child)| !reused.contains_key(&child.key))
        .enumerate()
        .map(|(rank, (ord, child))| {
            let crew = child.crew.as_deref().unwrap_or(&spawn.crew);
            let fingerprint = fingerprint(child);
            let mut row = json!({"id": child.id, "key": child.key, "ord": ord, "rank": rank,
                   "input": child.input, "crew_name": crew.name,
                   "crew_version": crew.version, "fingerprint": fingerprint,
                   "steps": crew.step_count(),
                   "event": {"crew": crew.name, "fingerprint": fingerprint,
                             "parent": {"run_id": run, "idx": idx, "attempt": attempt,
                                        "key": child.key}}});
            let own = crew.budget.is_some_and(|b| b.wall_time.is_some());
            if let (Some(left), false) = (left, own) {
                row["budget"] = json!({"wall_time": left});
            }
            row
        })
        .collect();
    let rows = serde_json::Value::Array(rows);
    c.execute(
        query(
            "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
             status, cursor, step_count, lease_epoch, event_seq, created_at, updated_at, \
             parent_run_id, parent_step_idx, parent_attempt, child_key, child_ord, depth, held, \
             priority, claim_at, trace, budget, tenant) \
             SELECT (j.value->>'id'){uuid}, j.value->>'crew_name', j.value->>'crew_version', \
             j.value->>'fingerprint', 'null', j.value->'input', 'queued', 0, \
             CAST(j.value->>'steps' AS INTEGER), 0, 1, {now}, {now}, :parent, :idx, \
             :attempt, j.value->>'key', CAST(j.value->>'ord' AS INTEGER), :depth, \
             CAST(j.value->>'rank' AS INTEGER) >= :at_once, :priority, {ahead:head}, :trace, \
             j.value->'budget', (SELECT p.tenant FROM runs p WHERE p.id = :parent) \
             FROM {rows:children}",
        )
        .bind("trace", trace.map(|t| serde_json::json!(t).to_string()))
        .bind("priority", i64::from(priority.get()))
        .bind("head", priority.head_start_secs() as f64)
        .bind("parent", run)
        .bind("idx", idx.get())
        .bind("attempt", attempt.get())
        .bind("depth", spawn.depth)
        .bind("at_once", spawn.concurrency.map_or(i64::MAX, i64::from))
        .bind("children", rows.clone()),
    )
    .await?;
    c.execute(
        query(
            "INSERT INTO events (run_id, seq, at, kind, data) \
             SELECT (j.value->>'id'){uuid}, 1, {now}, :kind, j.value->'event' \
             FROM {rows:children}",
        )
        .bind("kind", EventKind::RunSubmitted.as_str())
        .bind("children", rows.clone()),
    )
    .await?;
    if trace.is_some_and(|t| t.sampled) {
        super::traces::start_children_in(c, &rows).await?;
    }
    if let Some(first) = spawn.children.iter().find(|c| !reused.contains_key(&c.key)) {
        c.notify_runnable(first.id).await?;
    }
    if let Some(by) = reused.values().next().map(|kept| kept.id()) {
        // Reused children are settled already: they may decide the join.
        let counts = JoinCounts {
            rule: spawn.rule,
            quorum: spawn.quorum,
            total: spawn.children.len() as u32,
            settled: reused.len() as u32,
            ok: reused.len() as u32,
        };
        let parent = JoinRef { run, idx, attempt };
        match counts.state() {
            JoinState::Open => {}
            state => decide_in(c, &parent, counts, state, by).await?,
        }
    }
    Ok(())
}

/// Two crews are one if they are the same value (by address first: every
/// child of a `children` step has the spawn's own).
fn same(a: &CrewDef, b: &CrewDef) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// Each crew a spawn starts children on, stored once with its
/// fingerprint (a `delegate` spawn may start several); a thousand
/// children of one crew compare no definitions.
async fn remember_crews_in<'s>(
    c: &mut Conn<'_>,
    spawn: &'s SpawnCommit,
) -> Result<Vec<(&'s CrewDef, Fingerprint)>> {
    let named = spawn.children.iter().filter_map(|c| c.crew.as_deref());
    let mut crews: Vec<(&CrewDef, Fingerprint)> = Vec::new();
    for crew in std::iter::once(&spawn.crew).chain(named) {
        if crews.iter().any(|(known, _)| same(known, crew)) {
            continue;
        }
        let fingerprint = crew.fingerprint();
        super::crews::remember_in(c, crew, &fingerprint, &crew.to_json()).await?;
        crews.push((crew, fingerprint));
    }
    Ok(crews)
}

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
async fn interrupted_in(c: &mut Conn<'_>, run: RunId, error: &cairn_core::ErrorInfo) -> Result<()> {
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
    let event = NewEvent::new(
        EventKind::ChildInterrupted,
        json!({"child": run, "key": row.text("child_key")?,
               "idx": row.opt_int("parent_step_idx")?, "kind": error.kind,
               "message": error.message}),
    );
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
    let mut data = json!({"child": child, "key": row.text("child_key")?,
                          "idx": parent.idx, "status": row.text("status")?});
    if let Some(e) = error {
        (data["kind"], data["message"]) = (json!(e.kind), json!(e.message));
    }
    let event = NewEvent::new(EventKind::ChildEnded, data);
    append_events(c, parent.run, &[event]).await
}

/// A parent's step and attempt, as a child's row names them.
struct JoinRef {
    run: RunId,
    idx: StepIdx,
    attempt: Attempt,
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

fn counts_of(parent: RunId, row: &Row) -> Result<JoinCounts> {
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
async fn decide_in(
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
    let event = NewEvent::new(
        EventKind::ChildrenJoined,
        json!({"idx": parent.idx, "attempt": parent.attempt, "met": met,
               "rule": counts.rule, "settled": counts.settled, "ok": counts.ok,
               "total": counts.total, "by": by}),
    );
    append_events(c, parent.run, &[event]).await?;
    if woken == 1 {
        c.notify_runnable(parent.run).await?;
    }
    // The children still unfinished are cancelled by the parent when it
    // runs again (`Store::close_join`), each in a transaction of its own:
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
        let cancelled = Box::pin(super::operator::act_in(
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

/// `Store::joined`: the decided join of a step's attempt, with every
/// child's outcome in listing order; `None` while it is open or if the
/// attempt spawned nothing.
pub(super) async fn joined_in(
    c: &mut Conn<'_>,
    run: RunId,
    idx: StepIdx,
    attempt: Attempt,
) -> Result<Option<Joined>> {
    let Some(join) = c
        .fetch_optional(
            query(
                "SELECT rule, status FROM joins WHERE run_id = :run AND step_idx = :idx \
                 AND attempt = :attempt",
            )
            .bind("run", run)
            .bind("idx", idx.get())
            .bind("attempt", attempt.get()),
        )
        .await?
    else {
        return Ok(None);
    };
    let status = join.text("status")?;
    if status == "open" {
        return Ok(None);
    }
    let rule = join.text("rule")?;
    let rule = JoinRule::parse(&rule)
        .ok_or_else(|| cairn_core::Corruption::new(run, format!("join rule `{rule}`")))?;
    let children = children_in(c, run, Some((idx, attempt))).await?;
    Ok(Some(Joined {
        rule,
        met: status == "met",
        children,
    }))
}

/// The children of a run (of one step's attempt, or all), in listing
/// order, as their parent sees them.
pub(super) async fn children_in(
    c: &mut Conn<'_>,
    run: RunId,
    of: Option<(StepIdx, Attempt)>,
) -> Result<Vec<ChildOutcome>> {
    let (idx, attempt) = of.map_or((None, None), |(i, a)| (Some(i.get()), Some(a.get())));
    let rows = c
        .fetch_all(
            query(
                "SELECT r.id, r.child_key, r.status, r.error, r.parent_step_idx, \
                 r.created_at, r.finished_at, CASE WHEN r.held THEN 1 ELSE 0 END AS held, \
                 (SELECT s.output FROM steps s WHERE s.run_id = r.id \
                   AND s.idx = r.step_count - 1 AND s.status = 'succeeded') AS output, \
                 (SELECT CAST(COALESCE(SUM(s.input_tokens), 0) AS BIGINT) FROM steps s \
                   WHERE s.run_id = r.id) AS input_tokens, \
                 (SELECT CAST(COALESCE(SUM(s.output_tokens), 0) AS BIGINT) FROM steps s \
                   WHERE s.run_id = r.id) AS output_tokens, \
                 (SELECT CAST(COALESCE(SUM(s.cost_nanos), 0) AS BIGINT) FROM steps s \
                   WHERE s.run_id = r.id) AS cost_nanos \
                 FROM runs r WHERE r.parent_run_id = :run AND r.child_key IS NOT NULL \
                 AND (:idx IS NULL OR (r.parent_step_idx = :idx AND r.parent_attempt = :attempt)) \
                 ORDER BY r.parent_step_idx, r.parent_attempt, r.child_ord",
            )
            .bind("run", run)
            .bind("idx", idx)
            .bind("attempt", attempt),
        )
        .await?;
    rows.iter().map(|row| child_outcome(run, row)).collect()
}

fn child_outcome(parent: RunId, row: &Row) -> Result<ChildOutcome> {
    let id = row
        .opt_uuid("id", parent, "a child's id")?
        .map(RunId::from_uuid)
        .ok_or_else(|| cairn_core::Corruption::new(parent, "a child has no id"))?;
    let status: RunStatus = row
        .text("status")?
        .parse()
        .map_err(|e: String| cairn_core::Corruption::new(id, format!("run status: {e}")))?;
    let usage = Usage {
        input_tokens: u64::try_from(row.int("input_tokens")?).unwrap_or(0),
        output_tokens: u64::try_from(row.int("output_tokens")?).unwrap_or(0),
        cost_usd: cairn_core::Usd(u64::try_from(row.int("cost_nanos")?).unwrap_or(0)),
    };
    let error = row
        .opt_json("error", id, "run error")?
        .and_then(|e| serde_json::from_value(e).ok());
    Ok(ChildOutcome {
        key: row.text("child_key")?,
        run_id: id,
        status,
        output: row.opt_json("output", id, "output")?,
        error,
        tokens: usage.input_tokens + usage.output_tokens,
        usage,
        held: row.int("held")? != 0,
        step: u32::try_from(row.opt_int("parent_step_idx")?.unwrap_or(-1))
            .ok()
            .map(StepIdx),
        created_at: row.opt_time("created_at", id, "a child's start")?,
        finished_at: row.opt_time("finished_at", id, "a child's end")?,
    })
}
