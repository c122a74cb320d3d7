//! The executor's loop, in two halves: claiming a run (again after each
//! retry back-off, waiting out a back-off or an earlier run of the thread)
//! and dispatching its pending steps one by one under the lease guard,
//! committing each. [`Drive`] carries what both halves share from one claim
//! to the next: the claim request, the cursor the last claim should find,
//! the earlier outputs and the steps executed so far.

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::{failpoint, ClaimRequest, Claimed, Lease, Takeover};
use cairn_core::{
    rebuild_owned, Attempt, PreviousOutput, RunId, RunRecord, RunStatus, StepIdx, StepStatus,
    ThreadTurn, WaitKind,
};

use crate::lease::LeaseGuard;
use crate::outcome::{self, Dispatch, StepOutcome};
use crate::{Crew, Executor, Result, StepExtras};

/// One `drive` of one run, from claim to claim.
pub(crate) struct Drive<'a> {
    pub(crate) exec: &'a Executor,
    pub(crate) run_id: RunId,
    pub(crate) crew: &'a Crew,
    /// The next claim's request; plain after the first claim.
    pub(crate) request: ClaimRequest,
    /// The cursor the next claim should find; another process moved the
    /// run on if it does not, and the earlier outputs are read again.
    pub(crate) expected_cursor: StepIdx,
    pub(crate) previous: Arc<Vec<PreviousOutput>>,
    /// A claim already made (a worker's `claim_next`), used first.
    pub(crate) first: Option<Claimed>,
    /// Steps executed so far, in order.
    pub(crate) executed: Vec<StepIdx>,
}

/// What dispatching a claim ended with: the run is queued for a retry after
/// `wait`, at `cursor`.
pub(crate) struct Backoff {
    pub(crate) wait: Duration,
    pub(crate) cursor: StepIdx,
}

impl Drive<'_> {
    /// Claims the run (or takes the claim already made): a claim of a
    /// running run, or `None` when the drive is over (someone else claimed
    /// it during our back-off, or the claim itself ended the run).
    pub(crate) async fn claim(&mut self) -> Result<Option<Claimed>> {
        let (exec, run_id) = (self.exec, self.run_id);
        let claimed = loop {
            let claimed = match self.first.take() {
                Some(claimed) => Ok(claimed),
                None => {
                    failpoint::step("before_claim", self.expected_cursor);
                    let claimed = exec.store.claim(run_id, &self.request).await;
                    failpoint::step("after_claim", self.expected_cursor);
                    claimed
                }
            };
            match claimed {
                Err(cairn_checkpoint::Error::NotYet { wait, .. }) => {
                    tracing::debug!(run = %run_id, ?wait, "waiting out a retry back-off");
                    tokio::time::sleep(wait).await;
                }
                // Runs of a thread run in submission order: wait our turn.
                Err(cairn_checkpoint::Error::QueuedBehind { behind, .. }) => {
                    tracing::debug!(run = %run_id, %behind, "waiting for an earlier run of the thread");
                    tokio::time::sleep(exec.config.cancel_poll).await;
                }
                // Someone else claimed it during our back-off: it goes on there.
                Err(cairn_checkpoint::Error::WrongState { .. }) if !self.executed.is_empty() => {
                    return Ok(None);
                }
                claimed => break claimed?,
            }
        };
        if claimed.took_over {
            // Before the step runs again, even if the claim ended the run.
            exec.reap(run_id).await?;
        }
        // Our own later claims are plain ones.
        self.request.takeover = Takeover::Never;
        self.request.context = None;
        self.request.events.clear();
        self.request.replace_crew = None;
        if claimed.run.status != RunStatus::Running {
            // The claim itself ended the run (crash-loop cap).
            return Ok(None);
        }
        if claimed.run.cursor != self.expected_cursor {
            // Another process advanced the run between load and claim.
            let (fresh, steps) = exec.store.load(run_id).await?;
            self.previous = Arc::new(rebuild_owned(&fresh, steps)?.previous);
        }
        Ok(Some(claimed))
    }

    /// Dispatches the pending steps of a claim under the lease guard, with
    /// what people said about the cursor's step and the thread's earlier
    /// runs: a [`Backoff`] if a step left the run queued for a retry.
    pub(crate) async fn dispatch(&mut self, claimed: Claimed) -> Result<Option<Backoff>> {
        let (exec, run_id) = (self.exec, self.run_id);
        let mut run = claimed.run;
        // Keep the lease, and watch for a cancel, while this process
        // works on the run.
        let fence = claimed.fence;
        let guard = exec.keeper.hold(run_id, fence.clone());
        // What people said about the cursor's step: feedback, answers, approval.
        let extras = match claimed.first_run {
            true => StepExtras::default(),
            false => {
                exec.extras(self.crew, run_id, claimed.at_cursor.as_ref())
                    .await?
            }
        };
        // The thread's earlier runs, read once per claim: every step of
        // this dispatch sees the same conversation.
        let thread = match &run.thread_id {
            Some(t) => {
                let limits = &exec.config.limits;
                let turns = exec
                    .store
                    .thread_history(t, run_id, limits.thread_history_runs)
                    .await?;
                cairn_core::newest_within(turns, limits.thread_history_bytes)
            }
            None => vec![],
        };
        // The attempt of the step the claim marked running at the cursor.
        let attempt = match claimed.at_cursor {
            Some(row) if row.idx == run.cursor && row.status == StepStatus::Running => {
                Some(row.attempt)
            }
            _ => None,
        };
        let thread_budget = match &run.thread_id {
            Some(t) => exec
                .store
                .thread_budget(t)
                .await?
                .map(|b| (t.clone(), b.budget)),
            None => None,
        };
        let held = Held {
            guard: &guard,
            fence,
            thread,
            thread_budget,
        };
        let retry_after = self.steps(&mut run, &held, attempt, extras).await?;
        // A run queued for a retry is no longer held.
        drop(guard);
        Ok(retry_after.map(|wait| Backoff {
            wait,
            cursor: run.cursor,
        }))
    }

    /// Step 3 of the executor: the pending steps one by one, each committed
    /// before the next; `run` follows the commits. The back-off of a step
    /// that left the run queued for a retry, if one did.
    async fn steps(
        &mut self,
        run: &mut RunRecord,
        held: &Held<'_>,
        mut attempt: Option<Attempt>,
        mut extras: StepExtras,
    ) -> Result<Option<Duration>> {
        let (exec, run_id, crew) = (self.exec, self.run_id, self.crew);
        while run.cursor.get() < run.step_count {
            let idx = run.cursor;
            let current = attempt.take().ok_or_else(|| {
                cairn_core::Corruption::new(run_id, format!("step {idx} was not marked running"))
            })?;
            let (def, agent) = crew.agent(idx).ok_or_else(|| {
                cairn_core::Corruption::new(run_id, format!("crew has no agent for step {idx}"))
            })?;
            let step = Dispatch {
                run: run_id,
                fence: held.fence.clone(),
                step_count: run.step_count,
                idx,
                attempt: current,
                def,
                next: crew.agent(idx.next()).map(|(d, _)| d.role.clone()),
                depth: run.child.as_ref().map_or(0, |c| c.depth),
                child: run.child.is_some(),
                wall_time: crate::budget_of(run).and_then(|b| b.wall_time),
            };
            let cancelled = held.guard.now() == Lease::CancelRequested;
            if cancelled || run.cancel_requested_at.is_some() {
                // Requested before this step started: run nothing.
                let cancel = outcome::commit(&step, StepOutcome::Cancelled);
                exec.store.commit_step(&cancel).await?;
                return Ok(None);
            }
            let extras = StepExtras {
                thread: held.thread.clone(),
                thread_budget: held.thread_budget.clone(),
                ..std::mem::take(&mut extras)
            };
            let commit = exec
                .execute_step(&step, agent, run, held.guard, &self.previous, &extras)
                .await?;
            failpoint::step("before_commit", idx);
            let commit = match exec.store.commit_step(&commit).await {
                Ok(()) => commit,
                // Cancelled while the step ran: its result is discarded.
                Err(cairn_checkpoint::Error::CancelRequested { .. }) => {
                    let cancel = outcome::commit(&step, StepOutcome::Cancelled);
                    exec.store.commit_step(&cancel).await?;
                    cancel
                }
                Err(e) => return Err(e.into()),
            };
            failpoint::step("after_commit", idx);
            let rows = commit.rows();
            tracing::info!(run = %run_id, step = %idx, role = %def.role, attempt = %current, status = %rows.status, "step committed");
            // A step that only opened its approval wait did not run.
            if rows.open_wait.map(|w| w.kind) != Some(WaitKind::Approval) {
                self.executed.push(idx);
            }
            run.status = rows.run_status;
            run.cursor = rows.cursor;
            if rows.status != StepStatus::Succeeded {
                return Ok(rows.retry_after);
            }
            // The commit marked the next step running, attempt 1.
            attempt = rows.start_next.map(|_| Attempt::FIRST);
            // The step's context is gone by now, so nothing is copied.
            let output = match commit.transition {
                cairn_checkpoint::StepTransition::Succeeded { output, .. }
                | cairn_checkpoint::StepTransition::Consumed { output, .. } => output,
                _ => serde_json::Value::Null,
            };
            Arc::make_mut(&mut self.previous).push(PreviousOutput {
                idx,
                role: def.role.clone(),
                output,
            });
        }
        Ok(None)
    }
}

/// What one claim's dispatch holds for all its steps.
struct Held<'g> {
    guard: &'g LeaseGuard,
    fence: cairn_core::Fence,
    /// The thread's earlier runs, read once per claim.
    thread: Vec<ThreadTurn>,
    /// The thread's budget, read once per claim (the id and the limits).
    thread_budget: Option<(String, cairn_core::Budget)>,
}
