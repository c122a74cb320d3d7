//! Test fixtures: stored events as their writers store them. A case names
//! only the fields it is about; [`event`] fills in the rest with values no
//! case reads, and refuses a fixture that still does not decode as its
//! kind's payload (a shape no writer stores would test nothing).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use cairn::{EventData, EventKind, EventRecord};

/// Event `seq` of kind `kind` at `at`: `data` over its kind's filler.
pub(crate) fn event(seq: i64, kind: EventKind, at: DateTime<Utc>, data: Value) -> EventRecord {
    let mut full = filler(kind);
    merge(&mut full, data);
    if let Err(e) = EventData::decode(kind, &full) {
        panic!("fixture {full}: {e}");
    }
    EventRecord {
        run_id: cairn::RunId::new(),
        seq,
        at,
        kind,
        data: full,
    }
}

/// The fields each kind's writers always write, with values no case reads.
fn filler(kind: EventKind) -> Value {
    let error = json!({"kind": "agent", "message": "", "retryable": false});
    match kind {
        EventKind::RunClaimed => json!({"owner": "w", "epoch": 1, "from_status": "queued",
                                        "took_over_step": false, "cursor": 0}),
        EventKind::StepSucceeded | EventKind::StepCancelled => json!({"idx": 0, "attempt": 1}),
        EventKind::StepFailed => json!({"idx": 0, "error": error}),
        EventKind::RunCancelRequested | EventKind::RunRetried | EventKind::RunContinued => {
            json!({"by": "ops", "reason": null, "from_status": "running", "step": 0})
        }
        EventKind::WaitOpened => json!({"wait": cairn::WaitId::new(), "kind": "review",
                                        "idx": 0, "attempt": 1}),
        EventKind::WaitAnswered => json!({"wait": cairn::WaitId::new(), "kind": "review",
                                          "idx": 0, "answer": {"decision": "approve"},
                                          "by": "ann"}),
        EventKind::ModelCalled => json!({"idx": 0, "turn": 1, "provider": "fake",
                                         "model": "m", "ms": 1}),
        EventKind::ChildrenSpawned => json!({"idx": 0, "attempt": 1, "join": "all",
                                             "quorum": null, "children": 1, "crew": "c",
                                             "concurrency": null}),
        EventKind::ChildrenJoined => json!({"idx": 0, "attempt": 1, "met": true,
                                            "rule": "all", "settled": 1, "ok": 1, "total": 1,
                                            "by": cairn::RunId::new()}),
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
