//! The payloads of an agent step's calls: to its model (sent, called),
//! to its tools, and the repairs of its transcript on a resume.

use serde::{Deserialize, Serialize};

use crate::ids::{LeaseEpoch, StepIdx};
use crate::meter::price::Usd;

use super::is_false;

/// `model_called`: an agent step's model call ended (`cairn_agent::turn`).
/// One writer, two outcomes, in one flat object:
/// - a finished response: `input_tokens`, `output_tokens`, `stop_reason`,
///   `first_chunk_ms`; `cache_read_tokens` and `cache_write_tokens` when
///   the provider reported them (not 0); then either `empty: true` (no
///   text, no tool call: not the step's answer) or `tool_calls` (its
///   count), with `cost_usd` and `prices` when the call was priced;
/// - a failed call: `error` and `retryable`; when part of the response
///   came back before it was cut, `cut_tokens`, `cut_input_tokens`,
///   `cut_output_tokens` (estimates) and, priced, `cut_cost_nanos`.
///
/// Either carries `sent_epoch`, `sent_input`, `sent_output` and
/// `sent_cost_nanos` when the call was recorded sent first (a run with a
/// budget: `model_call_sent`), which resolves that record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCalled {
    pub idx: StepIdx,
    /// The call's turn within the step.
    pub turn: u32,
    pub provider: String,
    pub model: String,
    /// How long the call took, to its end or its failure.
    pub ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Why the response stopped (`end_turn`, `tool_use`, `max_tokens`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Input read from and written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// When the response began: its first piece of any kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_chunk_ms: Option<u64>,
    /// The response held no text and no tool call.
    #[serde(default, skip_serializing_if = "is_false")]
    pub empty: bool,
    /// The tool calls the response asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    /// What the call cost, in dollars, and the price table's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<String>,
    /// A failed call's error, as people read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// A cut response's estimated tokens (input plus output, and each),
    /// which the run's budget counts, and their price in billionths of a
    /// dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_cost_nanos: Option<u64>,
    /// The call's `model_call_sent` record: its epoch and estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_epoch: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_input: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_output: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_cost_nanos: Option<u64>,
}

/// `model_call_sent`: a model call of a run with a budget is about to be
/// sent (`SentCall::event`); one whose `model_called` never follows
/// counts at its estimate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCallSent {
    pub idx: StepIdx,
    pub turn: u32,
    /// The lease epoch it is sent under.
    pub epoch: LeaseEpoch,
    /// Its estimate: input tokens, `max_tokens`, and their price in
    /// billionths of a dollar.
    pub estimate_input: u64,
    pub estimate_output: u64,
    pub estimate_cost_nanos: u64,
}

/// `tool_executed`: an agent step ran a tool, written once with its
/// result's journal item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolExecuted {
    pub idx: StepIdx,
    /// The model's id for the call.
    pub call_id: String,
    pub tool: String,
    pub ms: u64,
    pub is_error: bool,
    /// The key the tool was given, the same on a re-execution.
    pub idempotency_key: String,
}

/// `transcript_repaired`: a resume repaired an agent step's transcript
/// (`cairn_agent::transcript::Repair`), by `action`. The `llm` agent's
/// turn writes the step's `idx` beside the action; the round-trip
/// samples of `payload/tests.rs` have both shapes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptRepaired {
    /// The step repaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idx: Option<StepIdx>,
    /// What was done, with its `action`.
    #[serde(flatten)]
    pub repair: RepairAction,
}

/// A repair of a transcript, by its `action`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RepairAction {
    /// An unfinished response's journal items were dropped.
    DropUnfinished {
        /// Their journal sequence numbers.
        seqs: Vec<i64>,
    },
    /// A tool call with no result, of a tool not idempotent, was given a
    /// synthetic "interrupted" result.
    SynthesizedResult { call_id: String, tool: String },
    /// A tool call with no result, of an idempotent tool, is run again.
    Reexecuted { call_id: String, tool: String },
}
