//! Trace contexts, samplers and the spans built from a run's events.

#![allow(clippy::unwrap_used)]

use chrono::{TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::event::{EventKind, EventRecord};

#[test]
fn a_traceparent_round_trips_and_bad_ones_are_refused() {
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let cx = TraceContext::parse_traceparent(tp).unwrap();
    assert!(cx.sampled);
    assert_eq!(cx.trace_id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(cx.traceparent(cx.parent.unwrap()), tp);
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    ] {
        assert!(TraceContext::parse_traceparent(bad).is_err(), "{bad}");
    }
    let stored = serde_json::to_string(&cx).unwrap();
    assert_eq!(serde_json::from_str::<TraceContext>(&stored).unwrap(), cx);
}

#[test]
fn samplers_parse_and_decide_as_opentelemetry_says() {
    let run = RunId::new();
    let caller =
        TraceContext::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
            .unwrap();
    let on = Sampler::default();
    assert!(on.context(run, None).sampled);
    assert_eq!(on.context(run, None).trace_id.0, *run.as_uuid().as_bytes());
    assert!(
        !on.context(run, Some(caller)).sampled,
        "parent-based follows the caller"
    );
    assert_eq!(on.context(run, Some(caller)).trace_id, caller.trace_id);
    assert!(
        Sampler::parse("always_on", None)
            .unwrap()
            .context(run, Some(caller))
            .sampled
    );
    assert!(
        !Sampler::parse("always_off", None)
            .unwrap()
            .context(run, None)
            .sampled
    );
    let none = Sampler::parse("traceidratio", Some("0")).unwrap();
    let all = Sampler::parse("traceidratio", Some("1")).unwrap();
    assert!(!none.context(run, None).sampled && all.context(run, None).sampled);
    assert!(Sampler::parse("traceidratio", Some("1.5")).is_err());
    assert!(Sampler::parse("jaeger_remote", None).is_err());
}

fn at(ms: i64) -> chrono::DateTime<Utc> {
    Utc.timestamp_millis_opt(1_700_000_000_000 + ms).unwrap()
}

/// An event as its writers store it: the data must decode as its kind's
/// payload (a fixture of a shape no writer writes would test nothing).
fn ev(seq: i64, ms: i64, kind: EventKind, data: serde_json::Value) -> EventRecord {
    if let Err(e) = crate::event::EventData::decode(kind, &data) {
        panic!("fixture {data}: {e}");
    }
    EventRecord {
        run_id: RunId::new(),
        seq,
        at: at(ms),
        kind,
        data,
    }
}

fn submitted() -> serde_json::Value {
    json!({"crew": "research", "fingerprint": "f1", "idempotency_key": null, "thread_id": null})
}

fn run() -> TracedRun {
    let id = RunId::new();
    TracedRun {
        id,
        crew: "research".into(),
        version: "1".into(),
        roles: vec!["planner".into(), "writer".into()],
        thread: Some("t-1".into()),
        parent_run: None,
        created_at: at(0),
        trace: TraceContext::root(id, true),
        root_exported: false,
    }
}

fn claim(seq: i64, ms: i64, cursor: i64, took_over: bool) -> EventRecord {
    ev(
        seq,
        ms,
        EventKind::RunClaimed,
        json!({"owner": "w", "cursor": cursor, "epoch": seq, "took_over_step": took_over,
               "from_status": "queued"}),
    )
}

fn step_ok(seq: i64, ms: i64, idx: i64, role: &str) -> EventRecord {
    ev(
        seq,
        ms,
        EventKind::StepSucceeded,
        json!({"idx": idx, "role": role, "attempt": 1, "duration_ms": 5, "input_tokens": 30, "output_tokens": 7}),
    )
}

fn model(seq: i64, ms: i64, idx: i64) -> EventRecord {
    ev(
        seq,
        ms,
        EventKind::ModelCalled,
        json!({"idx": idx, "turn": 1, "provider": "openai", "model": "m", "ms": 4,
              "input_tokens": 30, "output_tokens": 7, "stop_reason": "stop",
              "cache_read_tokens": 20, "first_chunk_ms": 2}),
    )
}

/// A run submitted, its step 0 claimed, and a model call of that step.
fn call_in_flight() -> Vec<EventRecord> {
    vec![
        ev(1, 0, EventKind::RunSubmitted, submitted()),
        claim(2, 10, 0, false),
        model(3, 20, 0),
    ]
}

fn named<'a>(b: &'a SpanBatch, name: &str) -> Vec<&'a SpanRecord> {
    b.spans.iter().filter(|s| s.name == name).collect()
}

#[test]
fn a_finished_run_gives_a_tree_under_its_own_span() {
    let r = run();
    let mut events = call_in_flight();
    events.extend([
        ev(
            4,
            25,
            EventKind::ToolExecuted,
            json!({"idx": 0, "call_id": "c1", "tool": "search", "ms": 2, "is_error": false,
                   "idempotency_key": "k1"}),
        ),
        step_ok(5, 30, 0, "planner"),
        step_ok(6, 40, 1, "writer"),
        ev(7, 40, EventKind::RunSucceeded, json!({"steps": 2})),
    ]);
    let b = spans(&r, 0, &events);
    assert_eq!(b.through, 7);
    assert!(b.root_exported);
    let root = named(&b, "invoke_workflow research");
    assert_eq!(root.len(), 1);
    assert_eq!(root[0].span_id, SpanId::of_run(r.id));
    assert_eq!(root[0].parent, None);
    assert_eq!((root[0].start, root[0].end), (at(0), at(40)));
    let planner = named(&b, "invoke_agent planner");
    assert_eq!(planner.len(), 1);
    assert_eq!(planner[0].parent, Some(SpanId::of_run(r.id)));
    assert_eq!((planner[0].start, planner[0].end), (at(10), at(30)));
    let chat = named(&b, "chat m");
    assert_eq!(chat[0].parent, Some(planner[0].span_id));
    assert_eq!(chat[0].kind, SpanKind::Client);
    assert!(chat[0]
        .attributes
        .contains(&("gen_ai.usage.input_tokens", AttrValue::Int(30))));
    assert!(chat[0]
        .attributes
        .contains(&("gen_ai.usage.cache_read.input_tokens", AttrValue::Int(20))));
    assert!(chat[0]
        .attributes
        .contains(&("cairn.model.first_chunk_ms", AttrValue::Int(2))));
    assert!(!chat[0]
        .attributes
        .iter()
        .any(|(k, _)| *k == "gen_ai.usage.cache_creation.input_tokens"));
    assert_eq!(
        named(&b, "execute_tool search")[0].parent,
        Some(planner[0].span_id)
    );
    // A step with no claim of its own (the commit claimed it) spans its duration.
    let writer = named(&b, "invoke_agent writer");
    assert_eq!((writer[0].start, writer[0].end), (at(35), at(40)));
    assert!(b
        .spans
        .iter()
        .all(|s| s.trace_id.0 == *r.id.as_uuid().as_bytes()));
    // Built again, the same ids: a second exporter adds no new span.
    assert_eq!(spans(&r, 0, &events), b);
}

#[test]
fn a_running_step_stays_behind_the_cursor_and_a_takeover_joins_its_span() {
    let r = run();
    let before_kill = call_in_flight();
    let b = spans(&r, 0, &before_kill);
    assert_eq!(
        b.through, 1,
        "the claim and the call wait for the step's end"
    );
    assert_eq!(b.spans.len(), 1);
    let mut after = before_kill[1..].to_vec();
    after.extend([
        claim(4, 500, 0, true),
        model(5, 520, 0),
        step_ok(6, 530, 0, "planner"),
    ]);
    let b = spans(&r, 1, &after);
    assert_eq!(b.through, 6);
    let planner = named(&b, "invoke_agent planner");
    assert_eq!(
        planner.len(),
        1,
        "one span for the attempt, across the takeover"
    );
    assert_eq!(planner[0].start, at(10));
    assert!(planner[0]
        .attributes
        .contains(&("cairn.step.takeovers", AttrValue::Int(1))));
    let calls = named(&b, "chat m");
    assert_eq!(calls.len(), 2, "the dead process's call and the new one");
    assert!(calls.iter().all(|c| c.parent == Some(planner[0].span_id)));
    assert!(!b.root_exported);
}

#[test]
fn the_runs_span_is_exported_once_and_a_caller_is_its_parent() {
    let mut r = run();
    let caller =
        TraceContext::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap();
    r.trace = caller;
    let failed = vec![ev(
        1,
        5,
        EventKind::RunFailed,
        json!({"error": {"kind": "agent", "message": "boom", "retryable": false}}),
    )];
    let b = spans(&r, 0, &failed);
    let root = named(&b, "invoke_workflow research");
    assert_eq!(root[0].parent, caller.parent);
    assert_eq!(root[0].trace_id, caller.trace_id);
    assert_eq!(root[0].status, SpanStatus::Error("boom".into()));
    r.root_exported = true;
    let again = vec![ev(2, 9, EventKind::RunSucceeded, json!({}))];
    assert!(named(&spans(&r, 1, &again), "invoke_workflow research").is_empty());
}

#[test]
fn span_ids_differ_by_run_and_event() {
    let (a, b) = (RunId::new(), RunId::new());
    assert_ne!(SpanId::of_run(a), SpanId::of_run(b));
    assert_ne!(SpanId::of_event(a, 1), SpanId::of_event(a, 2));
    assert_ne!(SpanId::of_event(a, 1), SpanId::of_run(a));
    assert_eq!(SpanId::of_event(a, 3), SpanId::of_event(a, 3));
}

/// Journal item `seq` of attempt 1.
fn item(
    seq: i64,
    kind: crate::journal::JournalKind,
    payload: serde_json::Value,
) -> crate::journal::JournalEntry {
    crate::journal::JournalEntry {
        seq,
        attempt: crate::Attempt(1),
        generation: 0,
        kind,
        payload,
        created_at: at(0),
    }
}

#[test]
fn content_is_cut_at_a_character_boundary_and_matched_by_call_id() {
    use crate::journal::JournalKind;
    let r = run();
    let events = vec![
        claim(1, 0, 0, false),
        ev(
            2,
            5,
            EventKind::ToolExecuted,
            json!({"idx": 0, "call_id": "c1", "tool": "t", "ms": 1, "is_error": false,
                   "idempotency_key": "k1"}),
        ),
        step_ok(3, 10, 0, "planner"),
    ];
    let mut b = spans(&r, 0, &events);
    let steps = [StepContent {
        idx: 0,
        output: Some(json!("ééééé")),
        journal: vec![
            item(
                1,
                JournalKind::ToolCall,
                json!({"call_id": "c1", "arguments": {"q": "x"}}),
            ),
            item(
                2,
                JournalKind::ToolResult,
                json!({"call_id": "c1", "content": "done"}),
            ),
        ],
    }];
    capture(&mut b.spans, &steps, 5);
    let tool = &named(&b, "execute_tool t")[0];
    assert!(tool.attributes.contains(&(
        "gen_ai.tool.call.arguments",
        AttrValue::Str("{\"q\":…".into())
    )));
    assert!(tool
        .attributes
        .contains(&("gen_ai.tool.call.result", AttrValue::Str("done".into()))));
    let step = &named(&b, "invoke_agent planner")[0];
    // 5 bytes: two 2-byte characters, then a cut.
    assert!(step
        .attributes
        .contains(&("cairn.step.output", AttrValue::Str("éé…".into()))));
}

#[test]
fn a_model_calls_messages_are_its_turn_in_the_journal() {
    let r = run();
    let called = |seq, turn, input: i64, output: i64| {
        ev(
            seq,
            seq * 10,
            EventKind::ModelCalled,
            json!({"idx": 0, "turn": turn, "provider": "openai", "model": "m", "ms": 4,
                  "input_tokens": input, "output_tokens": output}),
        )
    };
    let events = vec![
        claim(1, 0, 0, false),
        called(2, 0, 10, 2),
        called(3, 1, 30, 7),
        // A call whose tokens match no finished response in the journal.
        called(4, 1, 99, 9),
        step_ok(5, 60, 0, "planner"),
    ];
    let mut b = spans(&r, 0, &events);
    let journal = two_turns();
    let steps = [StepContent {
        idx: 0,
        output: None,
        journal,
    }];
    capture(&mut b.spans, &steps, 4096);
    let chats = named(&b, "chat m");
    let messages = |s: &SpanRecord, key: &str| -> Option<serde_json::Value> {
        s.text(key).map(|t| serde_json::from_str(&t).unwrap())
    };
    let said = json!({"role": "assistant", "parts": [
        {"type": "text", "content": "Looking."},
        {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"order": "A"}}]});
    let mut first_out = said.clone();
    first_out["finish_reason"] = json!("tool_call");
    assert_eq!(messages(chats[0], "gen_ai.input.messages"), Some(json!([])));
    assert_eq!(
        messages(chats[0], "gen_ai.output.messages"),
        Some(json!([first_out]))
    );
    assert_eq!(
        messages(chats[1], "gen_ai.input.messages"),
        Some(json!([said, {"role": "tool", "parts": [
            {"type": "tool_call_response", "id": "c1", "response": "found"}]}]))
    );
    assert_eq!(
        messages(chats[1], "gen_ai.output.messages"),
        Some(json!([{"role": "assistant", "finish_reason": "stop",
            "parts": [{"type": "text", "content": "Found it."}]}]))
    );
    assert_eq!(messages(chats[2], "gen_ai.output.messages"), None);
}

/// A step's journal of two responses: a text in two pieces and a tool call,
/// the tool's result, an unfinished response a repair dropped, the answer.
fn two_turns() -> Vec<crate::journal::JournalEntry> {
    use crate::journal::JournalKind;
    [
        (
            JournalKind::AssistantText,
            json!({"text": "Look", "continues": true}),
        ),
        (JournalKind::AssistantText, json!({"text": "ing."})),
        (
            JournalKind::ToolCall,
            json!({"call_id": "c1", "name": "lookup", "arguments": {"order": "A"}}),
        ),
        (
            JournalKind::TurnEnd,
            json!({"stop_reason": "tool_use", "input_tokens": 10, "output_tokens": 2}),
        ),
        (
            JournalKind::ToolResult,
            json!({"call_id": "c1", "content": "found"}),
        ),
        // An unfinished response, dropped by a repair: never content.
        (JournalKind::AssistantText, json!({"text": "Fou"})),
        (
            JournalKind::Repair,
            json!({"action": "drop_unfinished", "seqs": [6]}),
        ),
        (JournalKind::AssistantText, json!({"text": "Found it."})),
        (
            JournalKind::TurnEnd,
            json!({"stop_reason": "end_turn", "input_tokens": 30, "output_tokens": 7}),
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (kind, payload))| item(i as i64 + 1, kind, payload))
    .collect()
}

#[test]
fn a_resumed_steps_span_counts_the_repairs_of_its_transcript() {
    let r = run();
    let repaired = |seq, action: serde_json::Value| {
        let mut data = action;
        data["idx"] = json!(0);
        ev(seq, 12, EventKind::TranscriptRepaired, data)
    };
    let events = vec![
        claim(1, 10, 0, true),
        repaired(2, json!({"action": "drop_unfinished", "seqs": [4]})),
        repaired(
            3,
            json!({"action": "synthesized_result", "call_id": "c1", "tool": "mail"}),
        ),
        step_ok(4, 30, 0, "planner"),
    ];
    let b = spans(&r, 0, &events);
    let planner = named(&b, "invoke_agent planner");
    assert_eq!(planner[0].int("cairn.step.repairs"), Some(2));
    assert_eq!(planner[0].int("cairn.step.takeovers"), Some(1));
}

#[test]
fn a_signal_links_its_senders_span() {
    let r = run();
    let sender = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let events = vec![
        ev(1, 0, EventKind::RunSubmitted, submitted()),
        ev(
            2,
            5,
            EventKind::SignalReceived,
            json!({"id": "evt-1", "name": "paid", "by": "hook:pay", "reason": null,
                   "traceparent": sender}),
        ),
        ev(
            3,
            6,
            EventKind::SignalReceived,
            json!({"id": "evt-2", "name": "paid", "by": "ops", "reason": null}),
        ),
        claim(4, 10, 0, false),
        ev(
            5,
            12,
            EventKind::SignalConsumed,
            json!({"idx": 0, "attempt": 1, "id": "evt-1", "name": "paid"}),
        ),
        step_ok(6, 12, 0, "planner"),
    ];
    let b = spans(&r, 0, &events);
    let received = named(&b, "cairn.signal.received");
    assert_eq!(received.len(), 2);
    let linked = TraceContext::parse_traceparent(sender).unwrap();
    assert_eq!(
        received[0].links,
        [(linked.trace_id, linked.parent.unwrap())],
        "the sender's span"
    );
    assert_eq!(
        received[0].text("cairn.signal.name").as_deref(),
        Some("paid")
    );
    assert!(received[1].links.is_empty(), "no traceparent, no link");
    let consumed = named(&b, "cairn.signal.consumed");
    assert_eq!(
        consumed[0].text("cairn.signal.id").as_deref(),
        Some("evt-1")
    );
}
