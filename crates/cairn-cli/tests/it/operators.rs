//! Operator actions through the `cairn` binary, both backends: `runs retry`
//! of a failed run (and its refusal for a succeeded one), `runs fork` (copied
//! steps are not executed again), `runs cancel` of a queued run and of a run
//! whose step is executing in another `cairn run` process; who and why are
//! recorded in the events.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{agent_sh, crew_toml, is_dead, read_pid, step, wait_until, Case, Kind};

both_backends!(
    retry_runs_the_failed_step_again_after_the_fix,
    retry_of_a_succeeded_run_is_refused,
    fork_copies_the_steps_before_it_without_running_them,
    fork_with_a_new_input_after_step_zero_is_refused,
    cancel_of_a_queued_fork,
    cancel_of_a_running_run_stops_its_step,
);

/// Three steps; the middle one fails (one attempt only) until `flag` exists.
fn flag_crew(case: &Case) -> String {
    let d = case.path("");
    let script = format!(
        "cat > /dev/null; echo 1 >> {d}/executions.log; \
         if [ -e {d}/flag ]; then echo '\"fixed\"'; else echo 'no flag yet' >&2; exit 5; fi",
        d = d.display()
    );
    let agents = [
        case.counting_agent("first"),
        agent_sh("flagged", &script) + "retry = { max_attempts = 1 }\n",
        case.counting_agent("third"),
    ];
    case.write("crew.toml", &crew_toml("flag", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

fn retry_runs_the_failed_step_again_after_the_fix(kind: Kind) {
    let case = Case::new(kind);
    let crew = flag_crew(&case);
    let run = case.cairn(&["run", &crew, "--json"]).expect_code(3).json();
    let id = run["id"].as_str().unwrap().to_owned();
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(step(&run, 1)["attempt"], 1, "{run:#}");
    assert_eq!(case.executions(), vec![0, 1], "one attempt only");

    std::fs::write(case.path("flag"), "").unwrap();
    let run = case
        .cairn(&[
            "runs",
            "retry",
            &id,
            "--by",
            "alice",
            "--reason",
            "flag created",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["error"], Value::Null, "{run:#}");
    assert_eq!(step(&run, 0)["attempt"], 1, "{run:#}");
    assert_eq!(step(&run, 1)["attempt"], 2, "{run:#}");
    assert_eq!(step(&run, 1)["output"], "fixed", "{run:#}");
    assert_eq!(step(&run, 2)["status"], "succeeded", "{run:#}");
    assert_eq!(
        case.executions(),
        vec![0, 1, 1, 2],
        "step 0 ran once; the retry started at step 1"
    );

    let retried = case.events_of(&id, "run_retried");
    assert_eq!(retried.len(), 1, "{retried:#?}");
    let data = &retried[0]["data"];
    // Locally the operating system's user acts; `--by` is kept as a note.
    assert_eq!(
        (&data["note"], &data["via"]),
        (&json!("alice"), &json!("local")),
        "{data:#}"
    );
    assert_ne!(data["by"], "alice", "{data:#}");
    assert_eq!(data["reason"], "flag created", "{data:#}");
    assert_eq!(data["step"], 1, "{data:#}");
}

fn retry_of_a_succeeded_run_is_refused(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(2);
    let run = case.run_json(&crew, 0);
    let id = run["id"].as_str().unwrap();
    let events = case.events(id);

    let out = case.cairn(&["runs", "retry", id]).expect_code(2);
    out.expect_stderr(&[id, "succeeded", "retry"]);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(case.show(id), run, "the refused retry changed the run");
    assert_eq!(case.events(id), events, "the refused retry wrote events");
    assert_eq!(case.executions(), vec![0, 1]);
}

/// A succeeded three-step counting run; returns its id and JSON.
fn succeeded_run(case: &Case) -> (String, Value) {
    let crew = case.counting_crew(3);
    let run = case
        .cairn(&[
            "run",
            crew.to_str().unwrap(),
            "--input",
            r#"{"n": 1}"#,
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(case.executions(), vec![0, 1, 2]);
    (run["id"].as_str().unwrap().to_owned(), run)
}

fn fork_copies_the_steps_before_it_without_running_them(kind: Kind) {
    let case = Case::new(kind);
    let (id, source) = succeeded_run(&case);
    let source_events = case.events(&id);

    let out = case
        .fork(&id, "1", &["--by", "erin", "--reason", "try again"])
        .expect_code(0);
    out.expect_stderr(&["forked", &id]);
    let runs = case.list();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let child_id = runs[1]["id"].as_str().unwrap().to_owned();
    assert_ne!(child_id, id);
    assert!(
        out.stdout.contains(&child_id),
        "prints the new run:\n{}",
        out.stdout
    );
    assert!(out.stderr.contains(&child_id), "{}", out.stderr);

    assert_eq!(
        case.executions(),
        vec![0, 1, 2, 1, 2],
        "the fork executed from step 1 only"
    );
    let child = case.show(&child_id);
    assert_eq!(child["status"], "succeeded", "{child:#}");
    assert_eq!(child["parent_run_id"], id.as_str(), "{child:#}");
    assert_eq!(child["input"], source["input"], "{child:#}");
    assert_eq!(
        step(&child, 0)["output"],
        step(&source, 0)["output"],
        "step 0 copied"
    );
    assert_eq!(step(&child, 0)["attempt"], 1, "{child:#}");
    assert_eq!(step(&child, 1)["status"], "succeeded", "{child:#}");
    assert_eq!(step(&child, 2)["status"], "succeeded", "{child:#}");

    let forked = case.events_of(&child_id, "run_forked");
    assert_eq!(forked.len(), 1, "{forked:#?}");
    let data = &forked[0]["data"];
    assert_eq!(data["parent"], id.as_str(), "{data:#}");
    assert_eq!(data["from_step"], 1, "{data:#}");
    assert_eq!(
        (&data["note"], &data["via"]),
        (&json!("erin"), &json!("local")),
        "{data:#}"
    );
    assert_eq!(data["reason"], "try again", "{data:#}");

    // The source is left alone.
    assert_eq!(case.show(&id), source);
    assert_eq!(case.events(&id), source_events);

    // --json prints the new run as a document.
    let json = case
        .cairn(&["runs", "fork", &id, "--from-step", "2", "--json"])
        .expect_code(0)
        .json();
    assert_ne!(json["id"], id.as_str());
    assert_ne!(json["id"], child_id.as_str());
    assert_eq!(json["status"], "succeeded", "{json:#}");
    assert_eq!(json["parent_run_id"], id.as_str(), "{json:#}");
    assert_eq!(case.executions(), vec![0, 1, 2, 1, 2, 2]);
}

fn fork_with_a_new_input_after_step_zero_is_refused(kind: Kind) {
    let case = Case::new(kind);
    let (id, _) = succeeded_run(&case);
    let out = case
        .fork(&id, "1", &["--input", r#"{"n": 2}"#])
        .expect_code(2);
    out.expect_stderr(&[&id, "--from-step 0"]);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(case.list().len(), 1, "no fork was created");
    assert_eq!(case.executions(), vec![0, 1, 2]);

    // From step 0 a new input is fine.
    let run = case
        .fork(&id, "0", &["--input", r#"{"n": 2}"#, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(run["input"]["n"], 2, "{run:#}");
    assert_eq!(case.executions(), vec![0, 1, 2, 0, 1, 2]);
}

fn cancel_of_a_queued_fork(kind: Kind) {
    let case = Case::new(kind);
    let (id, _) = succeeded_run(&case);
    let queued = case
        .fork(&id, "1", &["--enqueue", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(queued["status"], "queued", "{queued:#}");
    assert_eq!(case.executions(), vec![0, 1, 2], "--enqueue executed steps");
    let child = queued["id"].as_str().unwrap();

    let run = case
        .cairn(&[
            "runs",
            "cancel",
            child,
            "--by",
            "bob",
            "--reason",
            "not needed",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(run["status"], "cancelled", "{run:#}");
    assert!(run["finished_at"].is_string(), "{run:#}");
    let cancelled = case.events_of(child, "run_cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:#?}");
    assert_eq!(
        cancelled[0]["data"]["note"], "bob",
        "`--by` is a note locally"
    );
    assert_eq!(cancelled[0]["data"]["reason"], "not needed");

    // A cancelled run is finished: resume executes nothing.
    case.cairn(&["resume", child]).expect_code(6);
    assert_eq!(case.executions(), vec![0, 1, 2]);
    assert_eq!(case.show(child)["status"], "cancelled");
}

fn cancel_of_a_running_run_stops_its_step(kind: Kind) {
    let case = Case::new(kind);
    let pid_file = case.path("slow.pid");
    let agents = [
        agent_sh("first", "cat > /dev/null; echo '\"one\"'"),
        agent_sh(
            "slow",
            &format!(
                "cat > /dev/null; echo $$ > {p}.tmp && mv {p}.tmp {p}; exec sleep 30",
                p = pid_file.display()
            ),
        ),
        agent_sh("never", "cat > /dev/null; echo '\"never\"'"),
    ];
    let crew = case.write("crew.toml", &crew_toml("cancel", &agents));
    let mut child = case.spawn(&["run", crew.to_str().unwrap()], &[]);
    wait_until("the slow step to start", Duration::from_secs(30), || {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "cairn run exited ({status}) before the slow step started: {}",
                std::fs::read_to_string(case.path("bg.stderr")).unwrap_or_default()
            );
        }
        pid_file.exists()
    });
    let step_pid = read_pid(&pid_file);
    let id = case.only_run_id();
    assert_eq!(case.show(&id)["status"], "running");

    let out = case
        .cairn(&[
            "runs", "cancel", &id, "--by", "carol", "--reason", "too slow",
        ])
        .expect_code(0);
    out.expect_stderr(&["cancel requested"]);
    let asked = Instant::now();

    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if asked.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(step_pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("cairn run still runs 5 s after the cancel request");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(6),
        "cairn run: {status}\n{}",
        std::fs::read_to_string(case.path("bg.stderr")).unwrap_or_default()
    );
    wait_until(
        "the cancelled step's process to die",
        Duration::from_secs(2),
        || is_dead(step_pid),
    );

    let run = case.show(&id);
    assert_eq!(run["status"], "cancelled", "{run:#}");
    assert!(run["finished_at"].is_string(), "{run:#}");
    assert_eq!(run["cursor"], 1, "{run:#}");
    let slow = step(&run, 1);
    assert_eq!(slow["status"], "cancelled", "{slow:#}");
    assert_eq!(slow["output"], Value::Null, "{slow:#}");
    assert_eq!(
        run["steps"].as_array().unwrap().len(),
        2,
        "step 2 never started: {run:#}"
    );

    let requested = case.events_of(&id, "run_cancel_requested");
    assert_eq!(requested.len(), 1, "{:#}", case.events(&id));
    assert_eq!(
        requested[0]["data"]["note"], "carol",
        "`--by` is a note locally"
    );
    assert_eq!(requested[0]["data"]["reason"], "too slow");
    assert_eq!(case.events_of(&id, "run_cancelled").len(), 1);
}
