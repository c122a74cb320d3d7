//! An `llm` step on its run's page: the live box its text streams into,
//! and its journal as a conversation.

use super::*;

/// Where a running `llm` step's text appears as it streams (`console.js`
/// fills it from `output_delta` events). `data-seq` is the step's newest
/// journal item shown on this page: pieces sent before it are already in
/// the conversation, so the script shows only pieces with `after_seq` at or
/// past it, and no text appears twice.
pub(crate) fn live_text(step: &StepRecord, journal: &[JournalEntry]) -> Markup {
    let newest = journal.iter().map(|e| e.seq).max().unwrap_or(0);
    html! {
        section.live-output {
            h2 { "Live output · step " (step.idx.get()) " · " (step.role.as_str()) }
            pre.live-text id=(format!("live-text-{}", step.idx.get()))
                data-idx=(step.idx.get()) data-attempt=(step.attempt.get()) data-seq=(newest)
                aria-live="polite" {}
        }
    }
}

/// An `llm` step's journal as a conversation: text, tool calls with their
/// arguments, results, human answers, each repair marked with its kind, and
/// where each response ended. A new generation (after a rejected review)
/// starts under its own heading.
pub(crate) fn conversation(journal: &[JournalEntry]) -> Markup {
    // A heading where a generation after the first begins.
    let headed: Vec<(Option<u32>, &JournalEntry)> = journal
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let previous = i.checked_sub(1).map(|p| journal[p].generation);
            let starts = previous.map_or(e.generation > 0, |g| g != e.generation);
            (starts.then_some(e.generation), e)
        })
        .collect();
    html! {
        ol.conversation {
            @for (heading, e) in headed {
                @if let Some(g) = heading {
                    li.generation { "Journal " (g) " (after " (g) " rejected review" @if g != 1 { "s" } ")" }
                }
                (journal_item(e))
            }
        }
    }
}

fn journal_item(e: &JournalEntry) -> Markup {
    let p = &e.payload;
    let text = |key: &str| p.get(key).and_then(|v| v.as_str()).unwrap_or("").to_owned();
    let seq = html! { span.seq title=(format!("attempt {}", e.attempt.get())) { "#" (e.seq) } };
    html! {
        @match e.kind {
            JournalKind::AssistantText => li.assistant { (seq) " " strong { "Assistant" } pre { (text("text")) } },
            JournalKind::ToolCallStarted => li.tool-started { (seq) " " strong { "Tool call started" } " " code { (text("name")) } },
            JournalKind::ToolCall => li.tool-call {
                (seq) " " strong { "Tool call" } " " code { (text("name")) }
                pre { (text("arguments")) }
            },
            JournalKind::ToolResult => li.tool-result.error[p.get("is_error").and_then(|v| v.as_bool()).unwrap_or(false)] {
                (seq) " " strong { "Result" }
                @if p.get("synthesized").and_then(|v| v.as_bool()).unwrap_or(false) { " " span.badge { "synthesized" } }
                pre { (p.get("content").map(|c| c.as_str().map(str::to_owned).unwrap_or_else(|| c.to_string())).unwrap_or_default()) }
            },
            JournalKind::HumanAnswer => li.human { (seq) " " strong { "Human answer" } pre { (pretty(p.get("answer"))) } },
            JournalKind::Repair => li.repair {
                (seq) " " strong { "Repair" } " " span.badge.repair { (text("action")) }
                " " code { (p.to_string()) }
            },
            JournalKind::TurnEnd => li.turn-end {
                (seq) " end of response: " (text("stop_reason"))
                " · " (p.get("input_tokens").and_then(|v| v.as_u64()).unwrap_or(0)) " in / "
                (p.get("output_tokens").and_then(|v| v.as_u64()).unwrap_or(0)) " out · "
                (p.get("ms").and_then(|v| v.as_u64()).unwrap_or(0)) " ms"
            },
            _ => li { (seq) " " (e.kind.as_str()) " " code { (p.to_string()) } },
        }
    }
}
