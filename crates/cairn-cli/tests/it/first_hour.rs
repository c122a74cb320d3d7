//! The first hour of a new user (issue 14): what `run` prints while it
//! runs and when it stops, what a waiting run says, outputs in text, Ctrl-C,
//! closed pipes, help texts, capped input files, a retry under a fixed
//! crew, and errors that name the database.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{agent_sh, agent_template, crew_toml, q, wait_until, Case, Kind};

both_backends!(
    retry_with_a_fixed_crew_keeps_finished_steps,
    a_fork_runs_with_a_fixed_crew,
);

/// A step that waits until the file `go` exists in the case directory,
/// after saying it started (`started`).
fn gated_agent(case: &Case, role: &str) -> String {
    let dir = case.path("");
    let script = format!(
        "cat > /dev/null; touch {started}; while [ ! -f {go} ]; do sleep 0.02; done; echo '{{\"gated\": true}}'",
        started = q(&dir.join("started").display().to_string()),
        go = q(&dir.join("go").display().to_string()),
    );
    agent_sh(role, &script)
}

/// Reads a file written by a background process (empty if not yet there).
fn read(case: &Case, name: &str) -> String {
    std::fs::read_to_string(case.path(name)).unwrap_or_default()
}

/// `--progress lines` prints the run id, then a line per step as it
/// finishes, while the run is still going; the document follows at the end.
#[test]
fn run_prints_progress_lines_before_the_run_ends() {
    let case = Case::new(Kind::Sqlite);
    let agents = [
        agent_sh("first", "cat > /dev/null; echo '{\"n\": 1}'"),
        gated_agent(&case, "second"),
    ];
    let crew = case.write("crew.toml", &crew_toml("gated", &agents));
    let mut child = case.spawn(&["run", crew.to_str().unwrap(), "--progress", "lines"], &[]);
    wait_until("the first step's line", Duration::from_secs(30), || {
        read(&case, "bg.stdout").contains("first          succeeded")
    });
    // The run is still executing step 1: the lines came before its end.
    assert!(child.try_wait().unwrap().is_none());
    let so_far = read(&case, "bg.stdout");
    let id = case.only_run_id();
    assert!(
        so_far.starts_with(&format!("run {id}  crew gated v1  2 steps\n")),
        "{so_far}"
    );
    assert!(!so_far.contains("second         succeeded"), "{so_far}");
    std::fs::write(case.path("go"), "").unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let out = read(&case, "bg.stdout");
    assert!(out.contains("second         succeeded"), "{out}");
    // Each step's row once: the lines are the table, not printed again
    // (with other durations) under the final status.
    assert_eq!(out.matches("second         succeeded").count(), 1, "{out}");
    assert_eq!(out.matches("first          succeeded").count(), 1, "{out}");
    // Then the run as `runs show` prints it, with its result.
    assert!(out.contains("status succeeded"), "{out}");
    assert!(
        out.contains("result (step 1, second):\n  {\n    \"gated\": true\n  }"),
        "{out}"
    );
}

/// Without a terminal (and by default) `run` prints one document: no
/// progress lines, exactly one run header.
#[test]
fn run_without_a_terminal_prints_one_document() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(2);
    let out = case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
    let headers = out.stdout.lines().filter(|l| l.starts_with("run ")).count();
    assert_eq!(headers, 1, "{}", out.stdout);
    assert!(out.stdout.contains("status succeeded"), "{}", out.stdout);
    // --json stays the single JSON document even with --progress lines.
    let out = case
        .cairn(&[
            "run",
            crew.to_str().unwrap(),
            "--json",
            "--progress",
            "lines",
        ])
        .expect_code(0);
    assert_eq!(out.json()["status"], "succeeded");
}

/// Ctrl-C during `run` says where the run is and how to resume it, exits
/// 130, and `cairn resume` then finishes it without rerunning finished steps.
#[test]
fn ctrl_c_prints_the_resume_command_and_exits_130() {
    let case = Case::new(Kind::Sqlite);
    let agents = [case.counting_agent("first"), gated_agent(&case, "second")];
    let crew = case.write("crew.toml", &crew_toml("gated", &agents));
    let mut child = case.spawn(&["run", crew.to_str().unwrap()], &[]);
    wait_until("step 1 to start", Duration::from_secs(30), || {
        case.path("started").exists()
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{status:?} {}",
        read(&case, "bg.stderr")
    );
    let id = case.only_run_id();
    let stderr = read(&case, "bg.stderr");
    let resume = format!("cairn --db {} resume {id}\n", case.url());
    assert!(stderr.contains(&resume), "{stderr}");
    std::fs::write(case.path("go"), "").unwrap();
    // The lease of the interrupted process is still live, but its holder
    // is gone: the command as printed (no `--takeover`) takes it over.
    let out = case.cairn(&["resume", &id, "--json"]).expect_code(0);
    assert_eq!(out.json()["status"], "succeeded");
    assert_eq!(case.executed(0), 1);
}

/// A SIGKILLed `run` leaves a live lease; a plain `resume` on the same
/// machine sees its holder is gone and takes the run over at once. While
/// the holder lives, a plain `resume` is refused, and the error names the
/// whole command that takes it over (run id and `--db`).
#[test]
fn a_plain_resume_takes_over_from_a_killed_run_but_not_a_live_one() {
    let case = Case::new(Kind::Sqlite);
    let agents = [case.counting_agent("first"), gated_agent(&case, "second")];
    let crew = case.write("crew.toml", &crew_toml("gated", &agents));
    let mut child = crate::support::Spawned(case.spawn(&["run", crew.to_str().unwrap()], &[]));
    wait_until("step 1 to start", Duration::from_secs(30), || {
        case.path("started").exists()
    });
    let id = case.only_run_id();
    // The holder is alive: refused, with the command that would steal it.
    let out = case.cairn(&["resume", &id]);
    // SIGKILL: the lease stays live for its 30 s, but nobody holds it.
    kill(child.pid(), Signal::SIGKILL).unwrap();
    child.wait("the killed run");
    assert_ne!(out.code(), Some(0), "{}", out.stdout);
    let takeover = format!("cairn --db {} resume {id} --takeover", case.url());
    assert!(out.stderr.contains("live lease"), "{}", out.stderr);
    assert!(out.stderr.contains(&takeover), "{}", out.stderr);
    std::fs::write(case.path("go"), "").unwrap();
    let out = case.cairn(&["resume", &id, "--json"]).expect_code(0);
    assert_eq!(out.json()["status"], "succeeded");
    assert_eq!(case.executed(0), 1, "the finished step did not run again");
}

/// `run` and `runs show` print the final output (cut when long, pretty
/// JSON); `--outputs` every step's; `--step N` one step's, whole.
#[test]
fn outputs_are_shown_in_text() {
    let case = Case::new(Kind::Sqlite);
    let long = "cat > /dev/null; i=0; printf '['; while [ $i -lt 99 ]; do printf '%s,' $i; i=$((i+1)); done; echo '99]'";
    let agents = [
        agent_sh("numbers", long),
        agent_template("writer", "{{ outputs.numbers | length }} numbers"),
    ];
    let crew = case.write("crew.toml", &crew_toml("outs", &agents));
    let out = case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
    assert!(
        out.stdout
            .contains("result (step 1, writer):\n  100 numbers\n"),
        "{}",
        out.stdout
    );
    let id = case.only_run_id();

    let show = case.cairn(&["runs", "show", &id]).expect_code(0);
    assert!(show.stdout.contains("100 numbers"), "{}", show.stdout);
    assert!(!show.stdout.contains("output of step 0"), "{}", show.stdout);

    // Every step's output; the 102-line array is cut at 40 lines.
    let all = case
        .cairn(&["runs", "show", &id, "--outputs"])
        .expect_code(0);
    assert!(
        all.stdout
            .contains("output of step 0 (numbers):\n  [\n    0,\n"),
        "{}",
        all.stdout
    );
    assert!(!all.stdout.contains("    99\n"), "{}", all.stdout);
    let cut = format!(
        "… cut (62 more lines): `cairn --db {} runs show {id} --step 0` prints it whole",
        case.url()
    );
    assert!(all.stdout.contains(&cut), "{}", all.stdout);
    assert!(
        all.stdout
            .contains("output of step 1 (writer):\n  100 numbers"),
        "{}",
        all.stdout
    );

    // One step, whole.
    let one = case
        .cairn(&["runs", "show", &id, "--step", "0"])
        .expect_code(0);
    assert!(one.stdout.contains("    99\n  ]"), "{}", one.stdout);
    assert!(!one.stdout.contains("writer"), "{}", one.stdout);
    let step = case
        .cairn(&["runs", "show", &id, "--step", "0", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(step["role"], "numbers");
    assert_eq!(step["output"].as_array().map(Vec::len), Some(100));
    // A step the run does not have is bad usage.
    case.cairn(&["runs", "show", &id, "--step", "7"])
        .expect_code(2);
}

/// A waiting run prints the open wait's id, kind and the command that
/// answers it; `waits list` shows open waits unless --all; answering a
/// closed wait points to the open one; a reviewed step's duration leaves
/// out the review.
#[test]
fn a_waiting_run_says_what_to_do() {
    let case = Case::new(Kind::Sqlite);
    let review =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/review.toml");
    let out = case
        .cairn(&[
            "run",
            review.to_str().unwrap(),
            "--input",
            r#"{"topic": "t"}"#,
        ])
        .expect_code(4);
    let waits = case
        .cairn(&["waits", "list", "--status", "open", "--json"])
        .expect_code(0)
        .json();
    let first = waits[0]["id"].as_str().unwrap().to_owned();
    let answer = format!("cairn --db {} waits answer {first} --approve", case.url());
    crate::support::assert_contains(&out.stdout, &format!("wait {first} (review)"));
    assert!(out.stdout.contains(&answer), "{}", out.stdout);

    // Let the review take a while, then approve: the publisher's approval opens.
    std::thread::sleep(Duration::from_millis(300));
    let out = case
        .cairn(&["waits", "answer", &first, "--approve"])
        .expect_code(4);
    let open = case
        .cairn(&["waits", "list", "--status", "open", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(open.as_array().map(Vec::len), Some(1), "{open}");
    let second = open[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(open[0]["kind"], "approval");
    assert!(
        out.stdout
            .contains(&format!("waits answer {second} --approve")),
        "{}",
        out.stdout
    );
    // The JSON array holds the same records as the text (the open wait);
    // `--all` every wait, in either form.
    let open = case
        .cairn(&["waits", "list", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(open.as_array().map(Vec::len), Some(1), "{open}");
    assert_eq!(open[0]["id"], second.as_str(), "{open}");
    let all = case
        .cairn(&["waits", "list", "--json", "--all"])
        .expect_code(0)
        .json();
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");
    let text = case.cairn(&["waits", "list"]).expect_code(0);
    assert!(
        !text.stdout.contains(&first) && text.stdout.contains(&second),
        "{}",
        text.stdout
    );
    let text = case.cairn(&["waits", "list", "--all"]).expect_code(0);
    assert!(
        text.stdout.contains(&first) && text.stdout.contains(&second),
        "{}",
        text.stdout
    );

    // The answered review again, differently: refused, pointing to the open wait.
    let out = case
        .cairn(&["waits", "answer", &first, "--reject", "no"])
        .expect_code(2);
    out.expect_one_line_error(&["answered", &format!("waits answer {second} --approve")]);

    // The writer's row lasted at least the 300 ms review; the table's
    // duration leaves the review out and shows it as waited.
    let run = case.show(open[0]["run_id"].as_str().unwrap());
    let started =
        chrono::DateTime::parse_from_rfc3339(run["steps"][0]["started_at"].as_str().unwrap())
            .unwrap();
    let finished =
        chrono::DateTime::parse_from_rfc3339(run["steps"][0]["finished_at"].as_str().unwrap())
            .unwrap();
    let row_ms = (finished - started).num_milliseconds();
    let show = case
        .cairn(&["runs", "show", run["id"].as_str().unwrap()])
        .expect_code(0);
    assert!(show.stdout.contains("waited"), "{}", show.stdout);
    let writer = show
        .stdout
        .lines()
        .find(|l| l.contains(" writer "))
        .unwrap();
    let shown: i64 = writer
        .split("ms")
        .next()
        .and_then(|s| s.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no duration in {writer:?}"));
    assert!(
        shown <= row_ms - 300,
        "shown {shown} ms of a {row_ms} ms row: {writer}"
    );
}

/// `runs list` prints the newest run first (`--oldest` flips); the JSON
/// array keeps its documented order, oldest first.
#[test]
fn runs_list_shows_the_newest_first() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(1);
    for _ in 0..3 {
        case.cairn(&["submit", crew.to_str().unwrap()])
            .expect_code(0);
    }
    let ids: Vec<String> = case
        .list()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    let order = |text: &str| -> Vec<String> {
        text.lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap().to_owned())
            .collect()
    };
    let newest = case.cairn(&["runs", "list"]).expect_code(0);
    let mut reversed = ids.clone();
    reversed.reverse();
    assert_eq!(order(&newest.stdout), reversed);
    let limited = case.cairn(&["runs", "list", "--limit", "2"]).expect_code(0);
    assert_eq!(order(&limited.stdout), reversed[..2].to_vec());
    let oldest = case.cairn(&["runs", "list", "--oldest"]).expect_code(0);
    assert_eq!(order(&oldest.stdout), ids);
    // --json keeps its order (oldest first) but holds the same records as
    // the text: `--limit 1` is the newest run, `--oldest --limit 1` the
    // oldest.
    let json_ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["runs", "list", "--json"];
        all.extend_from_slice(args);
        match case.cairn(&all).expect_code(0).json() {
            Value::Array(runs) => runs
                .iter()
                .map(|r| r["id"].as_str().unwrap().to_owned())
                .collect(),
            other => panic!("not an array: {other}"),
        }
    };
    assert_eq!(json_ids(&["--limit", "1"]), vec![ids[2].clone()]);
    assert_eq!(json_ids(&["--limit", "2"]), ids[1..].to_vec());
    assert_eq!(
        json_ids(&["--oldest", "--limit", "1"]),
        vec![ids[0].clone()]
    );
    assert_eq!(json_ids(&[]), ids);
    // Without --limit the runs are read a page at a time (here 2): every
    // run, once, in the same order, in both forms.
    let paged = |args: &[&str]| {
        let mut all = vec!["runs", "list"];
        all.extend_from_slice(args);
        case.cairn_env(&all, &[("CAIRN_LIST_PAGE", "2")])
            .expect_code(0)
    };
    assert_eq!(order(&paged(&[]).stdout), reversed);
    assert_eq!(order(&paged(&["--oldest"]).stdout), ids);
    let json: Vec<String> = match paged(&["--json"]).json() {
        Value::Array(runs) => runs
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect(),
        other => panic!("not an array: {other}"),
    };
    assert_eq!(json, ids);
}

/// `runs journal` prints a header, even for a run without agent steps.
#[test]
fn runs_journal_prints_a_header() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(1);
    case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
    let out = case
        .cairn(&["runs", "journal", &case.only_run_id()])
        .expect_code(0);
    assert_eq!(out.stdout, "step  seq  a/g     kind              payload\n");
}

/// A run that is not found names the database looked in (absolute, since
/// the default is relative to the working directory).
#[test]
fn not_found_names_the_database() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(1);
    case.raw(&["run", crew.to_str().unwrap()], &[])
        .expect_code(0);
    case.cairn(&["run", crew.to_str().unwrap()]).expect_code(0);
    let unknown = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let out = case.raw(&["runs", "show", unknown], &[]).expect_code(2);
    let db = format!("sqlite://{}", case.path("cairn.db").display());
    out.expect_one_line_error(&["not found", &db, "working directory"]);
    let out = case.cairn(&["runs", "show", unknown]).expect_code(2);
    out.expect_one_line_error(&["not found", &format!("looked in {}", case.url())]);
}

/// A read-only command on a PostgreSQL schema without Cairn's tables says
/// so and creates none (a second look finds none either).
#[test]
fn read_only_commands_create_no_postgres_schema() {
    let case = Case::new(Kind::Postgres);
    for _ in 0..2 {
        let out = case.cairn(&["runs", "list"]).expect_code(2);
        out.expect_one_line_error(&["holds no Cairn schema"]);
    }
    // A command that writes creates the tables; reads work then.
    let crew = case.counting_crew(1);
    case.cairn(&["submit", crew.to_str().unwrap()])
        .expect_code(0);
    assert_eq!(case.list().len(), 1);
}

/// A closed stdout ends `runs show --json` and `demo` quietly with 0.
#[test]
fn a_closed_stdout_ends_quietly() {
    let case = Case::new(Kind::Sqlite);
    // An output bigger than a pipe's buffer, so the write meets the closed end.
    let agents = [agent_sh(
        "big",
        "cat > /dev/null; head -c 300000 /dev/zero | tr '\\0' x | sed 's/.*/\"&\"/'",
    )];
    let crew = case.write("crew.toml", &crew_toml("big", &agents));
    case.cairn(&["run", crew.to_str().unwrap(), "--json"])
        .expect_code(0);
    let id = case.only_run_id();
    for args in [
        vec!["runs", "show", &id, "--json", "--db", case.url()],
        vec!["demo", "--steps", "3", "--kill-at", "1", "--dir", "demo"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = case
            .command()
            .args(&args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {:?} {stderr}",
            out.status.signal()
        );
        assert_eq!(stderr, "", "{args:?}");
    }
    // A reader that stops after a few bytes: the same.
    let mut child = case
        .command()
        .args(["runs", "show", &id, "--json", "--db", case.url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0_u8; 16];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `demo` refuses --db (it keeps its own file) and a kill point past the
/// last step, as bad usage (exit 2).
#[test]
fn demo_usage_errors_exit_2() {
    let case = Case::new(Kind::Sqlite);
    let out = case
        .raw(&["demo", "--db", "sqlite://elsewhere.db"], &[])
        .expect_code(2);
    out.expect_one_line_error(&["--db is not used"]);
    let out = case
        .raw(&["demo", "--kill-at", "9", "--steps", "5"], &[])
        .expect_code(2);
    out.expect_one_line_error(&["--kill-at (9) must be below --steps (5)"]);
    assert!(!case.path("elsewhere.db").exists());
}

/// An `--input @FILE` over the cap is refused (exit 2) without reading it
/// all (`/dev/zero` never ends) and before the database file is created.
#[test]
fn an_oversized_input_file_is_refused_before_anything_is_written() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(1);
    let big = case.write("big.json", &format!("\"{}\"", "x".repeat(2 << 20)));
    for input in [format!("@{}", big.display()), "@/dev/zero".to_owned()] {
        let out = case
            .cairn(&["run", crew.to_str().unwrap(), "--input", &input])
            .expect_code(2);
        out.expect_one_line_error(&["over the cap of 1048576 bytes"]);
        assert!(!case.sqlite_file().exists());
    }
    // Just under the cap as a file, over it as compact JSON: impossible; a
    // value whose compact form is over the cap is refused the same way.
    let spaced = case.write("spaced.json", &format!("[{}]", "1,".repeat(600_000) + "1"));
    let out = case
        .cairn(&[
            "run",
            crew.to_str().unwrap(),
            "--input",
            &format!("@{}", spaced.display()),
        ])
        .expect_code(2);
    out.expect_one_line_error(&["over the cap"]);
    assert!(!case.sqlite_file().exists());
}

/// The failed crew of the retry and fork tests: step 1 fails for good.
fn broken_and_fixed(case: &Case) -> (String, String) {
    let broken = [
        case.counting_agent("fetch"),
        format!(
            "{}retry = {{ max_attempts = 1 }}\n",
            case.failing_agent("parse")
        ),
        agent_template("report", "parsed: {{ outputs.parse.step }}"),
    ];
    let fixed = [
        case.counting_agent("fetch"),
        case.counting_agent("parse"),
        agent_template("report", "parsed: {{ outputs.parse.step }}"),
    ];
    let broken = case.write("broken.toml", &crew_toml("pipeline", &broken));
    let fixed = case.write("fixed.toml", &crew_toml("pipeline", &fixed));
    (
        broken.to_str().unwrap().to_owned(),
        fixed.to_str().unwrap().to_owned(),
    )
}

/// `runs retry RUN --crew fixed.toml`: the failed step and the rest run
/// with the fixed crew, the finished step is kept, and the change is an
/// event naming who and why.
fn retry_with_a_fixed_crew_keeps_finished_steps(kind: Kind) {
    let case = Case::new(kind);
    let (broken, fixed) = broken_and_fixed(&case);
    case.cairn(&["run", &broken]).expect_code(3);
    let id = case.only_run_id();

    // A crew that renames a step the run has is refused; nothing changes.
    let renamed = [
        case.counting_agent("download"),
        case.counting_agent("parse"),
    ];
    let renamed = case.write("renamed.toml", &crew_toml("pipeline", &renamed));
    let out = case
        .cairn(&["runs", "retry", &id, "--crew", renamed.to_str().unwrap()])
        .expect_code(2);
    out.expect_one_line_error(&["does not fit", "`fetch`", "`download`"]);
    assert_eq!(case.show(&id)["status"], "failed");

    let out = case
        .cairn(&[
            "runs",
            "retry",
            &id,
            "--crew",
            &fixed,
            "--by",
            "ann",
            "--reason",
            "fixed parse",
            "--json",
        ])
        .expect_code(0);
    let run = out.json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["steps"][1]["attempt"], 2);
    assert_eq!(run["steps"][2]["output"], "parsed: 1");
    assert_eq!(case.executed(0), 1, "the finished step ran again");
    let events = case.events(&id);
    let events = events.as_array().unwrap();
    let retried = events.iter().find(|e| e["kind"] == "run_retried").unwrap();
    assert_eq!(retried["data"]["by"], "ann");
    assert_eq!(retried["data"]["reason"], "fixed parse");
    let forced = events.iter().find(|e| e["kind"] == "crew_forced").unwrap();
    assert!(
        forced["data"]["by"]
            .as_str()
            .unwrap()
            .starts_with("ann via "),
        "{forced}"
    );
    assert_eq!(forced["data"]["offered"], run["crew_fingerprint"]);
    assert_ne!(forced["data"]["stored"], forced["data"]["offered"]);
}

/// `runs fork RUN --from-step 1 --crew fixed.toml` runs the fork with the
/// fixed crew; the source run is untouched.
fn a_fork_runs_with_a_fixed_crew(kind: Kind) {
    let case = Case::new(kind);
    let (broken, fixed) = broken_and_fixed(&case);
    case.cairn(&["run", &broken]).expect_code(3);
    let id = case.only_run_id();
    let out = case
        .fork(&id, "1", &["--crew", &fixed, "--json"])
        .expect_code(0);
    let fork = out.json();
    assert_eq!(fork["status"], "succeeded", "{fork:#}");
    assert_eq!(fork["parent_run_id"], Value::String(id.clone()));
    assert_eq!(case.executed(0), 1);
    assert_eq!(case.show(&id)["status"], "failed");
    let events = case.events(fork["id"].as_str().unwrap());
    assert!(events
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "crew_forced"));
}

/// Every option and argument of every command has help text.
#[test]
fn every_option_has_help() {
    let case = Case::new(Kind::Sqlite);
    let commands: &[&[&str]] = &[
        &[],
        &["run"],
        &["submit"],
        &["resume"],
        &["compact"],
        &["threads", "list"],
        &["threads", "show"],
        &["runs", "list"],
        &["runs", "show"],
        &["runs", "events"],
        &["runs", "journal"],
        &["runs", "retry"],
        &["runs", "continue"],
        &["runs", "cancel"],
        &["runs", "fork"],
        &["serve"],
        &["worker"],
        &["waits", "list"],
        &["waits", "answer"],
        &["waits", "expire"],
        &["demo"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("-h");
        let out = case.raw(&args, &[]).expect_code(0);
        // An entry without help is its name alone on a line, with no more
        // indented line after it (clap puts long help on the next line).
        let lines: Vec<&str> = out.stdout.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let entry = line.starts_with("  ")
                && (t.starts_with('-') || t.starts_with('<') || t.starts_with('['));
            if !entry || t.contains("  ") {
                continue;
            }
            let indent = line.len() - t.len();
            let next = lines.get(i + 1).copied().unwrap_or("");
            let next_indent = next.len() - next.trim_start().len();
            assert!(
                !next.trim().is_empty() && next_indent > indent,
                "`cairn {} -h`: no help for {t:?}\n{}",
                cmd.join(" "),
                out.stdout
            );
        }
    }
}

/// The agents example writes its notes log where CAIRN_NOTES_LOG says (a
/// temporary file by default), never into the working directory.
#[test]
fn the_agents_example_keeps_its_notes_out_of_the_working_directory() {
    let case = Case::new(Kind::Sqlite);
    let crew =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents/crew.toml");
    let notes = case.path("elsewhere/notes.log");
    std::fs::create_dir_all(notes.parent().unwrap()).unwrap();
    case.cairn_env(
        &[
            "run",
            crew.to_str().unwrap(),
            "--input",
            r#"{"topic": "t"}"#,
        ],
        &[("CAIRN_NOTES_LOG", notes.to_str().unwrap())],
    )
    .expect_code(0);
    assert_eq!(std::fs::read_to_string(&notes).unwrap().lines().count(), 2);
    assert!(!case.path("notes.log").exists());
}

/// `worker` logs each claim, step and stop at info by default; `-q` keeps
/// only warnings.
#[test]
fn worker_logs_claims_and_steps_unless_quiet() {
    for quiet in [false, true] {
        let case = Case::new(Kind::Sqlite);
        let crew = case.counting_crew(2);
        case.cairn(&["submit", crew.to_str().unwrap()])
            .expect_code(0);
        let mut args = vec!["worker", "--poll-ms", "20"];
        if quiet {
            args.push("-q");
        }
        let mut worker = case.spawn(&args, &[]);
        let id = case.only_run_id();
        wait_until("the run to finish", Duration::from_secs(30), || {
            case.show(&id)["status"] == "succeeded"
        });
        kill(Pid::from_raw(worker.id() as i32), Signal::SIGTERM).unwrap();
        worker.wait().unwrap();
        let log = read(&case, "bg.stderr");
        for line in [
            "worker: claimed",
            "step started",
            "step committed",
            "worker: run stopped",
        ] {
            assert_eq!(
                log.contains(line),
                !quiet,
                "quiet {quiet}, {line:?}:\n{log}"
            );
        }
        if !quiet {
            assert!(log.contains(&id), "{log}");
        }
    }
}

/// `resume --context JSON`: the remaining steps see the merged input; a
/// context that is not an object is a usage error (exit 2).
#[test]
fn resume_with_context_gives_the_remaining_steps_more_input() {
    let case = Case::new(Kind::Sqlite);
    let agents = [agent_template(
        "say",
        "{{ input.topic }} for {{ input.who }}",
    )];
    let crew = case.write("crew.toml", &crew_toml("ctx", &agents));
    let id = case
        .cairn(&[
            "submit",
            crew.to_str().unwrap(),
            "--input",
            r#"{"topic": "news", "who": "?"}"#,
        ])
        .expect_code(0)
        .stdout
        .trim()
        .to_owned();
    case.cairn(&["resume", &id, "--context", "[1]"])
        .expect_code(2);
    let run = case
        .cairn(&[
            "resume",
            &id,
            "--context",
            r#"{"who": "ops"}"#,
            "--by",
            "ann",
            "--reason",
            "who asked",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(run["steps"][0]["output"], "news for ops", "{run:#}");
    let added = case.events_of(&id, "context_added");
    let added = added.first().expect("a context_added event");
    assert_eq!(added["data"]["by"], "ann");
    assert_eq!(added["data"]["reason"], "who asked");
}

/// A `command` step runs in its crew file's directory, whatever the
/// working directory of `cairn`: a relative argument (`data.json`) and a
/// relative program (`./tool.sh`) next to the crew file are found.
#[test]
fn command_steps_run_in_their_crew_files_directory() {
    let case = Case::new(Kind::Sqlite);
    std::fs::create_dir(case.path("crews")).unwrap();
    case.write("crews/data.json", "{\"from\": \"data\"}\n");
    let tool = case.write(
        "crews/tool.sh",
        "#!/bin/sh\ncat > /dev/null\necho '\"tool\"'\n",
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let agents = [
        agent_sh("reads", "cat > /dev/null; cat data.json"),
        crate::support::agent_command("runs", &["./tool.sh"]),
    ];
    let crew = case.write("crews/crew.toml", &crew_toml("dirs", &agents));
    // Run from the case directory, not the crew's.
    let run = case.run_json(&crew, 0);
    assert_eq!(run["steps"][0]["output"]["from"], "data", "{run:#}");
    assert_eq!(run["steps"][1]["output"], "tool", "{run:#}");
}
