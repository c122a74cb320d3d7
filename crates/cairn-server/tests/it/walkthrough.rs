//! The curl walkthrough of docs/http-api.md, run as it is shown: its shell
//! block is read from docs/http-api.md and run with bash (`-e -o pipefail`, so any
//! failing step fails it) against a server started here on a free port with
//! the repository's `examples/` crews, as `cairn serve --crews examples`
//! would serve them. It used to fail about half the time: an answer
//! returned before the next wait was open.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cairn_server::{ServeOptions, Server};
use cairn_testkit::TestDb;
use tokio::sync::oneshot;

/// A guard against a hang, not a measurement.
const GUARD: Duration = Duration::from_secs(120);

/// The first `sh` block after the line that introduces the walkthrough.
fn walkthrough(readme: &str) -> String {
    let intro = readme
        .find("A full run with a human review")
        .expect("docs/http-api.md introduces the curl walkthrough");
    let rest = &readme[intro..];
    let start = rest.find("```sh\n").expect("a ```sh block follows") + "```sh\n".len();
    let len = rest[start..].find("```").expect("the block ends");
    rest[start..start + len].to_owned()
}

/// Whether `tool` runs here.
fn available(tool: &str) -> bool {
    std::process::Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_curl_walkthrough_runs_as_written() {
    walkthrough_against(None).await;
}

/// The same block against a server with tokens, `CAIRN_TOKEN` exported as
/// the guide says: it sends the token (it used to print `null`s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_curl_walkthrough_runs_as_written_against_a_server_with_tokens() {
    walkthrough_against(Some("walkthrough-token-0123456789")).await;
}

async fn walkthrough_against(token: Option<&str>) {
    let missing: Vec<&str> = ["bash", "curl", "jq"]
        .into_iter()
        .filter(|t| !available(t))
        .collect();
    if !missing.is_empty() {
        let why = format!(
            "{} not installed (apt-get install curl jq)",
            missing.join(", ")
        );
        cairn_testkit::skip("the curl walkthrough", &why);
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = walkthrough(&std::fs::read_to_string(root.join("docs/http-api.md")).unwrap());
    assert!(script.contains("$API"), "{script}");

    let db = TestDb::sqlite();
    let server = Server::bind(ServeOptions {
        db_url: db.url.clone(),
        crews_dir: root.join("examples"),
        listen: "127.0.0.1:0".parse().unwrap(),
        tokens: token.into_iter().map(str::to_owned).collect(),
        ..ServeOptions::default()
    })
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));

    let mut bash = tokio::process::Command::new("bash");
    bash.args(["-e", "-o", "pipefail", "-c", &script])
        .env("API", format!("http://{addr}"))
        .env_remove("CAIRN_TOKEN")
        .kill_on_drop(true);
    if let Some(token) = token {
        bash.env("CAIRN_TOKEN", token);
    }
    let run = bash.output();
    let out = tokio::time::timeout(GUARD, run)
        .await
        .expect("the walkthrough finishes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Each answer says where the run stands; the run ends as the guide says.
    assert!(stdout.contains(r#""status":"answered""#), "{stdout}");
    for event in [
        "event: wait_opened",
        "event: wait_answered",
        "event: run_succeeded",
    ] {
        assert!(stdout.contains(event), "{event}: {stdout}");
    }
    // The final document: jq's pretty output, its `{` alone on a line.
    let last = &stdout[stdout.rfind("\n{\n").expect("the final document") + 1..];
    let run: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["steps"][0]["role"], "writer");
    assert_eq!(run["steps"][0]["attempt"], 2, "{run:#}");
    let published = run["steps"][1]["output"].as_str().unwrap();
    assert!(
        published.starts_with("PUBLISHED On durable agents: "),
        "{published}"
    );

    stop.send(()).unwrap();
    tokio::time::timeout(GUARD, done)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}
