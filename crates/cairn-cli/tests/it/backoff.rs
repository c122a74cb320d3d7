//! Retries through the `cairn` binary: a process SIGKILLed during a retry
//! back-off leaves the run queued with its `not_before`; the resume waits for
//! it and retries exactly once. Both backends.

use chrono::{DateTime, Utc};

use crate::support::{agent_sh, crew_toml, step, Case, Kind};

both_backends!(killed_during_a_back_off_the_retry_waits_for_not_before);

/// Step 1 fails on its first execution only, logging each execution's time.
fn flaky_crew(case: &Case) -> String {
    let dir = case.path("");
    let script = format!(
        "cat > /dev/null; date -u +%Y-%m-%dT%H:%M:%S.%NZ >> {d}/times.log; \
         if [ ! -e {d}/failed-once ]; then touch {d}/failed-once; echo 'flaky' >&2; exit 9; fi; \
         echo '\"fine\"'",
        d = dir.display()
    );
    let agents = [
        agent_sh("first", "cat > /dev/null; echo 1"),
        agent_sh("flaky", &script)
            + "retry = { max_attempts = 3, initial_delay_ms = 1200, jitter = 0.0 }\n",
    ];
    case.write("crew.toml", &crew_toml("backoff", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

fn times(case: &Case) -> Vec<DateTime<Utc>> {
    std::fs::read_to_string(case.path("times.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn killed_during_a_back_off_the_retry_waits_for_not_before(kind: Kind) {
    let case = Case::new(kind);
    let crew = flaky_crew(&case);
    case.killed_at(&["run", &crew], "during_backoff:1");
    let id = case.only_run_id();
    let stopped = case.show(&id);
    assert_eq!(stopped["status"], "queued", "{stopped:#}");
    assert_eq!(step(&stopped, 1)["status"], "failed");
    assert_eq!(step(&stopped, 1)["attempt"], 1);
    let not_before: DateTime<Utc> = stopped["not_before"].as_str().unwrap().parse().unwrap();
    assert_eq!(times(&case).len(), 1);

    let run = case.cairn(&["resume", &id, "--json"]).expect_code(0).json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 1)["attempt"], 2);
    assert_eq!(step(&run, 1)["output"], "fine");
    let times = times(&case);
    assert_eq!(times.len(), 2, "retried exactly once");
    assert!(
        times[1] >= not_before,
        "retried at {}, before not_before {not_before}",
        times[1]
    );
    assert!(run["not_before"].is_null());
}
