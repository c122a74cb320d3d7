//! The decisions of a claim and a refused commit, shared by both backends so
//! their SQL differs only in dialect, never in meaning.

use cairn_core::{
    Actor, Corruption, CrewDef, ErrorInfo, ErrorKind, EventKind, LeaseEpoch, NewEvent, RunRecord,
    RunStatus, StepRecord, StepStatus,
};

use crate::{Action, ClaimRequest, Error, ForkRequest, Result, StepCommit};

/// What a claim does to the step at the cursor. Shared by both backends.
pub(crate) struct ClaimPlan {
    pub step: ClaimStep,
    pub took_over: bool,
}

pub(crate) enum ClaimStep {
    /// The run is complete (nothing to dispatch).
    Nothing,
    /// No row yet: insert it `running`, attempt 1.
    Insert { role: cairn_core::Role },
    /// Set the row `running` with this attempt; add `takeovers_delta` to its
    /// takeover count (0 resets it: a new attempt).
    Restart { attempt: u32, takeovers_delta: u32 },
    /// Too many takeovers of the same attempt: fail step and run.
    CrashLoop { error: ErrorInfo },
}

pub(crate) fn plan_claim(
    run: &RunRecord,
    row: Option<StepRecord>,
    req: &ClaimRequest,
) -> Result<ClaimPlan> {
    let crew: &CrewDef = &run.crew_definition;
    let cursor = run.cursor;
    let Some(agent) = crew.agents.get(cursor.as_usize()) else {
        return Ok(ClaimPlan {
            step: ClaimStep::Nothing,
            took_over: false,
        });
    };
    let Some(row) = row else {
        return Ok(ClaimPlan {
            step: ClaimStep::Insert {
                role: agent.role.clone(),
            },
            took_over: false,
        });
    };
    let step = match row.status {
        StepStatus::Running if row.takeovers + 1 > req.crash_loop_cap => {
            return Ok(ClaimPlan {
                step: ClaimStep::CrashLoop {
                    error: ErrorInfo::new(
                        ErrorKind::CrashLoop,
                        format!(
                            "attempt {} of step {cursor} was in flight when its process died {} times; \
                             not taking it over again (cap {}); retry it once the cause is fixed",
                            row.attempt,
                            row.takeovers + 1,
                            req.crash_loop_cap
                        ),
                        false,
                    ),
                },
                took_over: true,
            })
        }
        StepStatus::Running => {
            return Ok(ClaimPlan {
                step: ClaimStep::Restart {
                    attempt: row.attempt.get(),
                    takeovers_delta: 1,
                },
                took_over: true,
            })
        }
        StepStatus::Failed => ClaimStep::Restart {
            attempt: row.attempt.get() + 1,
            takeovers_delta: 0,
        },
        StepStatus::Interrupted => ClaimStep::Restart {
            attempt: row.attempt.get(),
            takeovers_delta: 0,
        },
        status @ (StepStatus::Succeeded | StepStatus::Waiting | StepStatus::Cancelled) => {
            return Err(Corruption::new(
                run.id,
                format!("step {cursor} at the cursor is `{status}`, which cannot be dispatched"),
            )
            .into())
        }
    };
    Ok(ClaimPlan {
        step,
        took_over: false,
    })
}

pub(crate) fn claim_events(
    req: &ClaimRequest,
    epoch: LeaseEpoch,
    before: &RunRecord,
    plan: &ClaimPlan,
) -> Vec<NewEvent> {
    let mut events = vec![NewEvent::new(
        EventKind::RunClaimed,
        serde_json::json!({
            "owner": req.owner,
            "epoch": epoch,
            "from_status": before.status,
            "took_over_step": plan.took_over,
            "cursor": before.cursor,
        }),
    )];
    events.extend(req.events.iter().cloned());
    if let ClaimStep::CrashLoop { error } = &plan.step {
        events.push(NewEvent::new(
            EventKind::StepFailed,
            serde_json::json!({"idx": before.cursor, "error": error}),
        ));
        events.push(NewEvent::new(
            EventKind::RunFailed,
            serde_json::json!({"error": error}),
        ));
    }
    events
}

/// Why a commit matched no running run at the caller's epoch.
pub(crate) fn refused_commit(run: &RunRecord, c: &StepCommit) -> Error {
    if run.lease_epoch == c.epoch
        && run.status == RunStatus::Running
        && run.cancel_requested_at.is_some()
    {
        return Error::CancelRequested { run: run.id };
    }
    if run.lease_epoch != c.epoch {
        Error::StaleEpoch {
            run: run.id,
            held: c.epoch,
            current: run.lease_epoch,
        }
    } else {
        Error::WrongState {
            run: run.id,
            status: run.status,
            action: "commit a step",
        }
    }
}

/// What an operator action does to a run.
pub(crate) struct ActionPlan {
    pub to: RunStatus,
    /// Set `cancel_requested_at` (a running run).
    pub request_cancel: bool,
    pub event: NewEvent,
}

impl ActionPlan {
    pub fn finishes(&self) -> bool {
        self.to == RunStatus::Cancelled
    }
    pub fn clears_error(&self) -> bool {
        self.to == RunStatus::Queued
    }
}

pub(crate) fn plan_action(run: &RunRecord, action: Action, actor: &Actor) -> Result<ActionPlan> {
    let data = serde_json::json!({
        "by": actor.by,
        "reason": actor.reason,
        "from_status": run.status,
        "step": run.cursor,
    });
    let refuse = |action: &'static str| Error::WrongState {
        run: run.id,
        status: run.status,
        action,
    };
    let (to, request_cancel, kind) = match (action, run.status) {
        (Action::Retry, RunStatus::Failed) => (RunStatus::Queued, false, EventKind::RunRetried),
        (Action::Retry, _) => return Err(refuse("retry it (only a failed run can be retried)")),
        (Action::Continue, RunStatus::Interrupted) => {
            (RunStatus::Queued, false, EventKind::RunContinued)
        }
        (Action::Continue, _) => {
            return Err(refuse(
                "continue it (only an interrupted run can be continued)",
            ))
        }
        (Action::Cancel, RunStatus::Running) => {
            (RunStatus::Running, true, EventKind::RunCancelRequested)
        }
        (
            Action::Cancel,
            RunStatus::Queued | RunStatus::Waiting | RunStatus::Interrupted | RunStatus::Failed,
        ) => (RunStatus::Cancelled, false, EventKind::RunCancelled),
        (Action::Cancel, _) => return Err(refuse("cancel it (it has already finished)")),
    };
    run.status.check(to).map_err(|_| refuse("change it"))?;
    Ok(ActionPlan {
        to,
        request_cancel,
        event: NewEvent::new(kind, data),
    })
}

/// Checks a fork request against its source run and its checkpoints.
pub(crate) fn check_fork(run: &RunRecord, req: &ForkRequest) -> Result<()> {
    let refuse = |reason: String| Error::ForkRefused {
        run: run.id,
        reason,
    };
    let n = req.from_step.get();
    if n > run.step_count {
        return Err(refuse(format!(
            "--from-step {n} is past the crew's {} steps",
            run.step_count
        )));
    }
    if n > run.cursor.get() {
        return Err(refuse(format!(
            "only steps 0..{} have succeeded, so the fork can start at step {} at most",
            run.cursor, run.cursor
        )));
    }
    if req.input.is_some() && n > 0 {
        return Err(refuse(
            "a new input needs --from-step 0: every copied step's output was computed from the \
             old input, so copying it under a new one would be a lie"
                .into(),
        ));
    }
    Ok(())
}

pub(crate) fn fork_event(source: &RunRecord, req: &ForkRequest, actor: &Actor) -> NewEvent {
    NewEvent::new(
        EventKind::RunForked,
        serde_json::json!({
            "parent": source.id,
            "from_step": req.from_step,
            "input_changed": req.input.is_some(),
            "by": actor.by,
            "reason": actor.reason,
        }),
    )
}
