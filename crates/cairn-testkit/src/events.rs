//! Stored events as their writers store them, for tests that build events
//! by hand: a case names only the fields it is about, and [`complete`]
//! fills in the rest of its kind's payload with values no case reads. The
//! caller checks that the result decodes as its kind's payload (this crate
//! knows JSON, not Cairn's types), so a shape no writer stores fails there.

use serde_json::{json, Value};

/// `data` over the filler of the event kind named `kind` (`run_claimed`,
/// `step_failed`, …): objects merged key by key, `data` winning.
pub fn complete(kind: &str, data: Value) -> Value {
    let mut full = filler(kind);
    merge(&mut full, data);
    full
}

/// The fields each kind's writers always write, with values no case reads.
fn filler(kind: &str) -> Value {
    let error = json!({"kind": "agent", "message": "", "retryable": false});
    let wait = "01a2152b-78c2-7585-b750-546d851f6c68";
    let run = "01a2152b-789b-755f-937e-6295dd49f223";
    match kind {
        "run_claimed" => json!({"owner": "w", "epoch": 1, "from_status": "queued",
                                "took_over_step": false, "cursor": 0}),
        "step_succeeded" | "step_cancelled" => json!({"idx": 0, "attempt": 1}),
        "step_failed" | "run_failed" => json!({"idx": 0, "error": error}),
        "step_interrupted" => json!({"idx": 0, "role": "r", "attempt": 1, "duration_ms": 0,
                                     "error": error}),
        "step_deferred" => json!({"idx": 0, "role": "r", "attempt": 1, "duration_ms": 0,
                                  "key": "k", "delay_ms": 0, "observed": false}),
        "run_cancel_requested" | "run_retried" | "run_continued" => {
            json!({"by": "ops", "reason": null, "from_status": "running", "step": 0})
        }
        "wait_opened" => json!({"wait": wait, "kind": "review", "idx": 0, "attempt": 1}),
        "wait_answered" => json!({"wait": wait, "kind": "review", "idx": 0,
                                  "answer": {"decision": "approve"}, "by": "ann"}),
        "model_called" => json!({"idx": 0, "turn": 1, "provider": "fake", "model": "m",
                                 "ms": 1}),
        "tool_executed" => json!({"idx": 0, "call_id": "c1", "tool": "t", "ms": 1,
                                  "is_error": false, "idempotency_key": "k1"}),
        "transcript_repaired" => json!({"action": "drop_unfinished", "seqs": []}),
        "children_spawned" => json!({"idx": 0, "attempt": 1, "join": "all", "quorum": null,
                                     "children": 1, "crew": "c", "concurrency": null}),
        "children_joined" => json!({"idx": 0, "attempt": 1, "met": true, "rule": "all",
                                    "settled": 1, "ok": 1, "total": 1, "by": run}),
        _ => json!({}),
    }
}

/// `over`'s fields over `base`'s, objects merged key by key.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o,
    }
}
