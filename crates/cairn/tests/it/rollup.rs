//! A run's budget over its tree, both backends: its children's model calls
//! count against it, each holding its estimate while it runs, so children
//! in flight at once cannot pass it together (a call with no room beside
//! the others waits for one to end, spending no attempt); a child stopped
//! at its parent's budget carries on when the parent is continued with a
//! raise.

use std::time::Duration;

use serde_json::json;

use cairn::{Actor, Engine, ErrorKind, EventKind, RunFilter, RunStatus, SubmitOptions};
use cairn_testkit::{both, Kind, SlowModel};

use super::children::crews;

both!(
    children_in_flight_hold_their_calls_against_their_parents_budget,
    a_child_stopped_at_its_parents_budget_carries_on_when_the_parent_is_continued,
    a_parent_records_why_its_children_stopped_and_warns_at_80_percent_of_its_tree,
);

/// A child crew: one `llm` step on `model`, which may answer up to
/// `max_tokens` (what each call holds against the budget besides its input).
fn writer(model: &SlowModel, max_tokens: u32) -> String {
    format!(
        "[[agents]]\nrole = \"writer\"\nkind = \"llm\"\nprovider = \"openai\"\n\
         model = \"slow-1\"\nbase_url = \"{}\"\nmax_tokens = {max_tokens}\n",
        model.base_url
    )
}

/// Runs `crew` on `input` under the budget `flag`: the run where it stopped.
async fn ran_under(
    engine: &cairn::Engine,
    crew: &cairn::Crew,
    input: serde_json::Value,
    flag: &str,
) -> cairn::RunRecord {
    let opts = SubmitOptions {
        budget: Some(cairn::Budget::parse([flag], false).unwrap()),
        ..SubmitOptions::default()
    };
    engine.run(crew, input, opts).await.unwrap().run
}

async fn children_of(engine: &Engine, parent: cairn::RunId) -> Vec<cairn::RunRecord> {
    let filter = RunFilter {
        parent: Some(parent),
        ..RunFilter::default()
    };
    engine.list(&filter).await.unwrap()
}

async fn children_in_flight_hold_their_calls_against_their_parents_budget(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let items = json!({"items": ["a", "b", "c"]});
    // Without a budget, the three children's calls overlap at the model.
    let free = SlowModel::start(&["one", "two", "three"], Duration::from_millis(150)).unwrap();
    free.release();
    let (_dir, crew) = crews("", &writer(&free, 1000));
    let run = crate::ran(&engine, &crew, items.clone()).await.run;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    assert!(free.peak() >= 2, "calls overlapped: {}", free.peak());

    // A budget of 1,000 tokens: a call holds its input and its 1,000
    // `max_tokens`, so only one fits at a time; each spends 15 (12 in, 3
    // out), so all three fit one after another.
    let tight = SlowModel::start(&["one", "two", "three"], Duration::from_millis(150)).unwrap();
    tight.release();
    let (_dir, crew) = crews("", &writer(&tight, 1000));
    let run = ran_under(&engine, &crew, items, "tokens=1000").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    assert_eq!(tight.peak(), 1, "one call at a time");
    assert_eq!(tight.requests(), 3);
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!((spent.tokens, spent.model_calls), (45, 3), "the tree's");
    let mut deferred = 0;
    for child in children_of(&engine, run.id).await {
        let view = engine.show(child.id).await.unwrap();
        assert_eq!(view.steps[0].attempt.get(), 1, "a wait spends no attempt");
        let events = engine.events(child.id).await.unwrap();
        deferred += events
            .iter()
            .filter(|e| e.kind == EventKind::StepDeferred)
            .count();
    }
    assert!(deferred >= 1, "a child waited for room");
}

async fn a_child_stopped_at_its_parents_budget_carries_on_when_the_parent_is_continued(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let model = SlowModel::start(&["one", "two", "three"], Duration::from_millis(1)).unwrap();
    model.release();
    let (_dir, crew) = crews("concurrency = 1", &writer(&model, 10));
    // Two calls for the tree: the third child's is not made.
    let run = ran_under(
        &engine,
        &crew,
        json!({"items": ["a", "b", "c"]}),
        "model_calls=2",
    )
    .await;
    assert_eq!(run.status, RunStatus::Waiting, "{:?}", run.error);
    // In listing order, one at a time: the third is stopped.
    let children = engine.show(run.id).await.unwrap().children;
    let statuses: Vec<_> = children.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Succeeded,
            RunStatus::Succeeded,
            RunStatus::Interrupted
        ]
    );
    let error = children[2].error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::BudgetExceeded);
    crate::assert_contains(&error.message, &run.id.to_string());
    crate::assert_contains(&error.message, "cairn runs continue");
    assert_eq!(model.requests(), 2, "no call past the budget");

    // Raised and continued at the parent: the stopped child carries on,
    // and the parent with it.
    let ops = Actor::new("ops").because("one more");
    let raise = cairn::Budget::parse(["model_calls=+1"], true).unwrap();
    engine.raise_budget(run.id, &raise, &ops).await.unwrap();
    engine.continue_run(run.id, &ops).await.unwrap();
    let done = engine.execute(run.id).await.unwrap().run;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!(model.requests(), 3);
    let events = engine.events(children[2].run_id).await.unwrap();
    let continued = events
        .iter()
        .find(|e| e.kind == EventKind::RunContinued)
        .unwrap();
    assert_eq!(continued.data["by"], "ops");
}

/// A parent that makes no call of its own: its children's spending warns
/// on it at 80 % of its budget, a child stopped at its budget is recorded
/// on it (`child_interrupted`), and its view says its children stopped
/// (what `cairn run` exits 5 on). One raise-and-continue carries the tree
/// on.
async fn a_parent_records_why_its_children_stopped_and_warns_at_80_percent_of_its_tree(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let model = SlowModel::start(&["one", "two", "three"], Duration::from_millis(1)).unwrap();
    model.release();
    let (_dir, crew) = crews("concurrency = 1", &writer(&model, 10));
    let items = json!({"items": ["a", "b", "c"]});
    let run = ran_under(&engine, &crew, items, "model_calls=2").await;
    assert_eq!(run.status, RunStatus::Waiting, "{:?}", run.error);
    let view = engine.show(run.id).await.unwrap();
    assert_eq!(
        view.children_wait(),
        Some(cairn::ChildrenWait::Stopped {
            interrupted: 1,
            total: 3
        })
    );
    let events = engine.events(run.id).await.unwrap();
    let stopped = crate::of_kind(&events, EventKind::ChildInterrupted);
    assert_eq!(stopped.len(), 1, "{events:?}");
    assert_eq!(stopped[0].data["key"], "2");
    assert_eq!(stopped[0].data["kind"], "budget_exceeded");
    assert_eq!(
        stopped[0].data["child"],
        json!(view.children[2].run_id.to_string())
    );
    let warnings: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::BudgetWarning)
        .map(|e| (e.data["limit"].clone(), e.data["budget"].clone()))
        .collect();
    assert_eq!(warnings, [(json!("model_calls"), json!(2))], "once");
    // Each child that ended while the join was open is on the parent.
    let ended = |events: &[cairn::EventRecord]| -> Vec<(String, String)> {
        events
            .iter()
            .filter(|e| e.kind == EventKind::ChildEnded)
            .map(|e| (e.data["key"].to_string(), e.data["status"].to_string()))
            .collect()
    };
    let ok = |k: &str| (format!("\"{k}\""), "\"succeeded\"".to_owned());
    assert_eq!(ended(&events), [ok("0"), ok("1")]);

    let ops = Actor::new("ops");
    let raise = cairn::Budget::parse(["model_calls=+1"], true).unwrap();
    let continued = engine
        .continue_with_budget(run.id, &raise, &ops)
        .await
        .unwrap();
    assert_eq!(continued.budget.and_then(|b| b.model_calls), Some(3));
    let done = engine.execute(run.id).await.unwrap().run;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!(engine.show(run.id).await.unwrap().children_wait(), None);
    let events = engine.events(run.id).await.unwrap();
    assert_eq!(ended(&events), [ok("0"), ok("1"), ok("2")]);
}
