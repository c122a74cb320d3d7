//! Votes on a wait whose `wait_opened` carries an approver policy:
//! `answer_wait` through a channel is a vote. A voter outside `allow`, or
//! the run's submitter under `self_approval = false`, is refused with
//! nothing stored; one principal counts once; the vote that meets
//! `required` answers the wait with every vote in its `wait_answered`;
//! 16 concurrent votes decide it exactly once; `ballot` reads it all;
//! database access (no channel) answers directly.

use std::sync::Arc;

use cairn_checkpoint::{Error, StepTransition};
use cairn_core::event::payload::WaitOpened;
use cairn_core::{
    Access, Actor, Answer, Approvers, Attempt, EventData, EventKind, Ineligible, NewEvent,
    NewPrincipal, NewWait, Origin, RunStatus, StepIdx, Via, WaitId, WaitKind, WaitStatus,
};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::Db;
use crate::{claim_req, fresh, new_run, success};

both!(
    two_distinct_eligible_principals_decide_and_the_submitter_does_not_count,
    sixteen_concurrent_votes_decide_the_wait_exactly_once,
    database_access_answers_a_policy_wait_directly,
);

fn via_api(name: &str) -> Actor {
    Actor::new(name).from(Origin {
        via: Some(Via::Api),
        ..Origin::default()
    })
}

async fn principal(store: &Db, name: &str, groups: &[&str]) {
    let new = NewPrincipal {
        name: name.to_owned(),
        role: Access::Operator,
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        tenants: vec![],
        email: None,
    };
    let token = cairn_checkpoint::TokenDigest {
        id: format!("id-{name}"),
        hash: format!("hash-{name}"),
    };
    store
        .add_principal(&new, &token, &Actor::new("test"))
        .await
        .unwrap();
}

/// A two-step run submitted by `submitter`, waiting at step 0 for an
/// approval under `policy`.
pub(super) async fn waiting(store: &Db, submitter: &str, policy: Approvers) -> WaitId {
    waiting_until(store, submitter, policy, None).await
}

/// [`waiting`], with a deadline `deadline_ms` after it opens.
pub(super) async fn waiting_until(
    store: &Db,
    submitter: &str,
    policy: Approvers,
    deadline_ms: Option<u64>,
) -> WaitId {
    let submit = cairn_checkpoint::NewRun {
        by: Some(via_api(submitter)),
        ..new_run(2, None)
    };
    let run = store.submit(submit).await.unwrap().run;
    let c = store.claim(run.id, &claim_req(false)).await.unwrap();
    let wait = NewWait {
        deadline_ms,
        ..crate::new_wait(WaitKind::Approval, json!({"approve": "the payment"}))
    };
    let id = wait.id;
    let mut commit = success(c.run.id, c.run.lease_epoch, 0, 2);
    commit.events = vec![NewEvent::typed(EventData::WaitOpened(WaitOpened {
        wait: id,
        kind: WaitKind::Approval,
        idx: StepIdx(0),
        attempt: Attempt(1),
        approvers: Some(policy),
    }))];
    commit.transition = StepTransition::Waiting { output: None, wait };
    store.commit_step(&commit).await.unwrap();
    id
}

pub(super) fn finance_two() -> Approvers {
    Approvers {
        allow: vec!["group:finance".into()],
        required: 2,
        self_approval: false,
        ..Approvers::default()
    }
}

fn refused_as(result: cairn_checkpoint::Result<cairn_core::WaitRecord>, want: Ineligible) {
    match result {
        Err(Error::Ineligible { why, .. }) => assert_eq!(why, want),
        other => panic!("expected {want:?}: {other:?}"),
    }
}

async fn two_distinct_eligible_principals_decide_and_the_submitter_does_not_count(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    for (name, groups) in [
        ("ana", &["finance"][..]),
        ("bob", &["finance"]),
        ("sam", &["finance"]),
        ("eve", &[]),
    ] {
        principal(&store, name, groups).await;
    }
    let wait = waiting(&store, "sam", finance_two()).await;
    let run = store.list_waits(&Default::default()).await.unwrap()[0].run_id;
    let events_before = store.events(run).await.unwrap().len();

    let eve = store
        .answer_wait(wait, &Answer::Approve, &via_api("eve"))
        .await;
    refused_as(eve, Ineligible::NotAllowed("eve".into()));
    let sam = store
        .answer_wait(wait, &Answer::Approve, &via_api("sam"))
        .await;
    refused_as(sam, Ineligible::OwnRun("sam".into()));
    let ballot = store.ballot(wait).await.unwrap();
    assert!(ballot.votes.is_empty(), "refusals store nothing");
    assert_eq!(
        ballot.approvers,
        Some(finance_two()),
        "the policy the wait opened with"
    );
    assert_eq!(store.events(run).await.unwrap().len(), events_before);

    let first = store
        .answer_wait(wait, &Answer::Approve, &via_api("ana"))
        .await
        .unwrap();
    assert_eq!(first.status, WaitStatus::Open, "one of two");
    let again = store
        .answer_wait(wait, &Answer::Approve, &via_api("ana"))
        .await
        .unwrap();
    assert_eq!(
        again.status,
        WaitStatus::Open,
        "the same principal twice counts once"
    );
    let reject = Answer::Reject {
        feedback: "changed my mind".into(),
    };
    let changed = store.answer_wait(wait, &reject, &via_api("ana")).await;
    refused_as(changed, Ineligible::AlreadyVoted("ana".into()));
    let voted = store.events(run).await.unwrap();
    let voted: Vec<_> = voted
        .iter()
        .filter(|e| e.kind == EventKind::WaitVoted)
        .collect();
    assert_eq!(voted.len(), 1, "one vote recorded");
    assert_eq!(
        (&voted[0].data["by"], &voted[0].data["approvals"]),
        (&json!("ana"), &json!(1))
    );

    let decided = store
        .answer_wait(wait, &Answer::Approve, &via_api("bob"))
        .await
        .unwrap();
    assert_eq!(decided.status, WaitStatus::Answered);
    assert_eq!(
        decided.answered_by.as_deref(),
        Some("bob"),
        "the deciding vote"
    );
    assert_eq!(store.get_run(run).await.unwrap().status, RunStatus::Queued);
    let events = store.events(run).await.unwrap();
    let answered = events
        .iter()
        .find(|e| e.kind == EventKind::WaitAnswered)
        .unwrap();
    let by: Vec<&str> = answered.data["votes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["by"].as_str().unwrap())
        .collect();
    assert_eq!(by, ["ana", "bob"], "the decision lists its votes");
    assert_eq!(store.ballot(wait).await.unwrap().votes.len(), 2);
}

async fn sixteen_concurrent_votes_decide_the_wait_exactly_once(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let names: Vec<String> = (0..16).map(|i| format!("p{i}")).collect();
    for name in &names {
        principal(&store, name, &["finance"]).await;
    }
    let wait = waiting(&store, "someone-else", finance_two()).await;
    let mut votes = tokio::task::JoinSet::new();
    for name in names {
        let store = Arc::clone(&store);
        votes.spawn(async move {
            store
                .answer_wait(wait, &Answer::Approve, &via_api(&name))
                .await
        });
    }
    while let Some(vote) = votes.join_next().await {
        let answered = vote.unwrap();
        assert!(
            answered.is_ok(),
            "a vote before or after the decision is fine: {answered:?}"
        );
    }
    let waits = store.list_waits(&Default::default()).await.unwrap();
    assert_eq!(waits[0].status, WaitStatus::Answered);
    let events = store.events(waits[0].run_id).await.unwrap();
    let count = |kind| events.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count(EventKind::WaitAnswered), 1, "decided exactly once");
    let answered = events
        .iter()
        .find(|e| e.kind == EventKind::WaitAnswered)
        .unwrap();
    assert_eq!(
        answered.data["votes"].as_array().unwrap().len(),
        2,
        "by the second vote"
    );
    let voted = count(EventKind::WaitVoted);
    assert_eq!(voted, 1, "one vote before the deciding one");
}

async fn database_access_answers_a_policy_wait_directly(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let wait = waiting(&store, "sam", finance_two()).await;
    let local = Actor::new("root").from(Origin {
        via: Some(Via::Local),
        ..Origin::default()
    });
    let answered = store
        .answer_wait(wait, &Answer::Approve, &local)
        .await
        .unwrap();
    assert_eq!(
        answered.status,
        WaitStatus::Answered,
        "no vote: database access decides"
    );
    assert!(store.ballot(wait).await.unwrap().votes.is_empty());
    match store.ballot(WaitId::new()).await {
        Err(Error::WaitNotFound(_)) => {}
        other => panic!("an unknown wait: {other:?}"),
    }
}
