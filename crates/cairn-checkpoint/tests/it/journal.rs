//! The journal of agent steps: items append at the step's next `seq`, one
//! transaction each, fenced by the lease epoch; generations separate the
//! journals of re-runs after a rejected review. Both backends.

use cairn_checkpoint::{Error, JournalAppend};
use cairn_core::{Attempt, EventKind, JournalKind, LeaseEpoch, RunId, StepIdx};
use cairn_testkit::{both, Kind, TestDb};
use serde_json::json;

use crate::{claim_req, fresh, store, submitted_and_claimed};

fn item(
    run: RunId,
    epoch: LeaseEpoch,
    generation: u32,
    kind: JournalKind,
    n: u32,
) -> JournalAppend {
    JournalAppend {
        run_id: run,
        fence: crate::fence(epoch),
        idx: StepIdx(0),
        attempt: Attempt(1),
        generation,
        kind,
        payload: json!({"n": n}),
        event: None,
    }
}

both!(
    items_append_in_order_with_their_events,
    a_stale_epoch_cannot_journal,
    generations_are_read_apart,
);

async fn items_append_in_order_with_their_events(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    let first = store
        .append_journal(&item(id, epoch, 0, JournalKind::AssistantText, 1))
        .await
        .unwrap();
    let mut call = item(id, epoch, 0, JournalKind::ToolCall, 2);
    call.event = Some(crate::event(
        EventKind::TranscriptRepaired,
        json!({"seqs": [2]}),
    ));
    let second = store.append_journal(&call).await.unwrap();
    assert_eq!((first.seq, second.seq), (1, 2));
    assert_eq!(second.kind, JournalKind::ToolCall);
    let items = store.journal(id, StepIdx(0), Some(0)).await.unwrap();
    assert_eq!(
        items
            .iter()
            .map(|e| (e.seq, e.kind, e.payload.clone()))
            .collect::<Vec<_>>(),
        vec![
            (1, JournalKind::AssistantText, json!({"n": 1})),
            (2, JournalKind::ToolCall, json!({"n": 2})),
        ]
    );
    // Another step's journal is separate.
    assert!(store
        .journal(id, StepIdx(1), None)
        .await
        .unwrap()
        .is_empty());
    let events = store.events(id).await.unwrap();
    assert_eq!(
        events.last().map(|e| e.kind),
        Some(EventKind::TranscriptRepaired)
    );
}

async fn a_stale_epoch_cannot_journal(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 1).await;
    let (id, old) = (c.run.id, c.run.lease_epoch);
    store
        .append_journal(&item(id, old, 0, JournalKind::AssistantText, 1))
        .await
        .unwrap();
    // Another process takes the run over: the old holder is a zombie now.
    let taken = store.claim(id, &claim_req(true)).await.unwrap();
    assert!(taken.run.lease_epoch > old);
    let events_before = store.events(id).await.unwrap().len();
    match store
        .append_journal(&item(id, old, 0, JournalKind::ToolCall, 2))
        .await
    {
        Err(Error::StaleEpoch { held, current, .. }) => {
            assert_eq!((held, current), (old, taken.run.lease_epoch));
        }
        other => panic!("expected a stale epoch, got {other:?}"),
    }
    assert!(matches!(
        store
            .record_events(
                id,
                &crate::fence(old),
                &[crate::event(EventKind::ModelCalled, json!({}))]
            )
            .await,
        Err(Error::StaleEpoch { .. })
    ));
    assert_eq!(store.journal(id, StepIdx(0), None).await.unwrap().len(), 1);
    assert_eq!(store.events(id).await.unwrap().len(), events_before);
    // The new holder journals on.
    let next = store
        .append_journal(&item(
            id,
            taken.run.lease_epoch,
            0,
            JournalKind::ToolCall,
            3,
        ))
        .await
        .unwrap();
    assert_eq!(next.seq, 2);
    // Unknown run: not found, nothing written.
    assert!(matches!(
        store
            .append_journal(&item(RunId::new(), old, 0, JournalKind::ToolCall, 4))
            .await,
        Err(Error::RunNotFound(_))
    ));
}

async fn generations_are_read_apart(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 1).await;
    let (id, epoch) = (c.run.id, c.run.lease_epoch);
    for (generation, n) in [(0, 1), (0, 2), (1, 3)] {
        store
            .append_journal(&item(id, epoch, generation, JournalKind::AssistantText, n))
            .await
            .unwrap();
    }
    let g1 = store.journal(id, StepIdx(0), Some(1)).await.unwrap();
    assert_eq!(g1.len(), 1);
    assert_eq!((g1[0].seq, g1[0].generation), (3, 1));
    assert_eq!(store.journal(id, StepIdx(0), None).await.unwrap().len(), 3);
}

/// A journal item is acknowledged only once PostgreSQL committed it: a
/// commit that fails after the statement returned its row (here a deferred
/// constraint trigger of the test's own, which fires at commit) is an
/// error, not an item the agent then acts on. Acknowledging at the first
/// row would let a tool run whose call was never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_item_is_acknowledged_only_once_committed() {
    let db = TestDb::postgres().await;
    let store = store(&db).await;
    let c = submitted_and_claimed(&store, 1).await;
    db.exec(
        "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.payload ? 'refuse_at_commit' THEN \
           RAISE EXCEPTION 'refused at commit'; END IF; RETURN NULL; END $$; \
         CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON journal \
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();",
    )
    .await;
    let mut refused = item(c.run.id, c.run.lease_epoch, 0, JournalKind::ToolCall, 1);
    refused.payload = json!({"refuse_at_commit": true});
    let answer = store.append_journal(&refused).await;
    assert!(
        answer.is_err(),
        "acknowledged before the commit: {answer:?}"
    );
    let kept = item(c.run.id, c.run.lease_epoch, 0, JournalKind::ToolCall, 2);
    let kept = store.append_journal(&kept).await.unwrap();
    assert_eq!(kept.seq, 1, "the refused item was never stored");
    assert_eq!(
        store
            .journal(c.run.id, StepIdx(0), None)
            .await
            .unwrap()
            .len(),
        1
    );
}
