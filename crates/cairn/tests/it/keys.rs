//! Provider keys narrowed by `limit_key`, both backends: with `["model"]`,
//! a provider's 429 pauses only the model that was refused; a run calling
//! another model with the same API key goes on at once (with `["tenant"]`,
//! a run of another tenant). A command step's
//! `limit_key` runs its program under a key's limits. A `Retry-After` of
//! years pauses a key no longer than its `max_pause_ms` (15 minutes by
//! default), and the pause's reason says it was capped.

use std::time::{Duration, Instant};

use serde_json::json;

use cairn::{Crew, RunStatus, SubmitOptions};
use cairn_testkit::{both, Kind, SlowModel};

both!(
    a_429_pauses_only_the_model_refused_when_keys_are_narrowed_by_model,
    a_429_pauses_only_the_tenant_refused_when_keys_are_narrowed_by_tenant,
    a_command_step_runs_under_its_keys_in_flight_limit,
    a_crews_declared_limit_applies_to_its_key,
    a_retry_after_of_years_pauses_a_key_no_longer_than_its_max_pause,
);

/// A one-step crew calling `model` on the local server, its key narrowed
/// by `limit_key`.
fn crew(server: &SlowModel, model: &str, limit_key: &str) -> Crew {
    Crew::from_toml(&format!(
        "name = \"{model}\"\nversion = \"1\"\n[[agents]]\nrole = \"ask\"\nkind = \"llm\"\n\
         provider = \"openai\"\nmodel = \"{model}\"\nbase_url = \"{}\"\n\
         limit_key = {limit_key}\nretry = {{ max_attempts = 1 }}\n",
        server.base_url
    ))
    .unwrap()
}

async fn a_429_pauses_only_the_model_refused_when_keys_are_narrowed_by_model(kind: Kind) {
    let server = SlowModel::start(&["fine"], Duration::from_millis(1)).unwrap();
    let by_model = r#"["model", "team=research"]"#;
    let (big, small) = (
        crew(&server, "big-1", by_model),
        crew(&server, "small-1", by_model),
    );
    let plain = SubmitOptions::default;
    let suffix = ",model=big-1,team=research";
    only_the_refused_key_pauses(kind, &server, (big, plain()), (small, plain()), suffix).await;
}

/// With `limit_key = ["tenant"]`, one model: a 429 for tenant a's run
/// pauses only tenant a's key; tenant b's run goes on at once.
async fn a_429_pauses_only_the_tenant_refused_when_keys_are_narrowed_by_tenant(kind: Kind) {
    let server = SlowModel::start(&["fine"], Duration::from_millis(1)).unwrap();
    let model = crew(&server, "m-1", r#"["tenant"]"#);
    let of = |t: &str| SubmitOptions {
        tenant: Some(t.into()),
        ..SubmitOptions::default()
    };
    let (a, b) = ((model.clone(), of("a")), (model, of("b")));
    only_the_refused_key_pauses(kind, &server, a, b, "key=OPENAI_API_KEY,tenant=a").await;
}

/// The first run is refused with a 3 s `Retry-After`: exactly its key is
/// paused (its name ends in `suffix`), the other run goes on at once, and
/// the first is called again only after the pause.
async fn only_the_refused_key_pauses(
    kind: Kind,
    server: &SlowModel,
    (first, first_opts): (Crew, SubmitOptions),
    (other, other_opts): (Crew, SubmitOptions),
    suffix: &str,
) {
    let (_db, engine) = super::opened(kind).await;
    server.release();
    server.refuse_next(1, "3");
    let first = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run(&first, json!({}), first_opts).await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.keys().await.unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no key was paused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let keys = engine.keys().await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].key.ends_with(suffix), "{keys:?}");
    let other = engine.run(&other, json!({}), other_opts).await.unwrap().run;
    assert_eq!(other.status, RunStatus::Succeeded, "{:?}", other.error);
    let arrivals = server.arrivals();
    assert!(
        arrivals[1].duration_since(arrivals[0]) < Duration::from_millis(2500),
        "the other run waited for the pause"
    );
    let first = first.await.unwrap().unwrap().run;
    assert_eq!(first.status, RunStatus::Succeeded, "{:?}", first.error);
    let waited = server.arrivals()[2].duration_since(arrivals[0]);
    assert!(waited >= Duration::from_millis(2900), "{waited:?}");
}

/// A command step with `limit_key` runs under the key's limits: with one
/// in flight, three runs' programs never overlap (a lock directory each
/// takes), the others waiting at their attempt (deferred, none spent).
async fn a_command_step_runs_under_its_keys_in_flight_limit(kind: Kind) {
    one_program_at_a_time(kind, None).await;
}

/// The same limit declared by the crew (`limits = { in_flight = 1 }`)
/// instead of set by an operator: it applies, and the key shows it as the
/// crew's.
async fn a_crews_declared_limit_applies_to_its_key(kind: Kind) {
    one_program_at_a_time(kind, Some("limits = { in_flight = 1 }\n")).await;
}

async fn one_program_at_a_time(kind: Kind, declared: Option<&str>) {
    let (_db, engine) = super::opened(kind).await;
    let scratch = tempfile::tempdir().unwrap();
    let (lock, overlap) = (scratch.path().join("lock"), scratch.path().join("overlap"));
    let crew = Crew::from_toml(&format!(
        "name = \"scraper\"\nversion = \"1\"\n[[agents]]\nrole = \"fetch\"\nkind = \"command\"\n\
         limit_key = [\"service=scraper\"]\nretry = {{ max_attempts = 1 }}\n{}\
         command = [\"sh\", \"-c\", \"cat > /dev/null; mkdir {lock} || touch {overlap}; \
         sleep 0.3; rmdir {lock}; echo ok\"]\n",
        declared.unwrap_or_default(),
        lock = lock.display(),
        overlap = overlap.display()
    ))
    .unwrap();
    let one = cairn::KeyLimits {
        in_flight: Some(1),
        ..cairn::KeyLimits::default()
    };
    if declared.is_none() {
        engine.set_limits("service=scraper", &one).await.unwrap();
    }
    let runs: Vec<_> = (0..3)
        .map(|_| {
            let (engine, crew) = (engine.clone(), crew.clone());
            tokio::spawn(
                async move { engine.run(&crew, json!({}), SubmitOptions::default()).await },
            )
        })
        .collect();
    let mut deferred = 0;
    for run in runs {
        let run = run.await.unwrap().unwrap().run;
        assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
        let view = engine.show(run.id).await.unwrap();
        assert_eq!(view.steps[0].attempt.get(), 1, "a wait spends no attempt");
        let events = engine.events(run.id).await.unwrap();
        deferred += events
            .iter()
            .filter(|e| e.kind == cairn::EventKind::StepDeferred)
            .count();
    }
    assert!(!overlap.exists(), "two programs ran at once");
    assert!(deferred >= 1, "a run waited for the permit");
    let key = &engine.keys().await.unwrap()[0];
    let from = match declared {
        Some(_) => cairn::LimitsFrom::Crew,
        None => cairn::LimitsFrom::Operator,
    };
    assert_eq!((key.limits, key.limits_from), (one, Some(from)), "{key:?}");
}

/// A 429 with `Retry-After: 999999999` (31 years): the key is paused for
/// the default 15 minutes, not until 2058, and its reason says what the
/// provider asked and what was kept. A key whose `max_pause_ms` is 1 s is
/// paused 1 s, and its run goes on by itself.
async fn a_retry_after_of_years_pauses_a_key_no_longer_than_its_max_pause(kind: Kind) {
    let server = SlowModel::start(&["fine"], Duration::from_millis(1)).unwrap();
    server.release();
    let (_db, engine) = super::opened(kind).await;
    let (default, short) = (
        crew(&server, "default-1", r#"["model"]"#),
        crew(&server, "short-1", r#"["model"]"#),
    );
    server.refuse_next(1, "999999999");
    let stuck = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .run(&default, json!({}), SubmitOptions::default())
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let paused = loop {
        let keys = engine.keys().await.unwrap();
        if let Some(k) = keys.into_iter().find(|k| k.paused_until.is_some()) {
            break k;
        }
        assert!(Instant::now() < deadline, "no key was paused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stuck.abort();
    let left = paused.paused_until.unwrap() - chrono::Utc::now();
    assert!(
        left <= chrono::Duration::minutes(15) && left > chrono::Duration::minutes(14),
        "paused for {left:?}: {paused:?}"
    );
    let reason = paused.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("429") && reason.contains("asked for 999999999s; capped at 15m"),
        "{reason}"
    );

    let key = paused.key.replace("default-1", "short-1");
    let one_second = cairn::KeyLimits {
        max_pause_ms: Some(1000),
        ..cairn::KeyLimits::default()
    };
    engine.set_limits(&key, &one_second).await.unwrap();
    server.refuse_next(1, "999999999");
    let started = Instant::now();
    let run = engine
        .run(&short, json!({}), SubmitOptions::default())
        .await;
    let run = run.unwrap().run;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let events = engine.events(run.id).await.unwrap();
    let deferred = events
        .iter()
        .find(|e| e.kind == cairn::EventKind::StepDeferred)
        .expect("the step was deferred");
    let delay = deferred.data["delay_ms"].as_u64().unwrap_or(0);
    assert!((900..=1000).contains(&delay), "{:?}", deferred.data);
    let short_key = engine.keys().await.unwrap();
    let short_key = short_key.iter().find(|k| k.key == key).unwrap();
    let reason = short_key.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("capped at 1s"), "{reason}");
}
