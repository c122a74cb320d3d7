//! Signals between real processes, both backends: a signal sent while a
//! worker holds a step between reading it heard nothing and opening its
//! wait is consumed (the wait's commit finds it); a process killed before
//! the commit that consumes a signal leaves it buffered, and the resume
//! consumes it once; 16 concurrent sends of one id store one; a worker
//! times a wait out (its default, or a `deadline` failure); a program's
//! published values are readable while it still runs.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{agent_template, crew_toml, step, wait_until, Case, Kind, Spawned};

both_backends!(
    a_signal_sent_before_the_wait_opens_is_consumed,
    a_kill_before_the_commit_leaves_the_signal_for_the_resume,
    concurrent_sends_of_one_id_store_one_signal,
    a_worker_times_a_wait_out_to_its_default_or_fails_it,
    a_program_publishes_values_its_callers_read_while_it_runs,
);

/// Crew `name`: `order` (a template), a `paid` signal step with `extra`
/// keys, `ship`.
fn payment_crew(case: &Case, name: &str, extra: &str) -> String {
    let agents = [
        agent_template("order", "order {{ input.order }}"),
        format!("[[agents]]\nrole = \"paid\"\nkind = \"signal\"\n{extra}\n"),
        agent_template("ship", "shipped {{ outputs.paid | tojson }}"),
    ];
    case.write(&format!("{name}.toml"), &crew_toml(name, &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

/// The kinds of run `id`'s events, in order.
fn event_kinds(case: &Case, id: &str) -> Vec<String> {
    let events = case
        .cairn(&["runs", "events", id, "--json"])
        .expect_code(0)
        .json();
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// `cairn run CREW` on an order, stopped at its signal step: the run id.
#[track_caller]
fn waiting(case: &Case, crew: &str) -> String {
    let run = case
        .cairn(&["run", crew, "--input", "{\"order\": 1}", "--json"])
        .expect_code(4)
        .json();
    assert_eq!(run["status"], "waiting", "{run:#}");
    run["id"].as_str().unwrap().to_owned()
}

fn signals(case: &Case, id: &str) -> Value {
    case.cairn(&["signal", "list", id, "--json"])
        .expect_code(0)
        .json()
}

fn a_signal_sent_before_the_wait_opens_is_consumed(kind: Kind) {
    let case = Case::new(kind);
    let crew = payment_crew(&case, "payment", "signal = \"paid\"");
    // The worker holds the `paid` step 1.5 s after it read that nothing
    // was sent, before the commit that opens its wait.
    let hold = [("CAIRN_FAILPOINTS", "pause_before:listen:1500")];
    let _worker = Spawned(case.spawn(&["worker", "--poll-ms", "30"], &hold));
    let id = case
        .cairn(&[
            "submit",
            &crew,
            "--input",
            "{\"order\": 7}",
            "--idempotency-key",
            "order-7",
            "--json",
        ])
        .expect_code(0)
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until(
        "the worker to reach the wait",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(case.path("bg.stderr"))
                .unwrap_or_default()
                .contains("pause_before:listen")
        },
    );
    let sent = case
        .cairn(&[
            "signal",
            "send",
            "key:order-7",
            "paid",
            "--payload",
            "{\"amount\": 5}",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(sent["woke"], false, "no wait was open yet: {sent:#}");
    wait_until("the run to succeed", Duration::from_secs(60), || {
        case.show(&id)["status"] == "succeeded"
    });
    let run = case.show(&id);
    assert_eq!(step(&run, 1)["output"], json!({"amount": 5}), "{run:#}");
    assert_eq!(step(&run, 2)["output"], json!("shipped {\"amount\":5}"));
    let kinds = event_kinds(&case, &id);
    let at = |k: &str| {
        kinds
            .iter()
            .position(|x| x == k)
            .unwrap_or_else(|| panic!("no {k}: {kinds:?}"))
    };
    assert!(
        at("signal_received") < at("signal_wait_opened"),
        "{kinds:?}"
    );
    assert!(
        at("signal_wait_opened") < at("signal_consumed"),
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "signal_consumed").count(), 1);
    let listed = signals(&case, &id);
    assert_eq!(
        listed["signals"][0]["consumed_by"],
        json!([1, 1]),
        "{listed:#}"
    );
}

fn a_kill_before_the_commit_leaves_the_signal_for_the_resume(kind: Kind) {
    let case = Case::new(kind);
    let crew = payment_crew(&case, "payment", "signal = \"paid\"");
    let run = case
        .cairn(&[
            "run",
            &crew,
            "--input",
            "{\"order\": 8}",
            "--idempotency-key",
            "order-8",
            "--json",
        ])
        .expect_code(4)
        .json();
    assert_eq!(run["status"], "waiting", "{run:#}");
    let id = run["id"].as_str().unwrap().to_owned();
    let sent = case
        .cairn(&[
            "signal",
            "send",
            &id,
            "paid",
            "--payload",
            "{\"amount\": 8}",
            "--id",
            "evt-8",
        ])
        .expect_code(0);
    assert!(sent.stdout.contains("woke the run"), "{}", sent.stdout);
    // The resume reads the signal, then dies before its commit.
    case.killed_at(&["resume", &id], "before_commit:1");
    let listed = signals(&case, &id);
    assert_eq!(listed["signals"].as_array().unwrap().len(), 1);
    assert_eq!(
        listed["signals"][0]["consumed_at"],
        Value::Null,
        "{listed:#}"
    );
    case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    let run = case.show(&id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 1)["output"], json!({"amount": 8}));
    let listed = signals(&case, &id);
    assert_eq!(
        listed["signals"][0]["consumed_by"],
        json!([1, 1]),
        "{listed:#}"
    );
    let kinds = event_kinds(&case, &id);
    assert_eq!(
        kinds.iter().filter(|k| *k == "signal_consumed").count(),
        1,
        "{kinds:?}"
    );
}

fn concurrent_sends_of_one_id_store_one_signal(kind: Kind) {
    let case = Case::new(kind);
    let crew = payment_crew(&case, "payment", "signal = \"paid\"");
    let id = waiting(&case, &crew);
    let senders: Vec<_> = (0..16)
        .map(|i| {
            let payload = format!("{{\"try\": {i}}}");
            let args = [
                "signal",
                "send",
                &id,
                "other",
                "--id",
                "once",
                "--payload",
                &payload,
                "--json",
            ];
            let mut cmd = case.command();
            cmd.args(args).args(["--db", case.url()]);
            cmd.stdout(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let answers: Vec<Value> = senders
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let stored = answers.iter().filter(|a| a["duplicate"] == false).count();
    assert_eq!(stored, 1, "{answers:#?}");
    let first = &answers.iter().find(|a| a["duplicate"] == false).unwrap()["signal"];
    assert!(
        answers.iter().all(|a| a["signal"] == *first),
        "every send answers the first"
    );
    assert_eq!(signals(&case, &id)["signals"].as_array().unwrap().len(), 1);
}

fn a_worker_times_a_wait_out_to_its_default_or_fails_it(kind: Kind) {
    let case = Case::new(kind);
    let with_default = payment_crew(
        &case,
        "with-default",
        "signal = \"paid\"\ntimeout_ms = 800\ndefault = \"unpaid\"",
    );
    let a = waiting(&case, &with_default);
    let failing = payment_crew(
        &case,
        "failing",
        "any_of = [\"paid\", \"refused\"]\ntimeout_ms = 800",
    );
    let b = waiting(&case, &failing);
    let _worker = Spawned(case.spawn(&["worker", "--poll-ms", "30"], &[]));
    wait_until("both runs to end", Duration::from_secs(60), || {
        case.show(&a)["status"] == "succeeded" && case.show(&b)["status"] == "failed"
    });
    let ok = case.show(&a);
    assert_eq!(step(&ok, 1)["output"], json!("unpaid"), "{ok:#}");
    assert_eq!(step(&ok, 2)["output"], json!("shipped \"unpaid\""));
    let failed = case.show(&b);
    assert_eq!(failed["error"]["kind"], "deadline", "{failed:#}");
    assert_eq!(step(&failed, 1)["status"], "failed");
    for id in [&a, &b] {
        assert!(event_kinds(&case, id).contains(&"signal_timed_out".to_owned()));
    }
}

fn a_program_publishes_values_its_callers_read_while_it_runs(kind: Kind) {
    let case = Case::new(kind);
    let gate = case.path("go-on");
    let script = format!(
        r#"cat > /dev/null; echo 'cairn-publish: {{"key": "draft", "value": 1}}' >&2;
           while [ ! -e {gate} ]; do sleep 0.05; done;
           echo 'cairn-publish: {{"key": "draft", "value": 2}}' >&2;
           echo 'cairn-publish: not json' >&2;
           echo 'cairn-publish: {{"key": "final", "value": "x"}}' >&2; echo '{{}}'"#,
        gate = gate.display()
    );
    let crew = case.write(
        "publish.toml",
        &crew_toml("publish", &[crate::support::agent_sh("writer", &script)]),
    );
    let id = case
        .cairn(&["submit", crew.to_str().unwrap(), "--json"])
        .expect_code(0)
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let _worker = Spawned(case.spawn(&["worker", "--poll-ms", "30"], &[]));
    let draft = |case: &Case| {
        case.cairn(&["runs", "values", &id, "draft", "--json"])
            .expect_code(0)
            .json()
    };
    wait_until("the first draft", Duration::from_secs(30), || {
        draft(&case).as_array().is_some_and(|v| !v.is_empty())
    });
    assert_eq!(
        draft(&case)[0]["value"],
        json!(1),
        "read while the step runs"
    );
    assert_eq!(case.show(&id)["status"], "running");
    std::fs::write(&gate, "").unwrap();
    wait_until("the run to succeed", Duration::from_secs(30), || {
        case.show(&id)["status"] == "succeeded"
    });
    let all = case
        .cairn(&["runs", "values", &id, "--json"])
        .expect_code(0)
        .json();
    let pairs: Vec<(String, Value)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["key"].as_str().unwrap().to_owned(), p["value"].clone()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("draft".to_owned(), json!(2)),
            ("final".to_owned(), json!("x"))
        ],
        "the newest of each key; the bad line skipped"
    );
    let kinds = event_kinds(&case, &id);
    assert_eq!(kinds.iter().filter(|k| *k == "value_published").count(), 3);
}
