//! Child runs: the spawn a `children` step commits (its children and its
//! join, in the step commit's transaction), what else a step commit writes
//! (`follow_up_in`), and the reads of a join and of a run's children. A
//! child's end settled against its parent's join, the parent's wake and
//! the cancels that follow are `ends.rs`. What the counts mean is
//! `JoinCounts::state` (cairn-core), pure.

use async_trait::async_trait;
use cairn_core::event::payload::{RunSubmitted, SubmittedChild};
use cairn_core::EventData;
use cairn_core::{
    Actor, Attempt, ChildOutcome, CrewDef, Fingerprint, JoinCounts, JoinRule, JoinState, Joined,
    KeyPause, Priority, RunId, RunStatus, StepIdx, Usage,
};
use serde_json::json;

use crate::contract::{ChildStore, OperatorStore};
use crate::sql::{query, Conn, Row};
use crate::{Action, Error, NewChild, Result, SpawnCommit, StepCommit, StepTransition};

use super::boundary::placed;
use super::ends::{decide_in, JoinRef};
use super::{ScriptHost, TxKind};

/// What a step commit writes beyond its rows, in its transaction
/// (`StepCommit::follows_up`).
pub(crate) async fn follow_up_in(c: &mut Conn<'_>, commit: &StepCommit) -> Result<()> {
    if let StepTransition::Spawn(spawn) = &commit.transition {
        spawn_in(c, commit, spawn).await?;
    }
    if commit.rows().finishes() {
        super::ends::ended_in(c, commit.run_id).await?;
    }
    if let (true, StepTransition::Interrupted { error }) = (commit.child, &commit.transition) {
        super::ends::interrupted_in(c, commit.run_id, error).await?;
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
    super::signals::follow_up_in(c, commit).await?;
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
            let event = EventData::RunSubmitted(RunSubmitted {
                crew: crew.name.clone(),
                fingerprint: Fingerprint::from_stored(fingerprint.clone()),
                idempotency_key: None,
                thread_id: None,
                parent: Some(SubmittedChild {
                    run_id: run,
                    idx,
                    attempt,
                    key: child.key.clone(),
                }),
                copied_from: None,
                submitted_by: None,
            });
            let mut row = json!({"id": child.id, "key": child.key, "ord": ord, "rank": rank,
                   "input": child.input, "crew_name": crew.name,
                   "crew_version": crew.version, "fingerprint": fingerprint,
                   "steps": crew.step_count(), "event": event.to_value()});
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
    super::rows::submitted_in(c, &rows).await?;
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

/// `ChildStore::joined`: the decided join of a step's attempt, with every
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

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> ChildStore for H {
    async fn joined(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
    ) -> Result<Option<cairn_core::Joined>> {
        let read = self.tx(
            TxKind::Read,
            script!(|c| joined_in(c, id, idx, attempt).await),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn close_join(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
        actor: &Actor,
    ) -> Result<()> {
        let read = self.tx(
            TxKind::Read,
            script!(|c| children_in(c, id, Some((idx, attempt))).await),
        );
        let children = placed(self.target(), Some(id), read).await?;
        for child in children {
            if !child.status.is_live() {
                continue;
            }
            match self.act(child.run_id, Action::Cancel, actor).await {
                Ok(_) | Err(Error::WrongState { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn children(&self, id: RunId) -> Result<Vec<cairn_core::ChildOutcome>> {
        let read = self.tx(TxKind::Read, script!(|c| children_in(c, id, None).await));
        placed(self.target(), Some(id), read).await
    }
}
