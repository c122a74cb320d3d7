//! The transcript rules of DESIGN.md ("Inside an agent step") as pure
//! functions over a step's journal: classify its tail ([`analyze`]), plan
//! the repairs that make it clean ([`plan_repairs`]), turn it into what a
//! provider sees ([`project`]) and bound that by a history window
//! ([`window`]). No I/O: the turn loop journals what these decide.
//!
//! How the loop writes a journal, which these functions rely on: per model
//! response, `assistant_text` items and `tool_call_started` markers as the
//! stream produces them, a `tool_call` when a call's input is complete, and
//! one `turn_end` when the response finished; tools run only after
//! `turn_end`, each result a `tool_result`. So items after the last
//! `turn_end` belong to a response that never finished (nothing of it ran),
//! and a `tool_call` of a finished response without a `tool_result` is a
//! call whose process died between call and result.

use std::collections::{HashMap, HashSet};

use cairn_core::event::payload::{RepairAction, TranscriptRepaired};
use cairn_core::{EventData, JournalEntry, JournalKind, NewEvent, NewJournalItem, StepIdx};
use cairn_llm::Item;
use serde_json::{json, Value};

/// What a synthesized result tells the model when a non-idempotent tool's
/// call lost its result: its effect is unknown, so the model must neither
/// assume it happened nor be invited to repeat it (a second charge).
pub const INTERRUPTED: &str = "this call was interrupted before its result was recorded, so its effect is unknown: it may have happened. Check whether it took effect before repeating it, or ask.";

/// A journaled tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call_id: String,
    pub name: String,
    /// The raw JSON text the model produced.
    pub arguments: String,
    pub idempotency_key: Option<String>,
    pub seq: i64,
}

impl Call {
    fn from_entry(e: &JournalEntry) -> Call {
        Call {
            call_id: text(&e.payload, "call_id"),
            name: text(&e.payload, "name"),
            arguments: text(&e.payload, "arguments"),
            idempotency_key: e.payload["idempotency_key"].as_str().map(str::to_owned),
            seq: e.seq,
        }
    }
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

/// What the loop does once the journal is clean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Call the model (nothing journaled yet, or every call has its result).
    Model,
    /// The last finished response had no tool calls: its text is the
    /// step's answer.
    Final { text: String },
}

/// Where a journal stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// Items of a response that never finished, not yet dropped.
    pub unfinished: Vec<i64>,
    /// Calls of finished responses that have no result, in journal order.
    pub orphans: Vec<Call>,
    /// What comes after the repairs.
    pub next: Next,
    /// Finished responses (the next model call is turn `turns`).
    pub turns: u32,
}

/// One repair, journaled before the loop continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Drop the items of a response that never finished and regenerate:
    /// none of its calls ran, so there is nothing to reconcile.
    DropUnfinished { seqs: Vec<i64> },
    /// A non-idempotent call lost its result: tell the model it was
    /// interrupted and may not have completed.
    Synthesize(Call),
    /// An idempotent call lost its result: run it again with the same key.
    ReExecute(Call),
}

/// The transcript items of finished responses and their results, with
/// dropped items removed: `(entry, is-after-the-last-turn_end)`.
fn live(entries: &[JournalEntry]) -> Vec<(&JournalEntry, bool)> {
    let gone = cairn_core::journal::dropped(entries);
    let last_end = entries
        .iter()
        .rposition(|e| e.kind == JournalKind::TurnEnd && !gone.contains(&e.seq));
    entries
        .iter()
        .enumerate()
        .filter(|(_, e)| !gone.contains(&e.seq))
        .map(|(i, e)| (e, last_end.is_none_or(|end| i > end)))
        .collect()
}

/// Classifies a journal's tail.
pub fn analyze(entries: &[JournalEntry]) -> Analysis {
    let live = live(entries);
    let unfinished: Vec<i64> = live
        .iter()
        .filter(|(e, after)| {
            *after
                && matches!(
                    e.kind,
                    JournalKind::AssistantText
                        | JournalKind::ToolCallStarted
                        | JournalKind::ToolCall
                )
        })
        .map(|(e, _)| e.seq)
        .collect();
    let answered: HashSet<String> = live
        .iter()
        .filter(|(e, _)| e.kind == JournalKind::ToolResult)
        .map(|(e, _)| text(&e.payload, "call_id"))
        .collect();
    let mut orphans = Vec::new();
    let mut seen = HashSet::new();
    let mut turns = 0u32;
    // The last finished response: its texts and whether it called tools.
    let (mut texts, mut calls) = (Vec::<String>::new(), 0usize);
    let mut in_response = false;
    // The previous item was a piece of a long text that this one continues.
    let mut glued = false;
    for (e, after) in &live {
        if *after {
            continue;
        }
        let continues = continues(e);
        match e.kind {
            JournalKind::AssistantText | JournalKind::ToolCall if !in_response => {
                in_response = true;
                texts.clear();
                calls = 0;
                if e.kind == JournalKind::AssistantText {
                    texts.push(text(&e.payload, "text"));
                } else {
                    calls += 1;
                }
            }
            JournalKind::AssistantText => match (glued, texts.last_mut()) {
                (true, Some(last)) => last.push_str(&text(&e.payload, "text")),
                _ => texts.push(text(&e.payload, "text")),
            },
            JournalKind::ToolCall => calls += 1,
            JournalKind::TurnEnd => {
                turns += 1;
                in_response = false;
            }
            _ => {}
        }
        glued = continues;
        if e.kind == JournalKind::ToolCall {
            let call = Call::from_entry(e);
            if !answered.contains(&call.call_id) && seen.insert(call.call_id.clone()) {
                orphans.push(call);
            }
        }
    }
    let next = if turns > 0 && calls == 0 {
        Next::Final {
            text: texts.join("\n"),
        }
    } else {
        Next::Model
    };
    Analysis {
        unfinished,
        orphans,
        next,
        turns,
    }
}

/// The repairs that make `a`'s journal clean: drop an unfinished response
/// first, then settle each orphaned call in order.
pub fn plan_repairs(a: &Analysis, idempotent: impl Fn(&str) -> bool) -> Vec<Repair> {
    let mut out = Vec::new();
    if !a.unfinished.is_empty() {
        out.push(Repair::DropUnfinished {
            seqs: a.unfinished.clone(),
        });
    }
    for call in &a.orphans {
        out.push(if idempotent(&call.name) {
            Repair::ReExecute(call.clone())
        } else {
            Repair::Synthesize(call.clone())
        });
    }
    out
}

impl Repair {
    /// The items to append for this repair of step `idx`, each repair
    /// marker with its `transcript_repaired` event (the marker's payload
    /// is the event's action; the event names the step too). A
    /// re-execution's result comes from running the tool, so only its
    /// marker is here.
    pub fn journal_items(&self, idx: StepIdx) -> Vec<NewJournalItem> {
        let marker = |repair: RepairAction| {
            // The marker is the action alone; its event names the step too.
            let mut repaired = TranscriptRepaired { idx: None, repair };
            let payload = EventData::TranscriptRepaired(repaired.clone()).to_value();
            repaired.idx = Some(idx);
            NewJournalItem::new(JournalKind::Repair, payload)
                .with_event(NewEvent::typed(EventData::TranscriptRepaired(repaired)))
        };
        let call = |c: &Call| (c.call_id.clone(), c.name.clone());
        match self {
            Repair::DropUnfinished { seqs } => {
                vec![marker(RepairAction::DropUnfinished { seqs: seqs.clone() })]
            }
            Repair::Synthesize(c) => vec![
                marker({
                    let (call_id, tool) = call(c);
                    RepairAction::SynthesizedResult { call_id, tool }
                }),
                NewJournalItem::new(
                    JournalKind::ToolResult,
                    json!({"call_id": c.call_id, "content": INTERRUPTED,
                           "is_error": true, "synthesized": true}),
                ),
            ],
            Repair::ReExecute(c) => vec![marker({
                let (call_id, tool) = call(c);
                RepairAction::Reexecuted { call_id, tool }
            })],
        }
    }
}

/// The journal as a provider-neutral transcript: finished responses and
/// their results only. Skips markers, `turn_end`, repairs, human answers,
/// dropped items, an unfinished response (never sent as if complete),
/// duplicate results (the first wins) and results that answer no call of
/// the response right before them.
pub fn project(entries: &[JournalEntry]) -> Vec<Item> {
    let mut items = Vec::new();
    // Call ids of the current response, and those already answered.
    let mut open: HashMap<String, bool> = HashMap::new();
    let mut in_results = false;
    // The previous item was a piece of a long text that this one continues.
    let mut glued = false;
    for (e, after) in live(entries) {
        let next_glued = continues(e);
        match e.kind {
            // An unfinished response is never sent as if complete.
            JournalKind::AssistantText | JournalKind::ToolCall if after => {}
            JournalKind::AssistantText | JournalKind::ToolCall => {
                if in_results {
                    open.clear();
                    in_results = false;
                }
                if e.kind == JournalKind::AssistantText {
                    let piece = text(&e.payload, "text");
                    match (glued, items.last_mut()) {
                        (true, Some(Item::Assistant { text })) => text.push_str(&piece),
                        _ => items.push(Item::Assistant { text: piece }),
                    }
                } else {
                    let call = Call::from_entry(e);
                    if open.contains_key(&call.call_id) {
                        continue; // a duplicate call id in one response
                    }
                    open.insert(call.call_id.clone(), false);
                    items.push(Item::ToolCall {
                        id: call.call_id,
                        name: call.name,
                        arguments: call.arguments,
                    });
                }
            }
            JournalKind::ToolResult => {
                let id = text(&e.payload, "call_id");
                // A duplicate or an orphan result is skipped.
                if let Some(done @ false) = open.get_mut(&id) {
                    *done = true;
                    in_results = true;
                    items.push(Item::ToolResult {
                        call_id: id,
                        content: text(&e.payload, "content"),
                        is_error: e.payload["is_error"].as_bool().unwrap_or(false),
                    });
                }
            }
            _ => {}
        }
        glued = next_glued;
    }
    items
}

/// Whether this item is a piece of a long model text that the next
/// `assistant_text` continues (`"continues": true`).
fn continues(e: &JournalEntry) -> bool {
    e.continues()
}

/// `text` cut into pieces of at most `max` bytes, on character boundaries.
pub(crate) fn pieces(text: &str, max: usize) -> Vec<&str> {
    // A piece holds at least one character (four bytes at most).
    let max = max.max(4);
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out.push(rest);
    out
}

/// A history window: at most `max_items` items and about `max_tokens`
/// tokens of a step's transcript are sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub max_items: Option<u32>,
    pub max_tokens: Option<u32>,
}

/// A rough token count: 4 bytes of JSON a token.
pub fn estimate_tokens(items: &[Item]) -> u64 {
    items.iter().map(item_tokens).sum()
}

fn item_tokens(item: &Item) -> u64 {
    let bytes = serde_json::to_string(item).map_or(0, |s| s.len()) as u64;
    bytes.div_ceil(4)
}

fn is_assistant(item: &Item) -> bool {
    matches!(item, Item::Assistant { .. } | Item::ToolCall { .. })
}

/// The suffix of `items` that fits `w`, cut forward to a clean boundary
/// (the start of an assistant response, or a user item) so it never starts
/// with a result whose call was cut off. If no boundary lies inside the
/// window (one turn alone exceeds it), the window keeps its suffix but
/// drops the orphaned results (those whose call was cut off).
pub fn window(items: &[Item], w: &Window) -> Vec<Item> {
    let mut start = items.len();
    let mut tokens = 0u64;
    while start > 0 {
        let count = (items.len() - start + 1) as u64;
        let t = item_tokens(&items[start - 1]);
        if w.max_items.is_some_and(|m| count > u64::from(m))
            || w.max_tokens.is_some_and(|m| tokens + t > u64::from(m))
        {
            break;
        }
        tokens += t;
        start -= 1;
    }
    if start == 0 {
        return items.to_vec();
    }
    let clean = |i: usize| match &items[i] {
        Item::User { .. } => true,
        item => is_assistant(item) && !is_assistant(&items[i - 1]),
    };
    if let Some(i) = (start..items.len()).find(|&i| clean(i)) {
        return items[i..].to_vec();
    }
    let kept = &items[start..];
    let calls: HashSet<&str> = kept
        .iter()
        .filter_map(|i| match i {
            Item::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    kept.iter()
        .filter(|i| match i {
            Item::ToolResult { call_id, .. } => calls.contains(call_id.as_str()),
            _ => true,
        })
        .cloned()
        .collect()
}

/// A thread's earlier runs as conversation, oldest first: each run's input
/// as a user message, its final output as the assistant's answer (text as
/// it is, anything else as JSON).
pub fn thread_items(thread: &[cairn_core::ThreadTurn]) -> Vec<Item> {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    thread
        .iter()
        .flat_map(|t| {
            [
                Item::User {
                    text: text(&t.input),
                },
                Item::Assistant {
                    text: text(&t.output),
                },
            ]
        })
        .collect()
}

/// The transcript of one model call: the thread's earlier runs (`history`,
/// pairs from [`thread_items`]), the step's context as a user message, then
/// the journal. The context is always sent: without it the step has no task.
/// The journal gets the window's room first (once the context is counted:
/// one item, its estimated tokens), cut as [`window`] cuts; the history
/// gets what is left, in whole turns (a user message and its answer),
/// newest first, so it never starts with an answer to a question cut away.
pub fn request_items(
    history: &[Item],
    context: String,
    journal: &[JournalEntry],
    w: &Window,
) -> Vec<Item> {
    let first = Item::User { text: context };
    let room = Window {
        max_items: w.max_items.map(|m| m.saturating_sub(1)),
        max_tokens: w.max_tokens.map(|t| {
            let used = u32::try_from(item_tokens(&first)).unwrap_or(u32::MAX);
            t.saturating_sub(used)
        }),
    };
    let projected = project(journal);
    let kept = window(&projected, &room);
    let kept_tokens: u64 = kept.iter().map(item_tokens).sum();
    let mut items_left = room
        .max_items
        .map(|m| u64::from(m).saturating_sub(kept.len() as u64));
    let mut tokens_left = room
        .max_tokens
        .map(|t| u64::from(t).saturating_sub(kept_tokens));
    let mut start = history.len() - history.len() % 2;
    while start >= 2 {
        let turn = &history[start - 2..start];
        let t: u64 = turn.iter().map(item_tokens).sum();
        if items_left.is_some_and(|n| n < 2) || tokens_left.is_some_and(|n| n < t) {
            break;
        }
        items_left = items_left.map(|n| n - 2);
        tokens_left = tokens_left.map(|n| n - t);
        start -= 2;
    }
    let end = history.len() - history.len() % 2;
    let mut items = history[start..end].to_vec();
    items.push(first);
    items.extend(kept);
    items
}
