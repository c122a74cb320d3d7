//! A process's claims: `heartbeat_many` extends every lease it still holds
//! in one call, fenced per run, and says what each beat found in the order
//! given; `set_aside` fails a corrupt run with kind `corruption` once,
//! only while its holder (or, without one, a queued or running status)
//! still stands.

use std::time::Duration;

use cairn_checkpoint::{Action, Lease, StepTransition};
use cairn_core::{
    Corruption, ErrorKind, EventKind, Fence, LeaseEpoch, RunId, RunStatus, StepStatus, WaitKind,
};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::{claim_by, operator, Db};
use crate::{claim_req, fresh, new_run, submitted_and_claimed, success};

both!(
    heartbeat_many_extends_each_held_lease_and_reports_each_in_order,
    set_aside_fails_a_held_corrupt_run_once_and_only_for_its_holder,
    set_aside_without_a_holder_takes_only_a_queued_or_running_run,
);

const SHORT: Duration = Duration::from_millis(400);
const LONG: Duration = Duration::from_secs(30);

/// `n` runs submitted and claimed by `w` for `lease`: (id, fence) each.
async fn held(store: &Db, n: usize, lease: Duration) -> Vec<(RunId, Fence)> {
    let mut out = vec![];
    for _ in 0..n {
        let id = store.submit(new_run(2, None)).await.unwrap().run.id;
        let c = store.claim(id, &claim_by("w", lease)).await.unwrap();
        out.push((id, c.fence));
    }
    out
}

async fn heartbeat_many_extends_each_held_lease_and_reports_each_in_order(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    assert!(store.heartbeat_many(&[], LONG).await.unwrap().is_empty());
    let runs = held(&store, 4, SHORT).await;
    let [kept, lapsing, cancelled, stolen] = [0, 1, 2, 3].map(|i| runs[i].clone());
    store
        .act(cancelled.0, Action::Cancel, &operator("ops"))
        .await
        .unwrap();
    let thief = store.claim(stolen.0, &claim_req(true)).await.unwrap();
    assert_eq!(thief.run.lease_epoch, LeaseEpoch(stolen.1.epoch.0 + 1));
    let queued = store.submit(new_run(1, None)).await.unwrap().run.id;
    let beat = [
        stolen,
        (RunId::new(), Fence::new(LeaseEpoch(1), "w")),
        cancelled.clone(),
        (queued, Fence::new(LeaseEpoch(0), "w")),
        kept.clone(),
    ];
    let found = store.heartbeat_many(&beat, LONG).await.unwrap();
    use Lease::*;
    assert_eq!(
        found,
        [Lost, Lost, CancelRequested, Lost, Held],
        "in the order given"
    );

    let queued_run = store.get_run(queued).await.unwrap();
    assert_eq!(
        queued_run.status,
        RunStatus::Queued,
        "a lost beat changes nothing"
    );
    assert_eq!(queued_run.lease_epoch, LeaseEpoch(0));

    // Past the short lease: the run left out of the beat is taken over
    // (and the queued one claimed); the beaten ones stay held.
    tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
    let worker = claim_by("other", LONG);
    let mut taken = vec![];
    while let Some(c) = store.claim_next(&worker).await.unwrap() {
        assert_eq!(c.took_over, c.run.id == lapsing.0, "{:?}", c.run.id);
        taken.push(c.run.id);
    }
    taken.sort();
    let mut expected = vec![lapsing.0, queued];
    expected.sort();
    assert_eq!(taken, expected);
    let again = store.heartbeat_many(&[kept, lapsing], LONG).await.unwrap();
    assert_eq!(again, [Held, Lost], "the lapsed lease changed hands");
}

async fn set_aside_fails_a_held_corrupt_run_once_and_only_for_its_holder(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    let corrupt = Corruption::new(id, "step 1 output does not decode");
    let before = super::stored(&store, id).await;
    let stale = Some(LeaseEpoch(epoch.0 - 1));
    assert!(
        !store
            .set_aside(&corrupt, stale.map(crate::fence).as_ref())
            .await
            .unwrap(),
        "not its holder"
    );
    let after = super::stored(&store, id).await;
    assert_eq!(after, before, "nothing written");

    assert!(store
        .set_aside(&corrupt, Some(&crate::fence(epoch)))
        .await
        .unwrap());
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::Corruption);
    assert!(
        error.message.contains("does not decode"),
        "{}",
        error.message
    );
    assert!(!error.retryable);
    assert!(run.finished_at.is_some());
    assert_eq!(steps[0].status, StepStatus::Failed, "the running step too");
    assert_eq!(
        steps[0].error.as_ref().map(|e| e.kind),
        Some(ErrorKind::Corruption)
    );
    let events = store.events(id).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.kind, &last.data["set_aside"]),
        (EventKind::RunFailed, &json!(true))
    );
    assert_eq!(
        store
            .heartbeat(id, &crate::fence(epoch), LONG)
            .await
            .unwrap(),
        Lease::Lost,
        "released"
    );
    assert!(
        !store
            .set_aside(&corrupt, Some(&crate::fence(epoch)))
            .await
            .unwrap(),
        "once"
    );
    assert_eq!(store.events(id).await.unwrap(), events);
}

async fn set_aside_without_a_holder_takes_only_a_queued_or_running_run(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let queued = store.submit(new_run(2, None)).await.unwrap().run.id;
    let corrupt = |id| Corruption::new(id, "crew definition does not decode");
    assert!(store.set_aside(&corrupt(queued), None).await.unwrap());
    let run = store.get_run(queued).await.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.map(|e| e.kind), Some(ErrorKind::Corruption));

    let running = submitted_and_claimed(&store, 2).await.run.id;
    assert!(store.set_aside(&corrupt(running), None).await.unwrap());
    assert_eq!(
        store.get_run(running).await.unwrap().status,
        RunStatus::Failed
    );

    // A waiting run is neither: left as it is.
    let c = submitted_and_claimed(&store, 2).await;
    let mut wait = success(c.run.id, c.run.lease_epoch, 0, 2);
    wait.transition = StepTransition::Waiting {
        output: Some(json!({"draft": 0})),
        wait: crate::new_wait(WaitKind::Review, json!("review")),
    };
    store.commit_step(&wait).await.unwrap();
    let before = store.load(c.run.id).await.unwrap();
    assert_eq!(before.0.status, RunStatus::Waiting);
    assert!(!store.set_aside(&corrupt(c.run.id), None).await.unwrap());
    assert_eq!(store.load(c.run.id).await.unwrap(), before);
}
