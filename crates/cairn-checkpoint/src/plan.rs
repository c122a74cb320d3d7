//! The decisions of a claim and a refused commit, shared by both backends so
//! their SQL differs only in dialect, never in meaning.

use cairn_core::{
    Actor, Corruption, CrewDef, ErrorInfo, ErrorKind, Fence, LeaseEpoch, NewEvent, RunRecord,
    RunStatus, StepRecord, StepStatus,
};

use crate::{Action, ClaimRequest, Error, ForkRequest, Result, StepCommit};
use cairn_core::event::payload::{
    OperatorAction, RunCancelled, RunClaimed, RunFailed, RunForked, RunSucceeded, StepFailed,
    StepSucceeded, WaitAnswered, WaitExpired,
};
use cairn_core::{Answer, EventData, RunId, StepIdx, WaitKind, WaitRecord, WaitStatus};

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
    /// Set the row `running` with this attempt; add `takeovers_delta` (1 for
    /// a takeover) to its takeover count. A new attempt starts its counts
    /// (takeovers, shared deaths) again; the same attempt carried on after a
    /// deferral, a continue, a join or an answer keeps them.
    Restart { attempt: u32, takeovers_delta: u32 },
    /// Too many takeovers of the same attempt: fail step and run.
    CrashLoop { error: ErrorInfo },
    /// The in-flight attempt's holder died holding other runs too, so the
    /// death is no evidence against this one: restart the same attempt
    /// without counting a takeover, count a shared death (the step then
    /// runs alone, where a death is evidence), and mark the holder's other
    /// in-flight steps to be judged the same.
    SharedDeath { attempt: u32 },
}

/// What is known of the death of a taken-over attempt's holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Death {
    /// Other runs still `running` under the dead holder's lease (the store
    /// reads only whether there is one: 0 or 1).
    pub companions: u32,
    /// An earlier takeover found this step's holder dead with others.
    pub marked_shared: bool,
    /// The step's earlier takeovers that were shared deaths.
    pub shared_before: u32,
}

/// A takeover's plan, judged by the death behind it: `crash_loop` counts
/// only evidence. A holder that held this run alone died of it, maybe: the
/// takeover counts, and past the cap of such deaths the run fails. One
/// that held others too, or was found so by an earlier takeover, died of
/// any of them: the attempt restarts uncounted ([`ClaimStep::SharedDeath`]).
/// `takeovers` counts every takeover either way.
pub(crate) fn judge_death(
    plan: ClaimPlan,
    row: Option<&StepRecord>,
    death: Death,
    cap: u32,
    cursor: StepIdx,
) -> ClaimPlan {
    let taken_over = matches!(
        plan.step,
        ClaimStep::Restart {
            takeovers_delta: 1,
            ..
        } | ClaimStep::CrashLoop { .. }
    );
    let (Some(row), true) = (row, taken_over && plan.took_over) else {
        return plan;
    };
    let attempt = row.attempt.get();
    let alone = row.takeovers.saturating_sub(death.shared_before) + 1;
    let step = match () {
        _ if death.companions > 0 || death.marked_shared => ClaimStep::SharedDeath { attempt },
        _ if alone > cap => ClaimStep::CrashLoop {
            error: crash_loop_error(attempt, cursor, alone, cap),
        },
        _ => ClaimStep::Restart {
            attempt,
            takeovers_delta: 1,
        },
    };
    ClaimPlan {
        step,
        took_over: true,
    }
}

/// Why a step failed `crash_loop`.
fn crash_loop_error(attempt: u32, cursor: StepIdx, died: u32, cap: u32) -> ErrorInfo {
    ErrorInfo::new(
        ErrorKind::CrashLoop,
        format!(
            "attempt {attempt} of step {cursor} was in flight when its process died {died} times; \
             not taking it over again (cap {cap}); retry it once the cause is fixed"
        ),
        false,
    )
}

/// What a waiting step at the cursor waited for, as the claim found it.
#[derive(Debug)]
pub(crate) enum Waited {
    /// Its newest wait (of a person).
    Wait(Box<WaitRecord>),
    /// Its attempt's children, whose join is decided.
    Join,
    /// Its attempt's signal wait, heard or timed out.
    Signal,
    Nothing,
}

impl Waited {
    fn wait(&self) -> Option<&WaitRecord> {
        match self {
            Waited::Wait(w) => Some(w),
            _ => None,
        }
    }
}

pub(crate) fn plan_claim(
    run: &RunRecord,
    row: Option<StepRecord>,
    waited: &Waited,
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
                    error: crash_loop_error(
                        row.attempt.get(),
                        cursor,
                        row.takeovers + 1,
                        req.crash_loop_cap,
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
        // A step that waited for a person carries on as the answer says.
        // A step whose children's join is decided runs again, the same
        // attempt, and reads the join; a `signal` step woken by a signal
        // or its timeout runs again and reads what it heard.
        StepStatus::Waiting if matches!(waited, Waited::Join | Waited::Signal) => {
            ClaimStep::Restart {
                attempt: row.attempt.get(),
                takeovers_delta: 0,
            }
        }
        StepStatus::Waiting => match waited.wait().map(|w| (w.status, w.kind, &w.answer)) {
            Some((WaitStatus::Answered, WaitKind::Review, Some(Answer::Reject { .. }))) => {
                ClaimStep::Restart {
                    attempt: row.attempt.get() + 1,
                    takeovers_delta: 0,
                }
            }
            Some((WaitStatus::Answered, WaitKind::Approval | WaitKind::Question, _)) => {
                ClaimStep::Restart {
                    attempt: row.attempt.get(),
                    takeovers_delta: 0,
                }
            }
            _ => {
                return Err(Corruption::new(
                    run.id,
                    format!("step {cursor} is waiting but its wait has no answer to act on"),
                )
                .into())
            }
        },
        status @ (StepStatus::Succeeded | StepStatus::Cancelled) => {
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
    claim_events_at(req, epoch, (before.status, before.cursor), plan)
}

/// [`claim_events`] of a run known by its status and cursor before the
/// claim (a run the same statement creates has no record to read yet).
pub(crate) fn claim_events_at(
    req: &ClaimRequest,
    epoch: LeaseEpoch,
    (from_status, cursor): (RunStatus, StepIdx),
    plan: &ClaimPlan,
) -> Vec<NewEvent> {
    let mut events = vec![NewEvent::typed(EventData::RunClaimed(RunClaimed {
        owner: req.owner.clone(),
        epoch,
        from_status,
        took_over_step: plan.took_over,
        cursor,
        // Not counted towards `crash_loop`: its holder died holding others.
        shared_death: matches!(plan.step, ClaimStep::SharedDeath { .. }),
    }))];
    events.extend(req.events.iter().cloned());
    if let ClaimStep::CrashLoop { error } = &plan.step {
        events.push(step_failed(cursor, error));
        events.push(NewEvent::typed(EventData::RunFailed(RunFailed {
            error: error.clone(),
            idx: None,
            attempts: None,
            set_aside: false,
        })));
    }
    events
}

/// Why a commit matched no running run at the caller's fence; `owner` is
/// the run's lease owner now.
pub(crate) fn refused_commit(run: &RunRecord, owner: Option<&str>, c: &StepCommit) -> Error {
    let held = &c.fence;
    if run.lease_epoch != held.epoch {
        return Error::StaleEpoch {
            run: run.id,
            held: held.epoch,
            current: run.lease_epoch,
        };
    }
    if let Some(reused) = reused(run.id, held, owner) {
        return reused;
    }
    if run.status == RunStatus::Running && run.cancel_requested_at.is_some() {
        return Error::CancelRequested { run: run.id };
    }
    Error::WrongState {
        run: run.id,
        status: run.status,
        action: "commit a step",
    }
}

/// The epoch is the holder's but the owner is another's: the epoch was
/// granted twice.
fn reused(run: RunId, held: &Fence, owner: Option<&str>) -> Option<Error> {
    match owner {
        Some(owner) if owner == &*held.owner => None,
        // A run that is not running has no owner: its status says why.
        None => None,
        Some(owner) => Some(Error::LeaseReused {
            run,
            epoch: held.epoch,
            owner: owner.to_owned(),
            held_by: held.owner.to_string(),
        }),
    }
}

/// Whether a process holding `held` may still write to the run (a journal
/// item or an event): the run is `running` at that epoch under that owner;
/// `current` is the run's epoch and lease owner now.
pub(crate) fn check_holder(
    run: RunId,
    status: RunStatus,
    current: (LeaseEpoch, Option<&str>),
    held: &Fence,
) -> Result<()> {
    if current.0 != held.epoch {
        return Err(Error::StaleEpoch {
            run,
            held: held.epoch,
            current: current.0,
        });
    }
    if let Some(reused) = reused(run, held, current.1) {
        return Err(reused);
    }
    if status != RunStatus::Running {
        return Err(Error::WrongState {
            run,
            status,
            action: "write to the journal",
        });
    }
    Ok(())
}

/// A journal row's kind, or a corruption naming the run.
pub(crate) fn journal_kind(run: RunId, seq: i64, kind: &str) -> Result<cairn_core::JournalKind> {
    cairn_core::JournalKind::parse(kind).ok_or_else(|| {
        cairn_core::Corruption::new(run, format!("journal item {seq} has unknown kind `{kind}`"))
            .into()
    })
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
    let data = OperatorAction {
        actor: actor.clone(),
        from_status: run.status,
        step: run.cursor,
        rerun_children: action == Action::RetryRerunningChildren,
    };
    let refuse = |action: &'static str| Error::WrongState {
        run: run.id,
        status: run.status,
        action,
    };
    let (to, request_cancel, event) = match (action, run.status) {
        (Action::Retry | Action::RetryRerunningChildren, RunStatus::Failed) => {
            (RunStatus::Queued, false, EventData::RunRetried(data))
        }
        (Action::Retry | Action::RetryRerunningChildren, _) => {
            return Err(refuse("retry it (only a failed run can be retried)"))
        }
        (Action::Continue, RunStatus::Interrupted) => {
            (RunStatus::Queued, false, EventData::RunContinued(data))
        }
        (Action::Continue, _) => {
            return Err(refuse(
                "continue it (only an interrupted run can be continued)",
            ))
        }
        (Action::Cancel, RunStatus::Running) => (
            RunStatus::Running,
            true,
            EventData::RunCancelRequested(data),
        ),
        (
            Action::Cancel,
            RunStatus::Queued | RunStatus::Waiting | RunStatus::Interrupted | RunStatus::Failed,
        ) => (
            RunStatus::Cancelled,
            false,
            EventData::RunCancelled(RunCancelled::ByOperator(data)),
        ),
        (Action::Cancel, _) => return Err(refuse("cancel it (it has already finished)")),
    };
    run.status.check(to).map_err(|_| refuse("change it"))?;
    Ok(ActionPlan {
        to,
        request_cancel,
        event: NewEvent::typed(event),
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
            "step {n} is past the crew's {} steps",
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
            "a new input needs the fork to start at step 0 (--from-step 0): every copied step's \
             output was computed from the old input, so copying it under a new one would be a lie"
                .into(),
        ));
    }
    Ok(())
}

pub(crate) fn fork_event(source: &RunRecord, req: &ForkRequest, actor: &Actor) -> NewEvent {
    NewEvent::typed(EventData::RunForked(RunForked {
        parent: source.id,
        from_step: req.from_step,
        input_changed: req.input.is_some(),
        rerun_children: Some(req.rerun_children),
        thread_id: req.thread_id.clone(),
        actor: actor.clone(),
    }))
}

/// What answering a wait does. Short-lived, so its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum AnswerPlan {
    /// The same answer was already recorded: nothing to do.
    Repeat,
    Apply {
        run_to: RunStatus,
        cursor_to: StepIdx,
        step: StepChange,
        run_error: Option<ErrorInfo>,
        events: Vec<NewEvent>,
    },
}

pub(crate) enum StepChange {
    /// The step stays `waiting`; the next claim restarts it.
    Keep,
    /// The reviewed step commits with this output.
    Succeed(serde_json::Value),
    /// The step fails (approval rejected, deadline).
    Fail(ErrorInfo),
}

pub(crate) fn plan_answer(
    wait: &WaitRecord,
    run: &RunRecord,
    step: Option<&StepRecord>,
    answer: &Answer,
    actor: &Actor,
) -> Result<AnswerPlan> {
    let by = actor.by.as_str();
    if wait.status != WaitStatus::Open {
        if wait.status == WaitStatus::Answered && wait.answer.as_ref() == Some(answer) {
            return Ok(AnswerPlan::Repeat);
        }
        return Err(Error::WaitClosed {
            wait: wait.id,
            status: wait.status,
        });
    }
    if !answer.fits(wait.kind) {
        return Err(Error::BadAnswer {
            wait: wait.id,
            kind: wait.kind,
            hint: match wait.kind {
                WaitKind::Review => "answer with approve, edit or reject",
                WaitKind::Approval => "answer with approve or reject",
                WaitKind::Question => "answer with a value (decision `answer`)",
            },
        });
    }
    let step = step.filter(|s| {
        s.idx == wait.step_idx && s.status == StepStatus::Waiting && run.cursor == wait.step_idx
    });
    let Some(step) = step.filter(|_| run.status == RunStatus::Waiting) else {
        return Err(Corruption::new(
            run.id,
            format!(
                "wait {} is open but the run is `{}` at step {}",
                wait.id, run.status, run.cursor
            ),
        )
        .into());
    };
    let mut data = WaitAnswered {
        wait: wait.id,
        kind: wait.kind,
        idx: wait.step_idx,
        answer: answer.clone(),
        by: by.to_owned(),
        reason: actor.reason.clone(),
        original: None,
        origin: actor.origin.clone(),
        votes: vec![],
    };
    let next = wait.step_idx.next();
    let advance = |output: serde_json::Value| {
        let last = next.get() == run.step_count;
        (
            if last {
                RunStatus::Succeeded
            } else {
                RunStatus::Queued
            },
            next,
            StepChange::Succeed(output),
        )
    };
    let (run_to, cursor_to, change, run_error) = match answer {
        Answer::Approve if wait.kind == WaitKind::Review => {
            let (r, c, s) = advance(step.output.clone().unwrap_or_default());
            (r, c, s, None)
        }
        Answer::Edit { output } => {
            data.original = Some(step.output.clone().unwrap_or_default());
            let (r, c, s) = advance(output.clone());
            (r, c, s, None)
        }
        Answer::Reject { feedback } if wait.kind == WaitKind::Approval => {
            let error = ErrorInfo::new(
                ErrorKind::Rejected,
                format!("{by} rejected step {}: {feedback}", wait.step_idx),
                false,
            );
            (
                RunStatus::Failed,
                wait.step_idx,
                StepChange::Fail(error.clone()),
                Some(error),
            )
        }
        _ => (RunStatus::Queued, wait.step_idx, StepChange::Keep, None),
    };
    run.status.check(run_to).map_err(|_| Error::WrongState {
        run: run.id,
        status: run.status,
        action: "answer its wait",
    })?;
    let mut events = vec![NewEvent::typed(EventData::WaitAnswered(data))];
    let idx = wait.step_idx;
    match &change {
        StepChange::Succeed(_) => {
            events.push(NewEvent::typed(EventData::StepSucceeded(StepSucceeded {
                idx,
                attempt: wait.attempt,
                role: None,
                duration_ms: None,
                input_tokens: None,
                output_tokens: None,
                reviewed_by: Some(by.to_owned()),
            })));
            if run_to == RunStatus::Succeeded {
                events.push(NewEvent::typed(EventData::RunSucceeded(RunSucceeded {
                    steps: Some(run.step_count),
                    copied_from: None,
                })));
            }
        }
        StepChange::Fail(error) => events.extend(failure_events(idx, error)),
        StepChange::Keep => {}
    }
    Ok(AnswerPlan::Apply {
        run_to,
        cursor_to,
        step: change,
        run_error,
        events,
    })
}

/// What expiring a wait with the outcome "fail" does: the step and run fail
/// with this error, recorded by these events. Refused for a closed wait.
pub(crate) fn plan_expire(wait: &WaitRecord) -> Result<(ErrorInfo, Vec<NewEvent>)> {
    if wait.status != WaitStatus::Open {
        return Err(Error::WaitClosed {
            wait: wait.id,
            status: wait.status,
        });
    }
    let error = ErrorInfo::new(
        ErrorKind::Deadline,
        format!(
            "the {} wait on step {} passed its deadline unanswered",
            wait.kind, wait.step_idx
        ),
        false,
    );
    let mut events = vec![NewEvent::typed(EventData::WaitExpired(WaitExpired {
        wait: wait.id,
        kind: wait.kind,
        idx: wait.step_idx,
        error: error.clone(),
    }))];
    events.extend(failure_events(wait.step_idx, &error));
    Ok((error, events))
}

/// The events of a step failure that ends its run.
pub(crate) fn failure_events(idx: StepIdx, error: &ErrorInfo) -> [NewEvent; 2] {
    [
        step_failed(idx, error),
        NewEvent::typed(EventData::RunFailed(RunFailed {
            error: error.clone(),
            idx: Some(idx),
            attempts: None,
            set_aside: false,
        })),
    ]
}

/// The `step_failed` of a step failed outside its attempt (a crash loop, a
/// rejection, a deadline): its index and error alone.
fn step_failed(idx: StepIdx, error: &ErrorInfo) -> NewEvent {
    NewEvent::typed(EventData::StepFailed(StepFailed {
        idx,
        error: error.clone(),
        role: None,
        attempt: None,
        duration_ms: None,
        will_retry: None,
    }))
}

#[cfg(test)]
mod tests;
