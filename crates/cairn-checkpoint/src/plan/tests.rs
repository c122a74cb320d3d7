//! Storage's half of a state change, case by case, with no database: where
//! the run, its step and its wait stand → what a claim, an answer, an
//! operator action, an expiry or a fork does, or why it is refused. The
//! step's half is decided (and tested the same way) in the scheduler's
//! `outcome.rs`.
//!
//! Each function gets a table of rows (input → expected plan or refusal),
//! checked by one helper or loop. Plans are compared through small views
//! (`Claim`, `Answered`, `Act`) because the plan types carry no
//! `PartialEq`; a refusal is compared as its [`Kind`] and its whole
//! message, as an operator reads it.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::*;
use crate::Kind;
use cairn_core::{AgentDef, AgentKind, Attempt, JournalKind, Role, WaitId};

// ---------------------------------------------------------------- fixtures

/// The run every case is about, and its id as messages print it.
const RUN: &str = "0191e3a4-7b1c-7000-8000-000000000001";
/// The wait every answer case is about.
const WAIT: &str = "0191e3a4-7b1c-7000-8000-0000000000aa";
/// Every run has three steps: plan, write, check.
const STEPS: u32 = 3;
/// The run's lease epoch.
const EPOCH: i64 = 7;

fn run_id() -> RunId {
    RunId::from_uuid(Uuid::from_u128(0x0191e3a4_7b1c_7000_8000_000000000001))
}

fn wait_id() -> WaitId {
    WaitId::from_uuid(Uuid::from_u128(0x0191e3a4_7b1c_7000_8000_0000000000aa))
}

fn at() -> DateTime<Utc> {
    DateTime::default()
}

fn run(status: RunStatus, cursor: u32) -> RunRecord {
    let crew = CrewDef {
        name: "essay".into(),
        version: "1".into(),
        agents: ["plan", "write", "check"]
            .into_iter()
            .map(|role| {
                AgentDef::new(
                    role,
                    AgentKind::Template {
                        template: "x".into(),
                    },
                )
            })
            .collect(),
        dir: None,
    };
    RunRecord {
        id: run_id(),
        crew: crew.name.clone(),
        crew_version: crew.version.clone(),
        crew_fingerprint: crew.fingerprint(),
        status,
        cursor: StepIdx(cursor),
        step_count: STEPS,
        input: json!({"topic": "rivers"}),
        idempotency_key: None,
        thread_id: None,
        lease_epoch: LeaseEpoch(EPOCH),
        not_before: None,
        cancel_requested_at: None,
        parent_run_id: None,
        parent_step_idx: None,
        error: None,
        created_at: at(),
        updated_at: at(),
        finished_at: None,
        crew_definition: crew,
    }
}

/// The row of step 1 (`write`), attempt 2, never taken over.
fn row(status: StepStatus) -> StepRecord {
    StepRecord {
        idx: StepIdx(1),
        role: Role::new("write"),
        status,
        attempt: Attempt(2),
        output: None,
        input_tokens: None,
        output_tokens: None,
        started_at: at(),
        finished_at: None,
        error: None,
        takeovers: 0,
    }
}

/// A wait on step 1, attempt 2.
fn wait(kind: WaitKind, status: WaitStatus, answer: Option<Answer>) -> WaitRecord {
    WaitRecord {
        id: wait_id(),
        run_id: run_id(),
        step_idx: StepIdx(1),
        attempt: Attempt(2),
        kind,
        status,
        prompt: json!("draft"),
        question_id: None,
        deadline: None,
        on_deadline: None,
        answered_by: answer.as_ref().map(|_| "ana".to_owned()),
        answered_at: answer.as_ref().map(|_| at()),
        answer,
        created_at: at(),
    }
}

fn approve() -> Answer {
    Answer::Approve
}
fn edit(output: &str) -> Answer {
    Answer::Edit {
        output: json!(output),
    }
}
fn reject(feedback: &str) -> Answer {
    Answer::Reject {
        feedback: feedback.into(),
    }
}
fn answer(value: Value) -> Answer {
    Answer::Answer { value }
}

/// What a refusal says: its kind and its whole message.
type Refusal = (Kind, String);

/// What a case must decide: a plan, or a refusal.
type Want<T> = std::result::Result<T, Refusal>;

/// A table: each row a name, an input and what it must decide.
type Rows<N, I, T> = Vec<(N, I, Want<T>)>;

/// Events as kind and data, comparable.
type Events = Vec<(EventKind, Value)>;

fn refusal(e: Error) -> Refusal {
    (e.kind(), e.to_string())
}

fn corrupt(detail: &str) -> Refusal {
    (Kind::Corruption, format!("run {RUN} is corrupt: {detail}"))
}

fn wrong_state(status: RunStatus, action: &str) -> Refusal {
    (
        Kind::WrongState,
        format!("run {RUN} is `{status}`: cannot {action}"),
    )
}

fn stale(held: i64) -> Refusal {
    (
        Kind::Internal,
        format!(
            "run {RUN}: lease epoch {held} is stale (the run is now at epoch {EPOCH}); another \
             process claimed it, so this write was rejected"
        ),
    )
}

fn events(events: &[NewEvent]) -> Events {
    events.iter().map(|e| (e.kind, e.data.clone())).collect()
}

#[test]
fn the_fixtures_print_as_the_messages_expect() {
    assert_eq!(run_id().to_string(), RUN);
    assert_eq!(wait_id().to_string(), WAIT);
    assert_eq!(
        run(RunStatus::Queued, 0).crew_definition.step_count(),
        STEPS
    );
}

// ------------------------------------------------------------------ claims

/// A claim's plan, comparable.
#[derive(Debug, Clone, PartialEq)]
enum Claim {
    Nothing,
    Insert(&'static str),
    Restart { attempt: u32, takeovers_delta: u32 },
    CrashLoop(ErrorInfo),
    SharedDeath { attempt: u32 },
}

const TOOK_OVER: bool = true;
const FRESH: bool = false;

/// One claim: where the run stands, the row at its cursor, the latest wait
/// of a waiting row, and the request's crash-loop cap.
struct ClaimCase {
    run: RunStatus,
    cursor: u32,
    row: Option<StepRecord>,
    wait: Option<WaitRecord>,
    cap: u32,
}

fn claim(run: RunStatus, cursor: u32, row: Option<StepRecord>) -> ClaimCase {
    ClaimCase {
        run,
        cursor,
        row,
        wait: None,
        cap: 3,
    }
}

fn request(cap: u32) -> ClaimRequest {
    ClaimRequest {
        owner: "worker-1".into(),
        takeover: crate::Takeover::IfExpired,
        lease: std::time::Duration::from_secs(30),
        crash_loop_cap: cap,
        events: vec![],
        replace_crew: None,
        context: None,
    }
}

fn claim_view(plan: &ClaimPlan) -> (Claim, bool) {
    let step = match &plan.step {
        ClaimStep::Nothing => Claim::Nothing,
        ClaimStep::Insert { role } => Claim::Insert(match role.as_str() {
            "plan" => "plan",
            "write" => "write",
            "check" => "check",
            other => panic!("a role the crew does not have: {other}"),
        }),
        ClaimStep::Restart {
            attempt,
            takeovers_delta,
        } => Claim::Restart {
            attempt: *attempt,
            takeovers_delta: *takeovers_delta,
        },
        ClaimStep::CrashLoop { error } => Claim::CrashLoop(error.clone()),
        ClaimStep::SharedDeath { attempt } => Claim::SharedDeath { attempt: *attempt },
    };
    (step, plan.took_over)
}

fn claimed(case: &ClaimCase) -> Want<(Claim, bool)> {
    plan_claim(
        &run(case.run, case.cursor),
        case.row.clone(),
        case.wait.as_ref(),
        &request(case.cap),
    )
    .map(|plan| claim_view(&plan))
    .map_err(refusal)
}

fn check_claim(name: &str, case: ClaimCase, want: Want<(Claim, bool)>) {
    assert_eq!(claimed(&case), want, "{name}");
}

fn crash_loop(died: u32, cap: u32) -> ErrorInfo {
    ErrorInfo::new(
        ErrorKind::CrashLoop,
        format!(
            "attempt 2 of step 1 was in flight when its process died {died} times; not taking \
             it over again (cap {cap}); retry it once the cause is fixed"
        ),
        false,
    )
}

fn restart(attempt: u32, takeovers_delta: u32) -> Claim {
    Claim::Restart {
        attempt,
        takeovers_delta,
    }
}

#[test]
fn a_claim_plans_the_step_at_the_cursor() {
    use RunStatus::{Queued, Running};
    let running = |takeovers| {
        Some(StepRecord {
            takeovers,
            ..row(StepStatus::Running)
        })
    };
    let waiting = |kind, status, answer| ClaimCase {
        wait: Some(wait(kind, status, answer)),
        ..claim(Queued, 1, Some(row(StepStatus::Waiting)))
    };
    let no_answer = || corrupt("step 1 is waiting but its wait has no answer to act on");
    let cases: Rows<&str, ClaimCase, (Claim, bool)> = vec![
        // Where the cursor is.
        (
            "cursor past the last step → nothing to dispatch",
            claim(Queued, 3, None),
            Ok((Claim::Nothing, FRESH)),
        ),
        (
            "cursor past the last step, even with a row → nothing",
            claim(Running, 3, Some(row(StepStatus::Running))),
            Ok((Claim::Nothing, FRESH)),
        ),
        (
            "no row at step 0 → insert it as the first agent",
            claim(Queued, 0, None),
            Ok((Claim::Insert("plan"), FRESH)),
        ),
        (
            "no row at step 1 → insert it as the second agent",
            claim(Queued, 1, None),
            Ok((Claim::Insert("write"), FRESH)),
        ),
        (
            "no row at the last step → insert it",
            claim(Queued, 2, None),
            Ok((Claim::Insert("check"), FRESH)),
        ),
        (
            "a running run with no row: nothing was in flight, so no takeover",
            claim(Running, 1, None),
            Ok((Claim::Insert("write"), FRESH)),
        ),
        // An attempt in flight when its process died: the crash-loop cap.
        (
            "running row, never taken over → same attempt, takeovers + 1",
            claim(Running, 1, running(0)),
            Ok((restart(2, 1), TOOK_OVER)),
        ),
        (
            "running row, one under the cap → taken over once more",
            claim(Running, 1, running(2)),
            Ok((restart(2, 1), TOOK_OVER)),
        ),
        (
            "running row at the cap → crash loop, not taken over again",
            claim(Running, 1, running(3)),
            Ok((Claim::CrashLoop(crash_loop(4, 3)), TOOK_OVER)),
        ),
        (
            "running row past the cap → crash loop",
            claim(Running, 1, running(9)),
            Ok((Claim::CrashLoop(crash_loop(10, 3)), TOOK_OVER)),
        ),
        (
            "cap 0: the first takeover is already a crash loop",
            ClaimCase {
                cap: 0,
                ..claim(Running, 1, running(0))
            },
            Ok((Claim::CrashLoop(crash_loop(1, 0)), TOOK_OVER)),
        ),
        (
            "cap 1, taken over once → crash loop",
            ClaimCase {
                cap: 1,
                ..claim(Running, 1, running(1))
            },
            Ok((Claim::CrashLoop(crash_loop(2, 1)), TOOK_OVER)),
        ),
        // A failed or interrupted step.
        (
            "failed row → next attempt, takeovers reset",
            claim(Queued, 1, Some(row(StepStatus::Failed))),
            Ok((restart(3, 0), FRESH)),
        ),
        (
            "failed row that had been taken over → next attempt, count reset",
            claim(
                Queued,
                1,
                Some(StepRecord {
                    takeovers: 3,
                    ..row(StepStatus::Failed)
                }),
            ),
            Ok((restart(3, 0), FRESH)),
        ),
        (
            "interrupted row → the same attempt carries on",
            claim(Queued, 1, Some(row(StepStatus::Interrupted))),
            Ok((restart(2, 0), FRESH)),
        ),
        // A waiting step carries on as its answer says.
        (
            "review rejected → the next attempt, with the feedback",
            waiting(
                WaitKind::Review,
                WaitStatus::Answered,
                Some(reject("shorter")),
            ),
            Ok((restart(3, 0), FRESH)),
        ),
        (
            "approval approved → the same attempt runs",
            waiting(WaitKind::Approval, WaitStatus::Answered, Some(approve())),
            Ok((restart(2, 0), FRESH)),
        ),
        (
            "question answered → the same attempt carries on",
            waiting(
                WaitKind::Question,
                WaitStatus::Answered,
                Some(answer(json!(42))),
            ),
            Ok((restart(2, 0), FRESH)),
        ),
        (
            // QUESTION: a rejected approval fails its step when answered
            // (`plan_answer`), so this row should never be waiting; but if it
            // were, the claim would run the rejected step (same attempt)
            // instead of reporting corruption: the arm matches any answer of
            // an approval wait, not only `approve`.
            "approval rejected yet the row still waiting → the same attempt runs",
            waiting(WaitKind::Approval, WaitStatus::Answered, Some(reject("no"))),
            Ok((restart(2, 0), FRESH)),
        ),
        (
            "question answered, its answer missing → same attempt (only the status counts)",
            waiting(WaitKind::Question, WaitStatus::Answered, None),
            Ok((restart(2, 0), FRESH)),
        ),
        (
            "review approved yet the row still waiting → corruption (approval commits the step)",
            waiting(WaitKind::Review, WaitStatus::Answered, Some(approve())),
            Err(no_answer()),
        ),
        (
            "review edited yet the row still waiting → corruption",
            waiting(WaitKind::Review, WaitStatus::Answered, Some(edit("new"))),
            Err(no_answer()),
        ),
        (
            "waiting row, wait still open → corruption",
            waiting(WaitKind::Review, WaitStatus::Open, None),
            Err(no_answer()),
        ),
        (
            "waiting row, wait expired → corruption (expiry fails the step)",
            waiting(WaitKind::Approval, WaitStatus::Expired, None),
            Err(no_answer()),
        ),
        (
            "waiting row, wait cancelled → corruption",
            waiting(WaitKind::Question, WaitStatus::Cancelled, None),
            Err(no_answer()),
        ),
        (
            "waiting row, no wait at all → corruption",
            claim(Queued, 1, Some(row(StepStatus::Waiting))),
            Err(no_answer()),
        ),
        // Rows that can never be at the cursor of a claimable run.
        (
            "succeeded row at the cursor → corruption",
            claim(Queued, 1, Some(row(StepStatus::Succeeded))),
            Err(corrupt(
                "step 1 at the cursor is `succeeded`, which cannot be dispatched",
            )),
        ),
        (
            "cancelled row at the cursor → corruption",
            claim(Running, 1, Some(row(StepStatus::Cancelled))),
            Err(corrupt(
                "step 1 at the cursor is `cancelled`, which cannot be dispatched",
            )),
        ),
    ];
    for (name, case, want) in cases {
        check_claim(name, case, want);
    }
}

/// Which run statuses may be claimed at all is `script::claim::claimable`'s gate
/// (queued, or running with a takeover); the plan reads only the cursor,
/// its row and its wait, so every status plans alike.
#[test]
fn a_claim_plan_does_not_read_the_run_status() {
    let rows = [
        None,
        Some(row(StepStatus::Running)),
        Some(row(StepStatus::Failed)),
        Some(row(StepStatus::Interrupted)),
        Some(row(StepStatus::Succeeded)),
    ];
    for row in rows {
        let want = claimed(&claim(RunStatus::Queued, 1, row.clone()));
        for status in RunStatus::ALL {
            let case = claim(status, 1, row.clone());
            assert_eq!(claimed(&case), want, "{status}, row {:?}", case.row);
        }
    }
}

/// The claim's events: `run_claimed`, the caller's, then a crash loop's.
#[test]
fn a_claim_records_its_events() {
    let forced = NewEvent::new(EventKind::CrewForced, json!({"by": "ops"}));
    let claimed = |from: &str, took_over: bool, cursor: u32| {
        (
            EventKind::RunClaimed,
            json!({
                "owner": "worker-1", "epoch": 8, "from_status": from,
                "took_over_step": took_over, "cursor": cursor,
            }),
        )
    };
    let plan = |step: ClaimStep, took_over: bool| ClaimPlan { step, took_over };
    let error = crash_loop(4, 3);
    // (name, the run before, the caller's events, the plan, the events)
    let cases: Vec<(&str, RunRecord, Vec<NewEvent>, ClaimPlan, Events)> = vec![
        (
            "a first claim",
            run(RunStatus::Queued, 0),
            vec![],
            plan(
                ClaimStep::Insert {
                    role: Role::new("plan"),
                },
                false,
            ),
            vec![claimed("queued", false, 0)],
        ),
        (
            "a takeover with a forced crew: the caller's events follow",
            run(RunStatus::Running, 1),
            vec![forced.clone()],
            plan(
                ClaimStep::Restart {
                    attempt: 2,
                    takeovers_delta: 1,
                },
                true,
            ),
            vec![
                claimed("running", true, 1),
                (EventKind::CrewForced, json!({"by": "ops"})),
            ],
        ),
        (
            "a complete run: only the claim",
            run(RunStatus::Queued, 3),
            vec![],
            plan(ClaimStep::Nothing, false),
            vec![claimed("queued", false, 3)],
        ),
        (
            // QUESTION: this `run_failed` has no "idx", unlike every other
            // one (`failure_events` for a rejected approval or a deadline,
            // and the scheduler's `outcome::commit`); the crash loop does not
            // use `failure_events`.
            "a crash loop: the step and the run fail after the caller's events",
            run(RunStatus::Running, 1),
            vec![forced],
            plan(
                ClaimStep::CrashLoop {
                    error: error.clone(),
                },
                true,
            ),
            vec![
                claimed("running", true, 1),
                (EventKind::CrewForced, json!({"by": "ops"})),
                (EventKind::StepFailed, json!({"idx": 1, "error": error})),
                (EventKind::RunFailed, json!({"error": error})),
            ],
        ),
    ];
    for (name, before, extra, plan, want) in cases {
        let req = ClaimRequest {
            events: extra,
            ..request(3)
        };
        let got = claim_events(&req, LeaseEpoch(8), &before, &plan);
        assert_eq!(events(&got), want, "{name}");
    }
}

// ------------------------------------------------------- commits, holders

fn commit(epoch: i64) -> StepCommit {
    StepCommit {
        run_id: run_id(),
        epoch: LeaseEpoch(epoch),
        idx: StepIdx(1),
        attempt: Attempt(2),
        usage: None,
        events: vec![],
        transition: crate::StepTransition::Succeeded {
            output: json!("out"),
            next: crate::Next::Step(Role::new("r2")),
        },
    }
}

fn check_refused_commit(name: &str, (status, cancel, held): (RunStatus, bool, i64), want: Refusal) {
    let run = RunRecord {
        cancel_requested_at: cancel.then(at),
        ..run(status, 1)
    };
    assert_eq!(refusal(refused_commit(&run, &commit(held))), want, "{name}");
}

#[test]
fn a_refused_commit_says_why() {
    use RunStatus::*;
    let cancel_requested = (
        Kind::Internal,
        format!("run {RUN} has a cancel request; its step result was discarded"),
    );
    let mut cases: Vec<(String, (RunStatus, bool, i64), Refusal)> = vec![
        (
            "running at the epoch, cancel requested → cancel requested".into(),
            (Running, true, EPOCH),
            cancel_requested,
        ),
        (
            "an older epoch → stale".into(),
            (Running, false, EPOCH - 1),
            stale(EPOCH - 1),
        ),
        (
            "an older epoch and a cancel request → stale (the epoch first)".into(),
            (Running, true, EPOCH - 1),
            stale(EPOCH - 1),
        ),
        (
            "a newer epoch → stale too".into(),
            (Running, false, EPOCH + 1),
            stale(EPOCH + 1),
        ),
        (
            "an older epoch of a finished run → stale".into(),
            (Succeeded, false, EPOCH - 1),
            stale(EPOCH - 1),
        ),
        (
            // QUESTION: running at the caller's epoch with no cancel request
            // is the one case the commit's UPDATE matches; the SQLite backend
            // turns it into a corruption before asking (its step row was not
            // running), PostgreSQL raises that from SQL. Asked anyway, the
            // shared decision says "is `running`: cannot commit a step".
            "running at the epoch, no cancel request → wrong state `running`".into(),
            (Running, false, EPOCH),
            wrong_state(Running, "commit a step"),
        ),
        (
            "a cancel request on a run no longer running → wrong state".into(),
            (Cancelled, true, EPOCH),
            wrong_state(Cancelled, "commit a step"),
        ),
    ];
    for status in [Queued, Waiting, Interrupted, Succeeded, Failed, Cancelled] {
        cases.push((
            format!("`{status}` at the epoch → wrong state"),
            (status, false, EPOCH),
            wrong_state(status, "commit a step"),
        ));
    }
    for (name, input, want) in cases {
        check_refused_commit(&name, input, want);
    }
}

#[test]
fn only_the_running_holder_may_write() {
    use RunStatus::*;
    let mut cases: Rows<String, (RunStatus, i64), ()> = vec![
        (
            "running at the epoch → may write".into(),
            (Running, EPOCH),
            Ok(()),
        ),
        (
            "an older epoch → stale".into(),
            (Running, EPOCH - 1),
            Err(stale(EPOCH - 1)),
        ),
        (
            "a newer epoch → stale".into(),
            (Running, EPOCH + 1),
            Err(stale(EPOCH + 1)),
        ),
        (
            "an older epoch of a failed run → stale (the epoch first)".into(),
            (Failed, EPOCH - 1),
            Err(stale(EPOCH - 1)),
        ),
    ];
    for status in [Queued, Waiting, Interrupted, Succeeded, Failed, Cancelled] {
        cases.push((
            format!("`{status}` at the epoch → wrong state"),
            (status, EPOCH),
            Err(wrong_state(status, "write to the journal")),
        ));
    }
    for (name, (status, held), want) in cases {
        let got =
            check_holder(run_id(), status, LeaseEpoch(EPOCH), LeaseEpoch(held)).map_err(refusal);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_journal_kind_is_known_or_corrupt() {
    let known = [
        ("assistant_text", JournalKind::AssistantText),
        ("tool_call_started", JournalKind::ToolCallStarted),
        ("tool_call", JournalKind::ToolCall),
        ("tool_result", JournalKind::ToolResult),
        ("human_answer", JournalKind::HumanAnswer),
        ("repair", JournalKind::Repair),
        ("turn_end", JournalKind::TurnEnd),
    ];
    let mut cases: Vec<(&str, Want<JournalKind>)> =
        known.iter().map(|&(text, kind)| (text, Ok(kind))).collect();
    for unknown in ["", "ToolCall", "tool-call", "tool_call ", "checkpoint"] {
        cases.push((
            unknown,
            Err(corrupt(&format!(
                "journal item 4 has unknown kind `{unknown}`"
            ))),
        ));
    }
    for (text, want) in cases {
        assert_eq!(
            journal_kind(run_id(), 4, text).map_err(refusal),
            want,
            "{text:?}"
        );
    }
}

// ------------------------------------------------------- operator actions

/// An action's plan, comparable: the target status, the flags the store
/// acts on, and the event's kind.
#[derive(Debug, PartialEq)]
struct Act {
    to: RunStatus,
    request_cancel: bool,
    finishes: bool,
    clears_error: bool,
    event: EventKind,
}

fn act(to: RunStatus, request_cancel: bool, event: EventKind) -> Act {
    Act {
        to,
        request_cancel,
        finishes: to == RunStatus::Cancelled,
        clears_error: to == RunStatus::Queued,
        event,
    }
}

fn check_action(action: Action, status: RunStatus, actor: &Actor, want: Want<Act>) {
    let run = run(status, 1);
    let got = plan_action(&run, action, actor).map_err(refusal);
    let got = got.map(|plan| {
        // Every action's event says who, why, from where, at which step.
        assert_eq!(
            plan.event.data,
            json!({"by": actor.by, "reason": actor.reason, "from_status": status, "step": 1}),
            "{action:?} of a `{status}` run: its event's data"
        );
        Act {
            to: plan.to,
            request_cancel: plan.request_cancel,
            finishes: plan.finishes(),
            clears_error: plan.clears_error(),
            event: plan.event.kind,
        }
    });
    assert_eq!(got, want, "{action:?} of a `{status}` run");
}

#[test]
fn an_operator_action_plans_its_run_or_is_refused() {
    use Action::{Cancel, Continue, Retry};
    use RunStatus::*;
    let retry_refused = |s| {
        Err(wrong_state(
            s,
            "retry it (only a failed run can be retried)",
        ))
    };
    let continue_refused = |s| {
        Err(wrong_state(
            s,
            "continue it (only an interrupted run can be continued)",
        ))
    };
    let finished = |s| Err(wrong_state(s, "cancel it (it has already finished)"));
    let cancelled = || Ok(act(Cancelled, false, EventKind::RunCancelled));
    let cases: Vec<(Action, RunStatus, Want<Act>)> = vec![
        (Retry, Queued, retry_refused(Queued)),
        (Retry, Running, retry_refused(Running)),
        (Retry, Waiting, retry_refused(Waiting)),
        (Retry, Interrupted, retry_refused(Interrupted)),
        (Retry, Succeeded, retry_refused(Succeeded)),
        (Retry, Failed, Ok(act(Queued, false, EventKind::RunRetried))),
        (Retry, Cancelled, retry_refused(Cancelled)),
        (Continue, Queued, continue_refused(Queued)),
        (Continue, Running, continue_refused(Running)),
        (Continue, Waiting, continue_refused(Waiting)),
        (
            Continue,
            Interrupted,
            Ok(act(Queued, false, EventKind::RunContinued)),
        ),
        (Continue, Succeeded, continue_refused(Succeeded)),
        (Continue, Failed, continue_refused(Failed)),
        (Continue, Cancelled, continue_refused(Cancelled)),
        (Cancel, Queued, cancelled()),
        // A running run is only asked to stop: its executor ends it.
        (
            Cancel,
            Running,
            Ok(act(Running, true, EventKind::RunCancelRequested)),
        ),
        (Cancel, Waiting, cancelled()),
        (Cancel, Interrupted, cancelled()),
        (Cancel, Succeeded, finished(Succeeded)),
        (Cancel, Failed, cancelled()),
        (Cancel, Cancelled, finished(Cancelled)),
    ];
    assert_eq!(
        cases.len(),
        3 * RunStatus::ALL.len(),
        "every action × status"
    );
    let ops = Actor::new("ops").because("fixed the key");
    for (action, status, want) in cases {
        check_action(action, status, &ops, want);
    }
    // With no reason, the event says `"reason": null`.
    check_action(
        Retry,
        Failed,
        &Actor::new("ops"),
        Ok(act(Queued, false, EventKind::RunRetried)),
    );
}

// ------------------------------------------------------------------- forks

#[test]
fn a_fork_starts_at_a_succeeded_step() {
    let refused = |reason: &str| {
        Err((
            Kind::ForkRefused,
            format!("cannot fork run {RUN}: {reason}"),
        ))
    };
    let new_input = "a new input needs the fork to start at step 0 (--from-step 0): every copied \
                     step's output was computed from the old input, so copying it under a new \
                     one would be a lie";
    // (name, (cursor, from_step, new input?), expected)
    let cases: Rows<&str, (u32, u32, bool), ()> = vec![
        ("from step 0 of a fresh run", (0, 0, false), Ok(())),
        ("from the cursor", (2, 2, false), Ok(())),
        ("from before the cursor", (2, 1, false), Ok(())),
        ("from the end of a finished run", (3, 3, false), Ok(())),
        ("a new input from step 0", (2, 0, true), Ok(())),
        (
            "past the cursor",
            (1, 2, false),
            refused("only steps 0..1 have succeeded, so the fork can start at step 1 at most"),
        ),
        (
            "past the cursor of a fresh run",
            (0, 1, false),
            refused("only steps 0..0 have succeeded, so the fork can start at step 0 at most"),
        ),
        (
            "past the crew's steps",
            (3, 4, false),
            refused("step 4 is past the crew's 3 steps"),
        ),
        (
            "past the crew's steps with a new input: the step count first",
            (3, 4, true),
            refused("step 4 is past the crew's 3 steps"),
        ),
        ("a new input from step 1", (2, 1, true), refused(new_input)),
        (
            "past the cursor with a new input: the cursor first",
            (1, 2, true),
            refused("only steps 0..1 have succeeded, so the fork can start at step 1 at most"),
        ),
    ];
    for (name, (cursor, from, input), want) in cases {
        let req = ForkRequest {
            from_step: StepIdx(from),
            input: input.then(|| json!({"topic": "lakes"})),
            thread_id: None,
        };
        // The run's status plays no part (a running run may be forked).
        for status in RunStatus::ALL {
            let got = check_fork(&run(status, cursor), &req).map_err(refusal);
            assert_eq!(got, want, "{name} ({status})");
        }
    }
}

#[test]
fn a_fork_records_where_it_came_from() {
    let source = run(RunStatus::Succeeded, 3);
    let cases = vec![
        (
            ForkRequest {
                from_step: StepIdx(1),
                input: None,
                thread_id: None,
            },
            Actor::new("ops"),
            json!({"parent": RUN, "from_step": 1, "input_changed": false,
                   "thread_id": null, "by": "ops", "reason": null}),
        ),
        (
            ForkRequest {
                from_step: StepIdx(0),
                input: Some(json!({"topic": "lakes"})),
                thread_id: Some("t-9".into()),
            },
            Actor::new("ops").because("new topic"),
            json!({"parent": RUN, "from_step": 0, "input_changed": true,
                   "thread_id": "t-9", "by": "ops", "reason": "new topic"}),
        ),
    ];
    for (req, actor, want) in cases {
        let got = fork_event(&source, &req, &actor);
        assert_eq!((got.kind, got.data), (EventKind::RunForked, want));
    }
}

// ----------------------------------------------------------------- answers

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

#[test]
fn an_answer_plans_its_step_and_run() {
    use WaitKind::{Approval, Question, Review};
    let rejected = |idx: u32| {
        ErrorInfo::new(
            ErrorKind::Rejected,
            format!("ana rejected step {idx}: too long"),
            false,
        )
    };
    let fail = |idx: u32| {
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
    };
    let keep = |kind: &str, idx: u32, answer: Value| Answered::Apply {
        run_to: RunStatus::Queued,
        cursor_to: idx,
        step: Change::Keep,
        run_error: None,
        events: vec![wait_answered(kind, idx, answer)],
    };
    let review_hint = bad_answer("review", "answer with approve, edit or reject");
    let approval_hint = bad_answer("approval", "answer with approve or reject");
    let question_hint = bad_answer("question", "answer with a value (decision `answer`)");
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
                events: vec![
                    (
                        EventKind::WaitAnswered,
                        json!({"wait": WAIT, "kind": "review", "idx": 1,
                               "answer": {"decision": "edit", "output": "better"},
                               "by": "ana", "reason": "looks right", "original": "draft"}),
                    ),
                    reviewed(1),
                ],
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
                    (
                        EventKind::WaitAnswered,
                        json!({"wait": WAIT, "kind": "review", "idx": 2,
                               "answer": {"decision": "edit", "output": "better"},
                               "by": "ana", "reason": "looks right", "original": "draft"}),
                    ),
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

/// A takeover counts against a step only when its dead holder held it
/// alone: a holder that died holding other runs (or was found so by an
/// earlier takeover) restarts the attempt uncounted, even at the cap; the
/// cap counts deaths alone (`takeovers` less the shared ones).
#[test]
fn a_takeover_counts_only_a_death_the_step_was_alone_in() {
    use RunStatus::{Queued, Running};
    let running = |takeovers| StepRecord {
        takeovers,
        ..row(StepStatus::Running)
    };
    let death = |companions, marked_shared, shared_before| Death {
        companions,
        marked_shared,
        shared_before,
    };
    let (alone, with_others, marked) = (death(0, false, 0), death(23, false, 0), death(0, true, 0));
    let judged = |status, row: Option<StepRecord>, death| {
        let plan = match plan_claim(&run(status, 1), row.clone(), None, &request(3)) {
            Ok(plan) => plan,
            Err(e) => panic!("a claim refused: {e}"),
        };
        claim_view(&judge_death(plan, row.as_ref(), death, 3, StepIdx(1)))
    };
    let shared = (Claim::SharedDeath { attempt: 2 }, TOOK_OVER);
    let failed = |died| (Claim::CrashLoop(crash_loop(died, 3)), TOOK_OVER);
    let fresh_failed_row = judged(Queued, Some(row(StepStatus::Failed)), alone);
    let cases = [
        // name, run, row, death, want
        (
            "alone: counted",
            Running,
            Some(running(0)),
            alone,
            (restart(2, 1), TOOK_OVER),
        ),
        (
            "alone at the cap: crash loop",
            Running,
            Some(running(3)),
            alone,
            failed(4),
        ),
        (
            "with others: uncounted",
            Running,
            Some(running(0)),
            with_others,
            shared.clone(),
        ),
        (
            "with others at the cap: not failed",
            Running,
            Some(running(3)),
            with_others,
            shared.clone(),
        ),
        (
            "marked by an earlier takeover",
            Running,
            Some(running(1)),
            marked,
            shared.clone(),
        ),
        // Three takeovers, one of them shared: two deaths alone, under the cap.
        (
            "past shared deaths do not count",
            Running,
            Some(running(3)),
            death(0, false, 1),
            (restart(2, 1), TOOK_OVER),
        ),
        (
            "alone past the cap, shared ones aside",
            Running,
            Some(running(4)),
            death(0, false, 1),
            failed(4),
        ),
        // Nothing was in flight: no death to judge.
        (
            "a queued run's failed row",
            Queued,
            Some(row(StepStatus::Failed)),
            with_others,
            fresh_failed_row,
        ),
        (
            "no row yet",
            Queued,
            None,
            with_others,
            (Claim::Insert("write"), FRESH),
        ),
    ];
    for (name, status, row, death, want) in cases {
        assert_eq!(judged(status, row, death), want, "{name}");
    }
}
