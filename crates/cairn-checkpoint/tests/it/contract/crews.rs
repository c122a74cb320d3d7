//! Crew versions: every definition a run was stored with is kept once and
//! listed with its unfinished runs (`crews`), read back by fingerprint
//! (`crew_version`), and an unfinished run moves to another version only
//! as `upgrade_crew` allows: compatible, at a boundary its caller holds,
//! once, recorded; a refusal writes nothing.

use std::time::Duration;

use cairn_checkpoint::{CrewUpgrade, Error, Next, StepCommit, StepTransition};
use cairn_core::upgrade::Incompatible;
use cairn_core::{CrewDef, EventKind, Fingerprint, LeaseEpoch, RunId, RunStatus};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::{crew_of, operator, Db};
use crate::{claim_req, each, fresh, new_run, success};

both!(
    crews_lists_each_stored_version_once_with_its_unfinished_runs,
    a_queued_run_moves_to_a_compatible_version_once,
    an_incompatible_version_is_refused_unless_forced_past_a_finished_steps_kind,
    a_running_run_moves_only_for_the_holder_of_its_lease,
);

/// Version `version` of crew `alpha`: roles a, b, then `more` template
/// steps (c, d, …).
fn alpha(version: &str, more: usize) -> CrewDef {
    let roles = ["a", "b", "c", "d"];
    let agents: Vec<(&str, &str)> = roles[..2 + more].iter().map(|r| (*r, "template")).collect();
    crew_of("alpha", version, &agents)
}

async fn submit_of(store: &Db, def: &CrewDef) -> RunId {
    let mut run = new_run(1, None);
    run.crew = def.clone();
    store.submit(run).await.unwrap().run.id
}

/// [`success`] of step `idx` of a run of `def`, naming its next role.
fn done(id: RunId, epoch: LeaseEpoch, idx: u32, def: &CrewDef) -> StepCommit {
    let mut commit = success(id, epoch, idx, def.step_count());
    if let StepTransition::Succeeded {
        next: Next::Step(role),
        ..
    } = &mut commit.transition
    {
        *role = def.agents[idx as usize + 1].role.clone();
    }
    commit
}

fn to(def: &CrewDef, force: bool, held: Option<LeaseEpoch>) -> CrewUpgrade {
    CrewUpgrade {
        to: def.clone(),
        force,
        held: held.map(crate::fence),
        actor: operator("ops"),
    }
}

async fn crews_lists_each_stored_version_once_with_its_unfinished_runs(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    assert!(store.crews().await.unwrap().is_empty());
    let (v1, v2) = (alpha("1", 0), alpha("2", 1));
    let finished = submit_of(&store, &v1).await;
    submit_of(&store, &v1).await;
    // Times are kept to the millisecond: v2 is first seen after v1.
    tokio::time::sleep(Duration::from_millis(5)).await;
    submit_of(&store, &v2).await;
    store.submit(new_run(1, None)).await.unwrap();
    let c = store.claim(finished, &claim_req(false)).await.unwrap();
    for i in 0..2 {
        let commit = done(finished, c.run.lease_epoch, i, &v1);
        store.commit_step(&commit).await.unwrap();
    }

    let crews = store.crews().await.unwrap();
    let seen: Vec<(&str, &str, u64)> = crews
        .iter()
        .map(|k| (k.name.as_str(), k.version.as_str(), k.unfinished))
        .collect();
    assert_eq!(
        seen,
        [
            ("alpha", "1", 1),
            ("alpha", "2", 1),
            ("conformance", "1", 1)
        ],
        "by name then first seen; a succeeded run is finished"
    );
    assert_eq!(crews[0].fingerprint, v1.fingerprint());
    assert_eq!(crews[1].fingerprint, v2.fingerprint());
    assert!(crews[0].first_seen < crews[1].first_seen);
    submit_of(&store, &v2).await;
    let again = store.crews().await.unwrap();
    assert_eq!(again.len(), 3, "a version is stored once");
    assert_eq!(
        (again[1].unfinished, again[1].first_seen),
        (2, crews[1].first_seen)
    );

    let read = store.crew_version(&v2.fingerprint()).await.unwrap();
    assert_eq!(read, Some(v2));
    let unknown = Fingerprint::from_stored("sha256:no-such-version");
    assert_eq!(store.crew_version(&unknown).await.unwrap(), None);
}

async fn a_queued_run_moves_to_a_compatible_version_once(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (v1, v2) = (alpha("1", 0), alpha("2", 1));
    let id = submit_of(&store, &v1).await;
    let moved = store.upgrade_crew(id, &to(&v2, false, None)).await.unwrap();
    assert!(moved.moved);
    let run = &moved.run;
    assert_eq!((run.crew_version.as_str(), run.step_count), ("2", 3));
    assert_eq!(run.crew_fingerprint, v2.fingerprint());
    assert_eq!(run.crew_definition, v2);
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(store.get_run(id).await.unwrap(), moved.run, "as stored");
    let events = store.events(id).await.unwrap();
    let event = events.last().unwrap();
    assert_eq!(event.kind, EventKind::CrewUpgraded);
    assert_eq!(event.data["from"]["version"], json!("1"));
    assert_eq!(event.data["to"]["fingerprint"], json!(v2.fingerprint()));
    assert_eq!(event.data["by"], json!("ops"));
    assert_eq!(event.data["forced"], json!(false));
    let unfinished: Vec<u64> = each(store.crews().await.unwrap(), |k| k.unfinished);
    assert_eq!(unfinished, [0, 1], "the run counts for v2 now");

    let again = store.upgrade_crew(id, &to(&v2, false, None)).await.unwrap();
    assert!(!again.moved, "already there");
    assert_eq!(again.run, moved.run);
    assert_eq!(store.events(id).await.unwrap(), events, "nothing written");
}

/// A renamed started step is refused, forced or not; a finished step of
/// another kind only without `force`. Each refusal leaves run and events.
async fn an_incompatible_version_is_refused_unless_forced_past_a_finished_steps_kind(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let v1 = alpha("1", 0);
    let id = submit_of(&store, &v1).await;
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    let held = Some(c.run.lease_epoch);
    store
        .commit_step(&done(id, c.run.lease_epoch, 0, &v1))
        .await
        .unwrap();
    let before = super::stored(&store, id).await;
    let renamed = crew_of("alpha", "3", &[("x", "template"), ("b", "template")]);
    let rekinded = crew_of("alpha", "4", &[("a", "rust"), ("b", "template")]);
    let other = crew_of("beta", "1", &[("a", "template"), ("b", "template")]);
    let refusals = [
        (to(&renamed, false, held), "RoleDiffers"),
        (to(&renamed, true, held), "RoleDiffers"),
        (to(&rekinded, false, held), "KindDiffers"),
        (to(&other, true, held), "OtherCrew"),
    ];
    for (req, why) in refusals {
        match store.upgrade_crew(id, &req).await {
            Err(Error::Incompatible { run, source }) => {
                assert_eq!(run, id);
                assert!(format!("{source:?}").starts_with(why), "{why}: {source:?}");
            }
            other => panic!("{why}: expected a refusal, got {other:?}"),
        }
        let after = super::stored(&store, id).await;
        assert_eq!(after, before, "{why}: nothing written");
    }
    let forced = store
        .upgrade_crew(id, &to(&rekinded, true, held))
        .await
        .unwrap();
    assert!(forced.moved);
    assert_eq!(forced.run.crew_version, "4");
    let events = store.events(id).await.unwrap();
    let data = &events.last().unwrap().data;
    assert_eq!(data["forced"], json!(true));
    assert!(
        data["overridden"]
            .as_str()
            .is_some_and(|o| o.contains("step 0")),
        "{data}"
    );
}

async fn a_running_run_moves_only_for_the_holder_of_its_lease(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (v1, v2) = (alpha("1", 0), alpha("2", 1));
    let id = submit_of(&store, &v1).await;
    let c = store.claim(id, &claim_req(false)).await.unwrap();
    let epoch = c.run.lease_epoch;
    let before = super::stored(&store, id).await;
    for held in [None, Some(LeaseEpoch(epoch.0 - 1))] {
        match store.upgrade_crew(id, &to(&v2, false, held)).await {
            Err(Error::WrongState { run, status, .. }) => {
                assert_eq!((run, status), (id, RunStatus::Running));
            }
            other => panic!("held {held:?}: expected WrongState, got {other:?}"),
        }
        let after = super::stored(&store, id).await;
        assert_eq!(after, before, "held {held:?}: nothing written");
    }
    let moved = store
        .upgrade_crew(id, &to(&v2, false, Some(epoch)))
        .await
        .unwrap();
    assert!(moved.moved && moved.run.status == RunStatus::Running);
    assert_eq!(moved.run.lease_epoch, epoch, "the holder keeps its lease");
    // An ended run moves no more.
    for i in 0..3 {
        store.commit_step(&done(id, epoch, i, &v2)).await.unwrap();
    }
    match store
        .upgrade_crew(id, &to(&alpha("5", 2), false, None))
        .await
    {
        Err(Error::Incompatible { source, .. }) => {
            assert!(matches!(source, Incompatible::Ended { .. }), "{source:?}")
        }
        other => panic!("expected a refusal of an ended run, got {other:?}"),
    }
}
