//! More context from an operator (`add_context`): merged into the input of
//! a queued run, or of an interrupted one that it continues, with a
//! `context_added` event naming who, the context and what it replaced;
//! refused, with nothing written, for any other status or a context or
//! input that is not an object.

use cairn_checkpoint::{Error, StepTransition};
use cairn_core::{ErrorInfo, ErrorKind, EventKind, RunId, RunStatus};
use cairn_testkit::{both, Kind};
use serde_json::{json, Value};

use super::{operator, Db};
use crate::{claim_req, fresh, new_run, submitted_and_claimed, success};

both!(
    context_merges_into_a_queued_runs_input_naming_what_it_replaced,
    context_continues_an_interrupted_run,
    context_is_refused_for_other_statuses_and_non_objects_and_writes_nothing,
);

/// A two-step run interrupted at step 0.
async fn interrupted(store: &Db) -> RunId {
    let c = submitted_and_claimed(store, 2).await;
    let mut stop = success(c.run.id, c.run.lease_epoch, 0, 2);
    let error = ErrorInfo::new(ErrorKind::Interrupted, "max_turns", false);
    stop.transition = StepTransition::Interrupted { error };
    store.commit_step(&stop).await.unwrap();
    c.run.id
}

async fn context_merges_into_a_queued_runs_input_naming_what_it_replaced(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    let context = json!({"topic": "tides", "tone": "dry"});
    let run = store
        .add_context(id, &context, &operator("ann"))
        .await
        .unwrap();
    assert_eq!(run.input, json!({"topic": "tides", "tone": "dry"}));
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(store.get_run(id).await.unwrap(), run, "as stored");
    let events = store.events(id).await.unwrap();
    let added = events.last().unwrap();
    assert_eq!(added.kind, EventKind::ContextAdded);
    assert_eq!(
        added.data,
        json!({"by": "ann", "reason": "contract test", "context": context,
               "replaced": {"topic": "conformance"}})
    );
    // The claim that follows sees the merged input.
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    assert_eq!(c.run.input["tone"], json!("dry"));
}

async fn context_continues_an_interrupted_run(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = interrupted(&store).await;
    let run = store
        .add_context(id, &json!({"hint": "try shorter"}), &operator("ann"))
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Queued, "continued");
    assert_eq!(
        run.input,
        json!({"topic": "conformance", "hint": "try shorter"})
    );
    let events = store.events(id).await.unwrap();
    let [.., continued, added] = &events[..] else {
        unreachable!()
    };
    assert_eq!(
        (continued.kind, added.kind),
        (EventKind::RunContinued, EventKind::ContextAdded)
    );
    assert_eq!(added.data["replaced"], json!({}));
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    assert_eq!(
        c.at_cursor.unwrap().idx.get(),
        0,
        "the interrupted step carries on"
    );
}

async fn context_is_refused_for_other_statuses_and_non_objects_and_writes_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let running = submitted_and_claimed(&store, 1).await.run.id;
    let ended = {
        let c = submitted_and_claimed(&store, 1).await;
        let commit = success(c.run.id, c.run.lease_epoch, 0, 1);
        store.commit_step(&commit).await.unwrap();
        c.run.id
    };
    let queued = store.submit(new_run(1, None)).await.unwrap().run.id;
    let stopped = interrupted(&store).await;
    let mut text = new_run(1, None);
    text.input = json!("just a string");
    let text = store.submit(text).await.unwrap().run.id;
    let good = json!({"k": "v"});
    let cases: [(RunId, Value, &str); 5] = [
        (running, good.clone(), "WrongState"),
        (ended, good.clone(), "WrongState"),
        (queued, json!(["not", "an", "object"]), "BadContext"),
        (stopped, json!(42), "BadContext"),
        (text, good, "BadContext"),
    ];
    for (id, context, want) in cases {
        let before = super::stored(&store, id).await;
        let got = store.add_context(id, &context, &operator("ann")).await;
        match (&got, want) {
            (Err(Error::WrongState { run, .. }), "WrongState") => assert_eq!(*run, id),
            (Err(Error::BadContext { run, .. }), "BadContext") => assert_eq!(*run, id),
            _ => panic!("{context}: expected {want}, got {got:?}"),
        }
        let after = super::stored(&store, id).await;
        assert_eq!(
            after, before,
            "{context}: nothing written, not even a continue"
        );
    }
}
