//! The journal of an agent step: the ordered transcript items of its turn,
//! each committed the moment it exists (docs/DESIGN.md, "Inside an agent step").
//!
//! [`Journal`] is the contract an agent journals through; the executor hands
//! one to each step (`StepServices::journal`), bound to the run, step,
//! attempt and lease epoch, so agents never see storage and a zombie cannot
//! write. What a step spends goes through its meter (`crate::meter`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::NewEvent;
use crate::ids::Attempt;

/// What a journal item records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JournalKind {
    /// A finished block of assistant text: `{"text"}`.
    AssistantText,
    /// A partial marker: the model began a tool call whose input is still
    /// streaming: `{"call_id", "name"}`. Never sent to a provider.
    ToolCallStarted,
    /// A tool call with its finalized input, journaled before the tool runs:
    /// `{"call_id", "name", "arguments", "idempotency_key"}`.
    ToolCall,
    /// A tool's result, journaled after it ran (or a synthesized one):
    /// `{"call_id", "content", "is_error", "synthesized"?}`.
    ToolResult,
    /// A person's answer to a question the model asked: `{"call_id", "answer"}`.
    HumanAnswer,
    /// A repair applied on resume: `{"action", …}` (see the transcript rules).
    Repair,
    /// The end of one model response: `{"stop_reason", "input_tokens",
    /// "output_tokens", "ms"}`. Items after the last `turn_end` belong to a
    /// response that never finished.
    TurnEnd,
}

impl JournalKind {
    /// Every kind, in declaration order.
    pub const ALL: [JournalKind; 7] = [
        JournalKind::AssistantText,
        JournalKind::ToolCallStarted,
        JournalKind::ToolCall,
        JournalKind::ToolResult,
        JournalKind::HumanAnswer,
        JournalKind::Repair,
        JournalKind::TurnEnd,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JournalKind::AssistantText => "assistant_text",
            JournalKind::ToolCallStarted => "tool_call_started",
            JournalKind::ToolCall => "tool_call",
            JournalKind::ToolResult => "tool_result",
            JournalKind::HumanAnswer => "human_answer",
            JournalKind::Repair => "repair",
            JournalKind::TurnEnd => "turn_end",
        }
    }

    pub fn parse(s: &str) -> Option<JournalKind> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }
}

/// The seqs of journal items that a repair dropped (`drop_unfinished`): a
/// response that never finished, never sent to a model again.
pub fn dropped(entries: &[JournalEntry]) -> std::collections::HashSet<i64> {
    entries
        .iter()
        .filter(|e| e.kind == JournalKind::Repair && e.payload["action"] == "drop_unfinished")
        .flat_map(|e| {
            e.payload["seqs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_i64)
        })
        .collect()
}

/// A stored journal item. `seq` counts from 1 per step, across attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub seq: i64,
    pub attempt: Attempt,
    /// Which journal of the step the item belongs to: the number of rejected
    /// reviews before it. A re-run with reviewer feedback starts a fresh
    /// journal (generation + 1); retries, continues and takeovers keep it.
    pub generation: u32,
    pub kind: JournalKind,
    pub payload: Value,
    pub created_at: DateTime<Utc>,
}

impl JournalEntry {
    /// An assistant text that the next item continues (a long text is
    /// journaled in pieces).
    pub fn continues(&self) -> bool {
        self.kind == JournalKind::AssistantText && self.payload["continues"] == Value::Bool(true)
    }
}

/// An item to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJournalItem {
    pub kind: JournalKind,
    pub payload: Value,
    /// An event recorded in the same transaction (a repair, a tool call).
    pub event: Option<NewEvent>,
}

impl NewJournalItem {
    pub fn new(kind: JournalKind, payload: Value) -> Self {
        NewJournalItem {
            kind,
            payload,
            event: None,
        }
    }

    pub fn with_event(mut self, event: NewEvent) -> Self {
        self.event = Some(event);
        self
    }
}

/// Why a journal operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The step's process no longer holds the run (its lease epoch moved on,
    /// or the run stopped): nothing was written.
    #[error("the run's lease was lost; the journal was not written")]
    LeaseLost,
    /// The item is over the journal item cap; nothing was written.
    #[error("{0}")]
    TooLarge(#[from] crate::caps::TooLarge),
    /// The item holds a NUL character, which storage refuses; nothing was
    /// written (a retry would produce it again).
    #[error(transparent)]
    Unstorable(#[from] crate::caps::Unstorable),
    /// A stored item does not decode.
    #[error("journal is corrupt: {0}")]
    Corrupt(String),
    /// The database failed.
    #[error("journal storage failed: {0}")]
    Storage(String),
}

/// The journal of one step, bound by the executor to the run, step, attempt,
/// generation and lease epoch that dispatched it.
#[async_trait]
pub trait Journal: Send + Sync {
    /// The items of this step's current generation, by `seq`.
    async fn items(&self) -> Result<Vec<JournalEntry>, JournalError>;

    /// Appends one item in its own transaction, fenced by the lease epoch.
    async fn append(&self, item: NewJournalItem) -> Result<JournalEntry, JournalError>;

    /// Records an event (a model call, a tool execution) fenced likewise.
    async fn event(&self, event: NewEvent) -> Result<(), JournalError>;

    /// Publishes a piece of text the model is streaming, for whoever watches
    /// the run live (`output_delta`). Not stored and best effort: it never
    /// blocks and never fails the step; the finished block is journaled.
    fn live(&self, _text: &str) {}
}

/// A piece of an `llm` step's text as it streams (the `output_delta` event
/// of a run's event stream). Never stored: a watcher that missed some sees
/// the whole block once it is journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputDelta {
    pub run_id: crate::ids::RunId,
    pub idx: crate::ids::StepIdx,
    pub attempt: Attempt,
    /// The step's newest journal `seq` (any generation) when this piece was
    /// sent: the block it belongs to is journaled after it. A watcher that
    /// shows the journal up to `seq` M shows only pieces with
    /// `after_seq >= M`, so no text appears twice.
    pub after_seq: i64,
    pub text: String,
}

impl OutputDelta {
    /// Its JSON as a run's event stream carries it: its fields plus
    /// `"kind": "output_delta"`.
    pub fn event_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = v.as_object_mut() {
            map.insert("kind".into(), "output_delta".into());
        }
        v
    }
}

/// A cheap-to-clone handle on a service of a step (`$name` over `dyn
/// $service`), carried in its context: `new`, `Deref` to the service, a
/// `Debug` that names the handle, and equality that always holds (a
/// context's identity is its data, not where its services write).
macro_rules! service_handle {
    ($(#[$doc:meta])* $name:ident, $service:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(pub std::sync::Arc<dyn $service>);

        impl $name {
            pub fn new(service: impl $service + 'static) -> Self {
                $name(std::sync::Arc::new(service))
            }
        }

        impl std::ops::Deref for $name {
            type Target = dyn $service;
            fn deref(&self) -> &Self::Target {
                &*self.0
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($name))
            }
        }

        impl PartialEq for $name {
            fn eq(&self, _: &Self) -> bool {
                true
            }
        }
    };
}
pub(crate) use service_handle;

service_handle!(
    /// A cheap-to-clone handle on a step's journal, carried in its context.
    JournalHandle,
    Journal
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_text() {
        for k in JournalKind::ALL {
            assert_eq!(JournalKind::parse(k.as_str()), Some(k), "case {k:?}");
        }
        assert_eq!(JournalKind::parse("nope"), None);
    }
}
