//! Client mode: the same commands against a real `cairn serve` process over
//! HTTP (`--server URL --token T`), printing the same JSON documents as the
//! local commands, with the same exit codes.

use std::process::Child;
use std::time::Duration;

use serde_json::Value;

use crate::support::{wait_until, Case, Kind, Out};

struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const GREET: &str = r#"
name = "greet"
version = "1"
[[agents]]
role = "greeter"
kind = "template"
template = "Hello {{ input.name }}"
"#;

fn serve(case: &Case) -> Served {
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    std::fs::write(crews.join("greet.toml"), GREET).unwrap();
    let review =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/review.toml");
    std::fs::copy(review, crews.join("review.toml")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let child = case.spawn(
        &[
            "serve",
            "--crews",
            crews.to_str().unwrap(),
            "--listen",
            &listen,
        ],
        &[("CAIRN_API_TOKENS", "s3cret")],
    );
    wait_until("the server to listen", Duration::from_secs(30), || {
        std::net::TcpStream::connect(&listen).is_ok()
    });
    Served {
        child,
        url: format!("http://{listen}"),
    }
}

/// `cairn ARGS --server URL --token s3cret` (no --db: it must not be needed).
fn remote(case: &Case, served: &Served, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--server", &served.url, "--token", "s3cret"]);
    case.raw(&all, &[])
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
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
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
    let waits = remote(
        &case,
        &served,
        &[
            "waits", "list", "--run", &review, "--status", "open", "--json",
        ],
    )
    .expect_code(0)
    .json();
    let wait = waits[0]["id"].as_str().unwrap().to_owned();
    remote(
        &case,
        &served,
        &["waits", "answer", &wait, "--approve", "--by", "ann"],
    )
    .expect_code(4);
    let waits = remote(
        &case,
        &served,
        &[
            "waits", "list", "--run", &review, "--status", "open", "--json",
        ],
    )
    .expect_code(0)
    .json();
    let wait = waits[0]["id"].as_str().unwrap().to_owned();
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
