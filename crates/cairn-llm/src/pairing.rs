//! The providers' pairing rules, checked on a neutral transcript before any
//! request is sent. TODO(helper): implement `check_openai` and
//! `check_anthropic` with data-driven tests.

use crate::Item;

/// A broken pairing rule: which item, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("item {index}: {reason}")]
pub struct PairingError {
    pub index: usize,
    pub reason: String,
}

/// OpenAI Chat Completions: every `tool` message answers a `tool_call_id`
/// of the assistant message right before the run of tool messages, and
/// every call of an assistant message is answered before the next
/// non-tool message.
pub fn check_openai(_items: &[Item]) -> Result<(), PairingError> {
    Ok(())
}

/// Anthropic Messages: the first message is a user message; each
/// `tool_result` answers a `tool_use` of the immediately preceding assistant
/// message, results come first in their user message, and every `tool_use`
/// is answered in the very next message.
pub fn check_anthropic(_items: &[Item]) -> Result<(), PairingError> {
    Ok(())
}
