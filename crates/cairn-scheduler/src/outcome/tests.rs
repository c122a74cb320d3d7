//! The decision, case by case, with no database: a step's result and where
//! the run stands → its outcome; then what each outcome commits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use cairn_core::Stop;
use cairn_core::{AgentKind, EventKind, RetryPolicy, RunStatus, StepStatus};

/// One case: the agent, where the step stands, and what it returned.
struct Input {
    def: AgentDef,
    idx: u32,
    step_count: u32,
    attempt: u32,
    approved: bool,
    result: Result<StepOutput, Stop>,
}

/// What the case must decide. A retry's delay is checked against a floor
/// (the policy's jitter makes it a range), and must be the same every time.
#[derive(Debug)]
enum Expected {
    Is(StepOutcome),
    RetryAtLeast(ErrorInfo, Duration),
}

const MAX_OUTPUT: usize = 64;
const DURATION: Duration = Duration::from_millis(1234);

fn agent() -> AgentDef {
    AgentDef::new(
        "writer",
        AgentKind::Template {
            template: "x".into(),
        },
    )
}

fn with(f: impl FnOnce(&mut AgentDef)) -> AgentDef {
    let mut def = agent();
    f(&mut def);
    def
}

fn input(
    def: AgentDef,
    (idx, step_count, attempt): (u32, u32, u32),
    r: Result<Value, Stop>,
) -> Input {
    Input {
        def,
        idx,
        step_count,
        attempt,
        approved: false,
        result: r.map(StepOutput::new),
    }
}

fn err(kind: ErrorKind, retryable: bool) -> ErrorInfo {
    ErrorInfo::new(kind, "boom", retryable)
}

fn run_id() -> RunId {
    "0191e3a4-7b1c-7000-8000-000000000001".parse().unwrap()
}

fn dispatch(input: &Input) -> Dispatch<'_> {
    Dispatch {
        run: run_id(),
        fence: cairn_core::Fence::new(cairn_core::LeaseEpoch(7), "w"),
        step_count: input.step_count,
        idx: StepIdx(input.idx),
        attempt: Attempt(input.attempt),
        def: &input.def,
        next: Some(Role::new("next")),
        depth: 0,
        child: false,
        wall_time: None,
    }
}

/// The executor's path, minus the agent: gate, size check, decide.
fn outcome_of(input: &Input) -> StepOutcome {
    let step = dispatch(input);
    super::gate(&step, input.approved).unwrap_or_else(|| {
        let result = super::size_checked(input.result.clone(), MAX_OUTPUT);
        super::decide(&step, result, DURATION)
    })
}

fn check(name: &str, input: Input, expected: Expected) {
    let got = outcome_of(&input);
    assert_eq!(
        got,
        outcome_of(&input),
        "{name}: the decision is deterministic"
    );
    match (&expected, &got) {
        (Expected::Is(want), got) => assert_eq!(got, want, "{name}"),
        (
            Expected::RetryAtLeast(want, floor),
            StepOutcome::Retry {
                error,
                delay,
                duration_ms,
            },
        ) => {
            assert_eq!(error, want, "{name}");
            assert!(delay >= floor, "{name}: {delay:?} < {floor:?}");
            assert_eq!(*duration_ms, 1234, "{name}");
        }
        _ => panic!("{name}: expected {expected:?}, got {got:?}"),
    }
}

#[test]
fn a_result_decides_its_outcome() {
    let ms = 1234;
    let provider = |after: Option<Duration>| ErrorInfo {
        retry_after: after,
        ..err(ErrorKind::Provider, true)
    };
    let asked = Stop::ask("q1", "which?");
    let three_tries = |d: &mut AgentDef| {
        d.retry = Some(RetryPolicy {
            max_attempts: 3,
            initial_delay_ms: 100,
            multiplier: 2.0,
            max_delay_ms: 60_000,
            jitter: 0.5,
        })
    };
    let too_large = json!("x".repeat(MAX_OUTPUT + 1));
    let deferral = cairn_core::Deferral {
        key: "provider=scripted,script=s.toml".into(),
        after: Duration::from_secs(7),
        observed: true,
    };
    let deferred = Stop::deferred("429", deferral.clone());
    let too_large_error = super::size_checked(Ok(StepOutput::new(too_large.clone())), MAX_OUTPUT)
        .unwrap_err()
        .into_failure()
        .unwrap();
    // A three-try agent's step at (idx, step count, attempt) that failed.
    let failing = |at: (u32, u32, u32), kind: ErrorKind, retryable: bool| {
        input(with(three_tries), at, Err(err(kind, retryable).into()))
    };
    let failed = |error: ErrorInfo| {
        Expected::Is(StepOutcome::Failed {
            error,
            duration_ms: ms,
        })
    };
    let not_last = |output: Value| {
        Expected::Is(StepOutcome::Succeeded {
            output,
            usage: None,
            last: false,
            duration_ms: ms,
        })
    };
    let cases: Vec<(&str, Input, Expected)> = vec![
        (
            "success mid-run",
            input(agent(), (0, 3, 1), Ok(json!({"a": 1}))),
            not_last(json!({"a": 1})),
        ),
        (
            "success of the last step, with usage",
            Input {
                result: Ok(StepOutput::new(json!("done")).with_usage(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    cost_usd: Default::default(),
                })),
                ..input(agent(), (2, 3, 2), Ok(Value::Null))
            },
            Expected::Is(StepOutcome::Succeeded {
                output: json!("done"),
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    cost_usd: Default::default(),
                }),
                last: true,
                duration_ms: ms,
            }),
        ),
        (
            "review → a review wait holding the output",
            input(with(|d| d.review = true), (1, 3, 1), Ok(json!("draft"))),
            Expected::Is(StepOutcome::Wait {
                kind: WaitKind::Review,
                output: Some(json!("draft")),
                prompt: json!("draft"),
                question_id: None,
            }),
        ),
        (
            "approval before, not yet approved → an approval wait, nothing run",
            input(
                with(|d| d.approval = Some(ApprovalPoint::Before)),
                (1, 3, 2),
                Ok(json!("never used")),
            ),
            Expected::Is(StepOutcome::Wait {
                kind: WaitKind::Approval,
                output: None,
                prompt: json!({"idx": 1, "role": "writer", "attempt": 2}),
                question_id: None,
            }),
        ),
        (
            "approval before, approved → runs",
            Input {
                approved: true,
                ..input(
                    with(|d| d.approval = Some(ApprovalPoint::Before)),
                    (1, 3, 2),
                    Ok(json!("ran")),
                )
            },
            not_last(json!("ran")),
        ),
        (
            "question → a question wait",
            input(agent(), (0, 1, 1), Err(asked)),
            Expected::Is(StepOutcome::Wait {
                kind: WaitKind::Question,
                output: None,
                prompt: json!({"question": "which?"}),
                question_id: Some("q1".into()),
            }),
        ),
        (
            "retryable failure, attempts left → retry after the back-off",
            failing((0, 2, 2), ErrorKind::ExitStatus, true),
            Expected::RetryAtLeast(err(ErrorKind::ExitStatus, true), Duration::from_millis(100)),
        ),
        (
            "provider's retry-after above the back-off is the floor",
            input(
                with(three_tries),
                (0, 2, 1),
                Err(provider(Some(Duration::from_secs(90))).into()),
            ),
            Expected::RetryAtLeast(
                provider(Some(Duration::from_secs(90))),
                Duration::from_secs(90),
            ),
        ),
        (
            "retryable failure, out of attempts → failed",
            failing((1, 2, 3), ErrorKind::Timeout, true),
            failed(err(ErrorKind::Timeout, true)),
        ),
        (
            "permanent failure → failed at once",
            failing((1, 2, 1), ErrorKind::Agent, false),
            failed(err(ErrorKind::Agent, false)),
        ),
        (
            "interrupted → interrupted, never retried",
            failing((0, 2, 1), ErrorKind::Interrupted, true),
            Expected::Is(StepOutcome::Interrupted {
                error: err(ErrorKind::Interrupted, true),
                duration_ms: ms,
            }),
        ),
        (
            "too-large output → failed, not retried",
            input(with(three_tries), (0, 2, 1), Ok(too_large.clone())),
            failed(too_large_error.clone()),
        ),
        (
            "too-large output of a reviewed step → failed, no wait",
            input(with(|d| d.review = true), (0, 2, 1), Ok(too_large)),
            failed(too_large_error),
        ),
        (
            "a paused provider key on the last allowed attempt → deferred, no retry spent",
            input(agent(), (0, 2, 3), Err(deferred.clone())),
            Expected::Is(StepOutcome::Deferred {
                error: ErrorInfo::new(ErrorKind::RateLimited, "429", true),
                deferral,
                duration_ms: ms,
            }),
        ),
    ];
    for (name, input, expected) in cases {
        check(name, input, expected);
    }
}

#[test]
fn an_oversized_output_is_a_permanent_too_large_error() {
    let e = super::size_checked(Ok(StepOutput::new(json!("x".repeat(100)))), 10)
        .unwrap_err()
        .into_failure()
        .unwrap();
    assert_eq!((e.kind, e.retryable), (ErrorKind::TooLarge, false));
    assert!(super::size_checked(Ok(StepOutput::new(json!("ok"))), 10).is_ok());
}

/// What an outcome commits: step status, run status, cursor, and each
/// event's kind and data, exactly as the CLI's JSON and the tests read them.
#[test]
fn an_outcome_commits_its_rows_and_events() {
    let def = with(|d| d.wait_deadline_ms = Some(5000));
    let at = |idx, count, attempt| Input {
        def: def.clone(),
        idx,
        step_count: count,
        attempt,
        approved: false,
        result: Ok(StepOutput::new(Value::Null)),
    };
    let boom = err(ErrorKind::ExitStatus, true).with_usage(Usage {
        input_tokens: 1,
        output_tokens: 2,
        cost_usd: Default::default(),
    });
    let base = json!({"idx": 1, "role": "writer", "attempt": 2, "duration_ms": 1234});
    let merge = |extra: Value| {
        let mut data = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            data[k] = v.clone();
        }
        data
    };
    let cases = vec![
        (
            at(1, 3, 2),
            StepOutcome::Succeeded {
                output: json!("out"),
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    cost_usd: Default::default(),
                }),
                last: false,
                duration_ms: 1234,
            },
            (StepStatus::Succeeded, RunStatus::Running, 2),
            vec![(
                EventKind::StepSucceeded,
                merge(json!({"input_tokens": 3, "output_tokens": 4})),
            )],
        ),
        (
            at(1, 2, 2),
            StepOutcome::Succeeded {
                output: json!("out"),
                usage: None,
                last: true,
                duration_ms: 1234,
            },
            (StepStatus::Succeeded, RunStatus::Succeeded, 2),
            vec![
                (EventKind::StepSucceeded, base.clone()),
                (EventKind::RunSucceeded, json!({"steps": 2})),
            ],
        ),
        (
            at(1, 3, 2),
            StepOutcome::Retry {
                error: boom.clone(),
                delay: Duration::from_millis(1500),
                duration_ms: 1234,
            },
            (StepStatus::Failed, RunStatus::Queued, 1),
            vec![
                (
                    EventKind::StepFailed,
                    merge(json!({"error": boom, "will_retry": true})),
                ),
                (
                    EventKind::StepRetryScheduled,
                    json!({"idx": 1, "next_attempt": 3, "delay_ms": 1500}),
                ),
            ],
        ),
        (
            at(1, 3, 2),
            StepOutcome::Failed {
                error: boom.clone(),
                duration_ms: 1234,
            },
            (StepStatus::Failed, RunStatus::Failed, 1),
            vec![
                (
                    EventKind::StepFailed,
                    merge(json!({"error": boom, "will_retry": false})),
                ),
                (
                    EventKind::RunFailed,
                    json!({"idx": 1, "attempts": 2, "error": boom}),
                ),
            ],
        ),
        (
            at(1, 3, 2),
            StepOutcome::Interrupted {
                error: err(ErrorKind::Interrupted, false),
                duration_ms: 1234,
            },
            (StepStatus::Interrupted, RunStatus::Interrupted, 1),
            vec![(
                EventKind::StepInterrupted,
                merge(json!({"error": err(ErrorKind::Interrupted, false)})),
            )],
        ),
        (
            at(1, 3, 2),
            StepOutcome::Deferred {
                error: err(ErrorKind::RateLimited, true),
                deferral: cairn_core::Deferral {
                    key: "k".into(),
                    after: Duration::from_millis(2500),
                    observed: true,
                },
                duration_ms: 1234,
            },
            (StepStatus::Interrupted, RunStatus::Queued, 1),
            vec![
                (
                    EventKind::StepDeferred,
                    merge(json!({"key": "k", "delay_ms": 2500, "observed": true,
                                 "message": err(ErrorKind::RateLimited, true).message})),
                ),
                (
                    EventKind::KeyPaused,
                    json!({"key": "k", "for_ms": 2500,
                           "reason": err(ErrorKind::RateLimited, true).message}),
                ),
            ],
        ),
        (
            at(1, 3, 2),
            StepOutcome::Deferred {
                error: err(ErrorKind::RateLimited, true),
                deferral: cairn_core::Deferral {
                    key: "k".into(),
                    after: Duration::from_millis(900),
                    observed: false,
                },
                duration_ms: 1234,
            },
            (StepStatus::Interrupted, RunStatus::Queued, 1),
            vec![(
                EventKind::StepDeferred,
                merge(json!({"key": "k", "delay_ms": 900, "observed": false,
                             "message": err(ErrorKind::RateLimited, true).message})),
            )],
        ),
        (
            at(1, 3, 2),
            StepOutcome::Cancelled,
            (StepStatus::Cancelled, RunStatus::Cancelled, 1),
            vec![
                (EventKind::StepCancelled, json!({"idx": 1, "attempt": 2})),
                (EventKind::RunCancelled, json!({"idx": 1})),
            ],
        ),
    ];
    for (input, outcome, (status, run_status, cursor), events) in cases {
        let name = format!("{outcome:?}");
        let c = super::commit(&dispatch(&input), outcome);
        let r = c.rows();
        assert_eq!(
            (r.status, r.run_status, r.cursor),
            (status, run_status, StepIdx(cursor)),
            "{name}"
        );
        let got: Vec<(EventKind, Value)> =
            c.events.iter().map(|e| (e.kind, e.data.clone())).collect();
        assert_eq!(got, events, "{name}");
        assert_eq!(r.open_wait, None, "{name}");
    }

    // A wait: the step and run wait, the wait is opened with its deadline.
    let input = at(1, 3, 2);
    let c = super::commit(
        &dispatch(&input),
        StepOutcome::Wait {
            kind: WaitKind::Review,
            output: Some(json!("draft")),
            prompt: json!("draft"),
            question_id: None,
        },
    );
    let r = c.rows();
    let wait = r.open_wait.cloned().unwrap();
    assert_eq!(
        (r.status, r.run_status, r.cursor),
        (StepStatus::Waiting, RunStatus::Waiting, StepIdx(1))
    );
    assert_eq!(r.output, Some(&json!("draft")));
    assert_eq!(
        (wait.deadline_ms, wait.on_deadline),
        (Some(5000), Some(OnDeadline::Fail))
    );
    let got: Vec<(EventKind, Value)> = c.events.iter().map(|e| (e.kind, e.data.clone())).collect();
    assert_eq!(
        got,
        vec![(
            EventKind::WaitOpened,
            json!({"wait": wait.id, "kind": "review", "idx": 1, "attempt": 2})
        )]
    );
}
