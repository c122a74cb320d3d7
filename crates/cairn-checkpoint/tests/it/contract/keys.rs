//! Provider keys' pauses: `pause_key` stops a key for every run (a longer
//! pause standing wins; a provider's is held to the key's `max_pause_ms`),
//! `paused_for` says how long is left, `keys` lists it, and `resume_key`
//! ends it and makes the runs deferred on it claimable at once.

use std::time::Duration;

use cairn_checkpoint::{Error, StepTransition};
use cairn_core::{
    ErrorInfo, ErrorKind, EventKind, KeyLimits, KeyPause, KeyState, RunStatus, DEFAULT_MAX_PAUSE,
};
use cairn_testkit::{both, Kind};
use serde_json::json;

use super::{claim_by, Db};
use crate::{fresh, new_run, success};

both!(
    a_paused_key_reports_its_remaining_time_until_resumed,
    a_longer_pause_standing_wins_and_a_providers_pause_is_capped,
    resuming_a_key_makes_the_runs_deferred_on_it_claimable_now,
);

const KEY: &str = "provider=openai,url=http://127.0.0.1:9/v1,key=OPENAI_API_KEY";
const MINUTE: Duration = Duration::from_secs(60);

fn pause(key: &str, wait: Duration, by: &str) -> KeyPause {
    KeyPause {
        key: key.to_owned(),
        wait,
        reason: format!("paused by {by}"),
        by: by.to_owned(),
    }
}

/// Whether `left` is `wait` less the few seconds a slow test may take.
fn about(left: Duration, wait: Duration) -> bool {
    left <= wait && left + Duration::from_secs(5) > wait
}

async fn key(store: &Db, key: &str) -> KeyState {
    let keys = store.keys().await.unwrap();
    keys.into_iter().find(|k| k.key == key).expect("listed")
}

async fn a_paused_key_reports_its_remaining_time_until_resumed(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    assert_eq!(store.paused_for(KEY).await.unwrap(), None);
    match store.resume_key(KEY).await {
        Err(Error::KeyNotFound(k)) => assert_eq!(k, KEY),
        other => panic!("a key never paused: {other:?}"),
    }
    assert!(store.keys().await.unwrap().is_empty(), "nothing created");

    let paused = store.pause_key(&pause(KEY, MINUTE, "ops")).await.unwrap();
    assert!(about(paused.after, MINUTE), "{paused:?}");
    assert_eq!(paused.reason, "paused by ops");
    let left = store.paused_for(KEY).await.unwrap().expect("paused");
    assert!(about(left, MINUTE) && left <= paused.after, "{left:?}");
    let state = key(&store, KEY).await;
    assert!(state.paused_until.is_some() && state.paused_at.is_some());
    assert_eq!(state.reason.as_deref(), Some("paused by ops"));
    assert_eq!((state.paused_by.as_deref(), state.pauses), (Some("ops"), 1));
    assert_eq!(store.paused_for("another-key").await.unwrap(), None);

    let resumed = store.resume_key(KEY).await.unwrap();
    assert_eq!((resumed.key.as_str(), resumed.paused_until), (KEY, None));
    assert_eq!(store.paused_for(KEY).await.unwrap(), None);
    let listed = key(&store, KEY).await;
    assert_eq!(listed, resumed, "still listed, not paused");
    assert_eq!(listed.pauses, 1, "the pause that was still counts");
}

async fn a_longer_pause_standing_wins_and_a_providers_pause_is_capped(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    store.pause_key(&pause(KEY, MINUTE, "ops")).await.unwrap();
    let shorter = store
        .pause_key(&pause(KEY, Duration::from_secs(5), "ann"))
        .await
        .unwrap();
    assert!(
        about(shorter.after, MINUTE),
        "the minute stands: {shorter:?}"
    );
    let state = key(&store, KEY).await;
    assert_eq!(state.pauses, 1, "met a standing pause: not counted again");
    assert_eq!(state.paused_by.as_deref(), Some("ann"), "the last recorded");

    // A provider asking for hours is held to the default cap.
    let other = "provider=anthropic,key=ANTHROPIC_API_KEY";
    let hours = Duration::from_secs(7200);
    let capped = store
        .pause_key(&pause(other, hours, KeyPause::PROVIDER))
        .await
        .unwrap();
    assert!(about(capped.after, DEFAULT_MAX_PAUSE), "{capped:?}");
    assert!(capped.reason.contains("capped"), "{}", capped.reason);
    // ... or to the key's own `max_pause_ms`; an operator's pause is not.
    let limited = "provider=scripted,script=s.toml";
    let limits = KeyLimits {
        max_pause_ms: Some(2_000),
        ..KeyLimits::default()
    };
    store.set_limits(limited, &limits).await.unwrap();
    let provider = pause(limited, MINUTE, KeyPause::PROVIDER);
    let held = store.pause_key(&provider).await.unwrap();
    assert!(about(held.after, Duration::from_secs(2)), "{held:?}");
    let ops = store
        .pause_key(&pause(limited, MINUTE, "ops"))
        .await
        .unwrap();
    assert!(about(ops.after, MINUTE), "{ops:?}");
    let left = store.paused_for(limited).await.unwrap().unwrap();
    assert!(about(left, MINUTE), "{left:?}");
}

/// A step refused by its provider defers on the key (queued, claimable in
/// a minute) and pauses it; the resume makes it claimable at once.
async fn resuming_a_key_makes_the_runs_deferred_on_it_claimable_now(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let id = store.submit(new_run(2, None)).await.unwrap().run.id;
    let c = store.claim(id, &crate::claim_req(false)).await.unwrap();
    let mut deferral = success(id, c.run.lease_epoch, 0, 2);
    deferral.events = vec![crate::event(EventKind::StepDeferred, json!({"key": KEY}))];
    deferral.transition = StepTransition::Deferred {
        error: ErrorInfo::new(ErrorKind::RateLimited, "429: slow down", true),
        after: MINUTE,
        key: KEY.to_owned(),
        pause: true,
    };
    store.commit_step(&deferral).await.unwrap();
    assert_eq!(store.get_run(id).await.unwrap().status, RunStatus::Queued);
    let state = key(&store, KEY).await;
    assert_eq!(
        (state.deferred_runs, state.paused_by.as_deref()),
        (1, Some("provider"))
    );
    assert!(store.paused_for(KEY).await.unwrap().is_some());
    let worker = claim_by("w", MINUTE);
    assert!(
        store.claim_next(&worker).await.unwrap().is_none(),
        "deferred"
    );

    let resumed = store.resume_key(KEY).await.unwrap();
    assert_eq!(resumed.paused_until, None);
    let events = store.events(id).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.kind, last.data.clone()),
        (EventKind::KeyResumed, json!({"key": KEY}))
    );
    let claimed = store
        .claim_next(&worker)
        .await
        .unwrap()
        .expect("claimable now");
    assert_eq!(claimed.run.id, id);
    assert_eq!(
        claimed.at_cursor.unwrap().attempt.get(),
        1,
        "no retry spent"
    );
}
