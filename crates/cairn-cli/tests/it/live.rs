//! Live text of `llm` steps: `output_delta` on a run's event stream and
//! `cairn runs watch`, against a model server speaking OpenAI's protocol
//! that streams slowly and holds its response open, so every piece is seen
//! while the step is still running. On PostgreSQL the step runs in a
//! `cairn worker` and the server (API only) and a database-side watch are
//! other processes: the pieces cross them through notifications.

use std::path::PathBuf;
use std::time::Duration;

use cairn_testkit::SlowModel;
use serde_json::Value;

use crate::support::{llm_crew, serve, wait_until, Case, Kind, Spawned};

both_backends!(an_llm_steps_text_is_watched_live_before_the_step_ends);

const PIECES: [&str; 5] = ["Hello", " from", " a", " slow", " model"];
const TOKEN: &str = "live-token-0123456789abcdef";

/// `cairn ARGS` in the background, its stdout in `CASE/NAME.out`.
fn spawn_to(case: &Case, name: &str, args: &[&str]) -> (Spawned, PathBuf) {
    let out = case.path(&format!("{name}.out"));
    let child = case
        .command()
        .args(args)
        .env("CAIRN_API_TOKENS", TOKEN)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(case.path(&format!("{name}.err"))).unwrap())
        .spawn()
        .unwrap();
    (Spawned(child), out)
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The JSON lines of a `--json` watch.
fn lines(path: &PathBuf) -> Vec<Value> {
    read(path)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn streamed_text(lines: &[Value]) -> String {
    lines
        .iter()
        .filter(|l| l["kind"] == "output_delta")
        .map(|l| l["text"].as_str().unwrap())
        .collect()
}

fn an_llm_steps_text_is_watched_live_before_the_step_ends(kind: Kind) {
    let case = Case::new(kind);
    let model = SlowModel::start(&PIECES, Duration::from_millis(60)).unwrap();
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    std::fs::write(crews.join("slow.toml"), llm_crew(&model.base_url, "")).unwrap();
    // SQLite: the server runs the step. PostgreSQL: a worker does, and the
    // server only serves.
    let concurrency = match kind {
        Kind::Sqlite => "4",
        Kind::Postgres => "0",
    };
    let db = case.url().to_owned();
    let served = serve(
        &case,
        &[
            "--crews",
            crews.to_str().unwrap(),
            "--concurrency",
            concurrency,
        ],
        &[("CAIRN_API_TOKENS", TOKEN)],
    );
    let server = served.url.clone();
    let _worker = (kind == Kind::Postgres).then(|| {
        spawn_to(
            &case,
            "worker",
            &["worker", "--poll-ms", "100", "--db", &db],
        )
    });

    let remote = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--server", &server, "--token", TOKEN]);
        case.raw(&all, &[])
    };
    let submitted = remote(&["submit", "slow", "--json"]).expect_code(0).json();
    let id = submitted["id"].as_str().unwrap().to_owned();

    // Three watchers: the server's stream as JSON, the same as text, and
    // (reading the database itself) text.
    let (mut over_api, api_out) = spawn_to(
        &case,
        "watch-api",
        &[
            "runs", "watch", &id, "--json", "--server", &server, "--token", TOKEN,
        ],
    );
    let (mut api_text, api_text_out) = spawn_to(
        &case,
        "watch-api-text",
        &["runs", "watch", &id, "--server", &server, "--token", TOKEN],
    );
    let (mut from_db, db_out) = spawn_to(&case, "watch-db", &["runs", "watch", &id, "--db", &db]);
    wait_until(
        "the model call and every watcher",
        Duration::from_secs(30),
        || {
            model.requests() == 1
                && lines(&api_out).iter().any(|l| l["kind"] == "run_claimed")
                && read(&api_text_out).starts_with("run ")
                && read(&db_out).starts_with("run ")
        },
    );
    model.begin();

    let whole: String = PIECES.concat();
    wait_until(
        "every piece on the API stream",
        Duration::from_secs(30),
        || streamed_text(&lines(&api_out)) == whole,
    );
    // The model holds its response open: the step cannot have ended.
    let run = remote(&["runs", "show", &id, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(run["steps"][0]["status"], "running", "{run}");
    assert_eq!(run["status"], "running");
    if kind == Kind::Postgres {
        // The worker's pieces crossed to a watcher that reads the database.
        wait_until(
            "the pieces at the database watcher",
            Duration::from_secs(30),
            || read(&db_out).contains(&whole),
        );
    }
    model.release();

    for (watch, name) in [
        (&mut over_api, "the JSON watch"),
        (&mut api_text, "the text watch"),
        (&mut from_db, "the database watch"),
    ] {
        let status = watch.wait(name);
        assert!(status.success(), "{name} exited {status:?}");
    }
    let api = lines(&api_out);
    // Each piece once, in order, all before the step's end.
    assert_eq!(streamed_text(&api), whole);
    let pieces_end = api
        .iter()
        .rposition(|l| l["kind"] == "output_delta")
        .unwrap();
    let succeeded = api
        .iter()
        .position(|l| l["kind"] == "step_succeeded")
        .expect("a step_succeeded event");
    assert!(pieces_end < succeeded, "{api:?}");
    for piece in api.iter().filter(|l| l["kind"] == "output_delta") {
        assert_eq!(piece["run_id"], id.as_str());
        assert_eq!(piece["idx"], 0);
        assert_eq!(piece["attempt"], 1);
    }
    // The journaled block is exactly the streamed text.
    let journal = case
        .cairn(&["runs", "journal", &id, "--json"])
        .expect_code(0)
        .json();
    let texts: Vec<&str> = journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "assistant_text")
        .map(|i| i["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, vec![whole.as_str()]);
    // The text watches show the text once and end with the step table.
    let says = format!("writer (step 0) says: {whole}");
    for (out, name) in [(&api_text_out, "API"), (&db_out, "database")] {
        let text = read(out);
        assert_eq!(text.matches(&says).count(), 1, "{name} watch:\n{text}");
        assert!(
            text.contains("run ") && text.contains(" succeeded"),
            "{name} watch:\n{text}"
        );
        assert!(
            text.contains("idx  role"),
            "{name} watch ends with the table:\n{text}"
        );
    }
}

/// On PostgreSQL, live text goes out as notifications only while some
/// process watches (`live_watchers`): eight `llm` steps streaming 50 pieces
/// a second each, watched by nobody, cost the runner's process no more
/// than its heartbeat and checks, about 4 statements a second (it sent a
/// `NOTIFY` per run every 40 ms before, about 200 a second; packed into
/// one per 40 ms, still 25). The text is still journaled.
#[test]
fn streams_nobody_watches_send_no_notifications() {
    const RUNS: usize = 8;
    let case = Case::new(Kind::Postgres);
    let pieces: Vec<String> = (0..100).map(|i| format!("piece {i}. ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let model = SlowModel::start(&pieces, Duration::from_millis(20)).unwrap();
    let crew = case.write("crew.toml", &llm_crew(&model.base_url, ""));
    for _ in 0..RUNS {
        case.cairn(&["submit", crew.to_str().unwrap()])
            .expect_code(0);
    }
    let served = serve(&case, &["--concurrency", "8"], &[]);
    wait_until("every model call", Duration::from_secs(30), || {
        model.requests() == RUNS
    });
    model.begin();
    std::thread::sleep(Duration::from_millis(200));
    let (t0, before) = (
        std::time::Instant::now(),
        crate::support::store_statements(&served.listen),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let sent = crate::support::store_statements(&served.listen) - before;
    let per_s = sent as f64 / t0.elapsed().as_secs_f64();
    model.release();
    eprintln!("{per_s:.1} statements a second while {RUNS} unwatched steps streamed");
    assert!(
        per_s < 12.0,
        "{sent} statements in {:?} while {RUNS} unwatched steps streamed",
        t0.elapsed()
    );
    wait_until("every run to succeed", Duration::from_secs(60), || {
        case.list().iter().all(|r| r["status"] == "succeeded")
    });
    let run = case.show(case.list()[0]["id"].as_str().unwrap());
    assert_eq!(
        run["steps"][0]["output"],
        pieces.concat().trim_end(),
        "{run:#}"
    );
}
