//! The decisions of a claim and a refused commit, shared by both backends so
//! their SQL differs only in dialect, never in meaning.

use cairn_core::{
    Corruption, CrewDef, ErrorInfo, ErrorKind, EventKind, LeaseEpoch, NewEvent, RunRecord,
    StepRecord, StepStatus,
};

use crate::{ClaimRequest, Error, Result, StepCommit};

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
