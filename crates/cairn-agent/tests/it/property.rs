//! Random journals, crashed at a random point, repaired as the turn loop
//! repairs them, under random windows: every request built satisfies both
//! providers' pairing rules, and the repaired journal is clean.

use cairn_agent::transcript::{analyze, plan_repairs, request_items, Repair, Window};
use cairn_core::{JournalEntry, JournalKind};
use cairn_llm::pairing::{check_anthropic, check_openai};
use proptest::prelude::*;
use serde_json::json;

use crate::entry;

/// One model response: its texts, its calls (idempotent or not), and which
/// calls got their results before the next response.
#[derive(Debug, Clone)]
struct Response {
    texts: usize,
    calls: Vec<bool>,
    answered: Vec<bool>,
}

fn response() -> impl Strategy<Value = Response> {
    (
        0..3usize,
        prop::collection::vec(any::<bool>(), 0..4),
        prop::collection::vec(any::<bool>(), 4),
    )
        .prop_map(|(texts, calls, answered)| Response {
            texts,
            calls,
            answered,
        })
}

/// The journal the loop would write for `responses` (a crash-free run
/// answers every call; `answered` only matters at the crash point).
fn write(responses: &[Response]) -> Vec<(JournalKind, serde_json::Value)> {
    let mut out = Vec::new();
    for (r, resp) in responses.iter().enumerate() {
        for t in 0..resp.texts {
            out.push((
                JournalKind::AssistantText,
                json!({"text": format!("t{r}.{t}")}),
            ));
        }
        for (c, idem) in resp.calls.iter().enumerate() {
            let id = format!("c{r}.{c}");
            let tool = if *idem { "i" } else { "w" };
            out.push((
                JournalKind::ToolCallStarted,
                json!({"call_id": id, "name": tool}),
            ));
            out.push((
                JournalKind::ToolCall,
                json!({"call_id": id, "name": tool, "arguments": "{}"}),
            ));
        }
        out.push((JournalKind::TurnEnd, json!({})));
        for (c, _) in resp.calls.iter().enumerate() {
            if resp.answered[c] || r + 1 < responses.len() {
                let id = format!("c{r}.{c}");
                out.push((
                    JournalKind::ToolResult,
                    json!({"call_id": id, "content": "ok", "is_error": false}),
                ));
            }
        }
    }
    out
}

fn numbered(items: Vec<(JournalKind, serde_json::Value)>) -> Vec<JournalEntry> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, (k, p))| entry(i as i64 + 1, k, p))
        .collect()
}

/// Applies the loop's repairs: their items, and for a re-run its result.
fn repair(journal: &mut Vec<JournalEntry>, idempotent: &dyn Fn(&str) -> bool) {
    for _ in 0..3 {
        let repairs = plan_repairs(&analyze(journal), idempotent);
        if repairs.is_empty() {
            return;
        }
        for r in &repairs {
            for item in r.journal_items(cairn_core::StepIdx(0)) {
                let seq = journal.len() as i64 + 1;
                journal.push(entry(seq, item.kind, item.payload));
            }
            if let Repair::ReExecute(call) = r {
                let seq = journal.len() as i64 + 1;
                journal.push(entry(
                    seq,
                    JournalKind::ToolResult,
                    json!({"call_id": call.call_id, "content": "again", "is_error": false}),
                ));
            }
        }
    }
    panic!("repairs did not converge: {journal:#?}");
}

fn window() -> impl Strategy<Value = Window> {
    (prop::option::of(1u32..30), prop::option::of(10u32..2000)).prop_map(
        |(max_items, max_tokens)| Window {
            max_items,
            max_tokens,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn repaired_journals_give_valid_requests_under_any_window(
        responses in prop::collection::vec(response(), 0..6),
        cut in 0usize..200,
        w in window(),
        rerun_idempotent in any::<bool>(),
    ) {
        let full = write(&responses);
        let crashed = &full[..cut.min(full.len())];
        let mut journal = numbered(crashed.to_vec());
        let idempotent = move |tool: &str| rerun_idempotent && tool == "i";
        repair(&mut journal, &idempotent);
        let a = analyze(&journal);
        prop_assert!(a.unfinished.is_empty(), "unfinished after repair: {a:?}");
        prop_assert!(a.orphans.is_empty(), "orphans after repair: {a:?}");
        let request = request_items(&[], "context".into(), &journal, &w);
        if let Err(e) = check_openai(&request) {
            prop_assert!(false, "openai: {e}\n{request:#?}");
        }
        if let Err(e) = check_anthropic(&request) {
            prop_assert!(false, "anthropic: {e}\n{request:#?}");
        }
        // Without a window the whole repaired transcript is sent.
        let whole = request_items(&[], "context".into(), &journal, &Window::default());
        prop_assert!(whole.len() >= request.len());
    }
}
