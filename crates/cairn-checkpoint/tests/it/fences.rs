//! Fencing on epoch and owner: a claim lost with an asynchronous failover
//! of the database lets the next claim grant the same epoch again, to
//! another process. The first holder's writes must still be refused.
//!
//! The lost claim is modelled with a snapshot of the database taken just
//! before it (`TestDb::snapshot`): the "standby" that never received the
//! claim. The first holder claims on the primary, then writes to the
//! standby once it has been "promoted" and a second process has claimed
//! the run there at the same epoch.

use std::time::Duration;

use cairn_checkpoint::{open, ClaimRequest, Error, JournalAppend, Lease, OpenOptions, StepCommit};
use cairn_core::{Attempt, Corruption, EventKind, JournalKind, RunId, StepIdx};

type Db = std::sync::Arc<dyn cairn_checkpoint::Store>;
use cairn_testkit::{both, Kind};
use serde_json::json;

use crate::{event, fresh, new_run, success};

both!(
    an_epoch_granted_twice_fences_out_its_first_holder,
    a_committed_step_and_a_journal_item_keep_the_lease_they_were_fenced_on,
);

const LEASE: Duration = Duration::from_secs(30);

async fn an_epoch_granted_twice_fences_out_its_first_holder(kind: Kind) {
    let (db, primary) = fresh(kind).await;
    let id = primary.submit(new_run(2, None)).await.unwrap().run.id;
    // The standby stops receiving here: it never learns of the claim.
    let standby_db = db.snapshot().await;
    let first = primary
        .claim(id, &ClaimRequest::new("worker-b", LEASE, 3))
        .await
        .unwrap();
    // The primary is lost; the standby is promoted and another worker
    // claims the run there, at the epoch the lost claim had granted.
    let standby = open(&standby_db.url, &OpenOptions::default())
        .await
        .unwrap();
    let second = standby
        .claim(id, &ClaimRequest::new("worker-c", LEASE, 3))
        .await
        .unwrap();
    assert_eq!(
        second.fence.epoch, first.fence.epoch,
        "the epoch is granted twice"
    );
    assert_ne!(second.fence.owner, first.fence.owner);
    let before = stored(&standby, id).await;

    // Every fenced write of the first holder reaches the promoted standby
    // and is refused there, naming both owners.
    let reused = |e: Error| match e {
        Error::LeaseReused {
            run,
            epoch,
            owner,
            held_by,
        } => {
            assert_eq!((run, epoch), (id, first.fence.epoch));
            assert_eq!((owner.as_str(), held_by.as_str()), ("worker-c", "worker-b"));
        }
        other => panic!("expected LeaseReused, got {other:?}"),
    };
    let commit = StepCommit {
        fence: first.fence.clone(),
        ..success(id, first.fence.epoch, 0, 2)
    };
    reused(standby.commit_step(&commit).await.unwrap_err());
    let item = JournalAppend {
        run_id: id,
        fence: first.fence.clone(),
        idx: StepIdx(0),
        attempt: Attempt(1),
        generation: 0,
        kind: JournalKind::AssistantText,
        payload: json!({"text": "from the lost holder"}),
        event: None,
    };
    reused(standby.append_journal(&item).await.unwrap_err());
    let called = event(EventKind::ModelCalled, json!({}));
    reused(
        standby
            .record_events(id, &first.fence, &[called])
            .await
            .unwrap_err(),
    );
    let beat = standby.heartbeat(id, &first.fence, LEASE).await.unwrap();
    assert_eq!(
        beat,
        Lease::Lost,
        "its heartbeat tells it the lease is gone"
    );
    let many = standby
        .heartbeat_many(&[(id, first.fence.clone())], LEASE)
        .await
        .unwrap();
    assert_eq!(many, [Lease::Lost]);
    let corrupt = Corruption::new(id, "seen by the lost holder");
    let set = standby
        .set_aside(&corrupt, Some(&first.fence))
        .await
        .unwrap();
    assert!(!set, "nor can it set the run aside");
    assert_eq!(
        stored(&standby, id).await,
        before,
        "nothing the first holder sent was written"
    );

    // The second holder writes as usual.
    assert_eq!(
        standby.heartbeat(id, &second.fence, LEASE).await.unwrap(),
        Lease::Held
    );
    let commit = StepCommit {
        fence: second.fence.clone(),
        ..success(id, second.fence.epoch, 0, 2)
    };
    standby.commit_step(&commit).await.unwrap();
    let (run, steps) = standby.load(id).await.unwrap();
    assert_eq!(run.cursor, StepIdx(1));
    assert_eq!(steps[0].output, Some(json!({"out": 0})));
}

/// What is stored of run `id`: its row, steps and events.
async fn stored(store: &Db, id: RunId) -> impl PartialEq + std::fmt::Debug {
    (
        store.load(id).await.unwrap(),
        store.events(id).await.unwrap(),
    )
}

/// A step's commit and a journal item store the lease they were fenced on
/// (epoch and owner) with the row, so a history checker reads who wrote
/// each row from the row itself; the step the claim opened has none yet.
async fn a_committed_step_and_a_journal_item_keep_the_lease_they_were_fenced_on(kind: Kind) {
    let (db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    let held = store
        .claim(
            id,
            &cairn_checkpoint::ClaimRequest::new("worker-b", LEASE, 3),
        )
        .await
        .unwrap();
    let item = JournalAppend {
        run_id: id,
        fence: held.fence.clone(),
        idx: StepIdx(0),
        attempt: Attempt(1),
        generation: 0,
        kind: JournalKind::AssistantText,
        payload: json!({"text": "from the holder"}),
        event: None,
    };
    store.append_journal(&item).await.unwrap();
    let commit = StepCommit {
        fence: held.fence.clone(),
        ..success(id, held.fence.epoch, 0, 2)
    };
    store.commit_step(&commit).await.unwrap();
    let lease_of = |table: &str, idx_column: &str, idx: u32| {
        format!(
            "SELECT CAST(lease_epoch AS TEXT) || ' ' || lease_owner FROM {table} \
             WHERE run_id = '{id}' AND {idx_column} = {idx}"
        )
    };
    let want = Some(format!("{} worker-b", held.fence.epoch.0));
    assert_eq!(db.scalar(&lease_of("steps", "idx", 0)).await, want);
    assert_eq!(db.scalar(&lease_of("journal", "step_idx", 0)).await, want);
    assert_eq!(
        db.scalar(&lease_of("steps", "idx", 1)).await,
        None,
        "the next step, running, has no commit yet"
    );
}
