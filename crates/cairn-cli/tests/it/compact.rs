//! `cairn compact` through the binary: it removes finished runs and says
//! how many rows went (text and `--json`), a dry run removes nothing, an
//! unfinished run is never touched, and a policy that names nothing or an
//! age that does not read exits 2 before the database is touched. A worker
//! SIGTERMed as it starts (a retention pass due) exits 0.

use std::time::Duration;

use cairn::{Crew, RunFilter, RunId, RunStatus, SubmitOptions};
use nix::sys::signal::{kill, Signal};
use serde_json::{json, Value};

use crate::support::{
    agent_sh, agent_template, crew_toml, env_u64, in_process, ran_each_step_once, wait_until, Case,
    Kind, Spawned,
};

both_backends!(
    compact_removes_finished_runs_and_counts_them,
    a_compaction_without_a_criterion_or_with_a_bad_age_exits_2,
    compact_thread_touches_only_that_thread,
    events_alone_remove_events_and_keep_the_runs,
    a_worker_told_to_stop_as_it_starts_stops_cleanly,
);

/// A SIGTERM right after a worker's first line (its retention pass due at
/// once) ends it cleanly, exit 0: its signal handlers are in place before
/// that line, not only once its loop first waits (a full-suite run saw a
/// worker killed by the signal's default action there).
fn a_worker_told_to_stop_as_it_starts_stops_cleanly(kind: Kind) {
    let case = Case::new(kind);
    case.cairn(&["run", case.counting_crew(1).to_str().unwrap()])
        .expect_code(0);
    for round in 0..3 {
        let stderr = case.path(&format!("worker-{round}.stderr"));
        let mut cmd = case.command();
        cmd.args(["worker", "--db", case.url(), "--poll-ms", "50"])
            .args(["--compact-every", "1s", "--finished-older-than", "0s"])
            .env("CAIRN_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut worker = Spawned(cmd.spawn().expect("spawn cairn worker"));
        wait_until("the worker's first line", Duration::from_secs(20), || {
            std::fs::read_to_string(&stderr)
                .unwrap_or_default()
                .contains("cairn worker")
        });
        kill(worker.pid(), Signal::SIGTERM).unwrap();
        let status = worker.wait("worker");
        let said = std::fs::read_to_string(&stderr).unwrap_or_default();
        assert_eq!(status.code(), Some(0), "round {round}: {status}\n{said}");
        // It says that it stops, and that it stopped, as `serve` does.
        assert!(
            said.contains("stopping: no new claims") && said.contains("stopped"),
            "round {round}: {said}"
        );
    }
}

/// `--thread ID` applies the flags to that thread's runs only.
fn compact_thread_touches_only_that_thread(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(1);
    let crew = crew.to_str().unwrap();
    for thread in ["a", "a", "b"] {
        case.cairn(&["run", crew, "--thread", thread])
            .expect_code(0);
    }
    case.cairn(&["run", crew]).expect_code(0);
    let removed = case
        .cairn(&[
            "compact",
            "--finished-older-than",
            "0s",
            "--thread",
            "a",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(removed["runs"], 2, "{removed}");
    let left: Vec<Value> = case.list();
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|r| r["thread_id"] != "a"), "{left:#?}");
}

/// `--journals --events-older-than` without an age for whole runs (which
/// removed nothing before: a left-out criterion bound NULL under `NOT`)
/// removes the events and keeps the run; its dry run says the same.
fn events_alone_remove_events_and_keep_the_runs(kind: Kind) {
    let case = Case::new(kind);
    let agents = [crate::support::agent_template(
        "t",
        "hello {{ input.topic }}",
    )];
    let crew = case.write("crew.toml", &crate::support::crew_toml("j", &agents));
    let crew = crew.to_str().unwrap();
    case.cairn(&["run", crew, "--input", r#"{"topic": "x"}"#])
        .expect_code(0);
    let dry = case
        .cairn(&[
            "compact",
            "--journals",
            "--events-older-than",
            "0s",
            "--dry-run",
            "--json",
        ])
        .expect_code(0)
        .json();
    let removed = case
        .cairn(&[
            "compact",
            "--journals",
            "--events-older-than",
            "0s",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(dry, removed);
    assert_eq!(removed["runs"], 0, "{removed}");
    assert!(removed["events"].as_u64().unwrap() > 0, "{removed}");
    assert_eq!(case.list().len(), 1);
}

fn compact_removes_finished_runs_and_counts_them(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(2);
    let crew = crew.to_str().unwrap();
    for _ in 0..2 {
        case.cairn(&["run", crew]).expect_code(0);
    }
    let queued = case.cairn(&["submit", crew]).expect_code(0);
    let queued = queued.stdout.trim().to_owned();
    let before = case.show(&queued);

    let args = ["compact", "--finished-older-than", "0s", "--json"];
    let dry = case
        .cairn(&[&args[..], &["--dry-run"]].concat())
        .expect_code(0)
        .json();
    assert_eq!(case.list().len(), 3, "a dry run removes nothing");
    let removed = case.cairn(&args).expect_code(0).json();
    assert_eq!(removed, dry, "the dry run counted what went");
    // Two runs of two steps, each with its events.
    assert_eq!(removed["runs"], 2);
    assert_eq!(removed["steps"], 4);
    assert!(removed["events"].as_u64().unwrap() >= 2 * 3, "{removed}");
    assert_eq!(removed["waits"], json!(0));
    let left: Vec<Value> = case.list();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], queued.as_str());
    assert_eq!(case.show(&queued), before, "the queued run is untouched");
    // Text: the same counts.
    let text = case
        .cairn(&["compact", "--finished-older-than", "0s"])
        .expect_code(0);
    assert_eq!(
        text.stdout.trim(),
        "removed 0 runs, 0 steps, 0 events, 0 journal items, 0 waits"
    );
}

fn a_compaction_without_a_criterion_or_with_a_bad_age_exits_2(kind: Kind) {
    let case = Case::new(kind);
    case.cairn(&["compact"])
        .expect_code(2)
        .expect_stderr(&["say what to remove"]);
    case.cairn(&["compact", "--dry-run"])
        .expect_code(2)
        .expect_stderr(&["say what to remove"]);
    case.cairn(&["compact", "--events-older-than", "3 days"])
        .expect_code(2)
        .expect_stderr(&["--events-older-than", "is not an age"]);
}

both_backends!(a_worker_compacts_on_an_interval);

/// `cairn worker --compact-every`: the worker runs the policy on its own,
/// removes the finished runs, and logs each pass with its counts; a policy
/// without an interval is refused.
fn a_worker_compacts_on_an_interval(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(1);
    let crew = crew.to_str().unwrap();
    for _ in 0..3 {
        case.cairn(&["run", crew]).expect_code(0);
    }
    case.cairn(&["worker", "--finished-older-than", "0s"])
        .expect_code(2)
        .expect_stderr(&["needs --compact-every"]);
    let stderr = case.path("worker.stderr");
    let mut worker = case
        .command()
        .args(["worker", "--poll-ms", "50", "--compact-every", "1h"])
        .args(["--finished-older-than", "0s", "--db", case.url()])
        .env("CAIRN_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // The pass is logged after it committed: wait for the log line.
    while !std::fs::read_to_string(&stderr)
        .unwrap_or_default()
        .contains("retention pass")
    {
        if std::time::Instant::now() > deadline {
            let _ = worker.kill();
            panic!(
                "the worker did not compact: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = worker.kill();
    let _ = worker.wait();
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(
        log.contains("retention pass") && log.contains("runs=3"),
        "{log}"
    );
}

both_backends!(vacuum_gives_the_space_back);

/// `compact --vacuum`: on SQLite the file shrinks once the runs are gone;
/// on PostgreSQL Cairn's tables are vacuumed. Refused with a dry run (clap)
/// and with `--server` before anything is removed.
fn vacuum_gives_the_space_back(kind: Kind) {
    let case = Case::new(kind);
    // Ten runs of a step whose output is about 400 KB.
    let big = crate::support::agent_sh(
        "big",
        "cat > /dev/null; head -c 300000 /dev/zero | base64 -w0 | sed 's/.*/\"&\"/'",
    );
    let crew = case.write("big.toml", &crate::support::crew_toml("big", &[big]));
    for _ in 0..10 {
        case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
    }
    let size = || match kind {
        Kind::Sqlite => {
            let file = crate::support::sqlite_path(case.url());
            std::fs::metadata(file).map(|m| m.len()).unwrap_or(0)
        }
        Kind::Postgres => 0,
    };
    let before = size();

    let out = case.cairn(&[
        "compact",
        "--finished-older-than",
        "0s",
        "--dry-run",
        "--vacuum",
    ]);
    out.expect_code(2);
    let out = case.raw(
        &[
            "compact",
            "--finished-older-than",
            "0s",
            "--vacuum",
            "--server",
            "http://127.0.0.1:9",
        ],
        &[],
    );
    let out = out.expect_code(2);
    assert!(out.stderr.contains("--vacuum"), "{}", out.stderr);
    assert_eq!(case.list().len(), 10, "a refused vacuum removed nothing");

    let out = case
        .cairn(&["compact", "--finished-older-than", "0s", "--vacuum"])
        .expect_code(0);
    assert!(out.stdout.starts_with("removed 10 runs"), "{}", out.stdout);
    assert!(out.stderr.contains("vacuumed"), "{}", out.stderr);
    assert!(case.list().is_empty());
    if matches!(kind, Kind::Sqlite) {
        let after = size();
        assert!(
            after * 4 < before,
            "the file did not shrink: {before} bytes before, {after} after"
        );
    }
    case.cairn(&["doctor"]).expect_code(0);
}

both_backends!(compaction_killed_mid_pass_under_load_removes_only_finished_runs);

/// The compaction campaign (docs/reliability.md): rounds of 210 more
/// finished runs (more than one of the pass's 200-run batches) beside a
/// worker executing a stream of new runs of three slow `command` steps, and
/// a `cairn compact --finished-older-than 0s` pass SIGKILLed after a seeded
/// random 5-85 ms if it has not ended (`CAIRN_CAMPAIGN_KILLS` rounds,
/// default 5; `CAIRN_CAMPAIGN_RUNS` finished runs per round). Afterwards:
/// every run the worker executed succeeded with each step run exactly once
/// (a compaction never removed or disturbed a run before it finished), a
/// dry run counts exactly what the real pass then removes, nothing is left,
/// and `cairn doctor` is clean.
fn compaction_killed_mid_pass_under_load_removes_only_finished_runs(kind: Kind) {
    let _load = crate::support::loads_the_machine();
    let rounds = env_u64("CAIRN_CAMPAIGN_KILLS").unwrap_or(5);
    let per_round = env_u64("CAIRN_CAMPAIGN_RUNS").unwrap_or(210);
    let case = Case::new(kind);
    let quick = case.write(
        "quick.toml",
        &crew_toml("quick", &[agent_template("t", "hello {{ input.i }}")]),
    );
    let log = case.path("steps.log");
    let script = format!(
        "echo \"$CAIRN_RUN_ID $CAIRN_STEP_IDX\" >> {}; sleep 0.05; echo '{{\"ok\": true}}'",
        log.display()
    );
    let agents: Vec<String> = (0..3)
        .map(|i| agent_sh(&format!("s{i}"), &script))
        .collect();
    let slow = case.write("slow.toml", &crew_toml("slow", &agents));
    let (rt, engine) = in_process(&case);
    let quick = Crew::from_file(&quick).expect("the quick crew");
    let slow = Crew::from_file(&slow).expect("the slow crew");
    let finish = |n: u64| {
        for i in 0..n {
            rt.block_on(engine.run(&quick, json!({ "i": i }), SubmitOptions::default()))
                .expect("a quick run");
        }
    };
    let finished_left = || {
        let quick = RunFilter {
            crew: Some("quick".into()),
            limit: Some(1_000_000),
            ..RunFilter::default()
        };
        rt.block_on(engine.list(&quick)).expect("list runs").len()
    };
    let mut load = vec![];
    let submit = |n: usize, load: &mut Vec<RunId>| {
        for _ in 0..n {
            let s = rt
                .block_on(engine.submit(&slow, json!({}), SubmitOptions::default()))
                .expect("submit a slow run");
            load.push(s.run.id);
        }
    };
    submit(8, &mut load);
    let _worker = Spawned(case.spawn(
        &["worker", "--concurrency", "4", "--poll-ms", "20"],
        &[("CAIRN_LOG", "warn")],
    ));
    let mut rng = 0x5eed_u64;
    let (mut killed, mut mid_pass, mut completed) = (0, 0, 0);
    for _ in 0..rounds {
        finish(per_round);
        submit(2, &mut load);
        let before = finished_left();
        let mut cmd = case.command();
        cmd.args(["compact", "--finished-older-than", "0s", "--db", case.url()])
            .stdout(std::process::Stdio::null());
        let mut pass = Spawned(cmd.spawn().expect("spawn cairn compact"));
        rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        std::thread::sleep(Duration::from_millis(5 + (rng >> 33) % 80));
        match pass.0.try_wait().expect("try_wait") {
            Some(status) => {
                assert!(status.success(), "a compaction pass failed: {status}");
                completed += 1;
            }
            None => {
                kill(pass.pid(), Signal::SIGKILL).expect("SIGKILL");
                pass.wait("the killed compaction");
                killed += 1;
                let after = finished_left();
                if after > 0 && after < before {
                    mid_pass += 1;
                }
            }
        }
    }
    wait_until(
        "the worker to finish every run",
        Duration::from_secs(120),
        || {
            load.iter().all(|id| {
                rt.block_on(engine.get_run(*id))
                    .map_or(true, |r| r.status == RunStatus::Succeeded)
            })
        },
    );
    for id in &load {
        ran_each_step_once(&log, &id.to_string());
    }
    let args = ["compact", "--finished-older-than", "0s", "--json"];
    let dry = case
        .cairn(&[&args[..], &["--dry-run"]].concat())
        .expect_code(0)
        .json();
    let left = case.list().len() as u64;
    let removed = case.cairn(&args).expect_code(0).json();
    assert_eq!(dry, removed, "the dry run counted what went");
    assert_eq!(removed["runs"], left, "{removed}");
    assert!(case.list().is_empty(), "{:#?}", case.list());
    case.cairn(&["doctor"]).expect_code(0);
    println!(
        "compaction campaign {kind:?}: {} finished runs, {} runs under load, \
         {killed} passes killed ({mid_pass} with part of their runs removed), \
         {completed} completed, the last pass removed {left} runs",
        rounds * per_round,
        load.len()
    );
}
