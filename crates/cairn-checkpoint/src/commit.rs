//! The end of a step as it crosses the contract: a [`StepCommit`] says
//! what became of the attempt ([`StepTransition`]), and [`StepCommit::rows`]
//! derives, in this one function, every value the backends write for it
//! (step and run status, cursor, errors, the next step, the retry timer,
//! the wait to open). A combination the rows cannot take (a success that
//! leaves the cursor in place, a wait without its wait, a retry without a
//! timer) cannot be built.

use std::time::Duration;

use serde_json::Value;

use cairn_core::{
    Attempt, CrewDef, ErrorInfo, Fence, JoinRule, NewEvent, NewWait, OnParentClose, Role, RunId,
    RunStatus, StepIdx, StepStatus, Usage,
};

/// The end of one step, written in one transaction with the run's new
/// cursor and status and the events; fenced by `fence`. A success that
/// does not end the run marks the next step `running` in the same
/// transaction, so an in-flight step needs no commit of its own.
#[derive(Debug, Clone)]
pub struct StepCommit {
    pub run_id: RunId,
    /// The holder's lease: the run row is written only while it is
    /// `running` at this epoch under this owner.
    pub fence: Fence,
    pub idx: StepIdx,
    pub attempt: Attempt,
    /// Tokens the attempt used, whatever became of it.
    pub usage: Option<Usage>,
    pub events: Vec<NewEvent>,
    pub transition: StepTransition,
    /// The run is a child (`RunRecord::child`): a commit that ends it
    /// settles its parent's join in the same transaction.
    pub child: bool,
}

/// What became of the attempt, and with it of the run.
#[derive(Debug, Clone, PartialEq)]
pub enum StepTransition {
    /// The step succeeded: its output is kept, the cursor moves past it.
    Succeeded { output: Value, next: Next },
    /// The step waits for a person: the run waits at it, and `wait` opens
    /// in the same transaction. `output` is a draft kept for review.
    Waiting {
        output: Option<Value>,
        wait: NewWait,
    },
    /// The attempt failed and another follows: the run is queued again,
    /// claimable only `after` this long (database clock; a durable timer).
    Retry { error: ErrorInfo, after: Duration },
    /// The attempt failed for good: the step and the run fail with `error`.
    Failed { error: ErrorInfo },
    /// The step was interrupted: step and run are `interrupted` with
    /// `error`, and carry on when the run is continued.
    Interrupted { error: ErrorInfo },
    /// The step waits for its provider key's pause: the step is
    /// `interrupted` with `error` and the run `queued`, claimable `after`
    /// this long, the same attempt (no retry spent). With `pause`, its own
    /// call was refused, and the key is paused for every run in the same
    /// transaction (`script::pauses`).
    Deferred {
        error: ErrorInfo,
        after: Duration,
        key: String,
        pause: bool,
    },
    /// An operator cancelled the run: step and run are `cancelled`.
    Cancelled { error: ErrorInfo },
    /// The step starts children and waits for their join, holding
    /// nothing: step and run are `waiting`, and the children (`queued`)
    /// and the join are written in the same transaction.
    Spawn(Box<SpawnCommit>),
    /// A `signal` step succeeded with the signal `signal`, which the same
    /// transaction consumes (`script::signals`): otherwise as `Succeeded`.
    Consumed {
        output: Value,
        next: Next,
        signal: String,
    },
    /// A `signal` step waits for one of `names`: step and run are
    /// `waiting`, and its signal wait opens in the same transaction (its
    /// deadline `timeout` from the first time it opened at this attempt);
    /// a signal buffered meanwhile wakes the run at once.
    Listening {
        names: Vec<String>,
        timeout: Option<Duration>,
    },
}

/// What a `children` step's commit starts.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnCommit {
    pub rule: JoinRule,
    /// With `JoinRule::Quorum`; 0 otherwise.
    pub quorum: u32,
    pub on_parent_close: OnParentClose,
    /// Children beyond this many are inserted held (not claimable) and
    /// released one by one as their siblings settle.
    pub concurrency: Option<u32>,
    /// The children's depth (the parent's plus one).
    pub depth: u32,
    /// The crew every child runs unless it names its own.
    pub crew: CrewDef,
    /// In listing order; each id derived from (parent, step, attempt, key).
    pub children: Vec<NewChild>,
    /// The parent's wall-time limit in force: a child whose crew sets none
    /// gets what is left of it (the parent's limit less its age) as its own.
    pub wall_time: Option<u64>,
}

/// One child a spawn starts.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChild {
    pub id: RunId,
    pub key: String,
    pub input: Value,
    /// Its own crew (an `llm` agent's `delegate` call picks one), instead
    /// of the spawn's.
    pub crew: Option<Box<CrewDef>>,
}

/// What follows a step that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The next step (at the new cursor) starts, attempt 1, with this role.
    Step(Role),
    /// It was the last step: the run succeeds.
    RunSucceeded,
}

/// The values a [`StepCommit`] writes, derived by [`StepCommit::rows`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRows<'a> {
    pub status: StepStatus,
    /// The step's output (`None` stores none).
    pub output: Option<&'a Value>,
    /// The attempt's error. `None` keeps the row's last error: a step that
    /// succeeded on a retry still shows why it needed one.
    pub error: Option<&'a ErrorInfo>,
    pub run_status: RunStatus,
    pub cursor: StepIdx,
    pub run_error: Option<&'a ErrorInfo>,
    /// The step to mark `running` (index and role).
    pub start_next: Option<(StepIdx, &'a Role)>,
    /// With `run_status = Queued`: when the run may be claimed again.
    pub retry_after: Option<Duration>,
    /// With `status = Waiting`: the wait to open.
    pub open_wait: Option<&'a NewWait>,
}

impl StepCommit {
    /// The rows this commit writes: the one place they are derived from
    /// its transition, for both backends and their checks.
    pub fn rows(&self) -> StepRows<'_> {
        let idx = self.idx;
        let stays = |status, run_status, error| stays(idx, status, run_status, error);
        match &self.transition {
            StepTransition::Succeeded { output, next }
            | StepTransition::Consumed { output, next, .. } => StepRows {
                status: StepStatus::Succeeded,
                output: Some(output),
                error: None,
                run_status: match next {
                    Next::Step(_) => RunStatus::Running,
                    Next::RunSucceeded => RunStatus::Succeeded,
                },
                cursor: idx.next(),
                run_error: None,
                start_next: match next {
                    Next::Step(role) => Some((idx.next(), role)),
                    Next::RunSucceeded => None,
                },
                retry_after: None,
                open_wait: None,
            },
            StepTransition::Waiting { output, wait } => waits(idx, output.as_ref(), Some(wait)),
            // Waits too, for its children's join (no wait of a person).
            StepTransition::Spawn(_) | StepTransition::Listening { .. } => waits(idx, None, None),
            StepTransition::Retry { error, after } => StepRows {
                run_error: None,
                retry_after: Some(*after),
                ..stays(StepStatus::Failed, RunStatus::Queued, error)
            },
            StepTransition::Failed { error } => stays(StepStatus::Failed, RunStatus::Failed, error),
            StepTransition::Interrupted { error } => {
                stays(StepStatus::Interrupted, RunStatus::Interrupted, error)
            }
            StepTransition::Deferred { error, after, .. } => StepRows {
                run_error: None,
                retry_after: Some(*after),
                ..stays(StepStatus::Interrupted, RunStatus::Queued, error)
            },
            StepTransition::Cancelled { error } => {
                stays(StepStatus::Cancelled, RunStatus::Cancelled, error)
            }
        }
    }

    /// Whether the commit opens a wait (its own crash point).
    pub fn opens_wait(&self) -> bool {
        matches!(self.transition, StepTransition::Waiting { .. })
    }

    /// Whether the commit writes more than its rows, in the same
    /// transaction (`script::children::follow_up_in`): a spawn's children,
    /// or a child's end settling its parent's join, or a child's
    /// interruption recorded on its parent, or a cancel reaching the run's
    /// own children, or a deferral naming its provider key, or a signal
    /// consumed or waited for.
    pub fn follows_up(&self) -> bool {
        matches!(
            self.transition,
            StepTransition::Spawn(_)
                | StepTransition::Cancelled { .. }
                | StepTransition::Deferred { .. }
                | StepTransition::Consumed { .. }
                | StepTransition::Listening { .. }
        ) || (self.child
            && (self.rows().finishes()
                || matches!(self.transition, StepTransition::Interrupted { .. })))
    }
}

/// The rows of a step and run that wait at the cursor: for a person
/// (`wait`), or for children.
fn waits<'a>(idx: StepIdx, output: Option<&'a Value>, wait: Option<&'a NewWait>) -> StepRows<'a> {
    StepRows {
        status: StepStatus::Waiting,
        output,
        error: None,
        run_status: RunStatus::Waiting,
        cursor: idx,
        run_error: None,
        start_next: None,
        retry_after: None,
        open_wait: wait,
    }
}

/// The rows of a retry, a failure, an interruption or a cancel: the cursor
/// stays put, and the step's error is the run's (a retry's run has none).
fn stays(
    idx: StepIdx,
    status: StepStatus,
    run_status: RunStatus,
    error: &ErrorInfo,
) -> StepRows<'_> {
    StepRows {
        status,
        output: None,
        error: Some(error),
        run_status,
        cursor: idx,
        run_error: Some(error),
        start_next: None,
        retry_after: None,
        open_wait: None,
    }
}

impl StepRows<'_> {
    /// Whether the run ends with this commit.
    pub fn finishes(&self) -> bool {
        matches!(
            self.run_status,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

/// A step's cost as its row stores it (`steps.cost_nanos`): NULL when none
/// of its calls was priced.
pub(crate) fn cost_nanos(usage: Option<cairn_core::Usage>) -> Option<i64> {
    usage
        .filter(|u| !u.cost_usd.is_zero())
        .map(|u| i64::try_from(u.cost_usd.0).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use cairn_core::{ErrorKind, WaitId, WaitKind};
    use serde_json::json;

    use super::*;

    fn commit(transition: StepTransition) -> StepCommit {
        StepCommit {
            run_id: RunId::new(),
            fence: Fence::new(cairn_core::LeaseEpoch(3), "w"),
            idx: StepIdx(1),
            attempt: Attempt(2),
            usage: None,
            events: vec![],
            transition,
            child: false,
        }
    }

    /// Each transition's rows: (step status, run status, cursor, next step,
    /// retry timer, whether the step and the run carry an error).
    #[test]
    fn a_transition_derives_its_rows() {
        let e = ErrorInfo::new(ErrorKind::ExitStatus, "exit 1", true);
        let wait = NewWait {
            id: WaitId::new(),
            kind: WaitKind::Review,
            prompt: json!("draft"),
            question_id: None,
            deadline_ms: None,
            on_deadline: None,
        };
        let second = Duration::from_secs(1);
        let role = Role::new("b");
        use RunStatus as R;
        use StepStatus as S;
        let cases = [
            (
                StepTransition::Succeeded {
                    output: json!(1),
                    next: Next::Step(role.clone()),
                },
                (
                    S::Succeeded,
                    R::Running,
                    2,
                    Some((StepIdx(2), &role)),
                    None,
                    (false, false),
                ),
            ),
            (
                StepTransition::Succeeded {
                    output: json!(1),
                    next: Next::RunSucceeded,
                },
                (S::Succeeded, R::Succeeded, 2, None, None, (false, false)),
            ),
            (
                StepTransition::Consumed {
                    output: json!({"paid": 3}),
                    next: Next::RunSucceeded,
                    signal: "evt-1".into(),
                },
                (S::Succeeded, R::Succeeded, 2, None, None, (false, false)),
            ),
            (
                StepTransition::Listening {
                    names: vec!["paid".into()],
                    timeout: Some(second),
                },
                (S::Waiting, R::Waiting, 1, None, None, (false, false)),
            ),
            (
                StepTransition::Waiting {
                    output: None,
                    wait: wait.clone(),
                },
                (S::Waiting, R::Waiting, 1, None, None, (false, false)),
            ),
            (
                StepTransition::Retry {
                    error: e.clone(),
                    after: second,
                },
                (S::Failed, R::Queued, 1, None, Some(second), (true, false)),
            ),
            (
                StepTransition::Failed { error: e.clone() },
                (S::Failed, R::Failed, 1, None, None, (true, true)),
            ),
            (
                StepTransition::Interrupted { error: e.clone() },
                (S::Interrupted, R::Interrupted, 1, None, None, (true, true)),
            ),
            (
                StepTransition::Cancelled { error: e.clone() },
                (S::Cancelled, R::Cancelled, 1, None, None, (true, true)),
            ),
            (
                StepTransition::Deferred {
                    error: e.clone(),
                    after: second,
                    key: "provider=scripted,script=s.toml".into(),
                    pause: true,
                },
                (
                    S::Interrupted,
                    R::Queued,
                    1,
                    None,
                    Some(second),
                    (true, false),
                ),
            ),
        ];
        for (transition, (status, run_status, cursor, next, retry, errors)) in cases {
            let name = format!("{transition:?}");
            let c = commit(transition);
            let r = c.rows();
            assert_eq!(
                (
                    r.status,
                    r.run_status,
                    r.cursor,
                    r.start_next,
                    r.retry_after
                ),
                (status, run_status, StepIdx(cursor), next, retry),
                "{name}"
            );
            assert_eq!((r.error.is_some(), r.run_error.is_some()), errors, "{name}");
            assert_eq!(r.open_wait.is_some(), c.opens_wait(), "{name}");
            assert_eq!(r.output.is_some(), status == S::Succeeded, "{name}");
        }
    }
}
