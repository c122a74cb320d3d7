//! The NUL rule: a value with a NUL character is refused, naming its field,
//! on both databases alike (PostgreSQL's text and jsonb cannot hold one),
//! and nothing is written.

use cairn_checkpoint::{Action, Error, ForkRequest, RunFilter};
use cairn_core::{Actor, StepIdx};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::{fresh, new_run, submitted_and_claimed, success};

both!(
    a_nul_in_a_submit_is_refused_by_field_and_stores_nothing,
    a_nul_in_an_action_or_fork_is_refused_by_field,
    a_commit_or_journal_item_with_a_nul_is_refused_and_changes_nothing,
);

fn refused(result: Result<impl std::fmt::Debug, Error>, field: &str) {
    match result {
        Err(Error::Unstorable(u)) => assert_eq!(u.what, field),
        other => panic!("expected a NUL refusal of {field}, got {other:?}"),
    }
}

async fn a_nul_in_a_submit_is_refused_by_field_and_stores_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut run = new_run(2, None);
    run.input = json!({"text": "a\u{0}b"});
    refused(store.submit(run).await, "the run input");
    refused(
        store.submit(new_run(2, Some("key\u{0}"))).await,
        "the idempotency key",
    );
    let mut run = new_run(2, None);
    run.thread_id = Some("t\u{0}".into());
    refused(store.submit(run).await, "the thread id");
    let listed = store.list_runs(&RunFilter::default()).await.unwrap();
    assert!(listed.is_empty(), "nothing was stored: {listed:?}");
    let filter = RunFilter {
        thread: Some("t\u{0}".into()),
        ..RunFilter::default()
    };
    refused(store.list_runs(&filter).await, "the thread filter");
    let filter = RunFilter {
        tenant: Some("t\u{0}".into()),
        ..RunFilter::default()
    };
    refused(store.list_runs(&filter).await, "the tenant filter");
    refused(store.reset_limits("k\u{0}").await, "the provider key");
}

async fn a_nul_in_an_action_or_fork_is_refused_by_field(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    let by = Actor::new("ali\u{0}ce");
    refused(store.act(id, Action::Cancel, &by).await, "`by`");
    let reason = Actor::new("alice").because("because\u{0}");
    refused(store.act(id, Action::Cancel, &reason).await, "`reason`");
    let fork = ForkRequest {
        from_step: StepIdx(0),
        input: Some(json!(["\u{0}"])),
        thread_id: None,
        crew: None,
        rerun_children: false,
    };
    let alice = Actor::new("alice");
    refused(store.fork(id, &fork, &alice).await, "the fork's input");
    let run = store.get_run(id).await.unwrap();
    assert_eq!(run.status, cairn_core::RunStatus::Queued, "nothing changed");
    assert_eq!(store.events(id).await.unwrap().len(), 1);
}

async fn a_commit_or_journal_item_with_a_nul_is_refused_and_changes_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let mut commit = success(c.run.id, c.run.lease_epoch, 0, 2);
    let cairn_checkpoint::StepTransition::Succeeded { output, .. } = &mut commit.transition else {
        panic!("`success` builds a success");
    };
    *output = json!({"bytes": "\u{0}"});
    refused(store.commit_step(&commit).await, "step 0's output");
    let item = cairn_checkpoint::JournalAppend {
        run_id: c.run.id,
        fence: crate::fence(c.run.lease_epoch),
        idx: StepIdx(0),
        attempt: cairn_core::Attempt(1),
        generation: 0,
        kind: cairn_core::JournalKind::AssistantText,
        payload: json!({"text": "\u{0}"}),
        event: None,
    };
    refused(store.append_journal(&item).await, "a journal item");
    let (run, steps) = store.load(c.run.id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(0));
    assert_eq!(steps[0].status, cairn_core::StepStatus::Running);
    assert!(store
        .journal(c.run.id, StepIdx(0), None)
        .await
        .unwrap()
        .is_empty());
    // The same commit without the NUL lands: the run was left as it was.
    store
        .commit_step(&success(c.run.id, c.run.lease_epoch, 0, 2))
        .await
        .unwrap();
}
