//! The children a spawn keeps instead of starting, in the spawn's
//! transaction: at an operator's retry of a `children` step, the children
//! that succeeded at its earlier attempts (moved to this attempt's join);
//! in a fork that runs such a step again, the source run's children of
//! that step that succeeded with the same key, crew version and input
//! (copied into the fork, rows and checkpoints, as runs that succeeded).
//! Either is recorded on the parent as `children_reused`; `rerun_children`
//! in the retry's or the fork's event asks for none.

use std::collections::HashMap;

use cairn_core::event::payload::{
    ChildrenReused, ReusedChild, RunSubmitted, RunSucceeded, SubmittedChild,
};
use cairn_core::{EventData, EventKind, Fingerprint, NewEvent, Priority, RunId};
use serde_json::json;

use crate::sql::{query, Conn};
use crate::{NewChild, Result, SpawnCommit, StepCommit};

use super::rows::append_events;

/// How a listed child is kept.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kept {
    /// A child of this run's step at an earlier attempt, moved to this one.
    Adopted(RunId),
    /// A copy, under the spawn's id for the key, of the source run's child.
    Copied { from: RunId, to: RunId },
}

impl Kept {
    /// The child the join counts.
    pub(super) fn id(self) -> RunId {
        match self {
            Kept::Adopted(id) | Kept::Copied { to: id, .. } => id,
        }
    }
}

/// The kept children by key.
pub(super) type Reused = HashMap<String, Kept>;

/// The children this spawn keeps. `fingerprint` gives each listed child's
/// crew version (a fork keeps only a child of the same version).
pub(super) async fn find_in(
    c: &mut Conn<'_>,
    commit: &StepCommit,
    spawn: &SpawnCommit,
    fingerprint: &(dyn Fn(&NewChild) -> String + Sync),
) -> Result<Reused> {
    if commit.attempt.get() > 1 {
        retried_in(c, commit, spawn).await
    } else {
        forked_in(c, commit, spawn, fingerprint).await
    }
}

/// Whether the latest event of `kind` on `run` asked for every child anew.
async fn rerun_asked(c: &mut Conn<'_>, run: RunId, kind: EventKind) -> Result<bool> {
    let row = c
        .fetch_optional(
            query(
                "SELECT data FROM events WHERE run_id = :run AND kind = :kind \
                 ORDER BY seq DESC LIMIT 1",
            )
            .bind("run", run)
            .bind("kind", kind.as_str()),
        )
        .await?;
    Ok(match row {
        Some(row) => row
            .opt_json("data", run, "an operator's event")?
            .is_some_and(|d| d["rerun_children"] == true),
        None => false,
    })
}

/// At a retry: for each key the spawn lists, the child that succeeded at
/// the step's latest earlier attempt.
async fn retried_in(c: &mut Conn<'_>, commit: &StepCommit, spawn: &SpawnCommit) -> Result<Reused> {
    let mut kept = Reused::new();
    let (run, idx) = (commit.run_id, commit.idx);
    if rerun_asked(c, run, EventKind::RunRetried).await? {
        return Ok(kept);
    }
    let rows = c
        .fetch_all(
            query(
                "SELECT id, child_key FROM runs WHERE parent_run_id = :run \
                 AND parent_step_idx = :idx AND parent_attempt < :attempt \
                 AND child_key IS NOT NULL AND status = 'succeeded' \
                 ORDER BY parent_attempt DESC",
            )
            .bind("run", run)
            .bind("idx", idx.get())
            .bind("attempt", commit.attempt.get()),
        )
        .await?;
    for row in &rows {
        let key = row.text("child_key")?;
        let listed = spawn.children.iter().any(|c| c.key == key);
        if let (true, Some(id)) = (listed, row.opt_uuid("id", run, "a child's id")?) {
            kept.entry(key)
                .or_insert(Kept::Adopted(RunId::from_uuid(id)));
        }
    }
    Ok(kept)
}

/// In a fork (a run whose `parent_run_id` names its source and that is no
/// child): the source's children of the same step, latest attempt first,
/// that succeeded with a key, crew version and input this spawn lists.
async fn forked_in(
    c: &mut Conn<'_>,
    commit: &StepCommit,
    spawn: &SpawnCommit,
    fingerprint: &(dyn Fn(&NewChild) -> String + Sync),
) -> Result<Reused> {
    let mut kept = Reused::new();
    let run = commit.run_id;
    let source = c
        .fetch_optional(
            query(
                "SELECT parent_run_id FROM runs WHERE id = :run AND child_key IS NULL \
                 AND parent_run_id IS NOT NULL",
            )
            .bind("run", run),
        )
        .await?;
    let Some(source) = source else {
        return Ok(kept);
    };
    let Some(source) = source.opt_uuid("parent_run_id", run, "a fork's source")? else {
        return Ok(kept);
    };
    if rerun_asked(c, run, EventKind::RunForked).await? {
        return Ok(kept);
    }
    let rows = c
        .fetch_all(
            query(
                "SELECT id, child_key, input, crew_fingerprint FROM runs \
                 WHERE parent_run_id = :source AND parent_step_idx = :idx \
                 AND child_key IS NOT NULL AND status = 'succeeded' \
                 ORDER BY parent_attempt DESC",
            )
            .bind("source", RunId::from_uuid(source))
            .bind("idx", commit.idx.get()),
        )
        .await?;
    for row in &rows {
        let key = row.text("child_key")?;
        let Some(child) = spawn.children.iter().find(|c| c.key == key) else {
            continue;
        };
        if kept.contains_key(&key) || row.text("crew_fingerprint")? != fingerprint(child) {
            continue;
        }
        let input = row.opt_json("input", run, "a child's input")?;
        if let (Some(id), true) = (
            row.opt_uuid("id", run, "a child's id")?,
            input.as_ref() == Some(&child.input),
        ) {
            let from = RunId::from_uuid(id);
            kept.insert(key, Kept::Copied { from, to: child.id });
        }
    }
    Ok(kept)
}

/// Writes what `find_in` kept: adopted children moved to this attempt's
/// join, copies inserted (row, checkpoints, a submitted and a succeeded
/// event each), all in the spawn's listing order, and one
/// `children_reused` event on the parent.
pub(super) async fn keep_in(
    c: &mut Conn<'_>,
    commit: &StepCommit,
    spawn: &SpawnCommit,
    reused: &Reused,
    priority: Priority,
    fingerprint: &(dyn Fn(&NewChild) -> String + Sync),
) -> Result<()> {
    let (mut listed, mut copies) = (vec![], vec![]);
    for (ord, child) in spawn.children.iter().enumerate() {
        match reused.get(&child.key) {
            None => continue,
            Some(Kept::Adopted(id)) => {
                c.execute(
                    query(
                        "UPDATE runs SET parent_attempt = :attempt, child_ord = :ord \
                         WHERE id = :id",
                    )
                    .bind("attempt", commit.attempt.get())
                    .bind("ord", ord as i64)
                    .bind("id", *id),
                )
                .await?;
                listed.push(ReusedChild {
                    key: child.key.clone(),
                    run_id: *id,
                    copied_from: None,
                });
            }
            Some(Kept::Copied { from, to }) => {
                let crew = child.crew.as_deref().unwrap_or(&spawn.crew);
                let event = EventData::RunSubmitted(RunSubmitted {
                    crew: crew.name.clone(),
                    fingerprint: Fingerprint::from_stored(fingerprint(child)),
                    idempotency_key: None,
                    thread_id: None,
                    parent: Some(SubmittedChild {
                        run_id: commit.run_id,
                        idx: commit.idx,
                        attempt: commit.attempt,
                        key: child.key.clone(),
                    }),
                    copied_from: Some(*from),
                    submitted_by: None,
                });
                let done = EventData::RunSucceeded(RunSucceeded {
                    steps: None,
                    copied_from: Some(*from),
                });
                copies.push(json!({"id": to, "from": from, "ord": ord,
                                   "event": event.to_value(), "done": done.to_value()}));
                listed.push(ReusedChild {
                    key: child.key.clone(),
                    run_id: *to,
                    copied_from: Some(*from),
                });
            }
        }
    }
    if !copies.is_empty() {
        copy_in(
            c,
            commit,
            spawn,
            &serde_json::Value::Array(copies),
            priority,
        )
        .await?;
    }
    if listed.is_empty() {
        return Ok(());
    }
    let event = NewEvent::typed(EventData::ChildrenReused(ChildrenReused {
        idx: commit.idx,
        attempt: commit.attempt,
        reused: listed,
    }));
    append_events(c, commit.run_id, &[event]).await
}

/// The copies, one statement per table for all of them: each a run that
/// succeeded (settled in the join already), with its source's crew
/// version, input and checkpoints.
async fn copy_in(
    c: &mut Conn<'_>,
    commit: &StepCommit,
    spawn: &SpawnCommit,
    copies: &serde_json::Value,
    priority: Priority,
) -> Result<()> {
    c.execute(
        query(
            "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
             status, cursor, step_count, lease_epoch, event_seq, created_at, updated_at, \
             finished_at, parent_run_id, parent_step_idx, parent_attempt, child_key, child_ord, \
             depth, held, join_settled, priority, claim_at, budget, tenant) \
             SELECT (j.value->>'id'){uuid}, r.crew_name, r.crew_version, r.crew_fingerprint, \
             r.crew_def, r.input, 'succeeded', r.step_count, r.step_count, 0, 2, {now}, {now}, \
             {now}, :parent, :idx, :attempt, r.child_key, CAST(j.value->>'ord' AS INTEGER), \
             :depth, FALSE, TRUE, :priority, {now}, r.budget, r.tenant \
             FROM {rows:copies} JOIN runs r ON r.id = (j.value->>'from'){uuid}",
        )
        .bind("parent", commit.run_id)
        .bind("idx", commit.idx.get())
        .bind("attempt", commit.attempt.get())
        .bind("depth", spawn.depth)
        .bind("priority", i64::from(priority.get()))
        .bind("copies", copies.clone()),
    )
    .await?;
    c.execute(
        query(
            "INSERT INTO steps (run_id, idx, role, status, attempt, output, input_tokens, \
             output_tokens, cost_nanos, started_at, finished_at, error, takeovers) \
             SELECT (j.value->>'id'){uuid}, s.idx, s.role, s.status, s.attempt, s.output, \
             s.input_tokens, s.output_tokens, s.cost_nanos, s.started_at, s.finished_at, \
             s.error, s.takeovers \
             FROM {rows:copies} JOIN steps s ON s.run_id = (j.value->>'from'){uuid}",
        )
        .bind("copies", copies.clone()),
    )
    .await?;
    super::rows::submitted_in(c, copies).await?;
    // The source's own `run_succeeded` data (a copy succeeded as it did).
    c.execute(
        query(
            "INSERT INTO events (run_id, seq, at, kind, data) \
             SELECT (j.value->>'id'){uuid}, 2, {now}, :kind, COALESCE((SELECT e.data \
             FROM events e WHERE e.run_id = (j.value->>'from'){uuid} AND e.kind = :kind \
             ORDER BY e.seq DESC LIMIT 1), j.value->'done') FROM {rows:copies}",
        )
        .bind("kind", EventKind::RunSucceeded.as_str())
        .bind("copies", copies.clone()),
    )
    .await?;
    Ok(())
}
