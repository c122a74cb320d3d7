//! Round trips: for each kind, the JSON each of today's writers stores
//! (its shape copied from the writer, with realistic values) decodes as
//! its kind's payload and encodes back to the identical JSON.

use serde_json::{json, Value};

use super::*;
use crate::event::EventKind;

const RUN: &str = "01a2152b-7841-73ff-a67c-0367b946b9db";
const CHILD: &str = "01a2152b-789b-755f-937e-6295dd49f223";
const COPY: &str = "01a2152b-791a-7653-b50f-fae88dd12ad6";
const WAIT: &str = "01a2152b-78c2-7585-b750-546d851f6c68";

/// Decodes `data` as `kind`, checks the variant's kind, and returns it
/// after checking it encodes back to `data` exactly.
fn round_trip(kind: EventKind, data: Value) -> EventData {
    let decoded = match EventData::decode(kind, &data) {
        Ok(d) => d,
        Err(e) => panic!("{e}: {data}"),
    };
    assert_eq!(decoded.kind(), kind);
    assert_eq!(decoded.to_value(), data, "{}", kind.as_str());
    let typed = NewEvent::typed(decoded.clone());
    assert_eq!((typed.kind, &typed.data), (kind, &data));
    decoded
}

/// Every shape of every kind, as its writers store them.
fn samples() -> Vec<(EventKind, Value)> {
    let error = json!({"kind": "exit_status", "retryable": true,
                       "message": "`sh` exited with status 7: broken on purpose"});
    let deadline = json!({"kind": "deadline", "retryable": false,
                          "message": "the review wait on step 1 passed its deadline unanswered"});
    let fp = "sha256:cd0f6f05437c8b33";
    let parent = json!({"run_id": RUN, "idx": 1, "attempt": 2, "key": "paris"});
    let mut s = vec![
        // Submit; a child; a copied child.
        (
            EventKind::RunSubmitted,
            json!({"crew": "steps", "fingerprint": fp,
            "idempotency_key": null, "thread_id": "t1"}),
        ),
        (
            EventKind::RunSubmitted,
            json!({"crew": "steps", "fingerprint": fp,
            "idempotency_key": "order-17", "thread_id": null}),
        ),
        (
            EventKind::RunSubmitted,
            json!({"crew": "city", "fingerprint": fp, "parent": parent}),
        ),
        (
            EventKind::RunSubmitted,
            json!({"crew": "city", "fingerprint": fp, "parent": parent,
            "copied_from": COPY}),
        ),
        (
            EventKind::RunClaimed,
            json!({"owner": "cairn-cli:27179", "epoch": 1,
            "from_status": "queued", "took_over_step": false, "cursor": 0}),
        ),
        (
            EventKind::RunClaimed,
            json!({"owner": "worker-2", "epoch": 4,
            "from_status": "running", "took_over_step": true, "cursor": 2,
            "shared_death": true}),
        ),
        // A commit; with usage; the bench's; a reviewed step's.
        (
            EventKind::StepSucceeded,
            json!({"idx": 0, "role": "first", "attempt": 1,
            "duration_ms": 5}),
        ),
        (
            EventKind::StepSucceeded,
            json!({"idx": 1, "role": "writer", "attempt": 2,
            "duration_ms": 812, "input_tokens": 1200, "output_tokens": 340}),
        ),
        (
            EventKind::StepSucceeded,
            json!({"idx": 1, "attempt": 1, "reviewed_by": "ana"}),
        ),
        (
            EventKind::StepFailed,
            json!({"idx": 0, "role": "breaker", "attempt": 1,
            "duration_ms": 2, "error": error, "will_retry": false}),
        ),
        (EventKind::StepFailed, json!({"idx": 2, "error": deadline})),
        (
            EventKind::StepRetryScheduled,
            json!({"idx": 0, "next_attempt": 2, "delay_ms": 1500}),
        ),
        (EventKind::RunSucceeded, json!({"steps": 2})),
        (EventKind::RunSucceeded, json!({"copied_from": COPY})),
        (
            EventKind::RunFailed,
            json!({"idx": 0, "attempts": 1, "error": error}),
        ),
        (EventKind::RunFailed, json!({"idx": 2, "error": deadline})),
        (
            EventKind::RunFailed,
            json!({"error": {"kind": "crash_loop", "retryable": false,
            "message": "step 1 killed its process 3 times"}}),
        ),
        (
            EventKind::RunFailed,
            json!({"error": {"kind": "corruption", "retryable": false,
            "message": "step 3 at the cursor is missing"}, "set_aside": true}),
        ),
        (
            EventKind::CrewForced,
            json!({"stored": fp, "offered": "sha256:92f68acca6dd048f",
            "by": "cairn-cli:27210"}),
        ),
        (
            EventKind::CrewUpgraded,
            json!({
            "from": {"version": "1", "fingerprint": fp},
            "to": {"version": "2", "fingerprint": "sha256:92f68acca6dd048f"},
            "by": "ops", "reason": null, "forced": false, "overridden": null}),
        ),
        (
            EventKind::CrewUpgraded,
            json!({
            "from": {"version": "1", "fingerprint": fp},
            "to": {"version": "3", "fingerprint": "sha256:fc80f2e15836bdc3"},
            "by": "ops", "reason": "hotfix", "forced": true,
            "overridden": "step 1 changed its kind"}),
        ),
        (
            EventKind::RunBlocked,
            json!({"crew": "mixed", "version": "2", "fingerprint": fp,
            "handlers": ["summarize", "rank"]}),
        ),
    ];
    s.extend(operator_samples());
    s.extend(later_samples());
    s.extend(signal_samples());
    // Repairs as the `llm` agent's turn writes them: with the step.
    s.extend([
        (
            EventKind::TranscriptRepaired,
            json!({"action": "drop_unfinished", "seqs": [7], "idx": 2}),
        ),
        (
            EventKind::TranscriptRepaired,
            json!({"action": "synthesized_result", "idx": 0,
            "call_id": "toolu_02", "tool": "send_mail"}),
        ),
    ]);
    s
}

fn operator_samples() -> Vec<(EventKind, Value)> {
    let action = |reason: Value, status: &str| json!({"by": "ops", "reason": reason, "from_status": status, "step": 1});
    let mut rerun = action(json!("flaky"), "failed");
    rerun["rerun_children"] = json!(true);
    vec![
        (EventKind::RunRetried, action(json!(null), "failed")),
        (EventKind::RunRetried, rerun),
        (
            EventKind::RunContinued,
            action(json!("budget raised"), "interrupted"),
        ),
        (
            EventKind::RunCancelRequested,
            action(json!(null), "running"),
        ),
        (EventKind::StepCancelled, json!({"idx": 1, "attempt": 2})),
        (
            EventKind::RunCancelled,
            action(json!("not needed"), "waiting"),
        ),
        (EventKind::RunCancelled, json!({"idx": 1})),
        (
            EventKind::RunForked,
            json!({"parent": RUN, "from_step": 1, "input_changed": false,
            "rerun_children": false, "thread_id": null, "by": "ops", "reason": null}),
        ),
        (
            EventKind::RunForked,
            json!({"parent": RUN, "from_step": 0, "input_changed": true,
            "rerun_children": true, "thread_id": "t-9", "by": "ops", "reason": "new topic"}),
        ),
        // Before rerun_children was written.
        (
            EventKind::RunForked,
            json!({"parent": RUN, "from_step": 1, "input_changed": false,
            "thread_id": null, "by": "ops", "reason": null}),
        ),
        (
            EventKind::WaitOpened,
            json!({"wait": WAIT, "kind": "review", "idx": 0,
            "attempt": 1}),
        ),
        (
            EventKind::WaitAnswered,
            json!({"wait": WAIT, "kind": "approval", "idx": 1,
            "answer": {"decision": "approve"}, "by": "ana"}),
        ),
        (
            EventKind::WaitAnswered,
            json!({"wait": WAIT, "kind": "review", "idx": 1,
            "answer": {"decision": "edit", "output": "better"}, "by": "ana",
            "reason": "looks right", "original": "draft"}),
        ),
        (
            EventKind::WaitAnswered,
            json!({"wait": WAIT, "kind": "review", "idx": 1,
            "answer": {"decision": "edit", "output": {"text": "new"}}, "by": "ana",
            "original": null}),
        ),
        (
            EventKind::WaitAnswered,
            json!({"wait": WAIT, "kind": "question", "idx": 0,
            "answer": {"decision": "answer", "value": {"pick": "b"}}, "by": "bo"}),
        ),
        (
            EventKind::WaitAnswered,
            json!({"wait": WAIT, "kind": "review", "idx": 2,
            "answer": {"decision": "reject", "feedback": "too long"}, "by": "ana"}),
        ),
        (
            EventKind::WaitAnswered,
            json!({"wait": WAIT, "kind": "approval", "idx": 0,
            "answer": {"decision": "approve"}, "by": "bob",
            "via": "api", "token": "a1b2c3d4e5f6", "client": "10.0.0.7", "note": "bobby",
            "votes": [{"by": "ana", "decision": "approve", "via": "console"},
                      {"by": "bob", "decision": "approve", "via": "api"}]}),
        ),
        (
            EventKind::WaitVoted,
            json!({"wait": WAIT, "kind": "approval", "idx": 0, "decision": "approve",
            "by": "ana", "reason": "checked", "via": "console", "token": "a1b2c3d4e5f6",
            "approvals": 1, "rejects": 0, "required": 2}),
        ),
        (
            EventKind::WaitOpened,
            json!({"wait": WAIT, "kind": "approval", "idx": 0, "attempt": 1,
            "approvers": {"allow": ["group:finance"], "required": 2, "self_approval": false}}),
        ),
        (
            EventKind::WaitExpired,
            json!({"wait": WAIT, "kind": "review", "idx": 1,
            "error": {"kind": "deadline", "retryable": false,
                      "message": "the review wait on step 1 passed its deadline unanswered"}}),
        ),
        (
            EventKind::ContextAdded,
            json!({"by": "ops", "reason": null,
            "context": {"topic": "lakes", "depth": 2}, "replaced": {"topic": "rivers"}}),
        ),
        (
            EventKind::ContextAdded,
            json!({"by": "ops", "reason": "more",
            "context": {"extra": true}, "replaced": {}}),
        ),
        (
            EventKind::BudgetRaised,
            json!({"by": "ops", "reason": null,
            "raise": {"tokens": 5000}, "budget": {"tokens": 15000, "cost_usd": 2.5}}),
        ),
    ]
}

fn later_samples() -> Vec<(EventKind, Value)> {
    let sent = |mut v: Value| {
        for (k, n) in [
            ("sent_input", 900),
            ("sent_output", 1024),
            ("sent_cost_nanos", 4100),
        ] {
            v[k] = json!(n);
        }
        v["sent_epoch"] = json!(3);
        v
    };
    let called = json!({"idx": 0, "turn": 1, "provider": "anthropic",
        "model": "claude-sonnet-4-5", "ms": 2140, "input_tokens": 812, "output_tokens": 95,
        "stop_reason": "tool_use", "cache_read_tokens": 640, "first_chunk_ms": 410,
        "tool_calls": 2, "cost_usd": 0.003861, "prices": "2026-11"});
    let failed = json!({"idx": 0, "turn": 2, "provider": "openai", "model": "gpt-4o",
        "ms": 60000, "error": "openai: the stream ended before the response finished",
        "retryable": true, "cut_tokens": 1340, "cut_input_tokens": 1200,
        "cut_output_tokens": 140, "cut_cost_nanos": 4400000});
    let deferred = json!({"idx": 0, "role": "writer", "attempt": 1, "duration_ms": 31,
        "key": "anthropic:3f2a", "delay_ms": 30000, "observed": true,
        "message": "anthropic: 429 too many requests (retry after 30 s)"});
    let mut old_deferred = deferred.clone();
    if let Some(o) = old_deferred.as_object_mut() {
        o.remove("message");
    }
    vec![
        (EventKind::ModelCalled, called.clone()),
        (EventKind::ModelCalled, sent(called)),
        (
            EventKind::ModelCalled,
            json!({"idx": 1, "turn": 3, "provider": "anthropic",
            "model": "claude-haiku", "ms": 300, "input_tokens": 20, "output_tokens": 0,
            "stop_reason": "end_turn", "cache_write_tokens": 12, "first_chunk_ms": 280,
            "empty": true}),
        ),
        (EventKind::ModelCalled, failed.clone()),
        (EventKind::ModelCalled, sent(failed)),
        (
            EventKind::ModelCalled,
            json!({"idx": 0, "turn": 1, "provider": "openai",
            "model": "gpt-4o", "ms": 12, "error": "openai: 401 unauthorized",
            "retryable": false}),
        ),
        (
            EventKind::ToolExecuted,
            json!({"idx": 0, "call_id": "toolu_01", "tool": "search",
            "ms": 88, "is_error": false, "idempotency_key": format!("{RUN}:0:toolu_01")}),
        ),
        (
            EventKind::StepInterrupted,
            json!({"idx": 1, "role": "agent", "attempt": 1,
            "duration_ms": 5400, "error": {"kind": "interrupted", "retryable": false,
            "message": "the agent reached its max_turns of 8"}}),
        ),
        (
            EventKind::TranscriptRepaired,
            json!({"action": "drop_unfinished", "seqs": [7, 8]}),
        ),
        (
            EventKind::TranscriptRepaired,
            json!({"action": "synthesized_result",
            "call_id": "toolu_02", "tool": "send_mail"}),
        ),
        (
            EventKind::TranscriptRepaired,
            json!({"action": "reexecuted",
            "call_id": "toolu_03", "tool": "search"}),
        ),
        (
            EventKind::ChildrenSpawned,
            json!({"idx": 1, "attempt": 1, "join": "quorum",
            "quorum": 2, "children": 3, "crew": "city", "crews": ["city", "town"],
            "concurrency": null}),
        ),
        (
            EventKind::ChildrenSpawned,
            json!({"idx": 0, "attempt": 2, "join": "all",
            "quorum": null, "children": 1000, "crew": "city", "concurrency": 50}),
        ),
        (
            EventKind::ChildrenJoined,
            json!({"idx": 1, "attempt": 1, "met": true,
            "rule": "all_ok", "settled": 3, "ok": 3, "total": 3, "by": CHILD}),
        ),
        (
            EventKind::ChildrenReused,
            json!({"idx": 1, "attempt": 2, "reused": [
            {"key": "paris", "run_id": CHILD},
            {"key": "rome", "run_id": COPY, "copied_from": CHILD}]}),
        ),
        (EventKind::StepDeferred, deferred),
        (EventKind::StepDeferred, old_deferred),
        (
            EventKind::KeyPaused,
            json!({"key": "anthropic:3f2a", "for_ms": 30000,
            "reason": "anthropic: 429 too many requests (retry after 30 s)"}),
        ),
        (EventKind::KeyResumed, json!({"key": "anthropic:3f2a"})),
        (
            EventKind::BudgetWarning,
            json!({"idx": 0, "limit": "tokens", "budget": 10000,
            "spent": 8012}),
        ),
        (
            EventKind::BudgetWarning,
            json!({"limit": "cost_usd", "budget": 2.0,
            "spent": 1.62, "child": CHILD}),
        ),
        (
            EventKind::UsageReported,
            json!({"idx": 0, "attempt": 1, "input_tokens": 5000,
            "output_tokens": 700}),
        ),
        (
            EventKind::ChildInterrupted,
            json!({"child": CHILD, "key": "paris", "idx": 1,
            "kind": "budget_exceeded", "message": "the run's budget of 10000 tokens is spent"}),
        ),
        (
            EventKind::ModelCallSent,
            json!({"idx": 0, "turn": 1, "epoch": 3,
            "estimate_input": 900, "estimate_output": 1024, "estimate_cost_nanos": 4100}),
        ),
        (
            EventKind::ChildEnded,
            json!({"child": CHILD, "key": "paris", "idx": 1,
            "status": "succeeded"}),
        ),
        (
            EventKind::ChildEnded,
            json!({"child": CHILD, "key": "rome", "idx": 1,
            "status": "failed", "kind": "exit_status", "message": "`sh` exited with status 1"}),
        ),
        (
            EventKind::ProgramStarted,
            json!({"idx": 0, "attempt": 1, "pgid": 27230,
            "start": 4455120, "host": "build-7", "boot": "5c0f0c8e-2f0a-4bb4-a4b7-0d5d0c3b9e55",
            "pidns": "pid:[4026531836]", "engine_pid": 27224, "engine_start": 4455001}),
        ),
    ]
}

#[test]
fn every_writer_shape_round_trips() {
    for (kind, data) in samples() {
        round_trip(kind, data);
    }
}

#[test]
fn every_kind_has_a_sample() {
    let samples = samples();
    for kind in EventKind::ALL {
        assert!(
            samples.iter().any(|(k, _)| *k == kind),
            "no sample of `{}`",
            kind.as_str()
        );
    }
}

#[test]
fn absent_and_null_stay_apart() {
    let child = round_trip(
        EventKind::RunSubmitted,
        json!({"crew": "c", "fingerprint": "sha256:00", "parent":
               {"run_id": RUN, "idx": 0, "attempt": 1, "key": "k"}}),
    );
    let EventData::RunSubmitted(child) = child else {
        panic!("not run_submitted")
    };
    assert_eq!((child.idempotency_key, child.thread_id), (None, None));
    let EventData::RunSubmitted(top) = round_trip(
        EventKind::RunSubmitted,
        json!({"crew": "c", "fingerprint": "sha256:00", "idempotency_key": null,
               "thread_id": "t"}),
    ) else {
        panic!("not run_submitted")
    };
    assert_eq!(top.idempotency_key, Some(None));
    assert_eq!(top.thread_id, Some(Some("t".to_owned())));
}

#[test]
fn the_two_cancels_and_the_two_amounts_are_told_apart() {
    let at_step = round_trip(EventKind::RunCancelled, json!({"idx": 3}));
    assert!(matches!(
        at_step,
        EventData::RunCancelled(RunCancelled::AtStep { .. })
    ));
    let EventData::BudgetWarning(w) = round_trip(
        EventKind::BudgetWarning,
        json!({"limit": "cost_usd", "budget": 2.0, "spent": 1.6, "child": CHILD}),
    ) else {
        panic!("not budget_warning")
    };
    assert_eq!(w.budget, Amount::Dollars(crate::Usd(2_000_000_000)));
    assert_eq!(w.limit, BudgetLimit::CostUsd);
}

#[test]
fn a_shape_that_is_not_its_kinds_fails_naming_the_kind() {
    let err = EventData::decode(EventKind::StepRetryScheduled, &json!({"idx": 0}))
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("`step_retry_scheduled`") && e.contains("next_attempt")),
        "{err:?}"
    );
    assert!(EventData::decode(EventKind::KeyResumed, &json!(null)).is_err());
}

#[test]
fn context_added_is_typed_as_it_is_built() {
    let built = NewEvent::context_added(
        &json!({"topic": "rivers", "n": 1}),
        &json!({"topic": "lakes"}),
        &crate::Actor::new("ops").because("more"),
    );
    let EventData::ContextAdded(added) = round_trip(built.kind, built.data) else {
        panic!("not context_added")
    };
    assert_eq!(added.replaced.get("topic"), Some(&json!("rivers")));
}

/// What a signal send, a `signal` step's wait and its commit write.
fn signal_samples() -> Vec<(EventKind, Value)> {
    vec![
        (
            EventKind::SignalReceived,
            json!({"id": "evt_29", "name": "payment", "by": "ops", "reason": null,
            "via": "api", "woke": true}),
        ),
        (
            EventKind::SignalReceived,
            json!({"id": "0193", "name": "ci", "by": "hook:github", "reason": null,
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
        ),
        (
            EventKind::SignalWaitOpened,
            json!({"idx": 1, "attempt": 1, "names": ["paid", "refused"], "timeout_ms": 60000}),
        ),
        (
            EventKind::SignalConsumed,
            json!({"idx": 1, "attempt": 1, "id": "evt_29", "name": "paid"}),
        ),
        (
            EventKind::SignalTimedOut,
            json!({"idx": 1, "attempt": 2, "names": ["paid"]}),
        ),
        (
            EventKind::ValuePublished,
            json!({"key": "draft", "value": {"title": "Lakes"}, "idx": 0, "attempt": 1}),
        ),
    ]
}
