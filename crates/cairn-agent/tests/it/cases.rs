//! Every tail kind, as data.

use cairn_agent::transcript::{request_items, thread_items, window, Window};
use cairn_llm::pairing::{check_anthropic, check_openai};
use cairn_llm::Item;

use crate::{journal, projected, summary, words};

/// One case: the journal, its summary, and its projection.
#[track_caller]
fn check(j: &str, want_summary: &str, want_projected: &str) {
    let entries = journal(j);
    assert_eq!(summary(&entries), want_summary, "summary of `{j}`");
    assert_eq!(projected(&entries), want_projected, "projection of `{j}`");
}

#[test]
fn tails() {
    // (journal, its summary, its projection)
    #[rustfmt::skip]
    let cases = [
        // Nothing yet: call the model.
        ("", "model turns=0 []", ""),
        // A final answer (a finished response without calls).
        ("T:hi E", "final(hi) turns=1 []", "T:hi"),
        ("T:a T:b E", "final(a\nb) turns=1 []", "T:a T:b"),
        // Clean: every call of the last response has its result.
        ("T:look S:1 C:1 E R:1", "model turns=1 []", "T:look C:1 R:1"),
        ("S:1 C:1 E R:1 T:done E", "final(done) turns=2 []", "C:1 R:1 T:done"),
        // A call without a result (died between call and result): an
        // idempotent tool runs again, another gets a synthesized result.
        ("S:1 C:1:i E", "model turns=1 [rerun:1]", "C:1"),
        ("S:1 C:1:w E", "model turns=1 [synth:1]", "C:1"),
        // A call still streaming (only its marker): dropped, regenerated.
        ("S:0 C:0 E R:0 T:look S:1", "model turns=1 [drop[5, 6]]", "C:0 R:0"),
        // A finished call of a response that never finished: never ran, dropped.
        ("S:1 C:1 S:2", "model turns=0 [drop[1, 2, 3]]", ""),
        // Text of an unfinished response is not sent as if complete.
        ("T:half", "model turns=0 [drop[1]]", ""),
        // After the drop repair, the journal is clean.
        ("S:1 C:1 S:2 D:1,2,3", "model turns=0 []", ""),
        ("T:a E S:1 D:3 S:1 C:1 E R:1", "model turns=2 []", "T:a C:1 R:1"),
        // Parallel calls, one result missing.
        ("S:1 C:1:w S:2 C:2:i E R:1", "model turns=1 [rerun:2]", "C:1 C:2 R:1"),
        ("S:1 C:1:w S:2 C:2:w E R:2", "model turns=1 [synth:1]", "C:1 C:2 R:2"),
        // Text between call and result (same response, after the call).
        ("S:1 C:1 T:meanwhile E R:1", "model turns=1 []", "C:1 T:meanwhile R:1"),
        // Duplicates: a result recorded twice counts once.
        ("S:1 C:1 E R:1 R:1", "model turns=1 []", "C:1 R:1"),
        // A call id reused by a regenerated response after a drop.
        ("S:1 C:1 D:1,2 S:1 C:1 E R:1", "model turns=1 []", "C:1 R:1"),
        // An orphan result (its call is in no response) is never sent.
        ("R:9 T:a E", "final(a) turns=1 []", "T:a"),
    ];
    for (j, want_summary, want_projected) in cases {
        check(j, want_summary, want_projected);
    }
}

/// Items from words: `T:text` assistant text, `C:id` a call, `R:id` its
/// result (the inverse of [`words`]).
fn items_of(words: &str) -> Vec<Item> {
    words
        .split_whitespace()
        .map(|w| match w.split_once(':') {
            Some(("T", text)) => Item::Assistant { text: text.into() },
            Some(("C", id)) => Item::ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: "{}".into(),
            },
            Some(("R", id)) => Item::ToolResult {
                call_id: id.into(),
                content: "r".into(),
                is_error: false,
            },
            _ => panic!("unknown word {w}"),
        })
        .collect()
}

#[track_caller]
fn check_window(items: &[Item], max_items: u32, want: &str) {
    let w = Window {
        max_items: Some(max_items),
        max_tokens: None,
    };
    let got = window(items, &w);
    assert_eq!(
        words(&got),
        want,
        "window of {max_items} over {}",
        words(items)
    );
    let mut request = vec![Item::User { text: "cx".into() }];
    request.extend(got);
    check_openai(&request).unwrap();
    check_anthropic(&request).unwrap();
}

#[test]
fn windows_cut_forward_to_a_clean_boundary() {
    let items = items_of("T:a C:1 R:1 C:2 C:3 R:2 R:3 T:b C:4 R:4");
    check_window(&items, 100, "T:a C:1 R:1 C:2 C:3 R:2 R:3 T:b C:4 R:4");
    // Starts on a result whose call was cut: forward to the next response.
    check_window(&items, 8, "C:2 C:3 R:2 R:3 T:b C:4 R:4");
    check_window(&items, 6, "T:b C:4 R:4");
    check_window(&items, 4, "T:b C:4 R:4");
    check_window(&items, 3, "T:b C:4 R:4");
    // No clean boundary inside the window: the suffix stays, minus results
    // whose calls were cut off.
    check_window(&items, 2, "C:4 R:4");
    // One turn larger than the window: its leading orphaned results go.
    let big = items_of("C:1 C:2 C:3 R:1 R:2 R:3");
    check_window(&big, 4, "C:3 R:3");
    check_window(&big, 2, "");
}

#[test]
fn a_token_window_keeps_about_that_many_tokens() {
    let text = "x".repeat(40);
    let items = items_of(
        &(0..20)
            .map(|i| format!("T:{text} C:{i} R:{i} "))
            .collect::<String>(),
    );
    let w = Window {
        max_items: None,
        max_tokens: Some(200),
    };
    let got = window(&items, &w);
    assert!(!got.is_empty());
    assert!(cairn_agent::transcript::estimate_tokens(&got) <= 200);
    assert!(matches!(got[0], Item::Assistant { .. }), "{}", words(&got));
}

#[test]
fn a_request_starts_with_the_context_then_the_windowed_journal() {
    let j = journal("T:a S:1 C:1 E R:1 T:b S:2 C:2 E R:2");
    // The context counts as one item of the window.
    let w = Window {
        max_items: Some(4),
        max_tokens: None,
    };
    assert_eq!(
        words(&request_items(&[], "cx".into(), &j, &w)),
        "U:cx T:b C:2 R:2"
    );
    // A context larger than the token budget leaves no room for the
    // journal, but is still sent.
    let w = Window {
        max_items: None,
        max_tokens: Some(5),
    };
    let big = "x".repeat(100);
    assert_eq!(
        words(&request_items(&[], big.clone(), &j, &w)),
        format!("U:{big}")
    );
}

/// A thread of `n` earlier runs: inputs `q0, q1, …`, outputs `a0, a1, …`.
fn thread(n: usize) -> Vec<Item> {
    let turns: Vec<cairn_core::ThreadTurn> = (0..n)
        .map(|i| cairn_core::ThreadTurn {
            run_id: cairn_core::RunId::new(),
            input: serde_json::json!(format!("q{i}")),
            output: serde_json::json!(format!("a{i}")),
        })
        .collect();
    thread_items(&turns)
}

#[test]
fn a_thread_comes_before_the_context_in_whole_turns_newest_kept() {
    let j = journal("T:a S:1 C:1 E R:1");
    let w = |items: Option<u32>, tokens: Option<u32>| Window {
        max_items: items,
        max_tokens: tokens,
    };
    // No window: the whole thread, oldest first, as user/assistant pairs.
    assert_eq!(
        words(&request_items(&thread(3), "cx".into(), &j, &w(None, None))),
        "U:q0 T:a0 U:q1 T:a1 U:q2 T:a2 U:cx T:a C:1 R:1"
    );
    // The journal has the room first (1 context + 3 items); the thread
    // gets what is left, in whole turns: 7 - 4 = 3 items is one turn.
    assert_eq!(
        words(&request_items(
            &thread(3),
            "cx".into(),
            &j,
            &w(Some(7), None)
        )),
        "U:q2 T:a2 U:cx T:a C:1 R:1"
    );
    // No room left at all: no history, never half a turn.
    assert_eq!(
        words(&request_items(
            &thread(3),
            "cx".into(),
            &j,
            &w(Some(5), None)
        )),
        "U:cx T:a C:1 R:1"
    );
    // A token window cuts the same way, newest turns first.
    let all = request_items(&thread(3), "cx".into(), &j, &w(None, None));
    let total = cairn_agent::transcript::estimate_tokens(&all) as u32;
    let turn = cairn_agent::transcript::estimate_tokens(&thread(1)) as u32;
    let got = request_items(&thread(3), "cx".into(), &j, &w(None, Some(total - turn)));
    assert_eq!(words(&got), "U:q1 T:a1 U:q2 T:a2 U:cx T:a C:1 R:1");
    // Every such request is one both providers accept.
    for items in [Some(5), Some(6), Some(7), Some(9), None] {
        let req = request_items(&thread(3), "cx".into(), &j, &w(items, None));
        check_openai(&req).unwrap();
        check_anthropic(&req).unwrap();
    }
}

/// Applies the planned repairs as the loop does (a re-run's result is
/// `R:id` too) and returns the next request in words.
fn request_after_repairs(j: &str, idempotent: &str) -> String {
    words(&repaired_request(j, idempotent))
}

/// The next request after the planned repairs, as items.
fn repaired_request(j: &str, idempotent: &str) -> Vec<Item> {
    use cairn_agent::transcript::{analyze, plan_repairs, Repair};
    let mut entries = journal(j);
    for r in plan_repairs(&analyze(&entries), |t| t == idempotent) {
        let mut push = |kind, payload| {
            let seq = entries.len() as i64 + 1;
            entries.push(crate::entry(seq, kind, payload));
        };
        for item in r.journal_items(cairn_core::StepIdx(0)) {
            push(item.kind, item.payload);
        }
        if let Repair::ReExecute(call) = &r {
            push(
                cairn_core::JournalKind::ToolResult,
                serde_json::json!({"call_id": call.call_id, "content": "again", "is_error": false}),
            );
        }
    }
    let request = request_items(&[], "cx".into(), &entries, &Window::default());
    check_openai(&request).unwrap();
    check_anthropic(&request).unwrap();
    request
}

#[test]
fn a_lost_non_idempotent_result_is_sent_as_unknown_effect_not_as_not_done() {
    let request = repaired_request("T:a S:1 C:1:w E", "i");
    let synthesized = request.iter().find_map(|item| match item {
        Item::ToolResult {
            call_id,
            content,
            is_error,
        } if call_id == "1" => Some((content.clone(), *is_error)),
        _ => None,
    });
    let (content, is_error) = synthesized.expect("a result for call 1");
    assert_eq!(content, cairn_agent::transcript::INTERRUPTED);
    assert!(is_error, "an interrupted call is an error result");
    // What the text must say, and must not invite.
    assert!(content.contains("effect is unknown"), "{content}");
    assert!(content.contains("may have happened"), "{content}");
    assert!(content.contains("Check"), "{content}");
    assert!(!content.contains("not done"), "{content}");
}

#[test]
fn the_request_after_each_repair_kind() {
    // Unfinished streamed call: dropped; the request ends at the last clean item.
    assert_eq!(
        request_after_repairs("T:a S:1 C:1:w E R:1 T:b S:2", "i"),
        "U:cx T:a C:1 R:1"
    );
    // Call without result, not idempotent: a synthesized error result.
    assert_eq!(
        request_after_repairs("T:a S:1 C:1:w E", "i"),
        "U:cx T:a C:1 R:1"
    );
    // Call without result, idempotent: re-run with the same key; its result.
    assert_eq!(request_after_repairs("S:1 C:1:i E", "i"), "U:cx C:1 R:1");
    // Both at once: parallel calls, one answered, one lost, then a cut stream.
    assert_eq!(
        request_after_repairs("S:1 C:1:w S:2 C:2:i E R:1 S:3", "i"),
        "U:cx C:1 C:2 R:1 R:2"
    );
}
