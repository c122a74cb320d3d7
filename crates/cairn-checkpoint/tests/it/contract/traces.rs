//! Trace export cursors: a sampled run is pending (`trace_pending`) while
//! it has events past the last one its exporter read, with the events past
//! the last one whose spans were sent; `trace_advance` moves the cursor
//! only from where it was read, so of two exporters one moves it.

use cairn_checkpoint::{Action, StepTransition, TraceAdvance, TraceWork};
use cairn_core::{ErrorInfo, ErrorKind, EventKind, RunId, Sampler, TraceContext, Tracing};
use cairn_testkit::{both, Kind};

use super::{operator, Db};
use crate::{claim_req, fresh, new_run, success};

both!(
    a_sampled_run_is_pending_until_its_exporter_has_read_its_events,
    only_sampled_runs_are_pending_and_a_limit_caps_the_batch,
    an_ended_run_exported_to_its_last_event_is_pending_again_once_retried,
);

async fn traced(store: &Db, sampler: Option<Sampler>) -> RunId {
    let mut run = new_run(1, None);
    run.trace = sampler.map(|sampler| Tracing {
        sampler,
        parent: None,
    });
    store.submit(run).await.unwrap().run.id
}

fn seqs(work: &TraceWork) -> Vec<i64> {
    work.events.iter().map(|e| e.seq).collect()
}

fn advance(run: RunId, from: i64, to: i64, seen: i64) -> TraceAdvance {
    TraceAdvance {
        run,
        from,
        to,
        seen,
        root_exported: true,
    }
}

async fn a_sampled_run_is_pending_until_its_exporter_has_read_its_events(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = traced(&store, Some(Sampler::AlwaysOn)).await;
    let work = store.trace_pending(10).await.unwrap();
    let [w] = &work[..] else {
        panic!("one sampled run: {work:?}");
    };
    assert_eq!(w.run.id, id);
    assert_eq!(w.trace, TraceContext::root(id, true));
    assert_eq!((w.after, w.root_exported), (0, false));
    assert_eq!(w.events[0].kind, EventKind::RunSubmitted);
    assert_eq!(seqs(w), [1]);

    // The root span sent, the submit's event read but not settled.
    assert!(store.trace_advance(&advance(id, 0, 0, 1)).await.unwrap());
    assert!(
        store.trace_pending(10).await.unwrap().is_empty(),
        "nothing newer"
    );
    store.claim(id, &claim_req(false)).await.unwrap();
    let work = store.trace_pending(10).await.unwrap();
    assert_eq!(work.len(), 1);
    assert_eq!((work[0].after, work[0].root_exported), (0, true));
    assert_eq!(seqs(&work[0]), [1, 2], "from the last event sent");

    // Another exporter's move from a cursor no longer there fails.
    assert!(!store.trace_advance(&advance(id, 1, 2, 2)).await.unwrap());
    assert_eq!(
        store.trace_pending(10).await.unwrap()[0].after,
        0,
        "not moved"
    );
    assert!(store.trace_advance(&advance(id, 0, 2, 2)).await.unwrap());
    assert!(store.trace_pending(10).await.unwrap().is_empty());
}

async fn only_sampled_runs_are_pending_and_a_limit_caps_the_batch(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    traced(&store, None).await;
    traced(&store, Some(Sampler::AlwaysOff)).await;
    let a = traced(&store, Some(Sampler::AlwaysOn)).await;
    let b = traced(&store, Some(Sampler::AlwaysOn)).await;
    let ids = |work: Vec<TraceWork>| {
        let mut ids: Vec<RunId> = work.iter().map(|w| w.run.id).collect();
        ids.sort();
        ids
    };
    let mut sampled = vec![a, b];
    sampled.sort();
    assert_eq!(ids(store.trace_pending(10).await.unwrap()), sampled);
    assert_eq!(store.trace_pending(1).await.unwrap().len(), 1);
    assert!(store.trace_pending(0).await.unwrap().is_empty());
}

async fn an_ended_run_exported_to_its_last_event_is_pending_again_once_retried(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = traced(&store, Some(Sampler::AlwaysOn)).await;
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    let mut fail = success(id, c.run.lease_epoch, 0, 1);
    let error = ErrorInfo::new(ErrorKind::ExitStatus, "exit 1", true);
    fail.transition = StepTransition::Failed { error };
    store.commit_step(&fail).await.unwrap();
    let work = store.trace_pending(10).await.unwrap();
    let last = *seqs(&work[0]).last().unwrap();
    assert!(store
        .trace_advance(&advance(id, 0, last, last))
        .await
        .unwrap());
    assert!(store.trace_pending(10).await.unwrap().is_empty());

    store
        .act(id, Action::Retry, &operator("ops"))
        .await
        .unwrap();
    let work = store.trace_pending(10).await.unwrap();
    assert_eq!(work.len(), 1, "sent on again, exported again");
    assert_eq!(work[0].after, last);
    assert_eq!(
        work[0].events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::RunRetried]
    );
}
