//! Threads through the `cairn` binary, both backends: `--thread` on run
//! and submit (and the old `--thread-id`), the thread id rule (exit 2
//! before the database is opened), `threads list|show` as text and JSON,
//! `resume --thread` refusing a run of another thread before writing, and
//! `runs fork --thread`.

use serde_json::Value;

use crate::support::{Case, Kind};

both_backends!(
    run_and_submit_put_runs_in_threads_and_threads_show_them,
    a_bad_thread_id_exits_2_before_the_database_is_opened,
    resume_refuses_a_run_of_another_thread,
    fork_keeps_the_thread_unless_given_another,
);

/// Submits a run of `crew` in thread `thread`: its id.
fn submitted_in(case: &Case, crew: &str, thread: &str) -> String {
    let out = case
        .cairn(&["submit", crew, "--thread", thread])
        .expect_code(0);
    out.stdout.trim().to_owned()
}

/// `threads show` as text shows the conversation: each run's input and
/// final output, oldest first, after the run table.
#[test]
fn threads_show_text_shows_each_runs_input_and_output() {
    let case = Case::new(Kind::Sqlite);
    let agents = [crate::support::agent_template("say", "hello {{ input.q }}")];
    let crew = case.write("crew.toml", &crate::support::crew_toml("talk", &agents));
    let crew = crew.to_str().unwrap();
    for q in ["first", "second"] {
        let input = format!("{{\"q\": \"{q}\"}}");
        case.cairn(&["run", crew, "--thread", "c", "--input", &input])
            .expect_code(0);
    }
    let out = case.cairn(&["threads", "show", "c"]).expect_code(0).stdout;
    let first = out
        .find("output: hello first")
        .unwrap_or_else(|| panic!("{out}"));
    let second = out
        .find("output: hello second")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(first < second, "oldest first:\n{out}");
    assert!(
        out.contains("\"q\": \"second\""),
        "the input is shown:\n{out}"
    );
}

/// A `run` queued behind an unfinished run of its thread says what it
/// waits behind (not just its header, then silence), and starts once that
/// run is done.
#[test]
fn a_run_queued_behind_its_thread_says_what_it_waits_for() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(1);
    let crew = crew.to_str().unwrap();
    let first = submitted_in(&case, crew, "t");
    let mut child = crate::support::Spawned(case.spawn(&["run", crew, "--thread", "t"], &[]));
    let stderr = || std::fs::read_to_string(case.path("bg.stderr")).unwrap_or_default();
    crate::support::wait_until(
        "the queued run to say what it waits for",
        std::time::Duration::from_secs(30),
        || stderr().contains("queued behind"),
    );
    // Finish the earlier run; the queued one then runs to its end.
    case.cairn(&["resume", &first]).expect_code(0);
    let status = child.wait("the queued run");
    let said = stderr();
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("queued behind run {first} of thread `t` (queued)")),
        "{said}"
    );
}

fn id_of(run: &Value) -> String {
    run["id"].as_str().unwrap().to_owned()
}

fn run_and_submit_put_runs_in_threads_and_threads_show_them(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(2);
    let crew = crew.to_str().unwrap();
    let odd = "user/42 chat é";
    let first = case
        .cairn(&["run", crew, "--thread", odd, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(first["thread_id"], odd);
    let queued = case
        .cairn(&["submit", crew, "--thread-id", "other"])
        .expect_code(0);
    let queued = queued.stdout.trim().to_owned();
    let second = case
        .cairn(&["run", crew, "--thread", odd, "--json"])
        .expect_code(0)
        .json();
    // `runs show --json` carries the thread.
    assert_eq!(case.show(&id_of(&first))["thread_id"], odd);
    assert_eq!(case.show(&queued)["thread_id"], "other");
    case.cairn(&["run", crew]).expect_code(0); // in no thread

    let list = case.cairn(&["threads", "list", "--json"]).expect_code(0);
    let list = list.json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["thread_id"], "other");
    assert_eq!(list[1]["thread_id"], odd);
    assert_eq!(list[1]["runs"], 2);
    assert_eq!(list[1]["last_run_at"], second["created_at"]);
    for key in ["input_tokens", "output_tokens"] {
        assert_eq!(list[1][key], 0, "command steps report no tokens");
    }

    let shown = case
        .cairn(&["threads", "show", odd, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(shown["thread_id"], odd);
    assert_eq!(
        shown["totals"],
        serde_json::json!({"runs": 2, "input_tokens": 0, "output_tokens": 0})
    );
    // The runs are the documents `runs list --json` prints, oldest first.
    let listed: Vec<Value> = case
        .list()
        .into_iter()
        .filter(|r| r["thread_id"] == odd)
        .collect();
    assert_eq!(shown["runs"], Value::Array(listed));
    assert_eq!(shown["runs"][0]["id"], first["id"]);
    assert_eq!(shown["runs"][1]["id"], second["id"]);

    let text = case.cairn(&["threads", "list"]).expect_code(0).stdout;
    assert!(text.starts_with("  runs"), "{text}");
    assert!(text.lines().nth(2).unwrap().ends_with(odd), "{text}");
    let text = case.cairn(&["threads", "show", odd]).expect_code(0).stdout;
    assert!(
        text.starts_with(&format!("thread {odd}  runs 2  tokens in/out 0/0\n")),
        "{text}"
    );
    assert!(text.contains(&id_of(&first)) && text.contains(&id_of(&second)));

    case.cairn(&["threads", "show", "nope"])
        .expect_code(2)
        .expect_one_line_error(&["thread `nope` not found"]);
}

fn a_bad_thread_id_exits_2_before_the_database_is_opened(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(1);
    let crew = crew.to_str().unwrap();
    let long = "x".repeat(257);
    for (bad, problem) in [("", "is empty"), (long.as_str(), "257 bytes")] {
        for args in [
            vec!["run", crew, "--thread", bad],
            vec!["submit", crew, "--thread-id", bad],
            vec!["threads", "show", bad],
            vec![
                "resume",
                "0190d2a8-8b8f-7000-8000-000000000000",
                "--thread",
                bad,
            ],
        ] {
            case.cairn(&args)
                .expect_code(2)
                .expect_one_line_error(&["`--thread`", problem]);
        }
    }
    if kind == Kind::Sqlite {
        assert!(!case.sqlite_file().exists(), "the database was opened");
    }
    assert!(case.executions().is_empty());
    // 256 bytes is fine.
    let longest = "y".repeat(256);
    let run = case
        .cairn(&["run", crew, "--thread", &longest, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(run["thread_id"], longest.as_str());
}

fn resume_refuses_a_run_of_another_thread(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(2);
    let crew = crew.to_str().unwrap();
    let id = submitted_in(&case, crew, "chat-1");
    let loose = case.cairn(&["submit", crew]).expect_code(0);
    let loose = loose.stdout.trim().to_owned();
    let events = case.events(&id);
    case.cairn(&["resume", &id, "--thread", "chat-2"])
        .expect_code(2)
        .expect_one_line_error(&[&id, "`chat-2`", "its thread is `chat-1`"]);
    case.cairn(&["resume", &loose, "--thread", "chat-1"])
        .expect_code(2)
        .expect_one_line_error(&[&loose, "`chat-1`", "no thread"]);
    // Nothing was written or executed.
    assert_eq!(case.events(&id), events);
    assert_eq!(case.show(&id)["status"], "queued");
    assert_eq!(case.show(&loose)["status"], "queued");
    assert!(case.executions().is_empty());
    let done = case
        .cairn(&["resume", &id, "--thread", "chat-1", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(done["status"], "succeeded");
}

fn fork_keeps_the_thread_unless_given_another(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(2);
    let crew = crew.to_str().unwrap();
    let source = case
        .cairn(&["run", crew, "--thread", "chat-1", "--json"])
        .expect_code(0)
        .json();
    let source = id_of(&source);
    let kept = case
        .cairn(&["runs", "fork", &source, "--from-step", "1", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(kept["thread_id"], "chat-1");
    let moved = case
        .cairn(&[
            "runs",
            "fork",
            &source,
            "--from-step",
            "1",
            "--thread",
            "chat-2",
            "--json",
        ])
        .expect_code(0)
        .json();
    assert_eq!(moved["thread_id"], "chat-2");
    assert_eq!(moved["status"], "succeeded");
    case.cairn(&["runs", "fork", &source, "--from-step", "1", "--thread", ""])
        .expect_code(2)
        .expect_one_line_error(&["`--thread`", "is empty"]);
    let shown = case
        .cairn(&["threads", "show", "chat-1", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(shown["totals"]["runs"], 2);
    assert_eq!(case.list().len(), 3);
}
