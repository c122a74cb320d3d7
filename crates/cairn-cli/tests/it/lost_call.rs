//! A model call lost to a crash is counted (issue 47): `cairn run` is
//! SIGKILLed while its call is at the provider, again and again, each time
//! resumed by a takeover. Every call is recorded as sent, at its estimate
//! (input plus `max_tokens`), before its request leaves, so the calls the
//! provider served never exceed the run's budget by more than one call's
//! estimate; without that record each kill's call was free and the run
//! called on for ever.

use std::time::Duration;

use cairn_testkit::SlowModel;
use nix::sys::signal::{kill, Signal};

use crate::support::{llm_crew, wait_until, Case, Spawned};

both_backends!(calls_lost_to_kills_count_against_the_budget);

const BUDGET: u64 = 1500;

fn calls_lost_to_kills_count_against_the_budget(kind: cairn_testkit::Kind) {
    let case = Case::new(kind);
    // Held: no request is ever answered, so every kill is mid-call.
    let model = SlowModel::start(&["never"], Duration::from_millis(1)).unwrap();
    let crew = case.write(
        "slow.toml",
        &llm_crew(&model.base_url, "max_tokens = 100\n"),
    );
    let crew = crew.to_str().unwrap();
    let budget = format!("tokens={BUDGET}");
    let mut args = vec!["run", crew, "--input", "{}", "--budget", &budget];
    let (mut kills, mut id) = (0, String::new());
    let end = loop {
        let before = model.requests();
        let mut child = Spawned(case.spawn(&args, &[]));
        let called = || model.requests() > before;
        wait_until("a call, or the end", Duration::from_secs(30), || {
            called() || matches!(child.0.try_wait(), Ok(Some(_)))
        });
        if id.is_empty() {
            id = case.list()[0]["id"].as_str().unwrap().to_owned();
        }
        if !called() {
            let end = child.wait("the end");
            if end.code() == Some(3) {
                // Three takeovers of one attempt fail it `crash_loop`; an
                // operator's retry is a new attempt of the same budget.
                assert_eq!(case.show(&id)["error"]["kind"], "crash_loop");
                args = vec!["runs", "retry", &id];
                continue;
            }
            break end;
        }
        kill(child.pid(), Signal::SIGKILL).unwrap();
        child.wait("the kill");
        kills += 1;
        assert!(kills <= 30, "the run never stopped calling");
        args = vec!["resume", &id, "--takeover"];
    };
    // The last resume found the budget spent: interrupted, no call made.
    assert_eq!(
        end.code(),
        Some(5),
        "{}",
        std::fs::read_to_string(case.path("bg.stderr")).unwrap()
    );
    let run = case.show(&id);
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["error"]["kind"], "budget_exceeded", "{run}");
    assert!(kills >= 8, "{kills} kills mid-call");
    // Every request the provider served was recorded sent, and what they
    // were counted at passes the budget by at most one call's estimate.
    let sent = case.events_of(&id, "model_call_sent");
    assert_eq!(sent.len(), model.requests(), "{sent:?}");
    let estimate = |e: &serde_json::Value| {
        e["data"]["estimate_input"].as_u64().unwrap()
            + e["data"]["estimate_output"].as_u64().unwrap()
    };
    let served: u64 = sent.iter().map(estimate).sum();
    let one = sent.iter().map(estimate).max().unwrap();
    assert!(
        served <= BUDGET + one,
        "{served} served past {BUDGET} + {one}"
    );
    assert_eq!(run["spent"]["tokens"], served, "{run}");
    assert_eq!(run["spent"]["model_calls"], kills, "{run}");
}
