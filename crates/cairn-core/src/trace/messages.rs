//! A model call's messages as content (`gen_ai.input.messages`,
//! `gen_ai.output.messages`, in the GenAI conventions' JSON shape), read
//! back from the step's journal: the response a `chat` span covers is the
//! journal's finished response with the span's turn number (and the same
//! token counts, which tells generations apart); what was sent before it is
//! the step's journaled conversation up to it. The step's own first
//! message (its context, rendered from the run's input and earlier outputs)
//! and a thread's earlier runs are not journaled, so they are not repeated.

use serde_json::{json, Value};

use crate::journal::{dropped, JournalEntry, JournalKind};

/// One finished response in a journal: the conversation items before it
/// and its own items, up to its `turn_end`.
struct Turn<'a> {
    before: Vec<&'a JournalEntry>,
    own: Vec<&'a JournalEntry>,
    end: &'a JournalEntry,
}

/// The response numbered `turn` whose `turn_end` reports `tokens` (input,
/// output), newest generation first.
fn find<'a>(journal: &'a [JournalEntry], turn: i64, tokens: (i64, i64)) -> Option<Turn<'a>> {
    let gone = dropped(journal);
    let mut generations: Vec<u32> = journal.iter().map(|e| e.generation).collect();
    generations.sort_unstable();
    generations.dedup();
    generations.into_iter().rev().find_map(|g| {
        let live = journal
            .iter()
            .filter(|e| e.generation == g && !gone.contains(&e.seq));
        let found = nth(live, turn)?;
        let reported = (
            found.end.payload["input_tokens"].as_i64().unwrap_or(-1),
            found.end.payload["output_tokens"].as_i64().unwrap_or(-1),
        );
        (reported == tokens).then_some(found)
    })
}

fn nth<'a>(live: impl Iterator<Item = &'a JournalEntry>, turn: i64) -> Option<Turn<'a>> {
    let (mut before, mut own, mut k) = (Vec::new(), Vec::new(), 0);
    for e in live {
        let spoken = matches!(e.kind, JournalKind::AssistantText | JournalKind::ToolCall);
        let heard = matches!(e.kind, JournalKind::ToolResult | JournalKind::HumanAnswer);
        match e.kind {
            JournalKind::TurnEnd if k == turn => {
                return Some(Turn {
                    before,
                    own,
                    end: e,
                })
            }
            JournalKind::TurnEnd => k += 1,
            _ if k < turn && (spoken || heard) => before.push(e),
            _ if k == turn && spoken => own.push(e),
            _ if k == turn && heard => before.push(e),
            _ => {}
        }
    }
    None
}

/// `(input, output)` messages of the response a `chat` span covers, as
/// JSON text; each part's content cut to `limit` bytes, the input to its
/// newest messages within `4 × limit`.
pub(super) fn chat(
    journal: &[JournalEntry],
    turn: i64,
    tokens: (i64, i64),
    limit: usize,
) -> Option<(String, String)> {
    let t = find(journal, turn, tokens)?;
    let mut input = messages(&t.before, limit);
    let mut size: usize = input.iter().map(|m| m.to_string().len()).sum();
    while size > 4 * limit && input.len() > 1 {
        size -= input.remove(0).to_string().len();
    }
    let mut output = messages(&t.own, limit);
    if let Some(m) = output.last_mut() {
        let reason = t.end.payload["stop_reason"].as_str().unwrap_or_default();
        m["finish_reason"] = json!(finish_reason(reason));
    }
    Some((
        Value::Array(input).to_string(),
        Value::Array(output).to_string(),
    ))
}

/// Cairn's stop reasons in the conventions' words.
fn finish_reason(stop: &str) -> &str {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_call",
        "max_tokens" => "length",
        other => other,
    }
}

/// Journal items as messages: consecutive assistant items make one
/// `assistant` message (a long text's pieces joined), each tool result or
/// person's answer a `tool` message.
fn messages(items: &[&JournalEntry], limit: usize) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut glued = false;
    for e in items {
        let p = &e.payload;
        let part = match e.kind {
            JournalKind::AssistantText => json!({"type": "text", "content": text(&p["text"])}),
            JournalKind::ToolCall => json!({"type": "tool_call", "id": p["call_id"],
                "name": p["name"], "arguments": arguments(&p["arguments"])}),
            JournalKind::ToolResult => json!({"type": "tool_call_response", "id": p["call_id"],
                "response": text(&p["content"])}),
            _ => json!({"type": "tool_call_response", "id": p["call_id"],
                "response": text(&p["answer"])}),
        };
        let role = match e.kind {
            JournalKind::AssistantText | JournalKind::ToolCall => "assistant",
            _ => "tool",
        };
        let last = out
            .last_mut()
            .filter(|m| m["role"] == role && role == "assistant");
        match (last, glued) {
            (Some(m), true) => append_text(m, &part),
            (Some(m), false) => push_part(m, part),
            (None, _) => out.push(json!({"role": role, "parts": [part]})),
        }
        glued = e.continues();
    }
    for part in out.iter_mut().flat_map(parts) {
        cut_part(part, limit);
    }
    out
}

fn parts(m: &mut Value) -> impl Iterator<Item = &mut Value> {
    m["parts"].as_array_mut().into_iter().flatten()
}

fn push_part(m: &mut Value, part: Value) {
    if let Some(a) = m["parts"].as_array_mut() {
        a.push(part);
    }
}

/// A piece of a long text joined onto the text before it.
fn append_text(m: &mut Value, part: &Value) {
    let piece = part["content"].as_str().unwrap_or_default();
    match parts(m).last() {
        Some(last) if last["type"] == "text" => {
            let joined = format!("{}{piece}", last["content"].as_str().unwrap_or_default());
            last["content"] = json!(joined);
        }
        _ => push_part(m, part.clone()),
    }
}

/// A part's free text cut to `limit` bytes; arguments longer than that
/// become their cut JSON text.
fn cut_part(part: &mut Value, limit: usize) {
    for key in ["content", "response"] {
        if let Some(s) = part[key].as_str() {
            part[key] = json!(cut_str(s, limit));
        }
    }
    if !part["arguments"].is_null() {
        let args = part["arguments"].to_string();
        if args.len() > limit {
            part["arguments"] = json!(cut_str(&args, limit));
        }
    }
}

/// A call's arguments as an object when they are JSON text (as providers
/// stream them), else as stored.
fn arguments(v: &Value) -> Value {
    v.as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| v.clone())
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `s` cut to at most `limit` bytes at a character boundary, `…` marking
/// a cut.
pub(super) fn cut_str(s: &str, limit: usize) -> String {
    if s.len() <= limit {
        return s.to_owned();
    }
    let mut end = limit;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
