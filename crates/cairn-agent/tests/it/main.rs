//! The transcript rules as data: journals written in a compact notation,
//! and what `analyze`, `plan_repairs`, `project` and `window` make of them;
//! plus a property test that any journal, crashed anywhere and repaired,
//! gives requests both providers accept under any window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;
mod property;

use cairn_agent::transcript::{analyze, plan_repairs, project, Next, Repair};
use cairn_core::{Attempt, JournalEntry, JournalKind};
use cairn_llm::Item;
use serde_json::json;

/// Builds a journal from words, seq counting from 1:
/// `T:text` assistant text, `S:id` a call started streaming, `C:id:tool` a
/// finished call, `E` turn end, `R:id` a result, `D:3,4` a drop repair.
pub fn journal(words: &str) -> Vec<JournalEntry> {
    let mut out = Vec::new();
    for (i, w) in words.split_whitespace().enumerate() {
        let parts: Vec<&str> = w.split(':').collect();
        let (kind, payload) = match parts[0] {
            "T" => (JournalKind::AssistantText, json!({"text": parts[1]})),
            "S" => (
                JournalKind::ToolCallStarted,
                json!({"call_id": parts[1], "name": "t"}),
            ),
            "C" => (
                JournalKind::ToolCall,
                json!({"call_id": parts[1], "name": parts.get(2).copied().unwrap_or("t"),
                       "arguments": "{}", "idempotency_key": format!("k/{}", parts[1])}),
            ),
            "E" => (
                JournalKind::TurnEnd,
                json!({"stop_reason": "x", "input_tokens": 1, "output_tokens": 1}),
            ),
            "R" => (
                JournalKind::ToolResult,
                json!({"call_id": parts[1], "content": format!("r{}", parts[1]), "is_error": false}),
            ),
            "D" => (
                JournalKind::Repair,
                json!({"action": "drop_unfinished",
                       "seqs": parts[1].split(',').map(|s| s.parse::<i64>().unwrap()).collect::<Vec<_>>()}),
            ),
            other => panic!("unknown word {other}"),
        };
        out.push(entry(i as i64 + 1, kind, payload));
    }
    out
}

pub fn entry(seq: i64, kind: JournalKind, payload: serde_json::Value) -> JournalEntry {
    JournalEntry {
        seq,
        attempt: Attempt::FIRST,
        generation: 0,
        kind,
        payload,
        created_at: chrono::Utc::now(),
    }
}

/// The transcript in words: `T:text`, `C:id`, `R:id`.
pub fn words(items: &[Item]) -> String {
    items
        .iter()
        .map(|i| match i {
            Item::User { text } => format!("U:{text}"),
            Item::Assistant { text } => format!("T:{text}"),
            Item::ToolCall { id, .. } => format!("C:{id}"),
            Item::ToolResult { call_id, .. } => format!("R:{call_id}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a journal's analysis and repair plan say, in words: the next step,
/// the turns, and each repair (`drop[seqs]`, `synth:id`, `rerun:id`), with
/// tool `i` idempotent and every other tool not.
pub fn summary(j: &[JournalEntry]) -> String {
    let a = analyze(j);
    let next = match &a.next {
        Next::Model => "model".to_owned(),
        Next::Final { text } => format!("final({text})"),
    };
    let repairs: Vec<String> = plan_repairs(&a, |tool| tool == "i")
        .iter()
        .map(|r| match r {
            Repair::DropUnfinished { seqs } => format!("drop{seqs:?}"),
            Repair::Synthesize(c) => format!("synth:{}", c.call_id),
            Repair::ReExecute(c) => format!("rerun:{}", c.call_id),
        })
        .collect();
    format!("{next} turns={} [{}]", a.turns, repairs.join(" "))
}

/// `project` in words.
pub fn projected(j: &[JournalEntry]) -> String {
    words(&project(j))
}
