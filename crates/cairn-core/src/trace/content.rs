//! Content on spans, only when an operator asks for it
//! (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`): a tool
//! call's arguments and result, a model call's messages (`messages.rs`),
//! and a step's output, each cut to a limit. Read from what the store holds
//! (the journal and the step rows); nothing else (no environment, no
//! header, no key) is ever captured.

use serde_json::Value;

use super::messages::cut_str;
use super::spans::{AttrValue, SpanRecord};
use crate::journal::{JournalEntry, JournalKind};

/// The journal of one step, for [`capture`].
#[derive(Debug, Clone)]
pub struct StepContent {
    pub idx: i64,
    /// The step's output, if it has one.
    pub output: Option<Value>,
    /// The step's journal items, in order.
    pub journal: Vec<JournalEntry>,
}

/// Adds content to `spans`: `gen_ai.tool.call.arguments` and
/// `gen_ai.tool.call.result` on tool spans (the newest journal items with
/// the call's id), `gen_ai.input.messages` and `gen_ai.output.messages` on
/// model call spans, `cairn.step.output` on a succeeded step's span; every
/// value cut to `limit` bytes (at a character boundary, marked `…`).
pub fn capture(spans: &mut [SpanRecord], steps: &[StepContent], limit: usize) {
    for span in spans.iter_mut() {
        let Some(step) = span
            .int("cairn.step.idx")
            .and_then(|i| steps.iter().find(|s| s.idx == i))
        else {
            continue;
        };
        if let Some(turn) = span.int("cairn.model.turn") {
            let tokens = (
                span.int("gen_ai.usage.input_tokens").unwrap_or(-1),
                span.int("gen_ai.usage.output_tokens").unwrap_or(-1),
            );
            if let Some((input, output)) = super::messages::chat(&step.journal, turn, tokens, limit)
            {
                span.attributes.extend([
                    ("gen_ai.input.messages", AttrValue::Str(input)),
                    ("gen_ai.output.messages", AttrValue::Str(output)),
                ]);
            }
        } else if let Some(call) = span.text("gen_ai.tool.call.id") {
            let item = |kind: JournalKind| {
                step.journal
                    .iter()
                    .rev()
                    .find(|e| e.kind == kind && e.payload["call_id"] == call.as_str())
            };
            if let Some(e) = item(JournalKind::ToolCall) {
                let args = as_text(&e.payload["arguments"]);
                span.attributes
                    .push(("gen_ai.tool.call.arguments", cut(&args, limit)));
            }
            if let Some(e) = item(JournalKind::ToolResult) {
                let result = as_text(&e.payload["content"]);
                span.attributes
                    .push(("gen_ai.tool.call.result", cut(&result, limit)));
            }
        } else if span.text("cairn.step.outcome").as_deref() == Some("succeeded") {
            if let Some(out) = &step.output {
                let out = as_text(out);
                span.attributes
                    .push(("cairn.step.output", cut(&out, limit)));
            }
        }
    }
}

/// A string as it is; any other value as compact JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cut(s: &str, limit: usize) -> AttrValue {
    AttrValue::Str(cut_str(s, limit))
}
