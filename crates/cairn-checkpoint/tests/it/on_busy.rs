//! on_busy in the store: a busy thread's submit follows its `on_busy`
//! (queue, reject, interrupt), and runs of one thread are claimed in
//! submission order. Both backends, through the `Store` contract.

use cairn_checkpoint::{Error, OnBusy, RunFilter};
use cairn_core::{EventKind, RunStatus};
use cairn_testkit::{both, Kind};

use crate::{claim_req, fresh, new_run, success};

both!(
    a_busy_thread_rejects_and_stores_nothing,
    interrupt_cancels_the_busy_runs_and_records_why,
    runs_of_a_thread_are_claimed_in_submission_order,
    concurrent_rejects_to_an_idle_thread_store_exactly_one,
    concurrent_interrupts_leave_exactly_the_newest_alive,
);

/// Submits `n` runs to thread `t` at once, each on its own task.
async fn at_once(
    store: &std::sync::Arc<dyn cairn_checkpoint::Store>,
    n: usize,
    on_busy: OnBusy,
) -> Vec<Result<cairn_checkpoint::Submitted, Error>> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.submit(in_thread("t", on_busy)).await })
        })
        .collect();
    let mut out = vec![];
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// 16 submits with `on_busy = reject` to an idle thread, five rounds (a
/// fresh thread each): exactly one is stored, the rest are `ThreadBusy`.
async fn concurrent_rejects_to_an_idle_thread_store_exactly_one(kind: Kind) {
    for _ in 0..5 {
        let (_db, store) = fresh(kind).await;
        let results = at_once(&store, 16, OnBusy::Reject).await;
        let stored = results.iter().filter(|r| r.is_ok()).count();
        let busy = results
            .iter()
            .filter(|r| matches!(r, Err(Error::ThreadBusy { .. })))
            .count();
        assert_eq!((stored, busy), (1, 15), "{results:?}");
        let runs = store
            .list_runs(&RunFilter {
                thread: Some("t".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(runs.len(), 1);
    }
}

/// 16 submits with `on_busy = interrupt` at once, five rounds: every one
/// succeeds, and exactly one run of the thread is left alive (the newest).
async fn concurrent_interrupts_leave_exactly_the_newest_alive(kind: Kind) {
    for _ in 0..5 {
        let (_db, store) = fresh(kind).await;
        let results = at_once(&store, 16, OnBusy::Interrupt).await;
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        let runs = store
            .list_runs(&RunFilter {
                thread: Some("t".into()),
                newest_first: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(runs.len(), 16);
        let alive: Vec<_> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Queued)
            .collect();
        assert_eq!(alive.len(), 1, "{runs:?}");
        assert_eq!(alive[0].id, runs[0].id, "the newest run is the one alive");
        assert!(runs[1..].iter().all(|r| r.status == RunStatus::Cancelled));
    }
}

fn in_thread(thread: &str, on_busy: OnBusy) -> cairn_checkpoint::NewRun {
    let mut run = new_run(1, None);
    run.thread_id = Some(thread.to_owned());
    run.on_busy = on_busy;
    run
}

/// A run of one step submitted to `thread` to queue behind its busy runs.
async fn queued_in(
    store: &std::sync::Arc<dyn cairn_checkpoint::Store>,
    thread: &str,
) -> cairn_core::RunRecord {
    let submitted = store.submit(in_thread(thread, OnBusy::Queue)).await;
    submitted.unwrap().run
}

async fn a_busy_thread_rejects_and_stores_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let first = queued_in(&store, "t").await;
    let before = store.list_runs(&RunFilter::default()).await.unwrap();
    match store.submit(in_thread("t", OnBusy::Reject)).await {
        Err(Error::ThreadBusy {
            thread,
            run,
            status,
        }) => {
            assert_eq!(
                (thread.as_str(), run, status),
                ("t", first.id, RunStatus::Queued)
            );
        }
        other => panic!("expected ThreadBusy, got {other:?}"),
    }
    let after = store.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(after.len(), before.len(), "nothing stored");
    // Another thread, or the same one once its run is done, accepts.
    store.submit(in_thread("u", OnBusy::Reject)).await.unwrap();
    let held = store.claim(first.id, &claim_req(false)).await.unwrap();
    store
        .commit_step(&success(first.id, held.run.lease_epoch, 0, 1))
        .await
        .unwrap();
    store.submit(in_thread("t", OnBusy::Reject)).await.unwrap();
}

async fn interrupt_cancels_the_busy_runs_and_records_why(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let queued = queued_in(&store, "t").await;
    let running = queued_in(&store, "t").await;
    // The second is running under a claim (taken out of order on purpose:
    // an operator's takeover, say).
    let req = claim_req(true);
    store
        .act(
            queued.id,
            cairn_checkpoint::Action::Cancel,
            &cairn_core::Actor::new("x"),
        )
        .await
        .unwrap();
    store.claim(running.id, &req).await.unwrap();
    let new = store
        .submit(in_thread("t", OnBusy::Interrupt))
        .await
        .unwrap();
    assert!(new.created);
    // A running run gets a cancel request (its executor ends it).
    let r = store.get_run(running.id).await.unwrap();
    assert_eq!(r.status, RunStatus::Running);
    assert!(r.cancel_requested_at.is_some());
    let events = store.events(running.id).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventKind::RunCancelRequested);
    assert_eq!(last.data["by"], "on_busy=interrupt");
    assert!(last.data["reason"]
        .as_str()
        .unwrap()
        .contains(&new.run.id.to_string()));
    // A queued one is cancelled at once.
    let q = queued_in(&store, "v").await;
    store
        .submit(in_thread("v", OnBusy::Interrupt))
        .await
        .unwrap();
    assert_eq!(
        store.get_run(q.id).await.unwrap().status,
        RunStatus::Cancelled
    );
}

async fn runs_of_a_thread_are_claimed_in_submission_order(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let a1 = queued_in(&store, "a").await;
    let a2 = queued_in(&store, "a").await;
    let b1 = queued_in(&store, "b").await;
    let free = store.submit(new_run(1, None)).await.unwrap().run;
    let mut req = claim_req(false);
    req.takeover = cairn_checkpoint::Takeover::IfExpired;
    let mut claimed = vec![];
    while let Some(c) = store.claim_next(&req).await.unwrap() {
        claimed.push(c);
    }
    // a2 waits for a1; every other run is claimable.
    let ids: Vec<_> = claimed.iter().map(|c| c.run.id).collect();
    assert_eq!(ids, vec![a1.id, b1.id, free.id]);
    // Claiming a2 directly is refused until a1 is done.
    match store.claim(a2.id, &claim_req(false)).await {
        Err(Error::QueuedBehind { run, behind }) => assert_eq!((run, behind), (a2.id, a1.id)),
        other => panic!("expected QueuedBehind, got {other:?}"),
    }
    store
        .commit_step(&success(a1.id, claimed[0].run.lease_epoch, 0, 1))
        .await
        .unwrap();
    let next = store.claim_next(&req).await.unwrap().unwrap();
    assert_eq!(next.run.id, a2.id);
    // A failed earlier run no longer holds the thread back (it is parked).
    let c1 = queued_in(&store, "c").await;
    let c2 = queued_in(&store, "c").await;
    let held = store.claim_next(&req).await.unwrap().unwrap();
    assert_eq!(held.run.id, c1.id);
    let mut fail = success(c1.id, held.run.lease_epoch, 0, 1);
    fail.transition = cairn_checkpoint::StepTransition::Failed {
        error: cairn_core::ErrorInfo::new(cairn_core::ErrorKind::Agent, "no", false),
    };
    store.commit_step(&fail).await.unwrap();
    assert_eq!(store.claim_next(&req).await.unwrap().unwrap().run.id, c2.id);
}
