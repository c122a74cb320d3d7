//! Provider keys guarded against what a provider or a client sends (issue
//! 47): a `Retry-After` of years pauses a key no longer than its
//! `max_pause` (an operator's `limits set --max-pause`, or `max_pause_ms`
//! in `CAIRN_LIMITS`), the pause's reason says it was capped, and `cairn
//! run` and `runs watch` say the run waits on the key and until when. Key
//! names that are empty, over 1 KiB or hold a control character are
//! refused (`bad_key`), as is a pause past 36500d (`bad_age`), locally and
//! through `cairn serve`, with nothing stored; the server logs a client's
//! text escaped; `limits pause` creates a missing SQLite file as `limits
//! set` does. And (issue 46.8) `limits keys CREW` prints the key each
//! agent calls under, and a key no stored crew builds (a trailing `/`) is
//! marked by `limits set` and `limits list`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{llm_crew, model_and_crew, serve, Case, Kind, Out, Spawned};

both_backends!(
    a_retry_after_of_years_is_capped_and_cairn_run_says_the_run_waits_on_the_key,
    bad_keys_and_ages_are_refused_both_ways_and_nothing_is_stored,
    limits_keys_names_each_agents_key_and_a_key_no_crew_builds_is_marked,
);

/// A `Retry-After` of 31 years.
const YEARS: &str = "999999999";

/// `cairn ARGS` with `env`, which must succeed within 60 s (a pause of
/// years would hold it): its stdout.
fn run_within(case: &Case, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut run = Spawned(case.spawn(args, env));
    let status = run.wait("cairn run on a key paused by a 429");
    let stdout = std::fs::read_to_string(case.path("bg.stdout")).unwrap();
    assert!(status.success(), "{status:?}: {stdout}");
    stdout
}

/// The one key `limits list --json` shows.
fn only_key(case: &Case) -> Value {
    let keys = case
        .cairn(&["--json", "limits", "list"])
        .expect_code(0)
        .json();
    assert_eq!(keys.as_array().unwrap().len(), 1, "{keys}");
    keys[0].clone()
}

/// An operator's `--max-pause 2s`: a 429 asking for 31 years pauses the key
/// 2 s; `cairn run` (progress lines) says the run waits on the key, until
/// when and why, and finishes by itself; `runs watch` says the same. Then
/// `CAIRN_LIMITS`'s `max_pause_ms = 1500` caps a key without an
/// operator's limits.
fn a_retry_after_of_years_is_capped_and_cairn_run_says_the_run_waits_on_the_key(kind: Kind) {
    let case = Case::new(kind);
    let (model, crew, key) = model_and_crew(&case);
    let set = ["--json", "limits", "set", &key, "--max-pause", "2s"];
    let set = case.cairn(&set).expect_code(0).json();
    assert_eq!(set["limits"], serde_json::json!({"max_pause_ms": 2000}));
    let listed = case.cairn(&["limits", "list"]).expect_code(0);
    assert!(listed.stdout.contains("max_pause=2s"), "{}", listed.stdout);

    model.refuse_next(1, YEARS);
    let started = Instant::now();
    let run = run_within(&case, &["run", &crew, "--progress", "lines"], &[]);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    let says = [
        "deferred",
        "waits until ",
        &format!("on key {key}: "),
        "asked for 999999999s; capped at 2s",
    ];
    for said in says {
        assert!(run.contains(said), "{said}: {run}");
    }
    let reason = only_key(&case)["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("capped at 2s"), "{reason}");

    let id = case.only_run_id();
    let watched = case.cairn(&["runs", "watch", &id]).expect_code(0);
    assert!(
        watched.stdout.contains("waits until ") && watched.stdout.contains("capped at 2s"),
        "{}",
        watched.stdout
    );

    // The process's file instead of an operator: its top-level cap.
    case.cairn(&["limits", "reset", &key]).expect_code(0);
    let file = case.write("limits.toml", "max_pause_ms = 1500\n");
    let env = [("CAIRN_LIMITS", file.to_str().unwrap())];
    model.refuse_next(1, YEARS);
    let started = Instant::now();
    run_within(&case, &["run", &crew, "--json"], &env);
    assert!(started.elapsed() < Duration::from_secs(30));
    let k = only_key(&case);
    assert_eq!(
        k["limits"],
        serde_json::json!({"max_pause_ms": 1500}),
        "{k}"
    );
    assert_eq!(k["limits_from"], "config", "{k}");
    assert!(
        k["reason"].as_str().unwrap().contains("capped at 1500ms"),
        "{k}"
    );
}

/// `POST PATH` of JSON `body` on a server that needs no token: the status
/// line and the body.
fn post_json(listen: &str, path: &str, body: &Value) -> (String, Value) {
    let (status, body) = crate::support::post(listen, path, "application/json", &body.to_string());
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// `cairn ARGS`, with `--server URL` or else `--db`.
fn cairn(case: &Case, server: Option<&str>, args: &[&str]) -> Out {
    case.cairn_at(server, args)
}

fn bad_keys_and_ages_are_refused_both_ways_and_nothing_is_stored(kind: Kind) {
    let case = Case::new(kind);
    let key = "provider=openai,url=http://127.0.0.1:9/v1,key=OPENAI_API_KEY";
    // On a database not yet created, a pause creates it, as a set would.
    case.cairn(&["limits", "pause", key, "--for", "1h"])
        .expect_code(0);
    // Locally too, the change is audited, by the operating system's user.
    let audit = case.cairn(&["audit", "--json"]).expect_code(0).json();
    let paused = &audit.as_array().unwrap()[0];
    assert_eq!(
        (&paused["action"], &paused["via"], &paused["detail"]["key"]),
        (
            &Value::from("key_paused"),
            &Value::from("local"),
            &Value::from(key)
        )
    );
    let served = serve(&case, &["--concurrency", "0"], &[]);
    let long = "k".repeat(2000);
    let bad_keys = ["", "  ", &long, "provider=a\nforged", "a\u{1b}[31mb"];
    for server in [None, Some(served.url.as_str())] {
        for bad in bad_keys {
            cairn(&case, server, &["limits", "pause", bad, "--for", "1m"])
                .expect_code(2)
                .expect_stderr(&["bad provider key"]);
            cairn(&case, server, &["limits", "set", bad, "--rpm", "1"])
                .expect_code(2)
                .expect_stderr(&["bad provider key"]);
        }
        cairn(
            &case,
            server,
            &["limits", "pause", key, "--for", "3000000d"],
        )
        .expect_code(2)
        .expect_stderr(&["3000000d", "36500d"]);
        for age in ["3000000d", "0s", "500ms"] {
            cairn(&case, server, &["limits", "set", key, "--max-pause", age])
                .expect_code(2)
                .expect_stderr(&["max_pause_ms must be between 1000 and"]);
        }
    }
    for (pause, code) in [
        (serde_json::json!({"key": long, "for": "1m"}), "bad_key"),
        (
            serde_json::json!({"key": key, "for": "3000000d"}),
            "bad_age",
        ),
    ] {
        let (status, body) = post_json(&served.listen, "/v1/limits/pause", &pause);
        assert!(status.contains(" 400 "), "{status}");
        assert_eq!(body["error"]["code"], code, "{body}");
    }
    let listed = crate::support::get_text(&served.listen, "/v1/limits");
    assert!(listed.len() < 2000, "{} bytes: {listed}", listed.len());
    let keys: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(keys.as_array().unwrap().len(), 1, "{keys}");
    let until = keys[0]["paused_until"].as_str().unwrap();
    let until = chrono::DateTime::parse_from_rfc3339(until).unwrap();
    assert!(
        until < chrono::Utc::now() + chrono::Duration::hours(2),
        "{keys}"
    );

    // A client's newline is logged escaped, whatever logs it (a pause, a
    // cancel): no forged line in the log.
    let by = "ops\nFORGED cairn: provider key resumed";
    let pause = ["limits", "pause", key, "--for", "1m", "--by", by];
    cairn(&case, Some(&served.url), &pause).expect_code(0);
    let id = case.submit(&case.counting_crew(1));
    let cancel = ["runs", "cancel", &id, "--by", by];
    cairn(&case, Some(&served.url), &cancel).expect_code(0);
    let log = std::fs::read_to_string(case.path("serve.err")).unwrap();
    assert_eq!(log.matches("ops\\nFORGED").count(), 2, "{log}");
    assert!(!log.lines().any(|l| l.starts_with("FORGED")), "{log}");
}

/// Issue 46.8: a key had to be guessed, and a wrong guess (a trailing `/`
/// in its URL) was stored silently, limiting nothing. `limits keys CREW`
/// prints the key its `llm` agent calls under; `limits set` of the wrong
/// one says no stored crew builds it (and stores it: a key may be set
/// before its crew), of the right one says nothing; `limits list` marks
/// the wrong one (`*`, and `built_by` empty in `--json`). The same
/// through `cairn serve`.
fn limits_keys_names_each_agents_key_and_a_key_no_crew_builds_is_marked(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.write("crew.toml", &llm_crew("http://127.0.0.1:9/v1", ""));
    case.submit(&crew);
    let right = "provider=openai,url=http://127.0.0.1:9/v1,key=OPENAI_API_KEY";
    let wrong = "provider=openai,url=http://127.0.0.1:9/v1/,key=OPENAI_API_KEY";
    let served = serve(&case, &["--concurrency", "0"], &[]);
    for server in [None, Some(served.url.as_str())] {
        let keys = cairn(&case, server, &["--json", "limits", "keys", "slow"])
            .expect_code(0)
            .json();
        assert_eq!(keys[0]["role"], "writer", "{keys}");
        assert_eq!(keys[0]["kind"], "llm", "{keys}");
        assert_eq!(keys[0]["key"], right, "{keys}");
        let text = cairn(&case, server, &["limits", "keys", "slow"]).expect_code(0);
        assert!(text.stdout.contains(right), "{}", text.stdout);

        let set = cairn(&case, server, &["limits", "set", wrong, "--rpm", "5"]).expect_code(0);
        set.expect_stderr(&["no stored crew builds the key", "limits keys CREW"]);
        let set = cairn(&case, server, &["limits", "set", right, "--rpm", "5"]).expect_code(0);
        assert!(!set.stderr.contains("no stored crew"), "{}", set.stderr);

        let listed = cairn(&case, server, &["--json", "limits", "list"])
            .expect_code(0)
            .json();
        let of = |key: &str| {
            listed
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["key"] == key)
                .cloned()
                .unwrap()
        };
        assert_eq!(of(wrong)["built_by"], serde_json::json!([]), "{listed}");
        assert_eq!(of(right)["built_by"][0]["role"], "writer", "{listed}");
        assert_eq!(of(right)["limits"]["rpm"], 5, "{listed}");
        let table = cairn(&case, server, &["limits", "list"])
            .expect_code(0)
            .stdout;
        assert!(table.contains(&format!("{wrong}*")), "{table}");
        assert!(!table.contains(&format!("{right}*")), "{table}");
        assert!(table.contains("no stored crew builds this key"), "{table}");
    }
}
