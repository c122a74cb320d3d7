//! What a step's result means, decided in one place and without I/O: a
//! step's result plus where the run stands → a [`StepOutcome`] → the one
//! [`StepCommit`] that records it, a `StepTransition` and its events
//! ([`commit`], the only place the executor builds a commit, a
//! cancellation included).

use std::time::Duration;

use serde_json::{json, Value};

use cairn_checkpoint::{NewChild, Next, SpawnCommit, StepCommit, StepTransition};
use cairn_core::event::payload::{
    ChildrenSpawned, KeyPaused, RunCancelled, RunFailed, RunSucceeded, SignalConsumed,
    SignalWaitOpened, StepCancelled, StepDeferred, StepFailed, StepInterrupted, StepRetryScheduled,
    StepSucceeded, WaitOpened,
};
use cairn_core::{
    AgentDef, AgentKind, ApprovalPoint, Attempt, CrewDef, Deferral, ErrorInfo, ErrorKind,
    EventData, Fence, Heard, JoinRule, Listen, NewEvent, NewWait, OnDeadline, OnParentClose, Role,
    RunId, Spawn, StepIdx, StepOutput, Stop, Usage, WaitId, WaitKind,
};

/// The step being decided: which run, which step and attempt, its agent.
#[derive(Debug, Clone)]
pub(crate) struct Dispatch<'a> {
    pub run: RunId,
    /// The lease the commit is fenced by.
    pub fence: Fence,
    pub step_count: u32,
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub def: &'a AgentDef,
    /// The role of the next step, which a success marks running.
    pub next: Option<Role>,
    /// The run's depth (0 unless it is a child) and whether it is a child
    /// (whose end settles its parent's join).
    pub depth: u32,
    pub child: bool,
    /// The run's wall-time limit in force (its budget's), which children
    /// it starts inherit what is left of.
    pub wall_time: Option<u64>,
}

/// What became of a step. Each variant carries only what its commit needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StepOutcome {
    /// The step's output is kept; `last` ends the run.
    Succeeded {
        output: Value,
        usage: Option<Usage>,
        last: bool,
        duration_ms: u64,
    },
    /// The attempt failed; the run is queued again after `delay`.
    Retry {
        error: ErrorInfo,
        delay: Duration,
        duration_ms: u64,
    },
    /// The attempt failed and no other follows: the run fails.
    Failed { error: ErrorInfo, duration_ms: u64 },
    /// The step waits for a person (review, approval or question).
    Wait {
        kind: WaitKind,
        output: Option<Value>,
        prompt: Value,
        question_id: Option<String>,
    },
    /// The step was interrupted (it carries on when the run is continued).
    Interrupted { error: ErrorInfo, duration_ms: u64 },
    /// The step waits for its provider key's pause: the run is queued
    /// again at its end, the same attempt (`deferral` says how long).
    Deferred {
        error: ErrorInfo,
        deferral: Deferral,
        duration_ms: u64,
    },
    /// An operator cancelled the run.
    Cancelled,
    /// A `children` step (or an `llm` agent's `delegate` calls) starts
    /// these children and waits for their join.
    Spawn { spawn: Spawn },
    /// A `signal` step heard `signal`: its output commits, and the commit
    /// consumes the signal.
    Consumed {
        output: Value,
        signal: String,
        name: String,
        last: bool,
    },
    /// A `signal` step heard nothing yet: it waits for `names`.
    Listening {
        names: Vec<String>,
        timeout: Option<Duration>,
    },
}

/// What a `signal` step's wait (`listen`) means, given what storage holds
/// for it (`SignalStore::heard`): the signal to consume, its default or
/// its failure at the timeout, or a wait.
pub(crate) fn heard(step: &Dispatch<'_>, listen: Listen, heard: Heard) -> StepOutcome {
    let last = step.idx.get() + 1 == step.step_count;
    match heard {
        Heard::Signal(s) => StepOutcome::Consumed {
            output: listen.output(&s),
            signal: s.id,
            name: s.name,
            last,
        },
        Heard::TimedOut => match listen.default {
            Some(output) => StepOutcome::Succeeded {
                output,
                usage: None,
                last,
                duration_ms: 0,
            },
            None => {
                let waited = listen.timeout.map_or(0, |t| t.as_millis());
                let message = format!(
                    "step `{}` waited {waited} ms for signal `{}` and none came",
                    step.def.role,
                    listen.names.join("` or `")
                );
                StepOutcome::Failed {
                    error: ErrorInfo::new(ErrorKind::Deadline, message, false),
                    duration_ms: 0,
                }
            }
        },
        Heard::Nothing => StepOutcome::Listening {
            names: listen.names,
            timeout: listen.timeout,
        },
    }
}

/// Before dispatch: a step that needs approval first and has none waits
/// for it (and does not run).
pub(crate) fn gate(step: &Dispatch<'_>, approved: bool) -> Option<StepOutcome> {
    (step.def.approval == Some(ApprovalPoint::Before) && !approved).then(|| StepOutcome::Wait {
        kind: WaitKind::Approval,
        output: None,
        prompt: json!({"idx": step.idx, "role": step.def.role, "attempt": step.attempt}),
        question_id: None,
    })
}

/// An output over `max_bytes` is never stored, not even in part: it fails
/// the step, and a retry would only produce it again.
pub(crate) fn size_checked(
    result: Result<StepOutput, Stop>,
    max_bytes: usize,
) -> Result<StepOutput, Stop> {
    result.and_then(|out| {
        cairn_core::check_size("the step's output", &out.output, max_bytes)
            .map(|()| out)
            .map_err(|e| ErrorInfo::new(ErrorKind::TooLarge, e.to_string(), false).into())
    })
}

/// An output storage cannot keep (a NUL character, refused by both
/// backends) fails the step for good, named, instead of failing its commit
/// on every takeover. A question with one fails it the same way. An error
/// message is diagnostic text: a NUL in it becomes U+FFFD so the failure
/// itself can be stored.
pub(crate) fn storable_checked(result: Result<StepOutput, Stop>) -> Result<StepOutput, Stop> {
    let refuse = |what: &str, usage| {
        Stop::Failed(ErrorInfo {
            usage,
            ..ErrorInfo::new(
                ErrorKind::Unstorable,
                cairn_core::Unstorable {
                    what: what.to_owned(),
                }
                .to_string(),
                false,
            )
        })
    };
    let has_nul = cairn_core::caps::has_nul;
    match result {
        Ok(out) if cairn_core::json_has_nul(&out.output) => {
            Err(refuse("the step's output", out.usage))
        }
        Err(Stop::Ask(q)) if has_nul(&q.prompt) || has_nul(&q.id) => {
            Err(refuse("the step's question", None))
        }
        Err(Stop::Failed(mut e)) => {
            if has_nul(&e.message) {
                e.message = e.message.replace('\0', "\u{FFFD}");
            }
            Err(Stop::Failed(e))
        }
        other => other,
    }
}

/// What a dispatched step's (size-checked) result means: one match over
/// how it ended.
pub(crate) fn decide(
    step: &Dispatch<'_>,
    result: Result<StepOutput, Stop>,
    duration: Duration,
) -> StepOutcome {
    let duration_ms = duration.as_millis() as u64;
    match result {
        Ok(out) if step.def.review => StepOutcome::Wait {
            kind: WaitKind::Review,
            output: Some(out.output.clone()),
            prompt: out.output,
            question_id: None,
        },
        Ok(out) => StepOutcome::Succeeded {
            output: out.output,
            usage: out.usage,
            last: step.idx.get() + 1 == step.step_count,
            duration_ms,
        },
        Err(Stop::Spawn(spawn)) => StepOutcome::Spawn { spawn },
        // The executor reads what a listening step heard first
        // (`Executor::listened`); decided without that read, it waits.
        Err(Stop::Listen(listen)) => heard(step, listen, Heard::Nothing),
        Err(Stop::Ask(q)) => StepOutcome::Wait {
            kind: WaitKind::Question,
            output: None,
            prompt: json!({"question": q.prompt}),
            question_id: Some(q.id),
        },
        Err(Stop::Defer { error, deferral }) => StepOutcome::Deferred {
            error,
            deferral: *deferral,
            duration_ms,
        },
        Err(Stop::Failed(error))
            if matches!(
                error.kind,
                ErrorKind::Interrupted | ErrorKind::BudgetExceeded
            ) =>
        {
            StepOutcome::Interrupted { error, duration_ms }
        }
        Err(Stop::Failed(error)) => match retry_delay(step, &error) {
            Some(delay) => StepOutcome::Retry {
                error,
                delay,
                duration_ms,
            },
            None => StepOutcome::Failed { error, duration_ms },
        },
    }
}

/// The back-off before the next attempt, if the error and the policy allow
/// one. Deterministic: the same (run, step, attempt) always waits the same.
fn retry_delay(step: &Dispatch<'_>, error: &ErrorInfo) -> Option<Duration> {
    let policy = step.def.retry_policy();
    let attempt = step.attempt.get();
    (error.retryable && policy.allows_another(attempt)).then(|| {
        let seed = (step.run.as_uuid().as_u128() as u64)
            ^ (u64::from(step.idx.get()) << 32)
            ^ u64::from(attempt);
        // A provider's `retry-after` is a floor, not a replacement.
        policy
            .delay_after(attempt, seed)
            .max(error.retry_after.unwrap_or_default())
    })
}

/// The one place a [`StepCommit`] is built: the transition of the step and
/// run, and the events that record `outcome` (the rows follow from the
/// transition, `StepCommit::rows`).
pub(crate) fn commit(step: &Dispatch<'_>, outcome: StepOutcome) -> StepCommit {
    let (idx, attempt) = (step.idx, step.attempt);
    let role = &step.def.role;
    let (transition, usage, events) = match outcome {
        StepOutcome::Succeeded {
            output,
            usage,
            last,
            duration_ms,
        } => {
            let mut events = vec![NewEvent::typed(EventData::StepSucceeded(StepSucceeded {
                idx,
                attempt,
                role: Some(role.clone()),
                duration_ms: Some(duration_ms),
                input_tokens: usage.map(|u| u.input_tokens),
                output_tokens: usage.map(|u| u.output_tokens),
                reviewed_by: None,
            }))];
            let next = match (last, step.next.clone()) {
                (true, _) => Next::RunSucceeded,
                (false, Some(role)) => Next::Step(role),
                (false, None) => return no_next_step(step, usage, events),
            };
            if next == Next::RunSucceeded {
                events.push(NewEvent::typed(EventData::RunSucceeded(RunSucceeded {
                    steps: Some(step.step_count),
                    copied_from: None,
                })));
            }
            (StepTransition::Succeeded { output, next }, usage, events)
        }
        StepOutcome::Retry {
            error,
            delay,
            duration_ms,
        } => {
            let mut events = vec![step_failed(step, duration_ms, &error, true)];
            events.push(NewEvent::typed(EventData::StepRetryScheduled(
                StepRetryScheduled {
                    idx,
                    next_attempt: Attempt(attempt.get() + 1),
                    delay_ms: delay.as_millis() as u64,
                },
            )));
            let usage = error.usage;
            (
                StepTransition::Retry {
                    error,
                    after: delay,
                },
                usage,
                events,
            )
        }
        StepOutcome::Failed { error, duration_ms } => {
            let events = vec![
                step_failed(step, duration_ms, &error, false),
                run_failed(step, &error),
            ];
            let usage = error.usage;
            (StepTransition::Failed { error }, usage, events)
        }
        StepOutcome::Wait {
            kind,
            output,
            prompt,
            question_id,
        } => waiting(step, kind, output, prompt, question_id),
        StepOutcome::Interrupted { error, duration_ms } => {
            let events = vec![NewEvent::typed(EventData::StepInterrupted(
                StepInterrupted {
                    idx,
                    role: role.clone(),
                    attempt,
                    duration_ms,
                    error: error.clone(),
                },
            ))];
            let usage = error.usage;
            (StepTransition::Interrupted { error }, usage, events)
        }
        StepOutcome::Deferred {
            error,
            deferral,
            duration_ms,
        } => {
            let events = deferred_events(step, duration_ms, &error, &deferral);
            let usage = error.usage;
            let transition = StepTransition::Deferred {
                error,
                after: deferral.after,
                key: deferral.key,
                pause: deferral.observed,
            };
            (transition, usage, events)
        }
        StepOutcome::Cancelled => {
            let error = ErrorInfo::new(ErrorKind::Cancelled, "cancelled by an operator", false);
            let events = vec![
                NewEvent::typed(EventData::StepCancelled(StepCancelled { idx, attempt })),
                NewEvent::typed(EventData::RunCancelled(RunCancelled::AtStep { idx })),
            ];
            (StepTransition::Cancelled { error }, None, events)
        }
        StepOutcome::Consumed {
            output,
            signal,
            name,
            last,
        } => return consumed(step, output, signal, name, last),
        StepOutcome::Listening { names, timeout } => listening(step, names, timeout),
        StepOutcome::Spawn { spawn: request } => match spawn(step, request) {
            Ok((spawn, events)) => (StepTransition::Spawn(Box::new(spawn)), None, events),
            Err(error) => {
                return commit(
                    step,
                    StepOutcome::Failed {
                        error,
                        duration_ms: 0,
                    },
                )
            }
        },
    };
    StepCommit {
        run_id: step.run,
        fence: step.fence.clone(),
        idx,
        attempt,
        usage,
        events,
        transition,
        child: step.child,
    }
}

/// The transition and event of a step that waits for a person.
fn waiting(
    step: &Dispatch<'_>,
    kind: WaitKind,
    output: Option<Value>,
    prompt: Value,
    question_id: Option<String>,
) -> (StepTransition, Option<Usage>, Vec<NewEvent>) {
    let wait = NewWait {
        id: WaitId::new(),
        kind,
        prompt,
        question_id,
        deadline_ms: step.def.wait_deadline_ms,
        on_deadline: step
            .def
            .on_deadline
            .clone()
            .or(step.def.wait_deadline_ms.map(|_| OnDeadline::Fail)),
    };
    let events = vec![NewEvent::typed(EventData::WaitOpened(WaitOpened {
        wait: wait.id,
        kind,
        idx: step.idx,
        attempt: step.attempt,
        approvers: step.def.approvers.clone(),
    }))];
    (StepTransition::Waiting { output, wait }, None, events)
}

/// The transition and event of a `signal` step that waits for `names`.
fn listening(
    step: &Dispatch<'_>,
    names: Vec<String>,
    timeout: Option<Duration>,
) -> (StepTransition, Option<Usage>, Vec<NewEvent>) {
    let events = vec![NewEvent::typed(EventData::SignalWaitOpened(
        SignalWaitOpened {
            idx: step.idx,
            attempt: step.attempt,
            names: names.clone(),
            timeout_ms: timeout.map(|t| t.as_millis() as u64),
        },
    ))];
    (StepTransition::Listening { names, timeout }, None, events)
}

/// A success that consumes `signal`: as any success, its transition
/// naming the signal so the commit consumes it, after `signal_consumed`.
fn consumed(
    step: &Dispatch<'_>,
    output: Value,
    signal: String,
    name: String,
    last: bool,
) -> StepCommit {
    let success = StepOutcome::Succeeded {
        output,
        usage: None,
        last,
        duration_ms: 0,
    };
    let mut c = commit(step, success);
    if let StepTransition::Succeeded { output, next } = c.transition {
        c.events.insert(
            0,
            NewEvent::typed(EventData::SignalConsumed(SignalConsumed {
                idx: step.idx,
                attempt: step.attempt,
                id: signal.clone(),
                name,
            })),
        );
        c.transition = StepTransition::Consumed {
            output,
            next,
            signal,
        };
    }
    c
}

/// How a step's children join, and which crew each runs.
struct SpawnPlan {
    rule: JoinRule,
    quorum: Option<u32>,
    on_parent_close: OnParentClose,
    concurrency: Option<u32>,
    max_depth: u32,
    crew: CrewDef,
    /// Each child's own crew (`delegate`), in the request's order.
    own: Vec<Option<Box<CrewDef>>>,
}

/// A `children` step's settings, or an `llm` agent's for its `delegate`
/// calls (all must settle, a child per call, each on the crew it named).
fn spawn_plan(step: &Dispatch<'_>, request: &Spawn) -> Result<SpawnPlan, String> {
    match &step.def.kind {
        AgentKind::Children(def) => {
            let crew = def.crew_def.as_deref().cloned().ok_or_else(|| {
                format!(
                    "the crew `{}` of step `{}` was not resolved when the crew was loaded",
                    def.crew, step.def.role
                )
            })?;
            let own = request
                .children
                .iter()
                .map(|c| match &c.crew {
                    None => Ok(None),
                    Some(file) => def.child_crews.get(file).cloned().map(Box::new).map(Some).ok_or_else(|| {
                        format!("the crew `{file}` of child `{}` was not resolved when the crew was loaded", c.key)
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(SpawnPlan {
                rule: def.join,
                quorum: def.quorum,
                on_parent_close: def.on_parent_close,
                concurrency: def.concurrency,
                max_depth: def.max_depth(),
                crew,
                own,
            })
        }
        _ => match step.def.delegates() {
            Some((_, defs)) => delegation_plan(step, request, defs),
            None => Err(format!("step `{}` does not start children", step.def.role)),
        },
    }
}

/// The spawn an `llm` agent's `delegate` calls or a command's spawn
/// request asks for: all must settle, a child per entry, each on the crew
/// it named (one of the step's `delegate` crews).
fn delegation_plan(
    step: &Dispatch<'_>,
    request: &Spawn,
    defs: &[CrewDef],
) -> Result<SpawnPlan, String> {
    if request.crews.len() != request.children.len() {
        return Err(format!(
            "step `{}` named {} crews for {} children",
            step.def.role,
            request.crews.len(),
            request.children.len()
        ));
    }
    let own = request
        .crews
        .iter()
        .map(|name| match defs.iter().find(|c| c.name == *name) {
            Some(crew) => Ok(Some(Box::new(crew.clone()))),
            None => {
                let names: Vec<&str> = defs.iter().map(|c| c.name.as_str()).collect();
                Err(format!(
                    "step `{}` may not start crew `{name}` (its `delegate` crews: {})",
                    step.def.role,
                    names.join(", ")
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first = own.first().and_then(|c| c.as_deref()).cloned();
    Ok(SpawnPlan {
        rule: JoinRule::All,
        quorum: None,
        on_parent_close: OnParentClose::Cancel,
        concurrency: None,
        max_depth: cairn_core::children::DEFAULT_MAX_DEPTH,
        crew: first.ok_or_else(|| "a spawn with no child".to_owned())?,
        own,
    })
}

/// The spawn of a `children` step (or of an `llm` agent's `delegate`
/// calls) and its event, or why it cannot start them (the step fails, not
/// retried: a retry would list the same).
fn spawn(step: &Dispatch<'_>, request: Spawn) -> Result<(SpawnCommit, Vec<NewEvent>), ErrorInfo> {
    let fail = |m: String| ErrorInfo::new(ErrorKind::Children, m, false);
    if request.children.is_empty() {
        // Agents decide a join over no child themselves; a spawn of none
        // would wait for ever.
        return Err(fail("a spawn with no child".into()));
    }
    let plan = spawn_plan(step, &request).map_err(fail)?;
    let depth = step.depth + 1;
    if depth > plan.max_depth {
        return Err(fail(format!(
            "its children would run at depth {depth}, over the step's `max_depth` of {}",
            plan.max_depth
        )));
    }
    let mut crews: Vec<&str> = vec![plan.crew.name.as_str()];
    for own in plan.own.iter().flatten() {
        if !crews.contains(&own.name.as_str()) {
            crews.push(own.name.as_str());
        }
    }
    let event = NewEvent::typed(EventData::ChildrenSpawned(ChildrenSpawned {
        idx: step.idx,
        attempt: step.attempt,
        join: plan.rule,
        quorum: plan.quorum,
        children: request.children.len() as u32,
        crew: plan.crew.name.clone(),
        crews: crews.into_iter().map(str::to_owned).collect(),
        concurrency: plan.concurrency,
    }));
    let children = request
        .children
        .into_iter()
        .zip(plan.own)
        .map(|(c, crew)| NewChild {
            id: cairn_core::child_id(step.run, step.idx, step.attempt, &c.key),
            key: c.key,
            input: c.input,
            crew,
        })
        .collect();
    let spawn = SpawnCommit {
        rule: plan.rule,
        quorum: plan.quorum.unwrap_or(0),
        on_parent_close: plan.on_parent_close,
        concurrency: plan.concurrency,
        depth,
        crew: plan.crew,
        children,
        wall_time: step.wall_time,
    };
    Ok((spawn, vec![event]))
}

/// A success that is not the last step, of a crew with no agent after it:
/// the run's step count and its crew disagree, so the run fails
/// `corruption` (the step's success is recorded first) instead of waiting
/// at a step nothing can run.
fn no_next_step(
    step: &Dispatch<'_>,
    usage: Option<Usage>,
    mut events: Vec<NewEvent>,
) -> StepCommit {
    let error = ErrorInfo::new(
        ErrorKind::Corruption,
        format!("the crew has no agent for step {}", step.idx.next()),
        false,
    );
    events.push(run_failed(step, &error));
    StepCommit {
        run_id: step.run,
        fence: step.fence.clone(),
        idx: step.idx,
        attempt: step.attempt,
        usage,
        events,
        transition: StepTransition::Failed { error },
        child: step.child,
    }
}

/// A deferral's events: `step_deferred` (`data` and the key, the delay,
/// whether its own call was refused, and why it waits as people read it:
/// a paused key, a capped `Retry-After`, no permit free), and with its own
/// call refused, `key_paused`.
fn deferred_events(
    step: &Dispatch<'_>,
    duration_ms: u64,
    error: &ErrorInfo,
    deferral: &Deferral,
) -> Vec<NewEvent> {
    let delay_ms = deferral.after.as_millis() as u64;
    let mut events = vec![NewEvent::typed(EventData::StepDeferred(StepDeferred {
        idx: step.idx,
        role: step.def.role.clone(),
        attempt: step.attempt,
        duration_ms,
        key: deferral.key.clone(),
        delay_ms,
        observed: deferral.observed,
        message: Some(error.message.clone()),
    }))];
    if deferral.observed {
        events.push(NewEvent::typed(EventData::KeyPaused(KeyPaused {
            key: deferral.key.clone(),
            for_ms: delay_ms,
            reason: error.message.clone(),
        })));
    }
    events
}

/// `step_failed` of a finished attempt, saying whether another follows.
fn step_failed(
    step: &Dispatch<'_>,
    duration_ms: u64,
    error: &ErrorInfo,
    will_retry: bool,
) -> NewEvent {
    NewEvent::typed(EventData::StepFailed(StepFailed {
        idx: step.idx,
        error: error.clone(),
        role: Some(step.def.role.clone()),
        attempt: Some(step.attempt),
        duration_ms: Some(duration_ms),
        will_retry: Some(will_retry),
    }))
}

/// `run_failed` by this step's last attempt.
fn run_failed(step: &Dispatch<'_>, error: &ErrorInfo) -> NewEvent {
    NewEvent::typed(EventData::RunFailed(RunFailed {
        error: error.clone(),
        idx: Some(step.idx),
        attempts: Some(step.attempt.get()),
        set_aside: false,
    }))
}

#[cfg(test)]
mod tests;
