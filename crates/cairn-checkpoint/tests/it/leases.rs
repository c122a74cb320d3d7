//! Leases: `claim_next` takes the oldest runnable run (queued and due, or
//! running under an expired lease), and heartbeats extend a lease only for
//! its current holder. Both backends, through the `Store` contract.

use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::StepTransition;
use cairn_checkpoint::{Action, ClaimRequest, Lease};
use cairn_core::{Actor, ErrorInfo, ErrorKind, LeaseEpoch, RunStatus};
use cairn_testkit::{both, Kind, TestDb};

use crate::{fresh, new_run, store, success};

fn req(lease_ms: u64) -> ClaimRequest {
    ClaimRequest::new("worker", Duration::from_millis(lease_ms), 3)
}

/// The fence of a lease `req` granted at `epoch`.
fn fence(epoch: LeaseEpoch) -> cairn_core::Fence {
    cairn_core::Fence::new(epoch, "worker")
}

both!(
    a_steps_takeovers_survive_a_restart_of_the_same_attempt,
    stats_count_runs_the_ready_queue_and_takeovers,
    claim_next_takes_runnable_runs_oldest_first,
    a_higher_priority_goes_first_and_an_older_run_ages_past_it,
    claims_go_round_robin_across_tenants_within_a_priority,
    an_expired_lease_is_taken_over_and_the_old_holder_cannot_heartbeat,
    a_heartbeat_keeps_a_run_from_being_taken_over,
    a_claim_batch_takes_runs_in_claim_order_and_two_batches_never_share_one,
    a_claim_takes_the_definition_read_with_the_run_unless_its_crew_changed,
    a_start_claims_the_run_it_creates_and_only_submits_a_threads_or_a_repeated_one,
    a_start_writes_what_a_submit_then_a_claim_writes,
);

/// `RunStore::start`: a new run of no thread is submitted and claimed in one
/// transaction (epoch 1, step 0 running, `run_submitted` then
/// `run_claimed`), so no worker can take it in between; a run of a thread
/// (which may wait behind an earlier one) and a repeated idempotency key
/// are only submitted, as `submit` would.
async fn a_start_claims_the_run_it_creates_and_only_submits_a_threads_or_a_repeated_one(
    kind: Kind,
) {
    let (_db, store) = fresh(kind).await;
    let started = store
        .start(new_run(2, Some("k-start")), &req(30_000))
        .await
        .unwrap();
    assert!(started.submitted.created);
    let claimed = started
        .claimed
        .expect("a new run is claimed with its submit");
    let id = claimed.run.id;
    assert_eq!(started.submitted.run.id, id);
    assert_eq!(claimed.run.status, RunStatus::Running);
    assert_eq!(claimed.run.lease_epoch, LeaseEpoch(1));
    assert!(claimed.first_run && !claimed.took_over);
    let (run, steps) = store.load(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].status, cairn_core::StepStatus::Running);
    let kinds: Vec<_> = store
        .events(id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind.as_str().to_owned())
        .collect();
    assert_eq!(kinds, ["run_submitted", "run_claimed"]);
    assert!(
        store.claim_next(&req(30_000)).await.unwrap().is_none(),
        "the started run is held"
    );

    let again = store
        .start(new_run(2, Some("k-start")), &req(30_000))
        .await
        .unwrap();
    assert!(!again.submitted.created && again.claimed.is_none());
    assert_eq!(again.submitted.run.id, id);
    assert_eq!(store.get_run(id).await.unwrap().lease_epoch, LeaseEpoch(1));

    let mut threaded = new_run(2, None);
    threaded.thread_id = Some("t-start".into());
    let queued = store.start(threaded, &req(30_000)).await.unwrap();
    assert!(queued.submitted.created && queued.claimed.is_none());
    assert_eq!(queued.submitted.run.status, RunStatus::Queued);
}

/// A start (on PostgreSQL one statement, `postgres/start.rs`) stores what
/// a submit and then a claim of the same run store (the claim always the
/// script's transaction): the run's columns, its first step, its events
/// with their data, and the audit entry of a submit that came through a
/// channel. The start answers the run as submitted (queued, epoch 0) and as
/// claimed.
async fn a_start_writes_what_a_submit_then_a_claim_writes(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let origin = cairn_core::Origin {
        via: Some(cairn_core::Via::Api),
        token: Some("tok-1".into()),
        client: Some("127.0.0.1".into()),
        note: None,
    };
    let by = |key: &str| {
        let mut new = new_run(2, Some(key));
        new.by = Some(Actor::new("ada").from(origin.clone()));
        new.budget = Some(cairn_core::Budget {
            tokens: Some(5_000),
            ..Default::default()
        });
        new
    };
    let started = store.start(by("k-fast"), &req(30_000)).await.unwrap();
    let claimed = started.claimed.expect("a new run is claimed");
    assert_eq!(started.submitted.run.status, RunStatus::Queued);
    assert_eq!(started.submitted.run.lease_epoch, LeaseEpoch(0));
    let submitted = store.submit(by("k-slow")).await.unwrap().run;
    let slow = store.claim(submitted.id, &req(30_000)).await.unwrap();

    let (a, b) = (
        store.get_run(claimed.run.id).await.unwrap(),
        store.get_run(slow.run.id).await.unwrap(),
    );
    let same = |r: &cairn_core::RunRecord| {
        (
            r.status,
            r.lease_epoch,
            r.cursor,
            r.step_count,
            r.budget,
            r.priority,
            r.crew_fingerprint.clone(),
        )
    };
    assert_eq!(same(&a), same(&b));
    assert_eq!(
        same(&claimed.run),
        same(&a),
        "the start answers the run it stored"
    );
    let step =
        |s: &cairn_core::StepRecord| (s.idx, s.role.clone(), s.status, s.attempt, s.takeovers);
    let (_, steps_a) = store.load(a.id).await.unwrap();
    let (_, steps_b) = store.load(b.id).await.unwrap();
    assert_eq!(
        steps_a.iter().map(step).collect::<Vec<_>>(),
        steps_b.iter().map(step).collect::<Vec<_>>()
    );
    assert_eq!(
        claimed.at_cursor.as_ref().map(step),
        steps_a.first().map(step)
    );
    assert_eq!(
        claimed.at_cursor.map(|s| s.started_at),
        steps_a.first().map(|s| s.started_at)
    );

    let events = |id| {
        let store = &store;
        async move {
            let all = store.events(id).await.unwrap();
            all.into_iter()
                .map(|e| (e.seq, e.kind.as_str().to_owned(), e.data))
                .collect::<Vec<_>>()
        }
    };
    let (mut ea, eb) = (events(a.id).await, events(b.id).await);
    // The submits differ only in their idempotency keys.
    ea[0].2["idempotency_key"] = serde_json::json!("k-slow");
    assert_eq!(ea, eb);
    assert_eq!(
        ea.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
        ["run_submitted", "run_claimed"]
    );

    let audit = store
        .audit(&cairn_core::AuditFilter::default())
        .await
        .unwrap();
    let of = |id| {
        audit
            .iter()
            .filter(|e| e.run_id == Some(id))
            .map(|e| {
                (
                    e.principal.clone(),
                    e.via,
                    e.token.clone(),
                    e.client.clone(),
                    e.action.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(of(a.id), of(b.id));
    assert_eq!(
        of(a.id),
        [(
            "ada".to_owned(),
            cairn_core::Via::Api,
            Some("tok-1".to_owned()),
            Some("127.0.0.1".to_owned()),
            "run_submitted".to_owned()
        )]
    );
}

/// `ClaimRequest::read_crew`: the claim reads the run without its
/// definition and takes the caller's, but only while the run is still
/// stored under the fingerprint the caller read; a run whose crew changed
/// since is read whole. (`dir` is outside the fingerprint: it marks which
/// definition the claim returned.)
async fn a_claim_takes_the_definition_read_with_the_run_unless_its_crew_changed(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let marked = |run: &cairn_core::RunRecord| {
        let mut def = run.crew_definition.clone();
        def.dir = Some("/read/by/the/caller".into());
        Arc::new(def)
    };
    let same = store.submit(new_run(2, None)).await.unwrap().run;
    let mut claim = req(30_000);
    claim.read_crew = Some((same.crew_fingerprint.clone(), marked(&same)));
    let claimed = store.claim(same.id, &claim).await.unwrap();
    assert_eq!(
        claimed.run.crew_definition.dir.as_deref(),
        Some("/read/by/the/caller"),
        "the definition the caller read is the run's"
    );

    let changed = store.submit(new_run(2, None)).await.unwrap().run;
    let mut claim = req(30_000);
    let other = cairn_core::Fingerprint::from_stored("sha256:another-crew");
    claim.read_crew = Some((other, marked(&changed)));
    let claimed = store.claim(changed.id, &claim).await.unwrap();
    assert_eq!(
        claimed.run.crew_definition, changed.crew_definition,
        "a run stored under another fingerprint is read whole"
    );
    assert_eq!(claimed.run.lease_epoch, LeaseEpoch(1));
}

async fn claim_next_takes_runnable_runs_oldest_first(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let a = store.submit(new_run(2, None)).await.unwrap().run.id;
    let b = store.submit(new_run(2, None)).await.unwrap().run.id;
    let first = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    assert_eq!(first.run.id, a);
    assert_eq!(first.run.status, RunStatus::Running);
    assert!(!first.took_over);
    let second = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    assert_eq!(second.run.id, b);
    assert!(
        store.claim_next(&req(30_000)).await.unwrap().is_none(),
        "both are held"
    );
}

async fn an_expired_lease_is_taken_over_and_the_old_holder_cannot_heartbeat(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    let old = store.claim_next(&req(100)).await.unwrap().unwrap();
    assert_eq!(old.run.lease_epoch, LeaseEpoch(1));
    assert!(
        store.claim_next(&req(100)).await.unwrap().is_none(),
        "not expired yet"
    );
    tokio::time::sleep(Duration::from_millis(250)).await;
    let new = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    assert_eq!(new.run.id, id);
    assert_eq!(new.run.lease_epoch, LeaseEpoch(2));
    assert!(new.took_over, "the in-flight step was taken over");
    assert_eq!(new.at_cursor.unwrap().takeovers, 1);
    let lease = Duration::from_secs(30);
    assert!(
        store
            .heartbeat(id, &fence(LeaseEpoch(1)), lease)
            .await
            .unwrap()
            == Lease::Lost,
        "a zombie's heartbeat fails"
    );
    assert_eq!(
        store
            .heartbeat(id, &fence(LeaseEpoch(2)), lease)
            .await
            .unwrap(),
        Lease::Held
    );
}

async fn a_heartbeat_keeps_a_run_from_being_taken_over(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    store.submit(new_run(2, None)).await.unwrap();
    let held = store.claim_next(&req(200)).await.unwrap().unwrap();
    assert!(store
        .heartbeat(
            held.run.id,
            &fence(held.run.lease_epoch),
            Duration::from_secs(30)
        )
        .await
        .unwrap()
        .is_held());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        store.claim_next(&req(200)).await.unwrap().is_none(),
        "the lease was extended"
    );
}

both!(a_heartbeat_reports_a_cancel_request);

/// One query per beat keeps the lease and tells the holder an operator
/// asked to cancel, so a running step needs no second poller.
async fn a_heartbeat_reports_a_cancel_request(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    store.submit(new_run(2, None)).await.unwrap();
    let held = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    let (id, epoch) = (held.run.id, held.run.lease_epoch);
    let lease = Duration::from_secs(30);
    assert_eq!(
        store.heartbeat(id, &fence(epoch), lease).await.unwrap(),
        Lease::Held
    );
    store
        .act(id, Action::Cancel, &Actor::new("ops"))
        .await
        .unwrap();
    assert_eq!(
        store.heartbeat(id, &fence(epoch), lease).await.unwrap(),
        Lease::CancelRequested
    );
    assert_eq!(
        store
            .heartbeat(id, &fence(LeaseEpoch(epoch.0 + 1)), lease)
            .await
            .unwrap(),
        Lease::Lost
    );
}

both!(a_submit_wakes_a_waiting_worker);

/// PostgreSQL wakes a waiting worker as soon as a run is submitted (through
/// another connection, as another process would); SQLite just waits.
async fn a_submit_wakes_a_waiting_worker(kind: Kind) {
    let db = TestDb::of(kind).await;
    let worker = store(&db).await;
    let submitter = store(&db).await;
    if kind == Kind::Sqlite {
        let started = std::time::Instant::now();
        worker.wait_for_work(Duration::from_millis(100)).await;
        assert!(started.elapsed() >= Duration::from_millis(100));
        return;
    }
    // Let the listener connect before the notification is sent.
    worker.wait_for_work(Duration::from_millis(10)).await;
    let waiting = tokio::spawn(async move {
        let started = std::time::Instant::now();
        worker.wait_for_work(Duration::from_secs(20)).await;
        started.elapsed()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    submitter.submit(new_run(1, None)).await.unwrap();
    let waited = waiting.await.unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "woke after {waited:?}, not on the notification"
    );
}

async fn stats_count_runs_the_ready_queue_and_takeovers(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    assert_eq!(store.stats().await.unwrap(), Default::default());
    for _ in 0..3 {
        store.submit(new_run(1, None)).await.unwrap();
    }
    // One claimed with a short lease, then taken over once it expired.
    let first = store.claim_next(&req(100)).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = store.claim_next(&req(100)).await.unwrap().unwrap();
    assert_eq!(again.run.id, first.run.id);
    assert!(again.took_over);
    let stats = store.stats().await.unwrap();
    assert_eq!(
        stats.runs_by_status,
        vec![(RunStatus::Queued, 2), (RunStatus::Running, 1)]
    );
    assert_eq!(stats.ready, 2);
    assert_eq!(stats.takeovers, 1);
}

/// A backlog of 200 runs of priority 0: a run of priority 10 submitted last
/// is the next claimed. Each point is a minute's head start, so a run of
/// priority 0 submitted 11 minutes ago (its times moved back by raw SQL:
/// the test cannot wait) goes before a fresh run of priority 10, and a run
/// of priority -5 after the whole backlog.
async fn a_higher_priority_goes_first_and_an_older_run_ages_past_it(kind: Kind) {
    let (db, store) = fresh(kind).await;
    let with = |p: i64| {
        let mut run = new_run(1, None);
        run.priority = cairn_core::Priority::new(p).unwrap();
        run
    };
    let mut lows = vec![];
    for _ in 0..200 {
        lows.push(store.submit(with(0)).await.unwrap().run.id);
    }
    let late = store.submit(with(-5)).await.unwrap().run.id;
    let urgent = store.submit(with(10)).await.unwrap().run;
    assert_eq!(urgent.priority.get(), 10);
    let first = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    assert_eq!(
        first.run.id, urgent.id,
        "the urgent run goes before the backlog"
    );

    let aged = lows[150];
    let back = match kind {
        Kind::Postgres => "created_at - interval '11 minutes'",
        Kind::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', created_at, '-11 minutes')",
    };
    db.exec(&format!(
        "UPDATE runs SET created_at = {back}, claim_at = {} WHERE id = '{aged}'",
        back.replace("created_at", "claim_at")
    ))
    .await;
    let fresh = store.submit(with(10)).await.unwrap().run.id;
    let order: Vec<_> = [aged, fresh, lows[0]].to_vec();
    for want in order {
        let got = store.claim_next(&req(30_000)).await.unwrap().unwrap();
        assert_eq!(got.run.id, want);
    }
    for _ in 0..198 {
        let got = store.claim_next(&req(30_000)).await.unwrap().unwrap();
        assert_ne!(got.run.id, late, "priority -5 waits behind the backlog");
    }
    let last = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    assert_eq!(last.run.id, late);
}

/// Tenant a queues 20 runs, then tenant b 3: b's runs do not wait for a's
/// backlog but alternate with it (each tenant's runs are a second apart in
/// claim order), a run of no tenant goes by its submit time as before, and
/// a higher priority still goes first. The tenant is on the run.
async fn claims_go_round_robin_across_tenants_within_a_priority(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let of = |t: &str, p: i64| {
        let mut run = new_run(1, None);
        run.tenant = Some(cairn_core::Tenant::new(t).unwrap());
        run.priority = cairn_core::Priority::new(p).unwrap();
        run
    };
    let mut a = vec![];
    for _ in 0..20 {
        a.push(store.submit(of("a", 0)).await.unwrap().run.id);
    }
    let mut b = vec![];
    for _ in 0..3 {
        b.push(store.submit(of("b", 0)).await.unwrap().run.id);
    }
    let plain = store.submit(new_run(1, None)).await.unwrap().run.id;
    let urgent = store.submit(of("a", 10)).await.unwrap().run;
    assert_eq!(urgent.tenant.as_ref().map(|t| t.as_str()), Some("a"));
    let mut order = vec![];
    for _ in 0..25 {
        order.push(
            store
                .claim_next(&req(30_000))
                .await
                .unwrap()
                .unwrap()
                .run
                .id,
        );
    }
    assert!(store.claim_next(&req(30_000)).await.unwrap().is_none());
    assert_eq!(order[0], urgent.id, "priority first");
    let at = |id| order.iter().position(|r| *r == id).unwrap();
    // The submits took well under a second: b's first run goes right
    // after a's first, then they alternate, and the run of no tenant
    // goes by its submit time, before a's second.
    assert_eq!(
        [
            at(a[0]),
            at(b[0]),
            at(plain),
            at(a[1]),
            at(b[1]),
            at(a[2]),
            at(b[2])
        ],
        [1, 2, 3, 4, 5, 6, 7],
        "{order:?}"
    );
    let rest: Vec<_> = a.iter().map(|id| at(*id)).collect();
    assert!(
        rest.windows(2).all(|w| w[0] < w[1]),
        "a's own runs stay in order"
    );
}

/// `claim_batch` takes up to its size in claim order, queued and taken over
/// alike, in one transaction; two batches at once never claim one run twice
/// (PostgreSQL skips the rows the other holds; SQLite runs one at a time).
async fn a_claim_batch_takes_runs_in_claim_order_and_two_batches_never_share_one(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let mut ids = Vec::new();
    for _ in 0..9 {
        ids.push(store.submit(new_run(2, None)).await.unwrap().run.id);
    }
    // The first two are held under a short lease that then expires.
    let short = store.claim_batch(&req(100), 2).await.unwrap();
    let short: Vec<_> = short.iter().map(|c| c.run.id).collect();
    assert_eq!(short, ids[..2]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let first = store.claim_batch(&req(30_000), 4).await.unwrap();
    let first_ids: Vec<_> = first.iter().map(|c| c.run.id).collect();
    assert_eq!(first_ids, ids[..4], "claim order, expired leases included");
    let took_over: Vec<_> = first.iter().map(|c| c.took_over).collect();
    assert_eq!(took_over, [true, true, false, false]);
    assert!(first.iter().all(|c| c.run.status == RunStatus::Running));
    let long = req(30_000);
    let (a, b) = tokio::join!(store.claim_batch(&long, 3), store.claim_batch(&long, 3));
    let mut rest: Vec<_> = a
        .unwrap()
        .into_iter()
        .chain(b.unwrap())
        .map(|c| c.run.id)
        .collect();
    rest.sort();
    let mut want = ids[4..].to_vec();
    want.sort();
    assert_eq!(rest, want, "every other run once, none twice");
    assert!(store.claim_batch(&req(30_000), 4).await.unwrap().is_empty());
}

/// Found by the combined tree campaign (issue 47): a step taken over, then
/// stopped and carried on at the same attempt (a deferral, a budget stop
/// continued, a decided join, an answer), came back with `takeovers` 0, as
/// if a new attempt had begun: `runs show` under-reported its takeovers
/// and the crash-loop cap started counting again. Only a new attempt
/// starts the count again.
async fn a_steps_takeovers_survive_a_restart_of_the_same_attempt(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    store.claim_next(&req(100)).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    assert_eq!(taken.at_cursor.as_ref().unwrap().takeovers, 1);
    let mut stop = success(id, taken.run.lease_epoch, 0, 2);
    stop.fence = taken.fence.clone();
    stop.transition = StepTransition::Interrupted {
        error: ErrorInfo::new(ErrorKind::BudgetExceeded, "over budget", false),
    };
    store.commit_step(&stop).await.unwrap();
    store
        .act(id, Action::Continue, &Actor::new("ops"))
        .await
        .unwrap();
    let again = store.claim_next(&req(30_000)).await.unwrap().unwrap();
    let step = again.at_cursor.unwrap();
    assert_eq!(step.attempt.get(), 1, "the same attempt");
    assert_eq!(step.takeovers, 1, "its takeover still counted");
}
