//! Cairn through PgBouncer in transaction mode (`?pooler=transaction`):
//! Debian's `pgbouncer` in front of a database of the test's own, with two
//! server connections, so every client shares them and a named statement
//! or a `LISTEN` of one client would meet another's. A run, two workers,
//! `cairn serve` (its runner and its API) and the crash test all work
//! there. `.ci/run` installs PgBouncer and sets `CAIRN_REQUIRE_PGBOUNCER`;
//! elsewhere a missing one skips these tests with a line saying so.

use std::process::Stdio;
use std::time::Duration;

use cairn_testkit::{PgBouncer, TestDb};

use crate::support::{agent_sh, crew_toml, ran_each_step_once, serve, wait_until, Case, Spawned};

/// A PgBouncer with 2 server connections, or `None` (skip) when it is not
/// installed and not required.
fn bouncer(test: &str) -> Option<PgBouncer> {
    if !PgBouncer::installed() {
        assert!(
            std::env::var_os("CAIRN_REQUIRE_PGBOUNCER").is_none(),
            "{test}: pgbouncer is not installed (apt-get install pgbouncer)"
        );
        cairn_testkit::skip(
            test,
            "pgbouncer is not installed (apt-get install pgbouncer)",
        );
        return None;
    }
    Some(PgBouncer::start(2).unwrap_or_else(|e| panic!("{test}: {e}")))
}

/// A crew of three `command` steps, each logging `RUN IDX` to steps.log.
fn logging_crew(case: &Case) -> String {
    let script = format!(
        "echo \"$CAIRN_RUN_ID $CAIRN_STEP_IDX\" >> {}; echo '{{\"ok\": true}}'",
        case.path("steps.log").display()
    );
    let agents: Vec<String> = (0..3)
        .map(|i| agent_sh(&format!("s{i}"), &script))
        .collect();
    let crew = case.write("crew.toml", &crew_toml("pooled", &agents));
    crew.to_str().unwrap().to_owned()
}

#[test]
fn a_run_workers_and_a_server_work_through_pgbouncer_in_transaction_mode() {
    let Some(pgb) = bouncer("pooler") else { return };
    let case = Case::with_db(TestDb::postgres_at(pgb.url()));
    let crew = logging_crew(&case);

    let run = case.cairn(&["run", &crew, "--json"]).expect_code(0).json();
    assert_eq!(run["status"], "succeeded", "{run:#}\n{}", pgb.log());
    ran_each_step_once(&case.path("steps.log"), run["id"].as_str().unwrap());

    // 24 runs under two workers of four each, over two server connections.
    let ids: Vec<String> = (0..24)
        .map(|i| {
            let input = format!("{{\"i\": {i}}}");
            let out = case.cairn(&["submit", &crew, "--input", &input]);
            out.expect_code(0).stdout.trim().to_owned()
        })
        .collect();
    let _workers: Vec<Spawned> = (0..2)
        .map(|n| {
            let mut cmd = case.command();
            cmd.args(["worker", "--concurrency", "4", "--poll-ms", "50"])
                .args(["--db", case.url()])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(case.path(&format!("worker{n}.err"))).unwrap());
            Spawned(cmd.spawn().expect("spawn cairn worker"))
        })
        .collect();
    wait_until(
        "the workers to finish 24 runs",
        Duration::from_secs(90),
        || case.list().iter().all(|r| r["status"] == "succeeded"),
    );
    for id in &ids {
        ran_each_step_once(&case.path("steps.log"), id);
    }

    // A server: its runner takes a submitted run, its API reads it.
    let served = serve(&case, &["--concurrency", "2"], &[]);
    let id = case.cairn(&["submit", &crew]).expect_code(0).stdout;
    let id = id.trim();
    wait_until(
        "the server's runner to finish a run",
        Duration::from_secs(60),
        || case.show(id)["status"] == "succeeded",
    );
    ran_each_step_once(&case.path("steps.log"), id);
    let shown = case
        .raw(
            &["runs", "show", id, "--json", "--server", &served.url],
            &[],
        )
        .expect_code(0)
        .json();
    assert_eq!(shown["status"], "succeeded", "{shown:#}");
    assert_eq!(case.list().len(), 26);

    // A session setting cannot cross a transaction-mode pooler: refused,
    // saying what to do instead.
    let process = format!("{}&durability=process", case.url());
    let out = case.raw(&["runs", "list", "--db", &process], &[]);
    out.expect_one_line_error(&["durability=process", "ALTER ROLE"]);
}

#[test]
fn a_run_killed_through_pgbouncer_resumes_without_repeating_a_step() {
    let Some(pgb) = bouncer("pooler crash") else {
        return;
    };
    crate::crash::sigkill_mid_step_reruns_only_that_step(Case::with_db(TestDb::postgres_at(
        pgb.url(),
    )));
}
