//! The process registry (`WorkerStore`): a beat registers a process and adds
//! to what it offers, a leave removes it, a process that stops beating
//! expires and is forgotten an hour later; a runnable run whose crew
//! version has Rust agents no live process offers is blocked, evented
//! once per stall, and claimed only by a process that offers it.

use std::time::Duration;

use cairn_checkpoint::{Offered, ProcessBeat, ProcessRecord};
use cairn_core::{EventKind, RunId, RunStatus};
use cairn_testkit::{both, Kind};

use super::{claim_by, crew_of, Db};
use crate::{each, fresh, new_run, success};

both!(
    a_first_beat_registers_a_process_and_its_offers_grow_until_it_leaves,
    a_process_counts_the_runs_running_under_its_lease,
    a_process_that_stops_beating_expires_and_is_forgotten_an_hour_later,
    a_coded_run_no_live_process_offers_is_blocked_and_evented_once,
    a_version_is_unblocked_only_while_a_process_offering_it_lives,
);

fn coded(version: &str) -> cairn_core::CrewDef {
    crew_of("coded", version, &[("a", "rust"), ("b", "template")])
}

fn beat(id: &str, ttl: Duration, offers: Option<Vec<cairn_core::CrewDef>>) -> ProcessBeat {
    ProcessBeat {
        id: id.to_owned(),
        host: "host-1".into(),
        pid: 4242,
        ttl,
        offers,
    }
}

const LONG: Duration = Duration::from_secs(30);

async fn process(store: &Db, id: &str) -> Option<ProcessRecord> {
    let all = store.processes().await.unwrap();
    all.into_iter().find(|p| p.id == id)
}

/// Submits a run of `def`.
async fn submit_of(store: &Db, def: cairn_core::CrewDef) -> RunId {
    let mut run = new_run(1, None);
    run.crew = def;
    store.submit(run).await.unwrap().run.id
}

async fn a_first_beat_registers_a_process_and_its_offers_grow_until_it_leaves(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    assert!(store.processes().await.unwrap().is_empty());
    let v1 = coded("1");
    store
        .beat_process(&beat("w1", LONG, Some(vec![v1.clone()])))
        .await
        .unwrap();
    let first = process(&store, "w1").await.expect("registered");
    assert_eq!((first.host.as_str(), first.pid), ("host-1", 4242));
    assert!(first.live && first.held == 0);
    assert!(first.beat_at >= first.started_at && first.expires_at > first.beat_at);
    let offered_v1 = Offered {
        name: "coded".into(),
        version: "1".into(),
        fingerprint: v1.fingerprint(),
        needs_code: true,
    };
    assert_eq!(first.offers, std::slice::from_ref(&offered_v1));
    // The offered version is stored as a crew version, run or not.
    assert_eq!(
        store.crew_version(&v1.fingerprint()).await.unwrap(),
        Some(v1)
    );

    tokio::time::sleep(Duration::from_millis(20)).await;
    store.beat_process(&beat("w1", LONG, None)).await.unwrap();
    let again = process(&store, "w1").await.unwrap();
    assert_eq!(again.started_at, first.started_at, "the same registration");
    assert!(again.beat_at > first.beat_at && again.expires_at > first.expires_at);
    assert_eq!(again.offers, first.offers, "no offers: nothing changed");

    let plain = crew_of("plain", "7", &[("a", "template")]);
    store
        .beat_process(&beat("w1", LONG, Some(vec![plain.clone()])))
        .await
        .unwrap();
    let grown = process(&store, "w1").await.unwrap();
    let offered_plain = Offered {
        name: "plain".into(),
        version: "7".into(),
        fingerprint: plain.fingerprint(),
        needs_code: false,
    };
    assert_eq!(
        grown.offers,
        [offered_v1, offered_plain],
        "the union, by name"
    );

    assert!(store.leave("w1").await.unwrap());
    assert!(store.processes().await.unwrap().is_empty());
    assert!(!store.leave("w1").await.unwrap(), "already gone");
    assert!(!store.leave("never-registered").await.unwrap());
}

async fn a_process_counts_the_runs_running_under_its_lease(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    store.beat_process(&beat("w1", LONG, None)).await.unwrap();
    store.beat_process(&beat("w2", LONG, None)).await.unwrap();
    for _ in 0..3 {
        store.submit(new_run(1, None)).await.unwrap();
    }
    let mut mine = vec![];
    for _ in 0..2 {
        mine.push(
            store
                .claim_next(&claim_by("w1", LONG))
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let held = |p: Option<ProcessRecord>| p.unwrap().held;
    assert_eq!(held(process(&store, "w1").await), 2);
    assert_eq!(held(process(&store, "w2").await), 0);
    let done = &mine[0].run;
    let commit = cairn_checkpoint::StepCommit {
        fence: mine[0].fence.clone(),
        ..success(done.id, done.lease_epoch, 0, 1)
    };
    store.commit_step(&commit).await.unwrap();
    assert_eq!(
        held(process(&store, "w1").await),
        1,
        "a finished run is not held"
    );
}

async fn a_process_that_stops_beating_expires_and_is_forgotten_an_hour_later(kind: Kind) {
    let (db, store) = fresh(kind).await;
    store
        .beat_process(&beat("gone", Duration::from_millis(400), None))
        .await
        .unwrap();
    store
        .beat_process(&beat("alive", LONG, None))
        .await
        .unwrap();
    assert!(process(&store, "gone").await.unwrap().live);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let gone = process(&store, "gone").await.expect("listed while expired");
    assert!(!gone.live, "{gone:?}");
    assert!(process(&store, "alive").await.unwrap().live);
    // An hour can not be waited for: the row is aged instead.
    db.exec(match kind {
        Kind::Sqlite => {
            "UPDATE processes SET expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2 hours') \
             WHERE id = 'gone'"
        }
        Kind::Postgres => {
            "UPDATE processes SET expires_at = clock_timestamp() - interval '2 hours' \
             WHERE id = 'gone'"
        }
    })
    .await;
    store
        .beat_process(&beat("alive", LONG, None))
        .await
        .unwrap();
    let ids: Vec<String> = each(store.processes().await.unwrap(), |p| p.id);
    assert_eq!(ids, ["alive"], "forgotten at the next beat of any process");
}

async fn a_coded_run_no_live_process_offers_is_blocked_and_evented_once(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let v1 = coded("1");
    let run = submit_of(&store, v1.clone()).await;
    let plain = store.submit(new_run(1, None)).await.unwrap().run.id;
    let blocked = store.blocked().await.unwrap();
    assert_eq!(blocked.len(), 1, "only the coded run: {blocked:?}");
    assert_eq!((blocked[0].run, blocked[0].evented), (run, false));
    let what = &blocked[0].blocked;
    assert_eq!((what.crew.as_str(), what.version.as_str()), ("coded", "1"));
    assert_eq!(what.fingerprint, v1.fingerprint());
    assert_eq!(what.handlers, ["h-a"]);
    // A claimer that does not offer it passes it over.
    let taken = store
        .claim_next(&claim_by("w1", LONG))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.run.id, plain);
    assert!(store
        .claim_next(&claim_by("w1", LONG))
        .await
        .unwrap()
        .is_none());

    let swept = store.sweep_blocked().await.unwrap();
    assert_eq!(swept.iter().map(|b| b.run).collect::<Vec<_>>(), [run]);
    let events = store.events(run).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventKind::RunBlocked);
    assert_eq!(last.data["handlers"], serde_json::json!(["h-a"]));
    assert!(store.blocked().await.unwrap()[0].evented);
    assert!(
        store.sweep_blocked().await.unwrap().is_empty(),
        "once per stall"
    );
    assert_eq!(store.events(run).await.unwrap().len(), events.len());

    store
        .beat_process(&beat("w1", LONG, Some(vec![v1])))
        .await
        .unwrap();
    assert!(store.blocked().await.unwrap().is_empty());
    let claimed = store
        .claim_next(&claim_by("w1", LONG))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.run.id, run, "its offer lets w1 claim it");
    assert_eq!(claimed.run.status, RunStatus::Running);
}

/// A leave unblocks nothing any more at once; an expired beat neither; a
/// run running under an expired lease is runnable, so blocked too.
async fn a_version_is_unblocked_only_while_a_process_offering_it_lives(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let v2 = coded("2");
    let offering = |ttl| beat("w1", ttl, Some(vec![coded("2")]));
    store.beat_process(&offering(LONG)).await.unwrap();
    let run = submit_of(&store, v2).await;
    assert!(store.blocked().await.unwrap().is_empty());
    store.leave("w1").await.unwrap();
    let ids =
        |b: Vec<cairn_checkpoint::BlockedRun>| b.into_iter().map(|b| b.run).collect::<Vec<_>>();
    assert_eq!(
        ids(store.blocked().await.unwrap()),
        [run],
        "blocked at the leave"
    );

    store
        .beat_process(&offering(Duration::from_millis(400)))
        .await
        .unwrap();
    assert!(store.blocked().await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        ids(store.blocked().await.unwrap()),
        [run],
        "blocked at expiry"
    );

    // Claimed by a live offerer, it is not runnable; once its lease
    // lapses and the offerer is gone, it is blocked again.
    store.beat_process(&offering(LONG)).await.unwrap();
    let held = store
        .claim_next(&claim_by("w1", Duration::from_millis(500)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.run.id, run);
    store.leave("w1").await.unwrap();
    assert!(
        store.blocked().await.unwrap().is_empty(),
        "its lease stands"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(ids(store.blocked().await.unwrap()), [run]);
}
