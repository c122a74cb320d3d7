//! Exit codes and failures, both backends: a failing step parks the run
//! (exit 3, the error stored on the step), resume refuses a failed run and
//! executes nothing for a finished one, and idempotency keys return the same
//! run or refuse a different input.

use serde_json::Value;

use crate::support::{crew_toml, step, Case, Kind};

both_backends!(
    failing_step_exits_3_and_records_the_error,
    resume_of_a_failed_run_is_refused,
    resume_of_a_succeeded_run_executes_nothing,
    idempotency_key_returns_the_same_run,
    idempotency_key_with_another_input_is_refused,
);

/// Three steps; step 1 fails every time, with two attempts and a short
/// back-off between them.
fn failing_crew(case: &Case) -> String {
    let agents = [
        case.counting_agent("first"),
        case.failing_agent("second") + "retry = { max_attempts = 2, initial_delay_ms = 20 }\n",
        case.counting_agent("third"),
    ];
    case.write("crew.toml", &crew_toml("fails", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

fn run_failing(case: &Case) -> Value {
    let crew = failing_crew(case);
    let run = case.cairn(&["run", &crew, "--json"]).expect_code(3).json();
    assert_eq!(
        case.executions(),
        vec![0, 1, 1],
        "step 1 ran twice: its two attempts"
    );
    run
}

fn failing_step_exits_3_and_records_the_error(kind: Kind) {
    let case = Case::new(kind);
    let run = run_failing(&case);
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["cursor"], 1, "{run:#}");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "no row for step 2: {run:#}");

    let first = step(&run, 0);
    assert_eq!(first["status"], "succeeded", "{first:#}");
    assert_eq!(first["output"]["step"], 0, "{first:#}");
    assert_eq!(first["error"], Value::Null);

    let failed = step(&run, 1);
    assert_eq!(failed["role"], "second");
    assert_eq!(failed["status"], "failed", "{failed:#}");
    assert_eq!(failed["attempt"], 2, "{failed:#}");
    assert_eq!(failed["output"], Value::Null, "{failed:#}");
    assert!(failed["finished_at"].is_string(), "{failed:#}");
    let error = &failed["error"];
    assert_eq!(error["kind"], "exit_status", "{error:#}");
    assert_eq!(error["retryable"], true, "{error:#}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("boom: step 1 is on fire"),
        "the stderr tail is missing: {message}"
    );
    assert!(
        message.contains('7'),
        "the exit status is missing: {message}"
    );
    assert_eq!(run["error"]["kind"], "exit_status", "{run:#}");

    // The text table shows the error too.
    let id = run["id"].as_str().unwrap();
    let text = case.cairn(&["runs", "show", id]).expect_code(0);
    crate::support::assert_contains(&text.stdout, "boom: step 1 is on fire");
}

fn resume_of_a_failed_run_is_refused(kind: Kind) {
    let case = Case::new(kind);
    let run = run_failing(&case);
    let id = run["id"].as_str().unwrap();
    let before = case.show(id);
    let events = case.events(id);

    let out = case.cairn(&["resume", id]).expect_code(3);
    out.expect_stderr(&["retry", id]);
    assert_eq!(
        case.executions(),
        vec![0, 1, 1],
        "resume executed something"
    );
    assert_eq!(case.show(id), before, "resume changed the run");
    assert_eq!(case.events(id), events, "resume wrote events");
}

fn resume_of_a_succeeded_run_executes_nothing(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(3);
    let run = case.run_json(&crew, 0);
    let id = run["id"].as_str().unwrap();
    assert_eq!(case.executions(), vec![0, 1, 2]);
    let events = case.events(id);

    let out = case.cairn(&["resume", id]).expect_code(0);
    out.expect_stderr(&["nothing executed"]);
    let json = case.cairn(&["resume", id, "--json"]).expect_code(0).json();
    assert_eq!(json, run, "resume --json prints the stored run");
    assert_eq!(case.executions(), vec![0, 1, 2], "resume executed a step");
    assert_eq!(case.show(id), run, "resume changed the run");
    assert_eq!(case.events(id), events, "resume wrote events");
}

fn idempotency_key_returns_the_same_run(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(3);
    let crew = crew.to_str().unwrap();
    let args = [
        "run",
        crew,
        "--input",
        r#"{"n": 1}"#,
        "--idempotency-key",
        "order-42",
        "--json",
    ];
    let first = case.cairn(&args).expect_code(0).json();
    assert_eq!(first["idempotency_key"], "order-42");
    assert_eq!(case.executions(), vec![0, 1, 2]);

    let second = case.cairn(&args).expect_code(0).json();
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second, first);
    assert_eq!(
        case.executions(),
        vec![0, 1, 2],
        "the re-run executed steps"
    );
    assert_eq!(case.list().len(), 1);
}

fn idempotency_key_with_another_input_is_refused(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(3);
    let crew = crew.to_str().unwrap();
    let run = |input: &str| {
        case.cairn(&[
            "run",
            crew,
            "--input",
            input,
            "--idempotency-key",
            "order-42",
            "--json",
        ])
    };
    let first = run(r#"{"n": 1}"#).expect_code(0).json();
    let id = first["id"].as_str().unwrap();

    let out = run(r#"{"n": 2}"#).expect_code(2);
    out.expect_stderr(&["order-42", id]);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(case.executions(), vec![0, 1, 2], "the refused run executed");
    assert_eq!(case.list().len(), 1);
    assert_eq!(case.show(id), first);
}

mod submit_only {
    //! `cairn submit` enqueues without executing; `cairn resume` then runs it.
    use crate::support::{agent_sh, crew_toml, Case, Kind};

    both_backends!(submit_enqueues_and_resume_executes);

    fn submit_enqueues_and_resume_executes(kind: Kind) {
        let case = Case::new(kind);
        let script = format!(
            "cat > /dev/null; echo ran >> {}; echo '\"done\"'",
            case.path("ran.log").display()
        );
        let crew = case.write(
            "crew.toml",
            &crew_toml("queued", &[agent_sh("only", &script)]),
        );
        let crew = crew.to_str().unwrap();
        let out = case
            .cairn(&["submit", crew, "--input", "{\"n\": 1}"])
            .expect_code(0);
        let id = out.stdout.trim().to_owned();
        assert_eq!(case.show(&id)["status"], "queued");
        assert!(!case.path("ran.log").exists(), "submit executed nothing");
        let again = case
            .cairn(&["submit", crew, "--input", "{\"n\": 1}", "--json"])
            .expect_code(0)
            .json();
        assert_ne!(again["id"], id.as_str(), "no key: a new run");
        assert_eq!(again["status"], "queued");
        case.cairn(&["resume", &id]).expect_code(0);
        assert_eq!(case.show(&id)["status"], "succeeded");
        assert_eq!(
            std::fs::read_to_string(case.path("ran.log")).unwrap(),
            "ran\n"
        );
    }
}
