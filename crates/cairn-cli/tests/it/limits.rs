//! Provider keys over the real wire: an OpenAI-speaking model server that
//! answers "429 Too Many Requests" with a `Retry-After` pauses its key for
//! every run on the database (no call reaches it until the pause ends, no
//! retry is spent), and operators pause and resume keys by hand, locally
//! and through `cairn serve`. A key's in-flight limit holds the calls of
//! every worker to its permits, and a killed worker's permit ends with its
//! lease. Budgets: a crew's `[budget]`, `--budget` on
//! submit and `runs continue --budget` to raise it, both ways.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use cairn_testkit::{RateLimitedModel, SlowModel};
use serde_json::Value;

use crate::support::{llm_crew, model_and_crew, serve, step, wait_until, Case, Kind, Spawned};

both_backends!(
    a_rate_limited_provider_shared_by_two_workers_fails_no_run_and_spends_no_retry,
    an_in_flight_limit_holds_calls_to_its_permits_across_two_workers,
    a_killed_worker_releases_its_permit_with_its_lease,
    a_providers_rate_limit_pauses_its_key_for_every_run_and_spends_no_retry,
    an_operator_pause_holds_every_call_until_it_is_resumed_through_the_server,
    a_crew_budget_interrupts_a_looping_agent_and_continue_raises_it_both_ways,
    a_wall_time_budget_stops_the_next_step_and_continue_raises_it,
    a_price_table_prices_the_calls_of_a_crew_with_a_dollar_budget,
    a_limits_file_declares_a_keys_limits_until_an_operator_sets_them,
);

/// One attempt only: a 429 that spent one would fail the run.
const ONE_ATTEMPT: &str = "retry = { max_attempts = 1 }\n";

fn submit(case: &Case, crew: &str) -> String {
    let out = case.cairn(&["--json", "submit", crew]).expect_code(0);
    out.json()["id"].as_str().unwrap().to_owned()
}

/// `cairn ARGS`, with `--server URL` or else `--db`.
fn cairn(case: &Case, server: Option<&str>, args: &[&str]) -> crate::support::Out {
    case.cairn_at(server, args)
}

fn keys(case: &Case, server: Option<&str>) -> Vec<Value> {
    let out = cairn(case, server, &["--json", "limits", "list"]).expect_code(0);
    out.json().as_array().unwrap().clone()
}

fn succeeded(case: &Case, ids: &[String]) -> bool {
    ids.iter().all(|id| case.show(id)["status"] == "succeeded")
}

fn kinds(case: &Case, id: &str) -> Vec<(String, Value)> {
    let events = case.events(id);
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["kind"].as_str().unwrap().to_owned(), e["data"].clone()))
        .collect()
}

fn a_providers_rate_limit_pauses_its_key_for_every_run_and_spends_no_retry(kind: Kind) {
    let case = Case::new(kind);
    let (model, crew, key) = model_and_crew(&case);
    model.refuse_next(1, "2");
    let _worker = Spawned(case.spawn(&["worker", "--poll-ms", "50", "--concurrency", "4"], &[]));
    let first = submit(&case, &crew);
    wait_until("the key to be paused", Duration::from_secs(30), || {
        keys(&case, None)
            .first()
            .is_some_and(|k| !k["paused_until"].is_null())
    });
    // Two more runs of the same key while it is paused: claimed at once,
    // they find the pause and make no call.
    let later = [submit(&case, &crew), submit(&case, &crew)];
    let mut ids = vec![first.clone()];
    ids.extend(later.iter().cloned());
    wait_until("every run to succeed", Duration::from_secs(30), || {
        succeeded(&case, &ids)
    });

    let arrivals = model.arrivals();
    assert_eq!(arrivals.len(), 4, "one refused call, then one call per run");
    let refused_at: Instant = arrivals[0];
    for (i, at) in arrivals.iter().enumerate().skip(1) {
        let after = at.duration_since(refused_at);
        assert!(
            after >= Duration::from_millis(1950),
            "call {i} reached the provider {after:?} after the 429 that asked for 2 s"
        );
    }
    for id in &ids {
        let run = case.show(id);
        assert_eq!(step(&run, 0)["attempt"], 1, "no retry spent: {run}");
        assert_eq!(step(&run, 0)["status"], "succeeded");
    }
    let first_events = kinds(&case, &first);
    let paused = first_events
        .iter()
        .find(|(k, _)| k == "key_paused")
        .unwrap();
    assert_eq!(paused.1["key"], key.as_str());
    assert!(
        paused.1["reason"].as_str().unwrap().contains("429"),
        "{paused:?}"
    );
    for id in &later {
        let deferred: Vec<_> = kinds(&case, id)
            .into_iter()
            .filter(|(k, _)| k == "step_deferred")
            .collect();
        assert!(!deferred.is_empty(), "run {id} was not deferred");
        assert!(deferred
            .iter()
            .all(|(_, d)| d["observed"] == false && d["key"] == key.as_str()));
        assert!(!kinds(&case, id).iter().any(|(k, _)| k == "key_paused"));
    }
    let listed = keys(&case, None);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let k = &listed[0];
    assert_eq!(k["key"], key.as_str());
    assert_eq!(
        (k["pauses"].as_u64(), k["deferred_runs"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(k["paused_by"], "provider");
    assert!(k["paused_until"].is_null(), "the pause is over: {k}");
}

fn an_operator_pause_holds_every_call_until_it_is_resumed_through_the_server(kind: Kind) {
    let case = Case::new(kind);
    let (model, crew, key) = model_and_crew(&case);
    let served = serve(&case, &["--concurrency", "4"], &[]);
    let server = Some(served.url.as_str());
    let pause = [
        "--json",
        "limits",
        "pause",
        &key,
        "--for",
        "1h",
        "--by",
        "ops",
        "--reason",
        "provider incident",
    ];
    let paused = cairn(&case, server, &pause).expect_code(0).json();
    assert_eq!(paused["key"], key.as_str());
    // Through a server the caller pauses (its open API's `api`); `--by`
    // is only a note.
    let expected_by = "api";
    assert_eq!(
        (paused["paused_by"].as_str(), paused["reason"].as_str()),
        (Some(expected_by), Some("provider incident"))
    );
    assert!(!paused["paused_until"].is_null());
    let line = format!("cairn_provider_key_paused{{key=\"{key}\"}} 1");
    let scraped = crate::support::metrics(&served.listen);
    assert!(scraped.contains(&line), "{line} not in:\n{scraped}");

    let id = submit(&case, &crew);
    wait_until(
        "the run to be deferred on the key",
        Duration::from_secs(30),
        || {
            keys(&case, server)
                .first()
                .is_some_and(|k| k["deferred_runs"] == 1)
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(model.requests(), 0, "no call while the key is paused");
    assert_eq!(case.show(&id)["status"], "queued");

    let resumed = cairn(&case, server, &["--json", "limits", "resume", &key])
        .expect_code(0)
        .json();
    assert!(resumed["paused_until"].is_null(), "{resumed}");
    let line = format!("cairn_provider_key_paused{{key=\"{key}\"}} 0");
    assert!(crate::support::metrics(&served.listen).contains(&line));
    // Without the resume the run would wait an hour.
    wait_until("the run to succeed", Duration::from_secs(20), || {
        succeeded(&case, std::slice::from_ref(&id))
    });
    assert_eq!(model.requests(), 1);
    assert_eq!(step(&case.show(&id), 0)["attempt"], 1);
    // The resume that woke the run is in its events, naming the key.
    let resumed: Vec<Value> = kinds(&case, &id)
        .into_iter()
        .filter(|(k, _)| k == "key_resumed")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(resumed, [serde_json::json!({"key": key})], "{resumed:?}");

    // Bad input: a key never paused, an age that does not read; both ways.
    for server in [None, server] {
        cairn(&case, server, &["limits", "resume", "provider=nope"])
            .expect_code(2)
            .expect_stderr(&["provider=nope", "not found"]);
        cairn(&case, server, &["limits", "pause", &key, "--for", "soon"])
            .expect_code(2)
            .expect_stderr(&["--for"]);
        cairn(&case, server, &["limits", "set", &key, "--rpm", "0"])
            .expect_code(2)
            .expect_stderr(&["rpm", "between 1 and"]);
    }
    assert_eq!(keys(&case, None).len(), 1, "nothing stored by the refusals");
    assert!(keys(&case, None)[0]["limits"]
        .as_object()
        .unwrap()
        .is_empty());

    // Limits set through the server, replaced locally: each way shows what
    // the other stored.
    let set = [
        "--json", "limits", "set", &key, "--rpm", "60", "--tpm", "20000",
    ];
    let limited = cairn(&case, server, &set).expect_code(0).json();
    assert_eq!(
        limited["limits"],
        serde_json::json!({"rpm": 60, "tpm": 20000})
    );
    let local = cairn(
        &case,
        None,
        &["--json", "limits", "set", &key, "--in-flight", "3"],
    );
    assert_eq!(
        local.expect_code(0).json()["limits"],
        serde_json::json!({"in_flight": 3})
    );
    let listed = keys(&case, server);
    assert_eq!(listed[0]["limits"], serde_json::json!({"in_flight": 3}));
    assert_eq!(listed[0]["permits_in_use"], 0);
}

/// A crew with a `[budget]` of 2 model calls whose scripted model always
/// asks for its tool: the run stops `interrupted` (`budget_exceeded`)
/// after two calls; `--budget model_calls=3` on submit overrides the crew;
/// `runs continue --budget model_calls=+1` raises it and carries on,
/// locally and through a server; `runs show` says what the run spent of
/// its budget.
fn a_crew_budget_interrupts_a_looping_agent_and_continue_raises_it_both_ways(kind: Kind) {
    let case = Case::new(kind);
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    let script: String = (0..10)
        .map(|i| {
            format!(
                "[[responses]]\ntool_calls = [{{ id = \"c{i}\", name = \"count\", \
                 arguments = {{}} }}]\nusage = {{ input_tokens = 10, output_tokens = 5 }}\n"
            )
        })
        .collect();
    // Beside the crews directory: the server loads every file in it.
    let script_file = case.path("loop-script.toml");
    std::fs::write(&script_file, script).unwrap();
    std::fs::write(
        crews.join("looper.toml"),
        "name = \"looper\"\nversion = \"1\"\n[budget]\nmodel_calls = 2\n\
         [[agents]]\nrole = \"loop\"\nkind = \"llm\"\nprovider = \"scripted\"\n\
         model = \"scripted\"\nscript = \"SCRIPT\"\n\
         [[agents.tools]]\nname = \"count\"\ndescription = \"Count.\"\n\
         parameters = { type = \"object\" }\ncommand = [\"sh\", \"-c\", \"cat > /dev/null; echo ok\"]\n"
            .replace("SCRIPT", script_file.to_str().unwrap()),
    )
    .unwrap();
    let crew = crews.join("looper.toml");
    let crew = crew.to_str().unwrap();
    let calls = |id: &str| -> usize {
        kinds(&case, id)
            .iter()
            .filter(|(k, d)| k == "model_called" && d.get("error").is_none())
            .count()
    };

    let run = case.cairn(&["run", crew, "--json"]).expect_code(5).json();
    let id = run["id"].as_str().unwrap().to_owned();
    assert_eq!(run["error"]["kind"], "budget_exceeded", "{run}");
    assert_eq!(calls(&id), 2);
    let after = case
        .continue_one_more_call(&id, &["--json"])
        .expect_code(5)
        .json();
    assert_eq!(after["budget"]["model_calls"], 3, "{after}");
    assert_eq!(calls(&id), 3);

    let own = case
        .cairn(&["run", crew, "--budget", "model_calls=3", "--json"])
        .expect_code(5)
        .json();
    assert_eq!(
        calls(&own_id(&own)),
        3,
        "the submit's budget overrides the crew's"
    );

    let crews = crews.to_str().unwrap();
    let served = serve(&case, &["--crews", crews, "--concurrency", "2"], &[]);
    let server = Some(served.url.as_str());
    let there = cairn(&case, server, &["submit", "looper", "--json"])
        .expect_code(0)
        .json();
    let id = there["id"].as_str().unwrap().to_owned();
    wait_until(
        "the run to stop at its budget",
        Duration::from_secs(30),
        || case.show(&id)["status"] == "interrupted",
    );
    let more = [
        "runs",
        "continue",
        &id,
        "--budget",
        "model_calls=+2",
        "--enqueue",
    ];
    cairn(&case, server, &more).expect_code(0);
    wait_until(
        "the raised run to stop again",
        Duration::from_secs(30),
        || calls(&id) == 4 && case.show(&id)["status"] == "interrupted",
    );
    let raised = kinds(&case, &id);
    assert!(raised
        .iter()
        .any(|(k, d)| k == "budget_raised" && d["budget"]["model_calls"] == 4));
    // What the run spent of its budget, both ways: in the JSON and on the
    // text's budget line.
    for server in [None, server] {
        let shown = cairn(&case, server, &["runs", "show", &id, "--json"])
            .expect_code(0)
            .json();
        assert_eq!(shown["spent"]["model_calls"], 4, "{shown}");
        assert_eq!(shown["spent"]["tokens"], 60, "{shown}");
        let text = cairn(&case, server, &["runs", "show", &id]).expect_code(0);
        crate::support::assert_contains(&text.stdout, "budget: model calls 4 of 4");
    }
    let own_run = cairn(&case, None, &["runs", "show", &own_id(&own), "--json"]);
    assert_eq!(own_run.expect_code(0).json()["spent"]["model_calls"], 3);

    for server in [None, server] {
        cairn(
            &case,
            server,
            &["runs", "continue", &id, "--budget", "model_calls=2"],
        )
        .expect_code(2)
        .expect_stderr(&["--budget", "+N"]);
        cairn(&case, server, &["submit", crew, "--budget", "dollars=5"])
            .expect_code(2)
            .expect_stderr(&["--budget", "unknown limit"]);
    }
}

/// A model that holds every answer until released, its crew and key, and
/// the key limited to `in_flight` calls at once.
fn held_model(case: &Case, in_flight: &str) -> (SlowModel, String, String) {
    let model = SlowModel::start(&["fine"], Duration::from_millis(5)).unwrap();
    let crew = case.write("crew.toml", &llm_crew(&model.base_url, ONE_ATTEMPT));
    let key = format!("provider=openai,url={},key=OPENAI_API_KEY", model.base_url);
    let set = case
        .cairn(&["--json", "limits", "set", &key, "--in-flight", in_flight])
        .expect_code(0)
        .json();
    assert_eq!(set["limits"]["in_flight"].to_string(), in_flight, "{set}");
    (model, crew.to_str().unwrap().to_owned(), key)
}

fn key_state(case: &Case) -> Value {
    keys(case, None).into_iter().next().unwrap()
}

fn an_in_flight_limit_holds_calls_to_its_permits_across_two_workers(kind: Kind) {
    let case = Case::new(kind);
    let (model, crew, _key) = held_model(&case, "2");
    let worker = ["worker", "--poll-ms", "50", "--concurrency", "4"];
    let _a = Spawned(case.spawn(&worker, &[]));
    let _b = Spawned(case.spawn(&worker, &[]));
    let ids: Vec<String> = (0..5).map(|_| submit(&case, &crew)).collect();
    wait_until("two calls in flight", Duration::from_secs(30), || {
        model.streaming() == 2
    });
    // The other three were claimed, found no permit, and wait deferred:
    // queued, holding no permit, no lease and no worker slot.
    wait_until("three runs deferred", Duration::from_secs(30), || {
        key_state(&case)["deferred_runs"] == 3
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(model.requests(), 2, "no call beyond the two permits");
    let k = key_state(&case);
    assert_eq!(k["permits_in_use"], 2, "{k}");
    model.release();
    wait_until("every run to succeed", Duration::from_secs(60), || {
        succeeded(&case, &ids)
    });
    assert_eq!(model.peak(), 2, "never more than two calls at the provider");
    assert_eq!(model.requests(), 5, "one call per run");
    for id in &ids {
        assert_eq!(step(&case.show(id), 0)["attempt"], 1, "no retry spent");
    }
    let k = key_state(&case);
    assert_eq!(
        (&k["permits_in_use"], &k["deferred_runs"]),
        (&0.into(), &0.into()),
        "{k}"
    );
}

fn a_killed_worker_releases_its_permit_with_its_lease(kind: Kind) {
    let case = Case::new(kind);
    let (model, crew, _key) = held_model(&case, "1");
    let worker = [
        "worker",
        "--poll-ms",
        "50",
        "--lease-ms",
        "1500",
        "--heartbeat-ms",
        "500",
    ];
    let mut first = Spawned(case.spawn(&worker, &[]));
    let id = submit(&case, &crew);
    wait_until("the call in flight", Duration::from_secs(30), || {
        model.requests() == 1
    });
    assert_eq!(key_state(&case)["permits_in_use"], 1);
    nix::sys::signal::kill(first.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    first.wait("the killed worker");
    // Nobody releases the dead worker's permit: it ends with its lease.
    wait_until(
        "the permit to end with the lease",
        Duration::from_secs(10),
        || key_state(&case)["permits_in_use"] == 0,
    );
    let _second = Spawned(case.spawn(&worker, &[]));
    wait_until(
        "the run taken over and called again",
        Duration::from_secs(30),
        || model.requests() == 2,
    );
    model.release();
    wait_until("the run to succeed", Duration::from_secs(30), || {
        case.show(&id)["status"] == "succeeded"
    });
    let k = key_state(&case);
    assert_eq!(k["permits_in_use"], 0, "{k}");
}

/// A provider allowing 4 requests in any 4 s, with `Retry-After` beyond,
/// called by two worker processes with 10 runs of two one-attempt `llm`
/// steps: every run succeeds, no retry is spent (a 429 that spent one would
/// fail its run), and no request reaches the provider more than 1 s into a
/// pause it announced (those within it were on the wire when the 429
/// left). How much of the provider's rate is used is measured, not
/// asserted: `cairn-bench --rate-limit`.
fn a_rate_limited_provider_shared_by_two_workers_fails_no_run_and_spends_no_retry(kind: Kind) {
    let _loaded = crate::support::loads_the_machine();
    let case = Case::new(kind);
    let model = RateLimitedModel::start(4, Duration::from_secs(4), Duration::from_secs(1)).unwrap();
    let second = format!(
        "{ONE_ATTEMPT}[[agents]]\nrole = \"editor\"\nkind = \"llm\"\nprovider = \"openai\"\n\
         model = \"slow-1\"\nbase_url = \"{}\"\n{ONE_ATTEMPT}",
        model.base_url
    );
    let crew = case.write("crew.toml", &llm_crew(&model.base_url, &second));
    let crew = crew.to_str().unwrap();
    let worker = ["worker", "--poll-ms", "50", "--concurrency", "8"];
    let _a = Spawned(case.spawn(&worker, &[("OPENAI_API_KEY", "k")]));
    let _b = Spawned(case.spawn(&worker, &[("OPENAI_API_KEY", "k")]));
    let ids: Vec<String> = (0..10).map(|_| submit(&case, crew)).collect();
    wait_until("every run to succeed", Duration::from_secs(90), || {
        succeeded(&case, &ids)
    });
    let seen = model.seen();
    assert_eq!(seen.accepted, 20, "one call per step: {seen:?}");
    assert!(seen.refused > 0, "the limit was reached: {seen:?}");
    assert_eq!(
        seen.late_in_pause, 0,
        "a call on a key known paused: {seen:?}"
    );
    for id in &ids {
        let run = case.show(id);
        assert_eq!(step(&run, 0)["attempt"], 1, "no retry spent: {run}");
        assert_eq!(step(&run, 1)["attempt"], 1, "no retry spent: {run}");
    }
}

fn own_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_owned()
}

/// A crew with `[budget] wall_time = 1` whose first step takes 2 s: its
/// second step is not started (the run stops `interrupted`,
/// `budget_exceeded`, naming the wall time), and `runs continue --budget
/// wall_time=+1h` raises it and finishes the run, the first step not run
/// again. `--budget wall_time=…` on submit overrides the crew's.
fn a_wall_time_budget_stops_the_next_step_and_continue_raises_it(kind: Kind) {
    let case = Case::new(kind);
    let log = case.path("steps.log").display().to_string();
    let slow = crate::support::agent_sh("slow", &format!("echo slow >> {log}; sleep 2; echo 1"));
    let last = crate::support::agent_sh("last", &format!("echo last >> {log}; echo 2"));
    let crew = case.write(
        "crew.toml",
        &format!(
            "{}\n[budget]\nwall_time = 1\n",
            crate::support::crew_toml("timed", &[slow, last])
        ),
    );
    let crew = crew.to_str().unwrap();
    let run = case.cairn(&["run", crew, "--json"]).expect_code(5).json();
    let id = run["id"].as_str().unwrap().to_owned();
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["error"]["kind"], "budget_exceeded", "{run}");
    let why = run["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("wall time of 1 s"), "{why}");
    assert!(
        run["spent"]["wall_time"].as_u64().unwrap_or(0) >= 2,
        "{run}"
    );
    assert_eq!(run["steps"][1]["status"], "interrupted", "{run}");
    let shown = case.cairn(&["runs", "show", &id]).expect_code(0).stdout;
    assert!(
        shown.contains("seconds 2 of 1") || shown.contains("seconds 3 of 1"),
        "{shown}"
    );
    let after = case
        .cairn(&[
            "runs",
            "continue",
            &id,
            "--budget",
            "wall_time=+1h",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(after["status"], "succeeded", "{after}");
    assert_eq!(after["budget"]["wall_time"], 3601, "{after}");
    let ran = std::fs::read_to_string(case.path("steps.log")).unwrap_or_default();
    assert_eq!(ran, "slow\nlast\n", "the first step did not run again");

    let own = case
        .cairn(&["run", crew, "--budget", "wall_time=1m", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(own["budget"]["wall_time"], 60, "{own}");
}

/// `CAIRN_PRICES` names the process's price table: a crew with `[budget]
/// cost_usd` runs under it, `runs show` says what its calls cost (as a
/// hand computation gives), and a table that does not read is a usage
/// error (exit 2) naming it, with nothing run.
fn a_price_table_prices_the_calls_of_a_crew_with_a_dollar_budget(kind: Kind) {
    let case = Case::new(kind);
    let script = case.write(
        "script.toml",
        "[[responses]]\ntool_calls = [{ id = \"c1\", name = \"count\", arguments = {} }]\n\
         usage = { input_tokens = 1000, output_tokens = 100 }\n\
         [[responses]]\ntext = \"done\"\nusage = { input_tokens = 1000, output_tokens = 100 }\n",
    );
    let crew = case.write(
        "priced.toml",
        &format!(
            "name = \"priced\"\nversion = \"1\"\n[budget]\ncost_usd = 1.0\n\
             [[agents]]\nrole = \"ask\"\nkind = \"llm\"\nprovider = \"scripted\"\n\
             model = \"scripted\"\nscript = \"{}\"\n\
             [[agents.tools]]\nname = \"count\"\ndescription = \"Count.\"\n\
             parameters = {{ type = \"object\" }}\n\
             command = [\"sh\", \"-c\", \"cat > /dev/null; echo ok\"]\n",
            script.display()
        ),
    );
    let crew = crew.to_str().unwrap();
    let prices = case.write(
        "prices.toml",
        "version = \"2026-11\"\n[[prices]]\nprovider = \"scripted\"\nmodel = \"scripted\"\n\
         input = 2.0\noutput = 10.0\n",
    );
    let priced = [("CAIRN_PRICES", prices.to_str().unwrap())];
    let run = case
        .cairn_env(&["run", crew, "--thread", "t1", "--json"], &priced)
        .expect_code(0)
        .json();
    let id = run["id"].as_str().unwrap().to_owned();
    let thread = case.cairn(&["threads", "show", "t1", "--json"]).json();
    assert_eq!(thread["totals"]["cost_usd"], 0.006, "{thread}");
    // Each call: 1,000 in × $2 + 100 out × $10 per million = $0.003.
    let shown = case.cairn(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["spent"]["cost_usd"], 0.006, "{shown}");
    assert_eq!(
        step(&shown, 0)["cost_usd"],
        0.006,
        "the step's row: {shown}"
    );
    let text = case.cairn(&["runs", "show", &id]).expect_code(0);
    for says in ["budget: cost $0.006000 of $1.000000", "cost $0.006000\n"] {
        assert!(text.stdout.contains(says), "{says}: {}", text.stdout);
    }

    // A table that does not read, or is not there: refused, nothing run.
    let bad = case.write(
        "bad.toml",
        "version = \"1\"\n[[prices]]\nprovider = \"a\"\n",
    );
    let missing = case.path("missing.toml");
    for (file, says) in [(bad, "missing field"), (missing, "CAIRN_PRICES=")] {
        let env = [("CAIRN_PRICES", file.to_str().unwrap())];
        case.cairn_env(&["run", crew, "--json"], &env)
            .expect_code(2)
            .expect_stderr(&[says, file.to_str().unwrap()]);
    }
    let runs = case.cairn(&["runs", "list", "--json"]).json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
}

/// `CAIRN_LIMITS` names the process's limits per key: a run applies them
/// to its key (listed as `config`); an operator's `limits set` wins over
/// the file on later runs; `limits reset` (here through a server) drops
/// the operator's, and the next run applies the file's again. A file that
/// does not read is a usage error (exit 2), with nothing run.
fn a_limits_file_declares_a_keys_limits_until_an_operator_sets_them(kind: Kind) {
    let case = Case::new(kind);
    let (_model, crew, key) = model_and_crew(&case);
    let file = case.write(
        "limits.toml",
        &format!("[[key]]\nkey = \"{key}\"\nin_flight = 3\nrpm = 600\n"),
    );
    let env = [("CAIRN_LIMITS", file.to_str().unwrap())];
    let run = || {
        case.cairn_env(&["run", &crew, "--json"], &env)
            .expect_code(0)
    };
    let limits = |k: &Value| (k["limits"].clone(), k["limits_from"].clone());
    let from_file = (
        serde_json::json!({"in_flight": 3, "rpm": 600}),
        "config".into(),
    );
    run();
    assert_eq!(limits(&key_state(&case)), from_file);
    let listed = case.cairn(&["limits", "list"]).expect_code(0);
    crate::support::assert_contains(&listed.stdout, "in_flight=3 rpm=600 [config]");

    case.cairn(&["limits", "set", &key, "--rpm", "5"])
        .expect_code(0);
    run();
    let operator = (serde_json::json!({"rpm": 5}), "operator".into());
    assert_eq!(
        limits(&key_state(&case)),
        operator,
        "the operator's limits stand"
    );

    let served = serve(&case, &["--concurrency", "0"], &[]);
    let reset = cairn(
        &case,
        Some(&served.url),
        &["--json", "limits", "reset", &key],
    );
    let reset = reset.expect_code(0).json();
    assert_eq!(
        limits(&reset),
        (serde_json::json!({}), Value::Null),
        "{reset}"
    );
    run();
    assert_eq!(
        limits(&key_state(&case)),
        from_file,
        "the file's limits again"
    );

    let bad = case.write("bad.toml", &format!("[[key]]\nkey = \"{key}\"\nrpm = 0\n"));
    let env = [("CAIRN_LIMITS", bad.to_str().unwrap())];
    case.cairn_env(&["run", &crew, "--json"], &env)
        .expect_code(2)
        .expect_stderr(&["CAIRN_LIMITS=", "rpm must be between 1"]);
    let runs = case.cairn(&["runs", "list", "--json"]).json();
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs}");
}
