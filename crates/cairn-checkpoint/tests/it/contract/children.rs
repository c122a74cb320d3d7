//! Child runs as their parent reads them: a spawn committed through
//! `commit_step` starts its children queued (beyond its concurrency,
//! held), `children` lists them in listing order with their outcomes,
//! `joined` answers only once the join is decided, and `close_join`
//! cancels what a decided join no longer needs.

use std::time::Duration;

use cairn_checkpoint::{Lease, NewChild, NewRun, SpawnCommit, StepCommit, StepTransition};
use cairn_core::{
    child_id, Attempt, ErrorInfo, ErrorKind, EventKind, JoinRule, LeaseEpoch, OnParentClose, RunId,
    RunStatus, StepIdx,
};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::{kinds, operator, Db};
use crate::{claim_req, crew, fresh, new_run, success};

both!(
    children_are_listed_in_order_and_joined_once_every_child_settled,
    a_decided_join_is_closed_by_cancelling_its_unfinished_children,
    children_beyond_the_concurrency_are_held_and_released_one_by_one,
);

/// The spawn of step 0, attempt 1, of `parent`: one-step children of
/// `keys`, in that order.
fn spawn(
    parent: RunId,
    epoch: LeaseEpoch,
    keys: &[&str],
    rule: JoinRule,
    concurrency: Option<u32>,
) -> StepCommit {
    let children = keys
        .iter()
        .map(|key| NewChild {
            id: child_id(parent, StepIdx(0), Attempt(1), key),
            key: (*key).to_owned(),
            input: json!({"item": key}),
            crew: None,
        })
        .collect();
    StepCommit {
        run_id: parent,
        fence: crate::fence(epoch),
        idx: StepIdx(0),
        attempt: Attempt(1),
        usage: None,
        events: vec![crate::event(
            EventKind::ChildrenSpawned,
            json!({"idx": 0, "children": keys.len()}),
        )],
        transition: StepTransition::Spawn(Box::new(SpawnCommit {
            rule,
            quorum: 0,
            on_parent_close: OnParentClose::Cancel,
            concurrency,
            depth: 1,
            crew: crew(1),
            children,
            wall_time: None,
        })),
        child: false,
    }
}

/// A two-step parent, claimed, whose step 0 spawned `keys`; the child ids.
async fn spawned(
    store: &Db,
    keys: &[&str],
    rule: JoinRule,
    concurrency: Option<u32>,
) -> (RunId, Vec<RunId>) {
    spawned_under(store, new_run(2, None), keys, rule, concurrency).await
}

/// [`spawned`] of parent `run` (two steps or more).
pub(super) async fn spawned_under(
    store: &Db,
    run: NewRun,
    keys: &[&str],
    rule: JoinRule,
    concurrency: Option<u32>,
) -> (RunId, Vec<RunId>) {
    let id = store.submit(run).await.unwrap().run.id;
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    store
        .commit_step(&spawn(id, c.run.lease_epoch, keys, rule, concurrency))
        .await
        .unwrap();
    let ids = keys
        .iter()
        .map(|k| child_id(id, StepIdx(0), Attempt(1), k))
        .collect();
    (id, ids)
}

/// Claims child `id` and ends its one step: a success, or a failure.
async fn end_child(store: &Db, id: RunId, ok: bool) {
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    let mut commit = success(id, c.run.lease_epoch, 0, 1);
    commit.child = true;
    if !ok {
        let error = ErrorInfo::new(ErrorKind::ExitStatus, "exit 2", false);
        commit.transition = StepTransition::Failed { error };
    }
    store.commit_step(&commit).await.unwrap();
}

async fn statuses(store: &Db, parent: RunId) -> Vec<RunStatus> {
    let all = store.children(parent).await.unwrap();
    all.iter().map(|c| c.status).collect()
}

async fn children_are_listed_in_order_and_joined_once_every_child_settled(kind: Kind) {
    use RunStatus::*;
    let (_db, store) = fresh(kind).await;
    let (parent, ids) = spawned(&store, &["b", "a", "c"], JoinRule::All, None).await;
    assert_eq!(store.get_run(parent).await.unwrap().status, Waiting);
    let listed = store.children(parent).await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["b", "a", "c"], "listing order, not by key");
    assert_eq!(listed.iter().map(|c| c.run_id).collect::<Vec<_>>(), ids);
    assert!(listed
        .iter()
        .all(|c| c.status == Queued && c.output.is_none()));
    assert!(listed.iter().all(|c| c.step == Some(StepIdx(0)) && !c.held));
    assert_eq!(
        store.joined(parent, StepIdx(0), Attempt(1)).await.unwrap(),
        None
    );

    end_child(&store, ids[0], true).await;
    end_child(&store, ids[1], false).await;
    assert_eq!(
        store.joined(parent, StepIdx(0), Attempt(1)).await.unwrap(),
        None,
        "open while c runs"
    );
    assert_eq!(store.get_run(parent).await.unwrap().status, Waiting);
    end_child(&store, ids[2], true).await;

    let joined = store
        .joined(parent, StepIdx(0), Attempt(1))
        .await
        .unwrap()
        .expect("decided");
    assert_eq!((joined.rule, joined.met), (JoinRule::All, true));
    assert_eq!(joined.children, store.children(parent).await.unwrap());
    let [b, a, c] = &joined.children[..] else {
        panic!("three children: {joined:?}");
    };
    assert_eq!(
        (b.status, b.output.clone()),
        (Succeeded, Some(json!({"out": 0})))
    );
    assert_eq!((b.tokens, b.usage.input_tokens), (11, 10));
    assert_eq!((a.status, a.output.clone()), (Failed, None));
    assert_eq!(a.error.as_ref().map(|e| e.message.as_str()), Some("exit 2"));
    assert!(c.finished_at.is_some_and(|f| Some(f) >= c.created_at));
    assert_eq!(store.get_run(parent).await.unwrap().status, Queued, "woken");
    assert!(kinds(&store, parent)
        .await
        .contains(&EventKind::ChildrenJoined));
    // Another attempt or step of the parent started no children.
    assert_eq!(
        store.joined(parent, StepIdx(0), Attempt(2)).await.unwrap(),
        None
    );
    assert_eq!(
        store.joined(parent, StepIdx(1), Attempt(1)).await.unwrap(),
        None
    );
    assert!(store.children(ids[0]).await.unwrap().is_empty());
}

/// `all_ok` fails at the first failure: the parent is woken with the
/// others unfinished, and its `close_join` cancels a queued child at
/// once and asks a running one's holder to stop (its heartbeat says so).
async fn a_decided_join_is_closed_by_cancelling_its_unfinished_children(kind: Kind) {
    use RunStatus::*;
    let (_db, store) = fresh(kind).await;
    let (parent, ids) = spawned(&store, &["x", "y", "z"], JoinRule::AllOk, None).await;
    let y = store.claim(ids[1], &claim_req(false)).await.unwrap();
    end_child(&store, ids[0], false).await;
    let joined = store.joined(parent, StepIdx(0), Attempt(1)).await.unwrap();
    assert_eq!(joined.map(|j| j.met), Some(false));
    assert_eq!(store.get_run(parent).await.unwrap().status, Queued);
    assert_eq!(statuses(&store, parent).await, [Failed, Running, Queued]);

    let by = operator("parent");
    store
        .close_join(parent, StepIdx(0), Attempt(1), &by)
        .await
        .unwrap();
    assert_eq!(statuses(&store, parent).await, [Failed, Running, Cancelled]);
    let z_events = store.events(ids[2]).await.unwrap();
    let cancel = z_events.last().unwrap();
    assert_eq!(cancel.kind, EventKind::RunCancelled);
    assert_eq!(cancel.data["by"], json!("parent"), "{}", cancel.data);
    let lease = store
        .heartbeat(
            ids[1],
            &crate::fence(y.run.lease_epoch),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(lease, Lease::CancelRequested);
    assert!(store
        .get_run(ids[1])
        .await
        .unwrap()
        .cancel_requested_at
        .is_some());
    let x_before = store.load(ids[0]).await.unwrap();

    // Again: nothing left to cancel, nothing written.
    store
        .close_join(parent, StepIdx(0), Attempt(1), &by)
        .await
        .unwrap();
    assert_eq!(store.events(ids[2]).await.unwrap(), z_events);
    assert_eq!(
        store.load(ids[0]).await.unwrap(),
        x_before,
        "a failed child stays"
    );
    // A step attempt that started no children has nothing to close.
    store
        .close_join(parent, StepIdx(1), Attempt(1), &by)
        .await
        .unwrap();
    assert_eq!(statuses(&store, parent).await, [Failed, Running, Cancelled]);
}

async fn children_beyond_the_concurrency_are_held_and_released_one_by_one(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (parent, ids) = spawned(&store, &["1", "2", "3"], JoinRule::All, Some(1)).await;
    let held = |store: Db| async move {
        let all = store.children(parent).await.unwrap();
        all.iter().map(|c| c.held).collect::<Vec<_>>()
    };
    assert_eq!(held(store.clone()).await, [false, true, true]);
    let next = store.claim_next(&claim_req(false)).await.unwrap().unwrap();
    assert_eq!(next.run.id, ids[0], "only the first is claimable");
    assert!(store.claim_next(&claim_req(false)).await.unwrap().is_none());
    let mut commit = success(ids[0], next.run.lease_epoch, 0, 1);
    commit.child = true;
    store.commit_step(&commit).await.unwrap();
    assert_eq!(held(store.clone()).await, [false, false, true]);
    let next = store.claim_next(&claim_req(false)).await.unwrap().unwrap();
    assert_eq!(next.run.id, ids[1]);
}
