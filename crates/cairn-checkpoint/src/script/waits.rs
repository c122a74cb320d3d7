//! Waits: a person's answer (`WaitStore::answer_wait`) or a deadline
//! (`WaitStore::expire_wait`) closes one and moves its run on, in one
//! transaction. (A wait is opened by the step commit that stops at it.)
//! What an answer does is `plan_answer`'s (pure).

use async_trait::async_trait;
use cairn_core::event::payload::CastVote;
use cairn_core::{
    Actor, Answer, Ballot, ErrorInfo, EventData, NewEvent, RunId, RunStatus, StepIdx, Via, WaitId,
    WaitRecord, WaitStatus,
};

use crate::contract::WaitStore;
use crate::plan::{plan_answer, plan_expire, AnswerPlan, StepChange};
use crate::raw::{decode_wait, error_json, wait_cols};
use crate::sql::{query, Conn, Query};
use crate::{Error, Result, WaitFilter};

use super::boundary::{bounded, placed, retried};
use super::rows::{append_events, at_step, fetch_run, fetch_step};
use super::storable::{json_ok, text_ok};
use super::votes::{cast_in, policy_in, Cast};
use super::{ScriptHost, TxKind};

/// Wait `id`, its row locked for the write transaction it is read in.
pub(super) async fn fetch_wait(c: &mut Conn<'_>, id: WaitId) -> Result<WaitRecord> {
    let q = query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE id = :id {for_update}"
    ));
    one_wait(c, id, q).await
}

/// Wait `id`, read without a lock (in a read-only transaction).
async fn read_wait(c: &mut Conn<'_>, id: WaitId) -> Result<WaitRecord> {
    let q = query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE id = :id"
    ));
    one_wait(c, id, q).await
}

async fn one_wait(c: &mut Conn<'_>, id: WaitId, q: Query) -> Result<WaitRecord> {
    let row = c
        .fetch_found(q.bind("id", id), || Error::WaitNotFound(id))
        .await?;
    decode_wait(&row)
}

/// The newest wait of step `idx`, if any.
pub(super) async fn latest_wait(
    c: &mut Conn<'_>,
    id: RunId,
    idx: StepIdx,
) -> Result<Option<WaitRecord>> {
    const LATEST: &str = concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE run_id = :run AND step_idx = :idx \
         ORDER BY created_at DESC, id DESC LIMIT 1"
    );
    at_step(c, LATEST, id, idx, decode_wait).await
}

/// The waits `q` selects.
async fn waits_where(c: &mut Conn<'_>, q: Query) -> Result<Vec<WaitRecord>> {
    let rows = c.fetch_all(q).await?;
    rows.iter().map(decode_wait).collect()
}

/// `WaitStore::list_waits`.
pub(super) async fn list_waits_in(
    c: &mut Conn<'_>,
    filter: &WaitFilter,
) -> Result<Vec<WaitRecord>> {
    let q = query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE (:run IS NULL OR run_id = :run) \
         AND (:idx IS NULL OR step_idx = :idx) AND (:status IS NULL OR status = :status) \
         ORDER BY created_at, id"
    ))
    .bind("run", filter.run)
    .bind("idx", filter.step.map(|s| s.get()))
    .bind("status", filter.status.map(|s| s.as_str()));
    waits_where(c, q).await
}

/// `WaitStore::due_waits`.
pub(super) async fn due_waits_in(c: &mut Conn<'_>) -> Result<Vec<WaitRecord>> {
    let q = query(concat!(
        "SELECT ",
        wait_cols!(),
        " FROM waits WHERE status = 'open' AND deadline IS NOT NULL \
         AND deadline <= {now} ORDER BY deadline"
    ));
    waits_where(c, q).await
}

/// `WaitStore::answer_wait`'s transaction. The same answer again is a no-op
/// that returns the wait (`plan_answer`). A wait with an approver policy
/// takes the answer as a vote (`votes.rs`): only the vote that meets the
/// rule answers it, with the votes in its `wait_answered`.
pub(super) async fn answer_in(
    c: &mut Conn<'_>,
    id: WaitId,
    answer: &Answer,
    by: &Actor,
) -> Result<WaitRecord> {
    let wait = fetch_wait(c, id).await?;
    let mut votes = vec![];
    let mut answer = answer;
    let decided;
    // Database access (no channel, or `local`) passes every policy.
    let through = by.origin.via.is_some_and(|v| v != Via::Local);
    if through && wait.status == WaitStatus::Open && answer.fits(wait.kind) {
        if let Some(policy) = policy_in(c, &wait).await? {
            match cast_in(c, &wait, &policy, answer, by).await? {
                Cast::Repeat => return Ok(wait),
                Cast::Open(event) => {
                    append_events(c, wait.run_id, &[event]).await?;
                    return fetch_wait(c, id).await;
                }
                Cast::Decided {
                    answer: a,
                    votes: v,
                } => {
                    (decided, votes) = (a, v);
                    answer = &decided;
                }
            }
        }
    }
    let run = fetch_run(c, wait.run_id, true).await?;
    let step = fetch_step(c, run.id, run.cursor).await?;
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
    let events = with_votes(events, votes);
    c.execute(
        query(
            "UPDATE waits SET status = 'answered', answer = :answer, answered_by = :by, \
             answered_at = {now} WHERE id = :id AND status = 'open'",
        )
        .bind("id", id)
        .bind("answer", serde_json::to_value(answer).ok())
        .bind("by", by.by.as_str()),
    )
    .await?;
    apply_step_change(c, run.id, wait.step_idx, &change).await?;
    set_run_after_wait(c, run.id, run_to, cursor_to, run_error.as_ref()).await?;
    append_events(c, run.id, &events).await?;
    if run_to.is_finished() || run_to == RunStatus::Failed {
        super::ends::ended_in(c, run.id).await?;
    }
    fetch_wait(c, id).await
}

/// The answer's events, its `wait_answered` listing the votes that decided it.
fn with_votes(mut events: Vec<NewEvent>, votes: Vec<CastVote>) -> Vec<NewEvent> {
    if votes.is_empty() {
        return events;
    }
    for event in &mut events {
        if let Ok(EventData::WaitAnswered(mut answered)) = event.payload() {
            answered.votes = votes;
            *event = NewEvent::typed(EventData::WaitAnswered(answered));
            break;
        }
    }
    events
}

/// `WaitStore::expire_wait`'s transaction.
pub(super) async fn expire_in(c: &mut Conn<'_>, id: WaitId) -> Result<WaitRecord> {
    let wait = fetch_wait(c, id).await?;
    let (error, events) = plan_expire(&wait)?;
    c.execute(query("UPDATE waits SET status = 'expired' WHERE id = :id").bind("id", id))
        .await?;
    let fail = StepChange::Fail(error.clone());
    apply_step_change(c, wait.run_id, wait.step_idx, &fail).await?;
    set_run_after_wait(
        c,
        wait.run_id,
        RunStatus::Failed,
        wait.step_idx,
        Some(&error),
    )
    .await?;
    append_events(c, wait.run_id, &events).await?;
    super::ends::ended_in(c, wait.run_id).await?;
    fetch_wait(c, id).await
}

/// A waiting step's end as an answer or a deadline decided it.
async fn apply_step_change(
    c: &mut Conn<'_>,
    run: RunId,
    idx: StepIdx,
    change: &StepChange,
) -> Result<()> {
    let (status, output, error) = match change {
        StepChange::Keep => return Ok(()),
        StepChange::Succeed(output) => ("succeeded", Some(output.clone()), None),
        StepChange::Fail(e) => ("failed", None, error_json(&Some(e.clone()))),
    };
    c.execute(
        query(
            "UPDATE steps SET status = :status, output = COALESCE(:output, output), \
             error = COALESCE(:error, error), finished_at = {now} \
             WHERE run_id = :run AND idx = :idx AND status = 'waiting'",
        )
        .bind("run", run)
        .bind("idx", idx.get())
        .bind("status", status)
        .bind("output", output)
        .bind("error", error),
    )
    .await?;
    Ok(())
}

/// The run after one of its waits closed.
async fn set_run_after_wait(
    c: &mut Conn<'_>,
    run: RunId,
    to: RunStatus,
    cursor: StepIdx,
    error: Option<&ErrorInfo>,
) -> Result<()> {
    c.execute(
        query(
            "UPDATE runs SET status = :to, cursor = :cursor, error = :error, updated_at = {now}, \
             finished_at = CASE WHEN :finish THEN {now} ELSE finished_at END WHERE id = :id",
        )
        .bind("id", run)
        .bind("to", to.as_str())
        .bind("cursor", cursor.get())
        .bind("error", error_json(&error.cloned()))
        .bind(
            "finish",
            matches!(to, RunStatus::Succeeded | RunStatus::Failed),
        ),
    )
    .await?;
    if to == RunStatus::Queued {
        c.notify_runnable(run).await?;
    }
    Ok(())
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> WaitStore for H {
    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let filter = filter.clone();
        let read = self.tx(TxKind::Single, script!(|c| list_waits_in(c, &filter).await));
        placed(self.target(), None, read).await
    }

    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &Actor) -> Result<WaitRecord> {
        text_ok("`by`", Some(&by.by))?;
        text_ok("the reason", by.reason.as_deref())?;
        json_ok("the answer", serde_json::to_value(answer).ok().as_ref())?;
        // Sending the same answer again is a no-op that returns the wait
        // (`plan_answer`), so a retry needs no separate check.
        retried(
            "answer_wait",
            self,
            None,
            || {
                let (answer, by) = (answer.clone(), by.clone());
                self.tx(
                    TxKind::Write,
                    script!(|c| answer_in(c, id, &answer, &by).await),
                )
            },
            || async { Ok(None) },
        )
        .await
    }

    async fn ballot(&self, id: WaitId) -> Result<Ballot> {
        let read = self.tx(
            TxKind::Read,
            script!(|c| {
                let wait = read_wait(c, id).await?;
                super::votes::ballot_in(c, &wait).await
            }),
        );
        placed(self.target(), None, read).await
    }

    async fn due_waits(&self) -> Result<Vec<WaitRecord>> {
        let read = self.tx(TxKind::Single, script!(|c| due_waits_in(c).await));
        placed(self.target(), None, read).await
    }

    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord> {
        let write = self.tx(TxKind::Write, script!(|c| expire_in(c, id).await));
        bounded("expire_wait", self.target(), None, write).await
    }
}
