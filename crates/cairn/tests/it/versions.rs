//! Crew versions under concurrency (issue 47.11): two operators' upgrades
//! of the same runs at once, from two engines on one database. Each run
//! moves once, in one transaction, and only that transaction's upgrade
//! reports it `moved`; the other says it was already there.

use std::collections::HashMap;

use serde_json::json;

use cairn::{Actor, Crew, CrewUpgrade, Engine, EventKind, RunId, SubmitOptions, UpgradeVerdict};
use cairn_testkit::{both, Kind, TestDb};

use crate::engine;

both!(concurrent_upgrades_report_each_run_moved_once);

/// Version `version` of a two-step template crew.
fn essay(version: &str) -> Crew {
    Crew::from_toml(&format!(
        "name = \"essay\"\nversion = \"{version}\"\n\n[[agents]]\nrole = \"plan\"\n\
         kind = \"template\"\ntemplate = \"plan\"\n\n[[agents]]\nrole = \"write\"\n\
         kind = \"template\"\ntemplate = \"draft {version}\"\n"
    ))
    .unwrap()
}

fn actor(by: &str) -> Actor {
    Actor::new(by)
}

/// The run's `crew_upgraded` events.
async fn upgrades(engine: &Engine, id: RunId) -> usize {
    let events = engine.store().events(id).await.unwrap();
    crate::of_kind(&events, EventKind::CrewUpgraded).len()
}

async fn concurrent_upgrades_report_each_run_moved_once(kind: Kind) {
    let db = TestDb::of(kind).await;
    let (a, b) = (engine(&db).await, engine(&db).await);
    let (v1, v2) = (essay("1"), essay("2"));
    let mut runs = Vec::new();
    for _ in 0..120 {
        let submitted = a.submit(&v1, json!({}), SubmitOptions::default());
        runs.push(submitted.await.unwrap().run.id);
    }

    // A move that finds the run already there writes nothing and says so.
    let req = CrewUpgrade {
        to: v2.def().clone(),
        force: false,
        held: None,
        actor: actor("first"),
    };
    assert!(a.store().upgrade_crew(runs[0], &req).await.unwrap().moved);
    let again = b.store().upgrade_crew(runs[0], &req).await.unwrap();
    assert!(!again.moved);
    assert_eq!(&again.run.crew_fingerprint, v2.fingerprint());
    assert_eq!(upgrades(&a, runs[0]).await, 1);

    // Two upgrades of every run at once, planned before either moved all.
    let (by_a, by_b) = (actor("a"), actor("b"));
    let (from_a, from_b) = tokio::join!(
        a.upgrade_runs(&v2, None, false, false, &by_a),
        b.upgrade_runs(&v2, None, false, false, &by_b),
    );
    let (from_a, from_b) = (from_a.unwrap(), from_b.unwrap());
    let mut moved: HashMap<RunId, u32> = HashMap::new();
    for v in from_a.iter().chain(&from_b) {
        assert!(v.moved != v.already, "moved or already there: {v:?}");
        *moved.entry(v.run_id).or_default() += u32::from(v.moved);
    }
    assert!(
        from_a.len() + from_b.len() > runs.len() - 1,
        "the two plans overlapped: {} and {}",
        from_a.len(),
        from_b.len()
    );
    for id in &runs[1..] {
        assert_eq!(moved.get(id), Some(&1), "run {id} moved once");
        assert_eq!(upgrades(&a, *id).await, 1);
        let run = a.store().get_run(*id).await.unwrap();
        assert_eq!(&run.crew_fingerprint, v2.fingerprint());
    }
    let already: Vec<&UpgradeVerdict> =
        from_a.iter().chain(&from_b).filter(|v| v.already).collect();
    for v in &already {
        let reason = v.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("already on version 2"), "{v:?}");
    }
}
