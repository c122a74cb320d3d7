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
use cairn_core::{AgentDef, AgentKind, Attempt, EventKind, JournalKind, Role, WaitId};

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
        budget: None,
        upgrade: None,
    };
    RunRecord {
        status,
        cursor: StepIdx(cursor),
        step_count: STEPS,
        lease_epoch: LeaseEpoch(EPOCH),
        ..RunRecord::submitted(run_id(), crew, json!({"topic": "rivers"}), at())
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
        cost_usd: None,
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
        parents: vec![],
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

mod answers;
mod claims;
mod commits;
