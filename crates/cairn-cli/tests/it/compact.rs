//! `cairn compact` through the binary: it removes finished runs and says
//! how many rows went (text and `--json`), a dry run removes nothing, an
//! unfinished run is never touched, and a policy that names nothing or an
//! age that does not read exits 2 before the database is touched.

use serde_json::{json, Value};

use crate::support::{Case, Kind};

both_backends!(
    compact_removes_finished_runs_and_counts_them,
    a_compaction_without_a_criterion_or_with_a_bad_age_exits_2,
    compact_thread_touches_only_that_thread,
    events_alone_remove_events_and_keep_the_runs,
);

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
