//! Answers: what an answer does to its step and run, and a closed wait answered again.

use super::*;

/// An answer's plan, comparable. Short-lived, as `AnswerPlan` is.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq)]
enum Answered {
    Repeat,
    Apply {
        run_to: RunStatus,
        cursor_to: u32,
        step: Change,
        run_error: Option<ErrorInfo>,
        events: Events,
    },
}

#[derive(Debug, PartialEq)]
enum Change {
    Keep,
    Succeed(Value),
    Fail(ErrorInfo),
}

/// One answer: the wait, where its run and step stand, and who answers.
struct AnswerCase {
    wait: WaitRecord,
    run: RunStatus,
    cursor: u32,
    step: Option<StepRecord>,
    answer: Answer,
    actor: Actor,
}

/// `answer` to an open `kind` wait on step `idx` of a waiting run whose row
/// waits with the output "draft"; answered by ana, "looks right".
fn answering(kind: WaitKind, idx: u32, answer: Answer) -> AnswerCase {
    AnswerCase {
        wait: WaitRecord {
            step_idx: StepIdx(idx),
            ..wait(kind, WaitStatus::Open, None)
        },
        run: RunStatus::Waiting,
        cursor: idx,
        step: Some(StepRecord {
            idx: StepIdx(idx),
            output: Some(json!("draft")),
            ..row(StepStatus::Waiting)
        }),
        answer,
        actor: Actor::new("ana").because("looks right"),
    }
}

fn answered(case: &AnswerCase) -> Want<Answered> {
    let run = run(case.run, case.cursor);
    plan_answer(
        &case.wait,
        &run,
        case.step.as_ref(),
        &case.answer,
        &case.actor,
    )
    .map(|plan| match plan {
        AnswerPlan::Repeat => Answered::Repeat,
        AnswerPlan::Apply {
            run_to,
            cursor_to,
            step,
            run_error,
            events: evs,
        } => Answered::Apply {
            run_to,
            cursor_to: cursor_to.get(),
            step: match step {
                StepChange::Keep => Change::Keep,
                StepChange::Succeed(v) => Change::Succeed(v),
                StepChange::Fail(e) => Change::Fail(e),
            },
            run_error,
            events: events(&evs),
        },
    })
    .map_err(refusal)
}

fn check_answer(name: &str, case: AnswerCase, want: Want<Answered>) {
    assert_eq!(answered(&case), want, "{name}");
}

/// `wait_answered`'s data for a wait on step `idx` answered by ana.
fn wait_answered(kind: &str, idx: u32, answer: Value) -> (EventKind, Value) {
    (
        EventKind::WaitAnswered,
        json!({"wait": WAIT, "kind": kind, "idx": idx, "answer": answer, "by": "ana",
               "reason": "looks right"}),
    )
}

/// `wait_answered`'s data for a review of step `idx` edited to "better",
/// the original output ("draft") kept.
fn edited_to_better(idx: u32) -> (EventKind, Value) {
    let edit = json!({"decision": "edit", "output": "better"});
    let (kind, mut data) = wait_answered("review", idx, edit);
    data["original"] = json!("draft");
    (kind, data)
}

fn reviewed(idx: u32) -> (EventKind, Value) {
    (
        EventKind::StepSucceeded,
        json!({"idx": idx, "attempt": 2, "reviewed_by": "ana"}),
    )
}

fn bad_answer(kind: &str, hint: &str) -> Refusal {
    (
        Kind::BadAnswer,
        format!("wait {WAIT} is a `{kind}` wait: {hint}"),
    )
}

fn closed(status: &str) -> Refusal {
    (
        Kind::WaitClosed,
        format!("wait {WAIT} is `{status}`; it can no longer be answered"),
    )
}

fn open_but(status: RunStatus, cursor: u32) -> Refusal {
    corrupt(&format!(
        "wait {WAIT} is open but the run is `{status}` at step {cursor}"
    ))
}

fn rejected(idx: u32) -> ErrorInfo {
    ErrorInfo::new(
        ErrorKind::Rejected,
        format!("ana rejected step {idx}: too long"),
        false,
    )
}

/// An approval rejected at step `idx`: step and run fail.
fn fail(idx: u32) -> Answered {
    let e = rejected(idx);
    Answered::Apply {
        run_to: RunStatus::Failed,
        cursor_to: idx,
        step: Change::Fail(e.clone()),
        run_error: Some(e.clone()),
        events: vec![
            wait_answered(
                "approval",
                idx,
                json!({"decision": "reject", "feedback": "too long"}),
            ),
            (EventKind::StepFailed, json!({"idx": idx, "error": e})),
            (EventKind::RunFailed, json!({"idx": idx, "error": e})),
        ],
    }
}

/// The step stays as it is and the run queues to carry on.
fn keep(kind: &str, idx: u32, answer: Value) -> Answered {
    Answered::Apply {
        run_to: RunStatus::Queued,
        cursor_to: idx,
        step: Change::Keep,
        run_error: None,
        events: vec![wait_answered(kind, idx, answer)],
    }
}

#[test]
fn a_review_answer_plans_its_step_and_run() {
    use WaitKind::Review;
    let review_hint = bad_answer("review", "answer with approve, edit or reject");
    let cases: Rows<&str, AnswerCase, Answered> = vec![
        // Review: approve or edit commits the step; reject runs it again.
        (
            "review approved mid-run → the output commits, the run queues for the next step",
            answering(Review, 1, approve()),
            Ok(Answered::Apply {
                run_to: RunStatus::Queued,
                cursor_to: 2,
                step: Change::Succeed(json!("draft")),
                run_error: None,
                events: vec![
                    wait_answered("review", 1, json!({"decision": "approve"})),
                    reviewed(1),
                ],
            }),
        ),
        (
            "review approved at the last step → the run succeeds",
            answering(Review, 2, approve()),
            Ok(Answered::Apply {
                run_to: RunStatus::Succeeded,
                cursor_to: 3,
                step: Change::Succeed(json!("draft")),
                run_error: None,
                events: vec![
                    wait_answered("review", 2, json!({"decision": "approve"})),
                    reviewed(2),
                    (EventKind::RunSucceeded, json!({"steps": 3})),
                ],
            }),
        ),
        (
            "review approved, the row holding no output → commits null",
            AnswerCase {
                step: Some(StepRecord {
                    output: None,
                    ..row(StepStatus::Waiting)
                }),
                ..answering(Review, 1, approve())
            },
            Ok(Answered::Apply {
                run_to: RunStatus::Queued,
                cursor_to: 2,
                step: Change::Succeed(Value::Null),
                run_error: None,
                events: vec![
                    wait_answered("review", 1, json!({"decision": "approve"})),
                    reviewed(1),
                ],
            }),
        ),
        (
            "review edited → the edit commits; the event keeps the original",
            answering(Review, 1, edit("better")),
            Ok(Answered::Apply {
                run_to: RunStatus::Queued,
                cursor_to: 2,
                step: Change::Succeed(json!("better")),
                run_error: None,
                events: vec![edited_to_better(1), reviewed(1)],
            }),
        ),
        (
            "review edited at the last step → the run succeeds",
            answering(Review, 2, edit("better")),
            Ok(Answered::Apply {
                run_to: RunStatus::Succeeded,
                cursor_to: 3,
                step: Change::Succeed(json!("better")),
                run_error: None,
                events: vec![
                    edited_to_better(2),
                    reviewed(2),
                    (EventKind::RunSucceeded, json!({"steps": 3})),
                ],
            }),
        ),
        (
            "review rejected → the step stays waiting, the run queues to run it again",
            answering(Review, 1, reject("too long")),
            Ok(keep(
                "review",
                1,
                json!({"decision": "reject", "feedback": "too long"}),
            )),
        ),
        (
            "review rejected at the last step → still queued, not finished",
            answering(Review, 2, reject("too long")),
            Ok(keep(
                "review",
                2,
                json!({"decision": "reject", "feedback": "too long"}),
            )),
        ),
        (
            "review answered with a value → refused",
            answering(Review, 1, answer(json!(1))),
            Err(review_hint),
        ),
    ];
    for (name, case, want) in cases {
        check_answer(name, case, want);
    }
}

#[test]
fn an_approval_or_question_answer_plans_its_step_and_run() {
    use WaitKind::{Approval, Question};
    let approval_hint = bad_answer("approval", "answer with approve or reject");
    let question_hint = bad_answer("question", "answer with a value (decision `answer`)");
    let cases: Rows<&str, AnswerCase, Answered> = vec![
        // Approval: approve lets it run; reject fails step and run.
        (
            "approval approved → the step stays waiting, the run queues to run it",
            answering(Approval, 1, approve()),
            Ok(keep("approval", 1, json!({"decision": "approve"}))),
        ),
        (
            "approval approved at the last step → queued, not succeeded",
            answering(Approval, 2, approve()),
            Ok(keep("approval", 2, json!({"decision": "approve"}))),
        ),
        (
            "approval rejected → step and run fail, rejected",
            answering(Approval, 1, reject("too long")),
            Ok(fail(1)),
        ),
        (
            "approval rejected at the last step → the run fails",
            answering(Approval, 2, reject("too long")),
            Ok(fail(2)),
        ),
        (
            "approval edited → refused",
            answering(Approval, 1, edit("better")),
            Err(approval_hint.clone()),
        ),
        (
            "approval answered with a value → refused",
            answering(Approval, 1, answer(json!(1))),
            Err(approval_hint),
        ),
        // Question: only a value.
        (
            "question answered → the step stays waiting, the run queues to carry on",
            answering(Question, 1, answer(json!({"pick": "b"}))),
            Ok(keep(
                "question",
                1,
                json!({"decision": "answer", "value": {"pick": "b"}}),
            )),
        ),
        (
            "question answered at the last step → queued",
            answering(Question, 2, answer(json!(null))),
            Ok(keep(
                "question",
                2,
                json!({"decision": "answer", "value": null}),
            )),
        ),
        (
            "question approved → refused",
            answering(Question, 1, approve()),
            Err(question_hint.clone()),
        ),
        (
            "question edited → refused",
            answering(Question, 1, edit("x")),
            Err(question_hint.clone()),
        ),
        (
            "question rejected → refused",
            answering(Question, 1, reject("no")),
            Err(question_hint),
        ),
        // Who answers.
        (
            "no reason → the event has no `reason` (an action's has `null`)",
            AnswerCase {
                actor: Actor::new("ana"),
                ..answering(Approval, 1, approve())
            },
            Ok(Answered::Apply {
                run_to: RunStatus::Queued,
                cursor_to: 1,
                step: Change::Keep,
                run_error: None,
                events: vec![(
                    EventKind::WaitAnswered,
                    json!({"wait": WAIT, "kind": "approval", "idx": 1,
                           "answer": {"decision": "approve"}, "by": "ana"}),
                )],
            }),
        ),
    ];
    for (name, case, want) in cases {
        check_answer(name, case, want);
    }
}

#[test]
fn a_closed_wait_repeats_its_answer_or_refuses() {
    use WaitKind::{Approval, Question, Review};
    use WaitStatus::{Answered as Was, Cancelled, Expired};
    let closed_wait = |kind, status, earlier: Option<Answer>, now: Answer| AnswerCase {
        wait: wait(kind, status, earlier),
        ..answering(kind, 1, now)
    };
    let cases: Rows<&str, AnswerCase, Answered> = vec![
        // The same answer again: an idempotent no-op.
        (
            "review approved, approved again",
            closed_wait(Review, Was, Some(approve()), approve()),
            Ok(Answered::Repeat),
        ),
        (
            "review edited, the same edit again",
            closed_wait(Review, Was, Some(edit("better")), edit("better")),
            Ok(Answered::Repeat),
        ),
        (
            "review rejected, the same feedback again",
            closed_wait(Review, Was, Some(reject("no")), reject("no")),
            Ok(Answered::Repeat),
        ),
        (
            "approval approved, approved again",
            closed_wait(Approval, Was, Some(approve()), approve()),
            Ok(Answered::Repeat),
        ),
        (
            "approval rejected, rejected again",
            closed_wait(Approval, Was, Some(reject("no")), reject("no")),
            Ok(Answered::Repeat),
        ),
        (
            "question answered, the same value again",
            closed_wait(Question, Was, Some(answer(json!(42))), answer(json!(42))),
            Ok(Answered::Repeat),
        ),
        (
            "the same answer by someone else → still a repeat (the answer is the key)",
            AnswerCase {
                actor: Actor::new("bob"),
                ..closed_wait(Review, Was, Some(approve()), approve())
            },
            Ok(Answered::Repeat),
        ),
        (
            "a repeat after the run moved on (succeeded, no row waiting)",
            AnswerCase {
                run: RunStatus::Succeeded,
                cursor: 3,
                step: None,
                ..closed_wait(Review, Was, Some(approve()), approve())
            },
            Ok(Answered::Repeat),
        ),
        (
            "a repeat of a rejected approval on a failed run",
            AnswerCase {
                run: RunStatus::Failed,
                ..closed_wait(Approval, Was, Some(reject("no")), reject("no"))
            },
            Ok(Answered::Repeat),
        ),
        // A different answer: refused.
        (
            "review approved, then edited",
            closed_wait(Review, Was, Some(approve()), edit("better")),
            Err(closed("answered")),
        ),
        (
            "review edited, then edited differently",
            closed_wait(Review, Was, Some(edit("better")), edit("best")),
            Err(closed("answered")),
        ),
        (
            "review rejected, then rejected with other feedback",
            closed_wait(Review, Was, Some(reject("no")), reject("never")),
            Err(closed("answered")),
        ),
        (
            "approval approved, then rejected",
            closed_wait(Approval, Was, Some(approve()), reject("no")),
            Err(closed("answered")),
        ),
        (
            "approval rejected, then approved",
            closed_wait(Approval, Was, Some(reject("no")), approve()),
            Err(closed("answered")),
        ),
        (
            "question answered, then another value",
            closed_wait(Question, Was, Some(answer(json!(42))), answer(json!(43))),
            Err(closed("answered")),
        ),
        (
            "answered, its answer missing → refused",
            closed_wait(Question, Was, None, answer(json!(42))),
            Err(closed("answered")),
        ),
        (
            "a closed wait is refused before the answer's kind is checked",
            closed_wait(Question, Was, Some(answer(json!(1))), approve()),
            Err(closed("answered")),
        ),
        // Expired or cancelled: refused, whatever the answer.
        (
            "review expired",
            closed_wait(Review, Expired, None, approve()),
            Err(closed("expired")),
        ),
        (
            "approval expired",
            closed_wait(Approval, Expired, None, reject("no")),
            Err(closed("expired")),
        ),
        (
            "question expired",
            closed_wait(Question, Expired, None, answer(json!(1))),
            Err(closed("expired")),
        ),
        (
            "review cancelled",
            closed_wait(Review, Cancelled, None, edit("better")),
            Err(closed("cancelled")),
        ),
        (
            "approval cancelled",
            closed_wait(Approval, Cancelled, None, approve()),
            Err(closed("cancelled")),
        ),
        (
            "question cancelled",
            closed_wait(Question, Cancelled, None, answer(json!(1))),
            Err(closed("cancelled")),
        ),
        (
            "expired, holding the very answer given (a default answer) → refused",
            closed_wait(Approval, Expired, Some(approve()), approve()),
            Err(closed("expired")),
        ),
    ];
    for (name, case, want) in cases {
        check_answer(name, case, want);
    }
}

#[test]
fn an_open_wait_on_a_run_elsewhere_is_corruption() {
    use RunStatus::*;
    let mut cases: Rows<String, AnswerCase, Answered> = vec![
        (
            "no row at the wait's step".into(),
            AnswerCase {
                step: None,
                ..answering(WaitKind::Review, 1, approve())
            },
            Err(open_but(Waiting, 1)),
        ),
        (
            "the row is another step's".into(),
            AnswerCase {
                step: Some(StepRecord {
                    idx: StepIdx(0),
                    ..row(StepStatus::Waiting)
                }),
                ..answering(WaitKind::Review, 1, approve())
            },
            Err(open_but(Waiting, 1)),
        ),
        (
            "the cursor is at another step".into(),
            AnswerCase {
                cursor: 2,
                ..answering(WaitKind::Approval, 1, approve())
            },
            Err(open_but(Waiting, 2)),
        ),
        (
            "an answer of the wrong kind is refused as such first".into(),
            AnswerCase {
                run: Queued,
                ..answering(WaitKind::Question, 1, approve())
            },
            Err(bad_answer(
                "question",
                "answer with a value (decision `answer`)",
            )),
        ),
    ];
    for status in StepStatus::ALL {
        if status != StepStatus::Waiting {
            cases.push((
                format!("the step is `{status}`"),
                AnswerCase {
                    step: Some(row(status)),
                    ..answering(WaitKind::Question, 1, answer(json!(1)))
                },
                Err(open_but(Waiting, 1)),
            ));
        }
    }
    for status in [Queued, Running, Interrupted, Succeeded, Failed, Cancelled] {
        cases.push((
            format!("the run is `{status}`"),
            AnswerCase {
                run: status,
                ..answering(WaitKind::Review, 1, approve())
            },
            Err(open_but(status, 1)),
        ));
    }
    for (name, case, want) in cases {
        check_answer(&name, case, want);
    }
}

/// Every wait kind × answer × wait state × run status, by the class of what
/// it decides; the tables above give the values of each class.
#[test]
fn every_answer_to_every_wait_on_every_run() {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum State {
        Open,
        AnsweredSame,
        AnsweredOther,
        Expired,
        Cancelled,
    }
    #[derive(Debug, PartialEq)]
    enum Class {
        Applied,
        Repeat,
        Closed,
        BadAnswer,
        Corrupt,
    }
    let answers = [
        approve(),
        edit("better"),
        reject("too long"),
        answer(json!(7)),
    ];
    let fits = |kind: WaitKind, a: &Answer| {
        matches!(
            (kind, a),
            (
                WaitKind::Review,
                Answer::Approve | Answer::Edit { .. } | Answer::Reject { .. }
            ) | (WaitKind::Approval, Answer::Approve | Answer::Reject { .. })
                | (WaitKind::Question, Answer::Answer { .. })
        )
    };
    let mut seen = 0;
    for kind in [WaitKind::Review, WaitKind::Approval, WaitKind::Question] {
        for given in &answers {
            for state in [
                State::Open,
                State::AnsweredSame,
                State::AnsweredOther,
                State::Expired,
                State::Cancelled,
            ] {
                let (status, earlier) = match state {
                    State::Open => (WaitStatus::Open, None),
                    State::AnsweredSame => (WaitStatus::Answered, Some(given.clone())),
                    State::AnsweredOther => (
                        WaitStatus::Answered,
                        Some(match kind {
                            WaitKind::Question => answer(json!("earlier")),
                            _ => reject("earlier"),
                        }),
                    ),
                    State::Expired => (WaitStatus::Expired, None),
                    State::Cancelled => (WaitStatus::Cancelled, None),
                };
                for run_status in RunStatus::ALL {
                    let case = AnswerCase {
                        wait: wait(kind, status, earlier.clone()),
                        run: run_status,
                        ..answering(kind, 1, given.clone())
                    };
                    let want = match state {
                        State::AnsweredSame => Class::Repeat,
                        State::AnsweredOther | State::Expired | State::Cancelled => Class::Closed,
                        State::Open if !fits(kind, given) => Class::BadAnswer,
                        State::Open if run_status != RunStatus::Waiting => Class::Corrupt,
                        State::Open => Class::Applied,
                    };
                    let got = match answered(&case) {
                        Ok(Answered::Apply { .. }) => Class::Applied,
                        Ok(Answered::Repeat) => Class::Repeat,
                        Err((Kind::WaitClosed, _)) => Class::Closed,
                        Err((Kind::BadAnswer, _)) => Class::BadAnswer,
                        Err((Kind::Corruption, _)) => Class::Corrupt,
                        Err(other) => panic!("{kind} {given:?} {state:?} {run_status}: {other:?}"),
                    };
                    assert_eq!(
                        got, want,
                        "{kind} wait, {given:?}, {state:?}, run `{run_status}`"
                    );
                    seen += 1;
                }
            }
        }
    }
    assert_eq!(seen, 3 * 4 * 5 * 7);
}

// ---------------------------------------------------------------- expiries

#[test]
fn an_expired_wait_fails_its_step_and_run() {
    use WaitKind::{Approval, Question, Review};
    let deadline = |kind: &str| {
        ErrorInfo::new(
            ErrorKind::Deadline,
            format!("the {kind} wait on step 1 passed its deadline unanswered"),
            false,
        )
    };
    let expired = |kind: &str| {
        let e = deadline(kind);
        Ok((
            e.clone(),
            vec![
                (
                    EventKind::WaitExpired,
                    json!({"wait": WAIT, "kind": kind, "idx": 1, "error": e}),
                ),
                (EventKind::StepFailed, json!({"idx": 1, "error": e})),
                (EventKind::RunFailed, json!({"idx": 1, "error": e})),
            ],
        ))
    };
    type Expiry = Want<(ErrorInfo, Events)>;
    let cases: Vec<(&str, WaitRecord, Expiry)> = vec![
        (
            "open review",
            wait(Review, WaitStatus::Open, None),
            expired("review"),
        ),
        (
            "open approval",
            wait(Approval, WaitStatus::Open, None),
            expired("approval"),
        ),
        (
            "open question",
            wait(Question, WaitStatus::Open, None),
            expired("question"),
        ),
        (
            "answered",
            wait(Review, WaitStatus::Answered, Some(approve())),
            Err(closed("answered")),
        ),
        (
            "already expired",
            wait(Approval, WaitStatus::Expired, None),
            Err(closed("expired")),
        ),
        (
            "cancelled",
            wait(Question, WaitStatus::Cancelled, None),
            Err(closed("cancelled")),
        ),
    ];
    for (name, w, want) in cases {
        let got = plan_expire(&w)
            .map(|(e, evs)| (e, events(&evs)))
            .map_err(refusal);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_failure_ends_step_and_run_at_its_index() {
    let e = ErrorInfo::new(ErrorKind::Deadline, "late", false);
    assert_eq!(
        events(&failure_events(StepIdx(2), &e)),
        vec![
            (
                EventKind::StepFailed,
                json!({"idx": 2, "error": {"kind": "deadline", "message": "late", "retryable": false}}),
            ),
            (
                EventKind::RunFailed,
                json!({"idx": 2, "error": {"kind": "deadline", "message": "late", "retryable": false}}),
            ),
        ]
    );
}
