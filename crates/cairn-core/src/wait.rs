//! Human waits: a run stopped at a step boundary (or inside a step) until a
//! person answers. Review after a step, approval before one, or a question
//! asked by the step itself. Answers are durable rows; a step that restarts
//! after a crash finds its answers in its context (`StepContext::answers`).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::ids::{Attempt, RunId, StepIdx};

/// A wait's id (UUID v7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WaitId(Uuid);

crate::ids::uuid_id!(WaitId);

impl FromStr for WaitId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Uuid::parse_str(s.trim())
            .map(WaitId)
            .map_err(|e| format!("`{s}` is not a wait id (expected a UUID): {e}"))
    }
}

/// What a wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// A step's output waits to be approved, edited or rejected.
    Review,
    /// A step waits to be allowed to run.
    Approval,
    /// A step asked a question.
    Question,
}

/// Where a wait is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitStatus {
    Open,
    Answered,
    Expired,
    Cancelled,
}

macro_rules! words {
    ($ty:ident { $($v:ident => $w:literal),* }) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $w),* }
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s { $($w => Ok($ty::$v),)* _ => Err(format!("`{s}` is not a {}", stringify!($ty))) }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
    };
}
words!(WaitKind { Review => "review", Approval => "approval", Question => "question" });
words!(WaitStatus { Open => "open", Answered => "answered", Expired => "expired", Cancelled => "cancelled" });

/// A person's answer to a wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Answer {
    /// Review or approval: yes.
    Approve,
    /// Review: commit this output instead (the original is kept in the event).
    Edit { output: Value },
    /// Review: run the step again with this feedback. Approval: do not run it
    /// (the run fails, parked for an operator).
    Reject { feedback: String },
    /// Question: the answer.
    Answer { value: Value },
}

impl Answer {
    /// Its decision, as stored (`approve`, `edit`, `reject`, `answer`).
    pub fn decision(&self) -> &'static str {
        match self {
            Answer::Approve => "approve",
            Answer::Edit { .. } => "edit",
            Answer::Reject { .. } => "reject",
            Answer::Answer { .. } => "answer",
        }
    }

    /// Whether this answer fits a wait of `kind`.
    pub fn fits(&self, kind: WaitKind) -> bool {
        matches!(
            (kind, self),
            (
                WaitKind::Review,
                Answer::Approve | Answer::Edit { .. } | Answer::Reject { .. }
            ) | (WaitKind::Approval, Answer::Approve | Answer::Reject { .. })
                | (WaitKind::Question, Answer::Answer { .. })
        )
    }
}

/// What happens when a wait's deadline passes unanswered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum OnDeadline {
    /// The run fails (error kind `deadline`), parked for an operator.
    Fail,
    /// The wait is answered with this answer, by `deadline`.
    Default { answer: Answer },
}

/// A wait to open, decided by the executor.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWait {
    pub id: WaitId,
    pub kind: WaitKind,
    pub prompt: Value,
    pub question_id: Option<String>,
    pub deadline_ms: Option<u64>,
    pub on_deadline: Option<OnDeadline>,
}

/// A stored wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRecord {
    pub id: WaitId,
    pub run_id: RunId,
    pub step_idx: StepIdx,
    pub attempt: Attempt,
    pub kind: WaitKind,
    pub status: WaitStatus,
    pub prompt: Value,
    pub question_id: Option<String>,
    pub deadline: Option<DateTime<Utc>>,
    pub on_deadline: Option<OnDeadline>,
    pub answer: Option<Answer>,
    pub answered_by: Option<String>,
    pub answered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// When its run is a child run: where it hangs, nearest parent first,
    /// up to the top-level run (filled by the engine's listing; empty
    /// otherwise, and left out of the JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<crate::ids::ChildOf>,
}

/// A question a step asks through its context (see `StepContext::ask`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub prompt: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_fit_their_kinds() {
        let edit = Answer::Edit {
            output: Value::Null,
        };
        let reject = Answer::Reject {
            feedback: "no".into(),
        };
        let answer = Answer::Answer { value: Value::Null };
        assert!(Answer::Approve.fits(WaitKind::Review) && edit.fits(WaitKind::Review));
        assert!(reject.fits(WaitKind::Approval) && !edit.fits(WaitKind::Approval));
        assert!(answer.fits(WaitKind::Question) && !Answer::Approve.fits(WaitKind::Question));
        assert!(!answer.fits(WaitKind::Review));
    }

    #[test]
    fn answers_have_a_stable_json_form() {
        let a: Answer = serde_json::from_str(r#"{"decision": "reject", "feedback": "shorter"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a,
            Answer::Reject {
                feedback: "shorter".into()
            }
        );
        let d: OnDeadline =
            serde_json::from_str(r#"{"outcome": "default", "answer": {"decision": "approve"}}"#)
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            d,
            OnDeadline::Default {
                answer: Answer::Approve
            }
        );
    }
}
