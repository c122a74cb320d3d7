//! Due waits: `due_waits` lists the open waits whose deadline has passed
//! by the database clock, soonest deadline first, and none that has no
//! deadline, one still ahead, or one answered or expired meanwhile.

use std::time::{Duration, Instant};

use cairn_checkpoint::StepTransition;
use cairn_core::{
    Answer, EventKind, NewWait, OnDeadline, RunStatus, WaitId, WaitKind, WaitRecord, WaitStatus,
};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::{operator, Db};
use crate::{fresh, submitted_and_claimed, success};

both!(a_wait_is_due_once_its_deadline_passes_and_until_it_closes);

/// A two-step run waiting at step 0 for an approval with `deadline_ms`.
async fn waiting(store: &Db, deadline_ms: Option<u64>) -> WaitId {
    let c = submitted_and_claimed(store, 2).await;
    let wait = NewWait {
        deadline_ms,
        on_deadline: deadline_ms.map(|_| OnDeadline::Fail),
        ..crate::new_wait(WaitKind::Approval, json!({"approve": "step 0"}))
    };
    let id = wait.id;
    let mut commit = success(c.run.id, c.run.lease_epoch, 0, 2);
    commit.events = vec![crate::event(EventKind::WaitOpened, json!({"wait": id}))];
    commit.transition = StepTransition::Waiting { output: None, wait };
    store.commit_step(&commit).await.unwrap();
    id
}

fn ids(waits: &[WaitRecord]) -> Vec<WaitId> {
    waits.iter().map(|w| w.id).collect()
}

async fn a_wait_is_due_once_its_deadline_passes_and_until_it_closes(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    waiting(&store, None).await;
    waiting(&store, Some(3_600_000)).await;
    let opened = Instant::now();
    let later = waiting(&store, Some(1_400)).await;
    let sooner = waiting(&store, Some(1_000)).await;
    let none = store.due_waits().await.unwrap();
    assert!(
        opened.elapsed() < Duration::from_secs(1),
        "too slow to tell"
    );
    assert!(none.is_empty(), "no deadline passed yet: {none:?}");

    tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(opened.elapsed())).await;
    let due = store.due_waits().await.unwrap();
    assert_eq!(ids(&due), [sooner, later], "soonest deadline first");
    assert!(due
        .iter()
        .all(|w| w.status == WaitStatus::Open && w.deadline.is_some()));

    let answered = store
        .answer_wait(sooner, &Answer::Approve, &operator("ann"))
        .await
        .unwrap();
    assert_eq!(answered.status, WaitStatus::Answered);
    assert_eq!(ids(&store.due_waits().await.unwrap()), [later]);
    let expired = store.expire_wait(later).await.unwrap();
    assert_eq!(expired.status, WaitStatus::Expired);
    let run = store.get_run(expired.run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert!(
        store.due_waits().await.unwrap().is_empty(),
        "closed waits are not due"
    );
}
