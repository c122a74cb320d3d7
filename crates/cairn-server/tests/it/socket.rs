//! The server as `cairn serve` runs it: bound to a real socket, with the
//! embedded runner executing what the API queues; startup refusals; and a
//! graceful stop that open event streams do not hold up.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{header, Method, Request, StatusCode};
use cairn_server::{Error, ServeOptions, Server};
use cairn_testkit::{Kind, TestDb};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use crate::support::{assert_lines, serve_socket, write_crews, Running};

/// A raw HTTP/1 request over a fresh connection.
async fn http(
    addr: SocketAddr,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, addr.to_string());
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = match body {
        Some(v) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Full::new(Bytes::from(v.to_string()))
        }
        None => Full::new(Bytes::new()),
    };
    let response = sender
        .send_request(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// `GET path` (with the bearer `token`, if any).
async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (StatusCode, String) {
    http(addr, Method::GET, path, token, None).await
}

/// `POST path` with `body` (and the bearer `token`, if any).
async fn post(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, String) {
    http(addr, Method::POST, path, token, body).await
}

/// The `id` in a JSON reply's `text`.
fn id_in(text: &str) -> String {
    let reply: Value = serde_json::from_str(text).unwrap();
    reply["id"].as_str().unwrap().to_owned()
}

async fn start(kind: Kind, tokens: &[&str], concurrency: usize, poll: Duration) -> Running {
    serve_socket(TestDb::of(kind).await, |o| ServeOptions {
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        concurrency,
        poll_interval: poll,
        ..o
    })
    .await
}

impl Running {
    /// Polls a run until `done(run)` holds.
    async fn wait_for(
        &self,
        id: &str,
        token: Option<&str>,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, text) = get(self.addr, &format!("/v1/runs/{id}"), token).await;
            assert_eq!(status, StatusCode::OK, "{text}");
            let run: Value = serde_json::from_str(&text).unwrap();
            if done(&run) {
                return run;
            }
            assert!(Instant::now() < deadline, "run never got there: {run}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Submit over HTTP, the runner executes it, GET shows the result.
async fn submit_and_execute(kind: Kind) {
    let server = start(
        kind,
        &["tok-0123456789abcdef"],
        4,
        Duration::from_millis(50),
    )
    .await;
    let addr = server.addr;
    let (status, _) = http(addr, Method::GET, "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = http(addr, Method::GET, "/readyz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = http(addr, Method::GET, "/v1/crews", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, text) = post(
        addr,
        "/v1/runs",
        Some("tok-0123456789abcdef"),
        Some(json!({"crew": "pipeline", "input": {"name": "net"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let submitted: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(submitted["status"], "queued");
    let id = submitted["id"].as_str().unwrap().to_owned();

    let run = server
        .wait_for(&id, Some("tok-0123456789abcdef"), |r| {
            r["status"] == "succeeded"
        })
        .await;
    assert_eq!(run["steps"][0]["output"], json!({"n": 1}));
    assert_eq!(run["steps"][1]["output"], "n=1 for net");
    assert!(run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["attempt"] == 1));

    // The event stream over the socket ends on its own: the run is done.
    let (status, text) = get(
        addr,
        &format!("/v1/runs/{id}/events"),
        Some("tok-0123456789abcdef"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("event: run_succeeded"), "{text}");

    // The run's last commit is visible before the runner's drive returns
    // and counts itself: read the metrics once the drive is counted.
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = get(addr, "/metrics", Some("tok-0123456789abcdef")).await.1;
        if metrics.contains("cairn_runner_drives_total{outcome=\"succeeded\"}") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        metrics.contains("cairn_runs{status=\"succeeded\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cairn_runner_drives_total{outcome=\"succeeded\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cairn_step_attempts_total 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cairn_step_duration_seconds_count 2\n"),
        "{metrics}"
    );
    server.stop().await;
}

cairn_testkit::both!(submit_and_execute);

async fn post_run(addr: SocketAddr, crew: &str, input: Value) -> String {
    let (status, text) = post(
        addr,
        "/v1/runs",
        None,
        Some(json!({"crew": crew, "input": input})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let run: Value = serde_json::from_str(&text).unwrap();
    run["id"].as_str().unwrap().to_owned()
}

/// The runner is woken by submits and by its own finished drives: with a
/// poll interval of a minute, every run still executes promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_survives_failing_runs_and_wakes_on_submit() {
    let server = start(Kind::Sqlite, &[], 2, Duration::from_secs(60)).await;
    let addr = server.addr;
    let broken = post_run(addr, "broken", json!({})).await;
    let mut ids = vec![];
    for i in 0..6 {
        ids.push(post_run(addr, "greet", json!({"name": i})).await);
    }
    let failed = server
        .wait_for(&broken, None, |r| r["status"] == "failed")
        .await;
    assert_eq!(failed["error"]["kind"], "exit_status");
    for (i, id) in ids.iter().enumerate() {
        let run = server
            .wait_for(id, None, |r| r["status"] == "succeeded")
            .await;
        assert_eq!(run["steps"][0]["output"], format!("Hello {i}"));
    }
    let (_, metrics) = http(addr, Method::GET, "/metrics", None, None).await;
    assert_lines(
        &metrics,
        &[
            "cairn_runner_drives_total{outcome=\"failed\"} 1",
            "cairn_runner_drives_total{outcome=\"succeeded\"} 6",
            "cairn_step_attempts_total 7",
            "cairn_runner_in_flight 0",
        ],
    );
    let (status, _) = http(addr, Method::GET, "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    server.stop().await;
}

/// At most `concurrency` runs execute at once, and the slots are used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_executes_at_most_its_concurrency() {
    let server = start(Kind::Sqlite, &[], 2, Duration::from_millis(50)).await;
    let addr = server.addr;
    let mut ids = vec![];
    for i in 0..6 {
        ids.push(post_run(addr, "slow", json!({"i": i})).await);
    }
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, text) = http(addr, Method::GET, "/v1/runs?status=running", None, None).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let page: Value = serde_json::from_str(&text).unwrap();
        let running = page["runs"].as_array().unwrap().len();
        assert!(running <= 2, "{running} runs executing at once");
        most = most.max(running);
        let (_, text) = http(addr, Method::GET, "/v1/runs?status=succeeded", None, None).await;
        let page: Value = serde_json::from_str(&text).unwrap();
        if page["runs"].as_array().unwrap().len() == ids.len() {
            break;
        }
        assert!(Instant::now() < deadline, "runs did not finish: {page}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(most, 2, "two slots, six runs: both slots were used");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_event_streams() {
    // No runner: the run stays queued, so its stream would never end.
    let server = start(Kind::Sqlite, &[], 0, Duration::from_millis(50)).await;
    let addr = server.addr;
    let (_, text) = post(
        addr,
        "/v1/runs",
        None,
        Some(json!({"crew": "greet", "input": {}})),
    )
    .await;
    let id = id_in(&text);
    let stream =
        tokio::spawn(async move { get(addr, &format!("/v1/runs/{id}/events"), None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stream.is_finished(), "a queued run's stream stays open");
    let started = Instant::now();
    server.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "stopping took {:?}",
        started.elapsed()
    );
    let (status, text) = tokio::time::timeout(Duration::from_secs(5), stream)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("event: run_submitted"), "{text}");
}

#[tokio::test]
async fn startup_refuses_an_open_api_on_the_network_and_bad_crews() {
    let db = TestDb::sqlite();
    let crews = tempfile::tempdir().unwrap();
    write_crews(crews.path());
    let opts = |listen: &str, tokens: &[&str]| ServeOptions {
        db_url: db.url.clone(),
        crews_dir: crews.path().to_owned(),
        listen: listen.parse().unwrap(),
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        ..ServeOptions::default()
    };
    for tokens in [&[][..], &[""], &[" ", ""]] {
        let err = Server::bind(opts("0.0.0.0:0", tokens)).await.err().unwrap();
        assert!(matches!(err, Error::OpenOnNetwork { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("0.0.0.0:0") && message.contains("CAIRN_API_TOKENS"),
            "{message}"
        );
    }
    // Loopback without tokens, or any address with tokens, is fine.
    Server::bind(opts("127.0.0.1:0", &[])).await.unwrap();
    Server::bind(opts("[::1]:0", &[])).await.ok(); // no IPv6 on some machines
    Server::bind(opts("0.0.0.0:0", &["t-0123456789abcdef"]))
        .await
        .unwrap();

    // A crew file that does not load names the file.
    std::fs::write(
        crews.path().join("zz-bad.toml"),
        "name = \"bad\"\nversion = 1\n",
    )
    .unwrap();
    let err = Server::bind(opts("127.0.0.1:0", &[])).await.err().unwrap();
    assert!(matches!(err, Error::CrewFile { .. }), "{err}");
    assert!(err.to_string().contains("zz-bad.toml"), "{err}");
    std::fs::remove_file(crews.path().join("zz-bad.toml")).unwrap();

    // Two files with the same crew name.
    std::fs::write(crews.path().join("again.toml"), crate::support::greet()).unwrap();
    let err = Server::bind(opts("127.0.0.1:0", &[])).await.err().unwrap();
    let message = err.to_string();
    assert!(
        message.contains("again.toml") && message.contains("greet.toml"),
        "{message}"
    );
    std::fs::remove_file(crews.path().join("again.toml")).unwrap();

    // A missing directory.
    let mut missing = opts("127.0.0.1:0", &[]);
    missing.crews_dir = crews.path().join("nope");
    let err = Server::bind(missing).await.err().unwrap();
    assert!(matches!(err, Error::CrewsDir { .. }), "{err}");

    // A database URL that is not one.
    let mut bad_db = opts("127.0.0.1:0", &[]);
    bad_db.db_url = "mysql://x".into();
    let err = Server::bind(bad_db).await.err().unwrap();
    assert!(matches!(err, Error::Open(_)), "{err}");
}

/// A human review end to end through the socket: the runner parks the run
/// `waiting`, the wait is listed and approved over HTTP, and the runner,
/// woken by the answer, finishes the run.
async fn review_answered_over_http(kind: Kind) {
    // A one-minute poll: only the wake-ups of submit and answer move the run.
    let server = start(kind, &["tok-0123456789abcdef"], 2, Duration::from_secs(60)).await;
    let addr = server.addr;
    let tok = Some("tok-0123456789abcdef");
    let (status, text) = post(
        addr,
        "/v1/runs",
        tok,
        Some(json!({"crew": "review", "input": {"topic": "sockets"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let id = id_in(&text);
    let waiting = server
        .wait_for(&id, tok, |r| r["status"] == "waiting")
        .await;
    assert_eq!(waiting["steps"][0]["status"], "waiting");
    assert_eq!(waiting["steps"][0]["output"], "Draft on sockets");

    let (status, text) = http(addr, Method::GET, "/v1/waits?status=open", tok, None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let waits: Value = serde_json::from_str(&text).unwrap();
    let waits = waits["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert_eq!(waits[0]["run_id"], id.as_str());
    assert_eq!(waits[0]["kind"], "review");
    let wait = waits[0]["id"].as_str().unwrap();

    let (status, text) = post(
        addr,
        &format!("/v1/waits/{wait}/answer"),
        tok,
        Some(json!({"decision": "approve", "by": "ann"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answered: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answered["status"], "answered");
    // A `CAIRN_API_TOKENS` token answers as `api`; `by` is only a note.
    assert_eq!(answered["answered_by"], "api");

    let done = server
        .wait_for(&id, tok, |r| r["status"] == "succeeded")
        .await;
    assert_eq!(done["steps"][1]["output"], "PUBLISHED Draft on sockets");
    let (_, events) = get(addr, &format!("/v1/runs/{id}/events"), tok).await;
    for kind in [
        "event: wait_opened",
        "event: wait_answered",
        "event: run_succeeded",
    ] {
        assert!(events.contains(kind), "no `{kind}` in {events}");
    }
    let (status, text) = http(addr, Method::GET, "/v1/waits?status=open", tok, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["waits"],
        json!([])
    );
    server.stop().await;
}

cairn_testkit::both!(review_answered_over_http);

/// Operator actions through the socket are executed by the runner: a
/// retried run and a fork both finish without another request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_executes_what_operator_actions_queue() {
    let server = start(Kind::Sqlite, &[], 2, Duration::from_secs(60)).await;
    let addr = server.addr;
    let id = post_run(addr, "flaky", json!({"name": "r"})).await;
    server
        .wait_for(&id, None, |r| r["status"] == "failed")
        .await;
    let (status, text) = post(addr, &format!("/v1/runs/{id}/retry"), None, None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let done = server
        .wait_for(&id, None, |r| r["status"] == "succeeded")
        .await;
    assert_eq!(done["steps"][1]["attempt"], 2);

    let source = post_run(addr, "pipeline", json!({"name": "src"})).await;
    let before = server
        .wait_for(&source, None, |r| r["status"] == "succeeded")
        .await;
    let (status, text) = post(
        addr,
        &format!("/v1/runs/{source}/fork"),
        None,
        Some(json!({"from_step": 1, "reason": "again"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let fork = id_in(&text);
    let forked = server
        .wait_for(&fork, None, |r| r["status"] == "succeeded")
        .await;
    assert_eq!(forked["steps"][0], before["steps"][0], "copied, not run");
    assert_eq!(forked["steps"][1]["output"], "n=1 for src");
    server.stop().await;
}

/// The runner applies wait deadlines: a review nobody answers is approved
/// by its deadline default and the run finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_applies_wait_deadlines() {
    let server = start(Kind::Sqlite, &[], 2, Duration::from_millis(50)).await;
    let addr = server.addr;
    let id = post_run(addr, "deadline", json!({"topic": "time"})).await;
    let done = server
        .wait_for(&id, None, |r| r["status"] == "succeeded")
        .await;
    assert_eq!(done["steps"][0]["output"], "Draft on time");
    let (_, text) = get(addr, &format!("/v1/waits?run={id}"), None).await;
    let waits: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(waits["waits"][0]["status"], "answered", "{waits}");
    assert_eq!(waits["waits"][0]["answered_by"], "deadline");
    server.stop().await;
}

/// The embedded runner is a lease-based worker: a run claimed by a process
/// that then died (its lease expired, nobody heartbeats) is taken over from
/// its checkpoint and finished, and counted as a takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_takes_over_a_run_whose_holder_died() {
    // SQLite and a one-minute poll: nothing wakes the runner but the API.
    let server = start(Kind::Sqlite, &[], 2, Duration::from_secs(60)).await;
    // Once a first run is done, the runner sleeps until the API wakes it.
    let first = post_run(server.addr, "greet", json!({"name": "first"})).await;
    server
        .wait_for(&first, None, |r| r["status"] == "succeeded")
        .await;
    // Let the runner finish booking that drive and go back to sleep.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let dead = cairn::Engine::open_with(
        &server.db.url,
        &cairn::OpenOptions::default(),
        cairn::ExecutorConfig {
            owner: "dead-worker".into(),
            lease: Duration::from_millis(300),
            ..cairn::ExecutorConfig::default()
        },
    )
    .await
    .unwrap();
    let crew = cairn::Crew::from_file(server.crews.path().join("greet.toml")).unwrap();
    let id = dead
        .submit(
            &crew,
            json!({"name": "orphan"}),
            cairn::SubmitOptions::default(),
        )
        .await
        .unwrap()
        .run
        .id;
    let claimed = dead
        .claim_next()
        .await
        .unwrap()
        .expect("the dead worker claims it");
    assert_eq!(claimed.run.id, id);
    drop(claimed); // never driven: the worker "died" holding the lease
    tokio::time::sleep(Duration::from_millis(400)).await;
    // A submit wakes the runner; it claims the expired run too.
    let other = post_run(server.addr, "greet", json!({"name": "new"})).await;
    let run = server
        .wait_for(&id.to_string(), None, |r| r["status"] == "succeeded")
        .await;
    assert_eq!(run["steps"][0]["output"], "Hello orphan");
    assert_eq!(run["steps"][0]["takeovers"], 1);
    assert!(run["lease_epoch"].as_i64().unwrap() >= 2);
    server
        .wait_for(&other, None, |r| r["status"] == "succeeded")
        .await;
    let (_, metrics) = http(server.addr, Method::GET, "/metrics", None, None).await;
    // This process's count, and the event log's (every process).
    assert_lines(
        &metrics,
        &["cairn_lease_takeovers_total 1", "cairn_lease_takeovers 1"],
    );
    server.stop().await;
}

/// `/metrics` counts tokens and cost by crew and, for `llm` steps,
/// provider and model: an `llm` run's tokens and what they cost under the
/// server's price table show under its crew, provider and model, and its
/// step's row has the cost a hand computation gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_tokens_and_cost_by_crew_provider_and_model() {
    let prices = "version = \"t\"\n[[prices]]\nprovider = \"scripted\"\nmodel = \"scripted\"\n\
                  input = 2.0\noutput = 10.0\n";
    let prices = std::sync::Arc::new(cairn::PriceTable::parse(prices).unwrap());
    let server = serve_socket(TestDb::sqlite(), |o| ServeOptions {
        concurrency: 2,
        poll_interval: Duration::from_millis(50),
        prices: Some(prices),
        ..o
    })
    .await;
    let addr = server.addr;
    let id = post_run(addr, "agent", json!({"word": "hi"})).await;
    let run = server
        .wait_for(&id, None, |r| r["status"] == "succeeded")
        .await;
    let step = &run["steps"][0];
    let (input, output) = (
        step["input_tokens"].as_u64().unwrap_or(0),
        step["output_tokens"].as_u64().unwrap_or(0),
    );
    assert!(input > 0, "{run}");
    // $2 and $10 per million tokens: 2,000 and 10,000 billionths each.
    let dollars = (input * 2_000 + output * 10_000) as f64 / 1e9;
    assert_eq!(step["cost_usd"].as_f64(), Some(dollars), "{run}");
    let mut metrics = String::new();
    let who = "crew=\"agent\",provider=\"scripted\",model=\"scripted\"";
    let lines = [
        format!("cairn_tokens_total{{{who},direction=\"input\"}} {input}"),
        format!("cairn_cost_usd_total{{{who}}} {dollars}"),
    ];
    let has = |m: &str| lines.iter().all(|line| m.lines().any(|l| l == line));
    for _ in 0..200 {
        metrics = http(addr, Method::GET, "/metrics", None, None).await.1;
        if has(&metrics) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(has(&metrics), "no `{lines:?}` in {metrics}");
    server.stop().await;
}
