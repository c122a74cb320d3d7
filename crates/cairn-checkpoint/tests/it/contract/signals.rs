//! Signals: a send stores one signal per id (16 concurrent sends of one
//! id store one), buffered until a step's commit consumes it; a wait's
//! commit finds a signal sent before it; a send wakes a run whose open
//! wait names it and leaves the others buffered; a due wait times out;
//! a target with no or several unfinished runs stores nothing; a
//! signal-with-submit starts one run under its key; a sender bound to
//! tenants signals only their runs.

use std::time::Duration;

use cairn_checkpoint::{Error, NewSignal, Next, Sent, StartWith, StepTransition};
use cairn_core::{Actor, Attempt, EventKind, Heard, RunId, RunStatus, StepIdx, Target};
use cairn_testkit::{both, Kind};
use serde_json::{json, Value};

use super::{count_of, Db};
use crate::{claim_req, fresh, new_run, submitted_and_claimed, success};

both!(
    a_signal_sent_before_its_wait_is_consumed_once_by_the_commit,
    a_send_wakes_a_run_that_waits_for_its_name_and_a_wait_times_out,
    concurrent_sends_of_one_id_store_one_signal,
    a_target_with_no_or_several_unfinished_runs_stores_nothing,
    a_signal_with_start_starts_one_run_under_its_key,
    a_sender_bound_to_tenants_signals_only_their_runs,
    concurrent_sends_that_start_a_threads_run_start_one,
    a_cancelled_run_waits_for_no_signal,
);

fn signal(target: Target, name: &str, payload: Value, id: Option<&str>) -> NewSignal {
    NewSignal {
        target,
        name: name.to_owned(),
        payload,
        id: id.map(str::to_owned),
        by: Actor::new("hook"),
        start: None,
        traceparent: None,
        tenants: vec![],
    }
}

async fn send(store: &Db, run: RunId, name: &str, id: &str) -> Sent {
    let new = signal(Target::Run(run), name, json!({"n": id}), Some(id));
    store.send_signal(&new).await.unwrap()
}

/// Step 0 of `run` (held at `epoch`) starts to wait for `names`.
async fn listen(
    store: &Db,
    run: RunId,
    epoch: cairn_core::LeaseEpoch,
    names: &[&str],
    timeout: Option<Duration>,
) {
    let mut commit = success(run, epoch, 0, 2);
    commit.events = vec![];
    commit.transition = StepTransition::Listening {
        names: names.iter().map(|n| n.to_string()).collect(),
        timeout,
    };
    store.commit_step(&commit).await.unwrap();
}

async fn status(store: &Db, run: RunId) -> RunStatus {
    store.get_run(run).await.unwrap().status
}

async fn heard(store: &Db, run: RunId, names: &[&str]) -> Heard {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    store
        .heard(run, StepIdx(0), Attempt(1), &names)
        .await
        .unwrap()
}

fn heard_id(heard: &Heard) -> Option<&str> {
    match heard {
        Heard::Signal(s) => Some(s.id.as_str()),
        _ => None,
    }
}

async fn a_signal_sent_before_its_wait_is_consumed_once_by_the_commit(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let run = c.run.id;
    let first = send(&store, run, "paid", "s1").await;
    let second = send(&store, run, "paid", "s2").await;
    assert!(
        !first.duplicate && !first.woke && !first.started,
        "{first:?}"
    );
    assert_eq!((first.signal.run_id, second.signal.run_id), (run, run));
    // Buffered, oldest first: the step finds s1.
    let found = heard(&store, run, &["paid"]).await;
    assert_eq!(heard_id(&found), Some("s1"), "{found:?}");
    // A wait opened while a signal is buffered wakes its run in its commit.
    listen(&store, run, c.run.lease_epoch, &["paid"], None).await;
    assert_eq!(status(&store, run).await, RunStatus::Queued);
    assert_eq!(store.listening(run).await.unwrap(), None);
    let again = store.claim(run, &claim_req(false)).await.unwrap();
    assert_eq!(again.run.cursor, StepIdx(0), "the same step runs again");
    let mut commit = success(run, again.run.lease_epoch, 0, 2);
    commit.transition = StepTransition::Consumed {
        output: json!({"n": "s1"}),
        next: Next::Step(cairn_core::Role::new("r1")),
        signal: "s1".into(),
    };
    store.commit_step(&commit).await.unwrap();
    let signals = store.signals(run).await.unwrap();
    let consumed: Vec<_> = signals
        .iter()
        .map(|s| (s.id.as_str(), s.consumed_by))
        .collect();
    assert_eq!(
        consumed,
        [("s1", Some((StepIdx(0), Attempt(1)))), ("s2", None)],
        "s1 consumed by its commit, s2 still buffered"
    );
    let (_, steps) = store.load(run).await.unwrap();
    assert_eq!(steps[0].output, Some(json!({"n": "s1"})));
    assert_eq!(heard_id(&heard(&store, run, &["paid"]).await), Some("s2"));
}

async fn a_send_wakes_a_run_that_waits_for_its_name_and_a_wait_times_out(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let run = c.run.id;
    listen(&store, run, c.run.lease_epoch, &["a", "b"], None).await;
    assert_eq!(status(&store, run).await, RunStatus::Waiting);
    let open = store.listening(run).await.unwrap().expect("an open wait");
    assert_eq!(
        (open.idx, open.names.as_slice()),
        (StepIdx(0), &["a".to_owned(), "b".to_owned()][..])
    );
    let other = send(&store, run, "c", "c1").await;
    assert!(!other.woke, "a name it does not wait for");
    assert_eq!(status(&store, run).await, RunStatus::Waiting);
    let b = send(&store, run, "b", "b1").await;
    assert!(b.woke, "{b:?}");
    assert_eq!(status(&store, run).await, RunStatus::Queued);
    store.claim(run, &claim_req(false)).await.unwrap();
    let found = heard(&store, run, &["a", "b"]).await;
    assert_eq!(heard_id(&found), Some("b1"), "any of two: the one sent");
    assert_eq!(
        heard_id(&heard(&store, run, &["c"]).await),
        Some("c1"),
        "c stays buffered"
    );
    let received = count_of(&store, run, EventKind::SignalReceived).await;
    assert_eq!(received, 2);

    // A wait with a timeout, and no signal: timed out once it is due.
    let t = submitted_and_claimed(&store, 2).await;
    listen(
        &store,
        t.run.id,
        t.run.lease_epoch,
        &["never"],
        Some(Duration::from_millis(300)),
    )
    .await;
    assert_eq!(
        store.time_out_signal_waits(10).await.unwrap(),
        Vec::<RunId>::new()
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(store.time_out_signal_waits(10).await.unwrap(), [t.run.id]);
    assert_eq!(
        store.time_out_signal_waits(10).await.unwrap(),
        Vec::<RunId>::new(),
        "once"
    );
    assert_eq!(status(&store, t.run.id).await, RunStatus::Queued);
    store.claim(t.run.id, &claim_req(false)).await.unwrap();
    assert_eq!(heard(&store, t.run.id, &["never"]).await, Heard::TimedOut);
    assert_eq!(
        store.prune_signals(100).await.unwrap(),
        0,
        "nothing expired yet"
    );
    assert_eq!(
        store.buffered_signals().await.unwrap(),
        2,
        "b1 (read, not yet consumed by a commit) and c1"
    );
    assert_eq!(store.signals(run).await.unwrap().len(), 2);
}

async fn concurrent_sends_of_one_id_store_one_signal(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    let run = c.run.id;
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = store.clone();
        sends.spawn(async move {
            let new = signal(Target::Run(run), "paid", json!({"try": i}), Some("once"));
            store.send_signal(&new).await.unwrap()
        });
    }
    let sent = sends.join_all().await;
    let stored: Vec<&Sent> = sent.iter().filter(|s| !s.duplicate).collect();
    assert_eq!(stored.len(), 1, "one send stores it: {sent:?}");
    let first = &stored[0].signal;
    assert!(
        sent.iter().all(|s| s.signal == *first),
        "every send answers the first"
    );
    assert_eq!(store.signals(run).await.unwrap().len(), 1);
    let received = count_of(&store, run, EventKind::SignalReceived).await;
    assert_eq!(received, 1);
}

async fn a_target_with_no_or_several_unfinished_runs_stores_nothing(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let on_thread = |key: &str| cairn_checkpoint::NewRun {
        thread_id: Some("conversation".into()),
        ..new_run(2, Some(key))
    };
    let a = store.submit(on_thread("a")).await.unwrap().run.id;
    let b = store.submit(on_thread("b")).await.unwrap().run.id;
    let to = |t: Target| signal(t, "paid", json!(1), None);
    let refused = store
        .send_signal(&to(Target::Thread("conversation".into())))
        .await;
    match refused {
        Err(Error::AmbiguousSignalTarget { runs, .. }) => assert_eq!(runs, [a, b]),
        other => panic!("two unfinished runs: {other:?}"),
    }
    let none = store.send_signal(&to(Target::Key("nobody".into()))).await;
    assert!(
        matches!(none, Err(Error::NoSignalTarget { .. })),
        "{none:?}"
    );
    let gone = store.send_signal(&to(Target::Run(RunId::new()))).await;
    assert!(matches!(gone, Err(Error::RunNotFound(_))), "{gone:?}");
    let by = Actor::new("ops");
    store
        .act(a, cairn_checkpoint::Action::Cancel, &by)
        .await
        .unwrap();
    let finished = store.send_signal(&to(Target::Key("a".into()))).await;
    assert!(
        matches!(finished, Err(Error::NoSignalTarget { .. })),
        "{finished:?}"
    );
    let bad = signal(Target::Run(b), "", json!(1), None);
    let bad = store.send_signal(&bad).await;
    assert!(matches!(bad, Err(Error::BadSignal(_))), "{bad:?}");
    for run in [a, b] {
        assert!(
            store.signals(run).await.unwrap().is_empty(),
            "nothing stored"
        );
    }
    // One unfinished run left on the thread: it takes the signal.
    let sent = store
        .send_signal(&to(Target::Thread("conversation".into())))
        .await
        .unwrap();
    assert_eq!(sent.signal.run_id, b);
}

async fn a_signal_with_start_starts_one_run_under_its_key(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let start = StartWith {
        crew: new_run(2, None).crew,
        input: json!({"order": 9}),
    };
    let new = NewSignal {
        start: Some(start),
        ..signal(Target::Key("order-9".into()), "paid", json!(9), None)
    };
    let first = store.send_signal(&new).await.unwrap();
    assert!(first.started, "{first:?}");
    let run = store.get_run(first.signal.run_id).await.unwrap();
    assert_eq!(run.idempotency_key.as_deref(), Some("order-9"));
    assert_eq!(
        (run.status, run.input.clone()),
        (RunStatus::Queued, json!({"order": 9}))
    );
    let second = store.send_signal(&new).await.unwrap();
    assert!(!second.started, "the key's run is unfinished: it takes it");
    assert_eq!(second.signal.run_id, run.id);
    assert_eq!(store.signals(run.id).await.unwrap().len(), 2);
}

async fn a_sender_bound_to_tenants_signals_only_their_runs(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let of = |tenant: &str, key: &str| cairn_checkpoint::NewRun {
        tenant: Some(cairn_core::Tenant::new(tenant).unwrap()),
        ..new_run(2, Some(key))
    };
    let acme = store.submit(of("acme", "a-1")).await.unwrap().run.id;
    let globex = store.submit(of("globex", "g-1")).await.unwrap().run.id;
    let by_acme = |target: Target| NewSignal {
        tenants: vec!["acme".into()],
        ..signal(target, "paid", json!(1), None)
    };
    let refused = store.send_signal(&by_acme(Target::Run(globex))).await;
    assert!(
        matches!(refused, Err(Error::SignalForbidden(_))),
        "{refused:?}"
    );
    let refused = store.send_signal(&by_acme(Target::Key("g-1".into()))).await;
    assert!(
        matches!(refused, Err(Error::SignalForbidden(_))),
        "{refused:?}"
    );
    assert!(
        store.signals(globex).await.unwrap().is_empty(),
        "nothing stored"
    );
    let sent = store
        .send_signal(&by_acme(Target::Run(acme)))
        .await
        .unwrap();
    assert_eq!(sent.signal.run_id, acme);
    // A run it starts is its tenant's.
    let start = NewSignal {
        start: Some(StartWith {
            crew: new_run(2, None).crew,
            input: json!({}),
        }),
        ..by_acme(Target::Key("a-2".into()))
    };
    let started = store.send_signal(&start).await.unwrap();
    let run = store.get_run(started.signal.run_id).await.unwrap();
    assert_eq!(run.tenant.as_ref().map(|t| t.as_str()), Some("acme"));
}

async fn concurrent_sends_that_start_a_threads_run_start_one(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..8 {
        let store = store.clone();
        sends.spawn(async move {
            let new = NewSignal {
                start: Some(StartWith {
                    crew: new_run(2, None).crew,
                    input: json!({}),
                }),
                ..signal(Target::Thread("chat-1".into()), "msg", json!(i), None)
            };
            store.send_signal(&new).await.unwrap()
        });
    }
    let sent = sends.join_all().await;
    let runs: std::collections::BTreeSet<RunId> = sent.iter().map(|s| s.signal.run_id).collect();
    assert_eq!(runs.len(), 1, "one run for the thread: {sent:?}");
    assert_eq!(sent.iter().filter(|s| s.started).count(), 1);
    let run = *runs.iter().next().unwrap();
    assert_eq!(
        store.signals(run).await.unwrap().len(),
        8,
        "every signal on it"
    );
}

async fn a_cancelled_run_waits_for_no_signal(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let c = submitted_and_claimed(&store, 2).await;
    listen(&store, c.run.id, c.run.lease_epoch, &["paid"], None).await;
    assert!(store.listening(c.run.id).await.unwrap().is_some());
    let by = Actor::new("ops");
    store
        .act(c.run.id, cairn_checkpoint::Action::Cancel, &by)
        .await
        .unwrap();
    assert_eq!(store.listening(c.run.id).await.unwrap(), None);
    let refused = store
        .send_signal(&signal(Target::Run(c.run.id), "paid", json!(1), None))
        .await;
    assert!(
        matches!(refused, Err(Error::NoSignalTarget { .. })),
        "{refused:?}"
    );
}
