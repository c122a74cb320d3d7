//! Client mode: the same commands against a real `cairn serve` process over
//! HTTP (`--server URL --token T`), printing the same JSON documents as the
//! local commands, with the same exit codes.

use std::time::Duration;

use serde_json::Value;

use crate::support::{self, wait_until, Case, Kind, Out, Served};

const TOKEN: &str = "s3cret-token-0123456789";

fn serve(case: &Case) -> Served {
    let crews = support::crews_dir(
        case,
        &[
            ("greet.toml", &support::greet_crew()),
            ("fail.toml", &support::fail_crew()),
        ],
    );
    std::fs::copy(support::example("review.toml"), crews.join("review.toml")).unwrap();
    support::serve_crews(case, &crews, TOKEN)
}

/// `cairn ARGS --server URL --token s3cret-token-0123456789` (no --db: it must not be needed).
fn remote(case: &Case, served: &Served, args: &[&str]) -> Out {
    support::remote(case, served, TOKEN, args)
}

/// The id of `run`'s first open wait, listed through the server.
fn open_wait(case: &Case, served: &Served, run: &str) -> String {
    let args = ["waits", "list", "--run", run, "--status", "open", "--json"];
    let waits = remote(case, served, &args).expect_code(0).json();
    waits[0]["id"].as_str().unwrap().to_owned()
}

#[test]
fn the_cli_works_against_a_server() {
    let case = Case::new(Kind::Sqlite);
    let served = serve(&case);

    // run: submit by crew name, wait for the server's workers, same JSON.
    let out = remote(
        &case,
        &served,
        &["run", "greet", "--input", r#"{"name": "Ada"}"#, "--json"],
    )
    .expect_code(0);
    let run = out.json();
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["steps"][0]["output"], "Hello Ada");
    let id = run["id"].as_str().unwrap();
    let local = case.show(id);
    assert_eq!(run, local, "the server's document is the local one");
    let shown = remote(&case, &served, &["runs", "show", id, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(shown, local);

    // submit prints the id; list sees both runs; events end with the run.
    let out = remote(
        &case,
        &served,
        &["submit", "greet", "--input", r#"{"name": "Bo"}"#],
    )
    .expect_code(0);
    let second = out.stdout.trim().to_owned();
    assert_eq!(second.len(), 36, "{}", out.stdout);
    let list = remote(&case, &served, &["runs", "list", "--json"])
        .expect_code(0)
        .json();
    let ids = support::strs(&list, "id");
    assert!(
        ids.contains(&id) && ids.contains(&second.as_str()),
        "{ids:?}"
    );
    let events = remote(&case, &served, &["runs", "events", id, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(events, case.events(id));
    let journal = remote(&case, &served, &["runs", "journal", id, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(journal, Value::Array(vec![]));

    // A human review over HTTP: waits, answers, exit codes as locally.
    let out = remote(
        &case,
        &served,
        &["run", "review", "--input", r#"{"topic": "t"}"#, "--json"],
    )
    .expect_code(4);
    let review = out.json()["id"].as_str().unwrap().to_owned();
    let wait = open_wait(&case, &served, &review);
    remote(
        &case,
        &served,
        &["waits", "answer", &wait, "--approve", "--by", "ann"],
    )
    .expect_code(4);
    let wait = open_wait(&case, &served, &review);
    let out = remote(
        &case,
        &served,
        &["waits", "answer", &wait, "--approve", "--json"],
    )
    .expect_code(0);
    assert_eq!(out.json()["status"], "succeeded");

    // Refusals: wrong state (2, the server's message), local-only commands
    // (2), a wrong token (1).
    remote(&case, &served, &["runs", "continue", id])
        .expect_code(2)
        .expect_stderr(&["succeeded", "wrong_state"]);
    remote(&case, &served, &["resume", id])
        .expect_code(2)
        .expect_stderr(&["does not work with --server"]);
    case.raw(
        &[
            "runs",
            "show",
            id,
            "--server",
            &served.url,
            "--token",
            "nope",
        ],
        &[],
    )
    .expect_code(1)
    .expect_stderr(&["unauthorized"]);
}

/// Where a command goes: the database (`--db`, crews named by their file)
/// or a server (`--server`, crews named by name).
enum Mode<'a> {
    Local(&'a Case),
    Remote(&'a Case, &'a Served),
}

impl Mode<'_> {
    fn crew(&self, name: &str) -> String {
        match self {
            Mode::Local(case) => case.path(&format!("{name}.toml")).display().to_string(),
            Mode::Remote(..) => name.to_owned(),
        }
    }

    fn cairn(&self, args: &[&str]) -> Out {
        match self {
            Mode::Local(case) => case.cairn(args),
            Mode::Remote(case, served) => remote(case, served, args),
        }
    }
}

/// The same scenario of failing, waiting, refused and not-found commands
/// in one mode: each step's name and exit code.
fn scenario(mode: &Mode) -> Vec<(&'static str, Option<i32>)> {
    let unknown = "0190d2a8-8b8f-7000-8000-000000000000";
    let mut codes = vec![];
    let mut step = |what: &'static str, args: &[&str]| {
        let out = mode.cairn(args);
        codes.push((what, out.code()));
        out
    };
    let (greet, fail, review) = (mode.crew("greet"), mode.crew("fail"), mode.crew("review"));
    let id = |out: Out| out.json()["id"].as_str().unwrap().to_owned();
    let done = id(step(
        "a run that succeeds",
        &["run", &greet, "--input", r#"{"name": "Ada"}"#, "--json"],
    ));
    let failed = id(step("a run that fails", &["run", &fail, "--json"]));
    let waiting = id(step(
        "a run that waits",
        &["run", &review, "--input", r#"{"topic": "t"}"#, "--json"],
    ));
    step("a retry that fails again", &["runs", "retry", &failed]);
    step("continue a succeeded run", &["runs", "continue", &done]);
    step("cancel a succeeded run", &["runs", "cancel", &done]);
    step("retry a waiting run", &["runs", "retry", &waiting]);
    step(
        "fork past the last step",
        &["runs", "fork", &done, "--from-step", "9"],
    );
    step("show an unknown run", &["runs", "show", unknown]);
    step("cancel an unknown run", &["runs", "cancel", unknown]);
    step(
        "answer an unknown wait",
        &["waits", "answer", unknown, "--approve"],
    );
    step("input that is not JSON", &["run", &greet, "--input", "{"]);
    step(
        "show an unknown thread",
        &["threads", "show", "no-such-thread"],
    );
    let long = "x".repeat(257);
    step("a thread id too long", &["run", &greet, "--thread", &long]);
    step(
        "fork into an empty thread id",
        &["runs", "fork", &done, "--from-step", "0", "--thread", ""],
    );
    codes
}

/// Local and client mode read their exit codes from the same table
/// (`cairn::ErrorClass`): the same commands exit alike, each against its
/// own database (the server's runner would race local executions on one).
#[test]
fn local_and_remote_commands_exit_alike() {
    let local = Case::new(Kind::Sqlite);
    local.write("greet.toml", &support::greet_crew());
    local.write("fail.toml", &support::fail_crew());
    let review = support::example("review.toml");
    local.write("review.toml", &std::fs::read_to_string(review).unwrap());
    let server_case = Case::new(Kind::Sqlite);
    let served = serve(&server_case);

    let here = scenario(&Mode::Local(&local));
    let there = scenario(&Mode::Remote(&server_case, &served));
    let expected = [0, 3, 4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2];
    assert_eq!(here.len(), expected.len());
    for ((step, code), want) in here.iter().zip(expected) {
        assert_eq!(*code, Some(want), "locally, {step}: {here:?}");
    }
    assert_eq!(here, there, "local (left) and client mode (right) differ");
}

/// Threads over HTTP: `--thread` on run and fork, `threads list` and
/// `threads show` print what the same commands print locally, odd ids
/// travel percent-encoded, and an unknown thread exits 2.
#[test]
fn threads_work_against_a_server() {
    let case = Case::new(Kind::Sqlite);
    let served = serve(&case);
    let odd = "user/42 chat?#%20 é";
    let first = remote(
        &case,
        &served,
        &[
            "run",
            "greet",
            "--input",
            r#"{"name": "Ada"}"#,
            "--thread",
            odd,
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(first["thread_id"], odd);
    let id = first["id"].as_str().unwrap();
    // The old spelling still works.
    remote(
        &case,
        &served,
        &[
            "submit",
            "greet",
            "--input",
            r#"{"name": "Bo"}"#,
            "--thread-id",
            "other",
        ],
    )
    .expect_code(0);
    let forked = remote(
        &case,
        &served,
        &[
            "runs",
            "fork",
            id,
            "--from-step",
            "0",
            "--thread",
            "moved",
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(forked["thread_id"], "moved");
    let kept = remote(
        &case,
        &served,
        &["runs", "fork", id, "--from-step", "1", "--json"],
    )
    .expect_code(0)
    .json();
    assert_eq!(kept["thread_id"], odd);

    // The settled runs: the other thread's run may still be queued, so
    // compare once the server's workers have run everything.
    wait_until(
        "the server to finish every run",
        Duration::from_secs(30),
        || case.list().iter().all(|r| r["status"] == "succeeded"),
    );
    for args in [
        vec!["threads", "list", "--json"],
        vec!["threads", "show", odd, "--json"],
        vec!["threads", "list"],
        vec!["threads", "show", odd],
    ] {
        let there = remote(&case, &served, &args).expect_code(0);
        let here = case.cairn(&args).expect_code(0);
        assert_eq!(there.stdout, here.stdout, "{args:?}");
    }
    let shown = case.cairn(&["threads", "show", odd, "--json"]).json();
    assert_eq!(shown["totals"]["runs"], 2);
    remote(&case, &served, &["threads", "show", "nope"])
        .expect_code(2)
        .expect_stderr(&["thread_not_found"]);
    remote(&case, &served, &["run", "greet", "--thread", ""])
        .expect_code(2)
        .expect_stderr(&["--thread", "empty"]);
}

/// `cairn compact --server`: the server removes its finished runs and
/// answers the counts `cairn compact --json` prints; a policy naming
/// nothing exits 2 before anything is sent.
#[test]
fn compact_works_against_a_server() {
    let case = Case::new(Kind::Sqlite);
    let served = serve(&case);
    remote(
        &case,
        &served,
        &["run", "greet", "--input", r#"{"name": "Ada"}"#],
    )
    .expect_code(0);
    wait_until(
        "the server to finish the run",
        Duration::from_secs(30),
        || case.list().iter().all(|r| r["status"] == "succeeded"),
    );
    let args = ["compact", "--finished-older-than", "0s", "--json"];
    let dry = remote(&case, &served, &[&args[..], &["--dry-run"]].concat())
        .expect_code(0)
        .json();
    assert_eq!(dry["runs"], 1, "{dry}");
    assert_eq!(case.list().len(), 1, "a dry run removes nothing");
    let removed = remote(&case, &served, &args).expect_code(0).json();
    assert_eq!(removed, dry);
    assert!(case.list().is_empty());
    remote(&case, &served, &["compact"])
        .expect_code(2)
        .expect_stderr(&["say what to remove"]);
}

/// `runs events --server` prints each event as it arrives, not when the
/// run ends.
#[test]
fn runs_events_streams_as_events_arrive() {
    let case = Case::new(Kind::Sqlite);
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    let go = case.path("go");
    let gated = format!(
        "name = \"gated\"\nversion = \"1\"\n[[agents]]\nrole = \"gate\"\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {}]\n",
        serde_json::to_string(&format!(
            "cat > /dev/null; while [ ! -f {} ]; do sleep 0.02; done; echo '{{}}'",
            go.display()
        ))
        .unwrap()
    );
    std::fs::write(crews.join("gated.toml"), gated).unwrap();
    let served = serve(&case);
    let out = remote(&case, &served, &["submit", "gated", "--json"]).expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_owned();
    let events_out = case.path("events.out");
    let mut follower = case
        .command()
        .args([
            "runs",
            "events",
            &id,
            "--server",
            &served.url,
            "--token",
            TOKEN,
        ])
        .stdout(std::fs::File::create(&events_out).unwrap())
        .spawn()
        .unwrap();
    wait_until("the claim to be printed", Duration::from_secs(30), || {
        std::fs::read_to_string(&events_out)
            .unwrap_or_default()
            .contains("run_claimed")
    });
    // The run waits on the gate: the stream is still open.
    assert!(follower.try_wait().unwrap().is_none());
    std::fs::write(&go, "").unwrap();
    assert_eq!(follower.wait().unwrap().code(), Some(0));
    let text = std::fs::read_to_string(&events_out).unwrap();
    assert!(text.contains("run_succeeded"), "{text}");
}

/// A local crew file that differs from the server's crew of the same name
/// is refused (exit 2) instead of silently running the server's.
#[test]
fn a_local_crew_file_that_differs_from_the_servers_is_refused() {
    let case = Case::new(Kind::Sqlite);
    let served = serve(&case);
    let changed = case.write(
        "greet.toml",
        &support::greet_crew().replace("Hello", "Goodbye"),
    );
    let out = remote(
        &case,
        &served,
        &["run", changed.to_str().unwrap(), "--json"],
    )
    .expect_code(2);
    out.expect_one_line_error(&["fingerprint", "the server's crew `greet`"]);
    // The same file as the server's runs.
    let same = case.write("same.toml", &support::greet_crew());
    let out = remote(
        &case,
        &served,
        &[
            "run",
            same.to_str().unwrap(),
            "--input",
            r#"{"name": "Ann"}"#,
            "--json",
        ],
    )
    .expect_code(0);
    let run: Value = out.json();
    assert_eq!(run["status"], "succeeded");
}

/// `cairn serve`'s limit flags reach the server: with `--max-connections 1`
/// an idle connection holds the only slot and the next one is answered 503;
/// a zero timeout is a usage error.
#[test]
fn serve_flags_set_the_connection_limits() {
    use std::io::{Read, Write};
    let case = Case::new(Kind::Sqlite);
    let crews = support::crews_dir(&case, &[("greet.toml", &support::greet_crew())]);
    case.raw(
        &[
            "serve",
            "--crews",
            crews.to_str().unwrap(),
            "--header-timeout",
            "0s",
        ],
        &[],
    )
    .expect_code(2);

    // Killed (by its pid) when the test ends, passed or failed.
    let served = support::serve(
        &case,
        &[
            "--crews",
            crews.to_str().unwrap(),
            "--max-connections",
            "1",
            "--header-timeout",
            "60s",
        ],
        &[],
    );
    let listen = served.listen.clone();
    // The only slot, held by a connection that sends nothing (the header
    // timeout, 60 s, is far away). A probe above may still hold the slot
    // for a moment, and then this connection is refused at once: connect
    // again until one is kept open.
    let mut idle = None;
    wait_until(
        "an idle connection to hold the only slot",
        Duration::from_secs(30),
        || {
            let Ok(mut held) = std::net::TcpStream::connect(&listen) else {
                return false;
            };
            let _ = held.set_read_timeout(Some(Duration::from_millis(300)));
            use std::io::ErrorKind::{TimedOut, WouldBlock};
            match held.read_exact(&mut [0u8; 1]) {
                // Nothing to read: the server holds it open.
                Err(e) if matches!(e.kind(), TimedOut | WouldBlock) => {
                    idle = Some(held);
                    true
                }
                // Answered (refused) or closed at once: not holding the slot.
                _ => false,
            }
        },
    );
    let mut answer = String::new();
    wait_until(
        "a second connection to be refused",
        Duration::from_secs(30),
        || {
            let Ok(mut second) = std::net::TcpStream::connect(&listen) else {
                return false;
            };
            let _ = second.set_read_timeout(Some(Duration::from_secs(5)));
            let _ =
                second.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            answer.clear();
            let _ = second.read_to_string(&mut answer);
            answer.starts_with("HTTP/1.1 503")
        },
    );
    assert!(answer.contains("too_many_connections"), "{answer}");
}
