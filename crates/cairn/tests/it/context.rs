//! Resume with a context overlay (agent runners' "resume with more
//! context"): the JSON object is merged into the input the remaining steps
//! see, recorded on a `context_added` event with who and why; finished
//! steps keep their outputs; a finished run, or context that is not an
//! object, is refused and nothing is written. Both backends.

use serde_json::json;

use cairn::{Actor, ErrorClass, EventKind, ResumeOptions, RunStatus, SubmitOptions};
use cairn_testkit::{both, Kind};

use crate::{crew, Log};

both!(
    the_remaining_steps_see_the_context_and_finished_steps_keep_theirs,
    a_finished_run_or_a_context_that_is_not_an_object_is_refused,
);

fn with_context(context: serde_json::Value) -> ResumeOptions {
    ResumeOptions {
        takeover: true,
        context: Some((context, Actor::new("ops").because("the customer's tier"))),
        ..ResumeOptions::default()
    }
}

async fn the_remaining_steps_see_the_context_and_finished_steps_keep_theirs(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    // Killed during step 1 of 3: step 0 saw {"topic": "t"}.
    let (_log, id) = crate::killed_and_registered(&engine, 3, 1).await;
    let context = json!({"tier": "gold", "topic": "t2"});
    let done = engine
        .resume(id, with_context(context.clone()))
        .await
        .unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded);
    let view = engine.show(id).await.unwrap();
    let input_of = |i: usize| view.steps[i].output.as_ref().unwrap()["input"].clone();
    assert_eq!(
        input_of(0),
        json!({"topic": "t"}),
        "a finished step is untouched"
    );
    let merged = json!({"topic": "t2", "tier": "gold"});
    assert_eq!(input_of(1), merged);
    assert_eq!(input_of(2), merged);
    assert_eq!(
        view.run.input, merged,
        "the run's input as the steps saw it"
    );
    let events = engine.events(id).await.unwrap();
    let added = crate::of_kind(&events, EventKind::ContextAdded);
    assert_eq!(added.len(), 1, "{events:#?}");
    assert_eq!(added[0].data["by"], "ops");
    assert_eq!(added[0].data["reason"], "the customer's tier");
    assert_eq!(added[0].data["context"], context);
    assert_eq!(added[0].data["replaced"], json!({"topic": "t"}));
}

async fn a_finished_run_or_a_context_that_is_not_an_object_is_refused(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let log = Log::default();
    let crew = crew(2, &log, None);
    // Not an object: refused by the claim, which then writes nothing.
    let queued = engine
        .submit(&crew, json!({"topic": "t"}), SubmitOptions::default())
        .await
        .unwrap()
        .run;
    let before = engine.events(queued.id).await.unwrap();
    let err = engine
        .resume(queued.id, with_context(json!(["not", "an", "object"])))
        .await
        .unwrap_err();
    assert_eq!(
        (err.class(), err.code()),
        (ErrorClass::Invalid, "bad_context"),
        "{err}"
    );
    assert_eq!(engine.events(queued.id).await.unwrap(), before);
    assert_eq!(
        engine.get_run(queued.id).await.unwrap().input,
        json!({"topic": "t"})
    );
    // A finished run: refused, nothing written.
    let done = crate::ran(&engine, &crew, json!({"topic": "t"})).await.run;
    let before = engine.events(done.id).await.unwrap();
    let err = engine
        .resume(done.id, with_context(json!({"more": 1})))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Conflict, "{err}");
    assert!(err.to_string().contains("add context to it"), "{err}");
    assert_eq!(engine.events(done.id).await.unwrap(), before);
}
