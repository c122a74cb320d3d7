//! `cairn-bench --in-flight`: thousands of `llm` steps in flight in one
//! process. A fake model speaking OpenAI's streamed Chat Completions (in
//! this process, on 127.0.0.1) holds every response until all of them have
//! arrived, then streams each over 10 s, a piece a second. One `cairn
//! serve --concurrency N` (its embedded runner is the worker; its
//! `/metrics` count the statements it sends) runs N single-step runs on
//! SQLite and on PostgreSQL, for N = 2,000 and 4,000. Reported: statements
//! per second while every step waits on its stream, resident memory per
//! in-flight step (over the same process idle), the process's peak
//! PostgreSQL connections (`pg_stat_activity`) and leases lost (takeovers).

use std::convert::Infallible;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::body::{Body, Bytes};
use serde_json::{json, Map, Value};
use sqlx::postgres::{PgPool, PgPoolOptions};

use cairn::{Crew, Engine, ExecutorConfig, OpenOptions, RunFilter, RunStatus, SubmitOptions};

use crate::{round2, PgSchema};

/// Steps in flight, unless `CAIRN_BENCH_IN_FLIGHT` lists others (`500,1000`).
const COUNTS: [usize; 2] = [2_000, 4_000];
/// Pieces of each answer, one a second once streaming begins.
const PIECES: usize = 10;
/// How long the bench waits for every request to reach the model.
const ARRIVAL_LIMIT: Duration = Duration::from_secs(120);

/// The fake model: counts requests, holds each until `expected` arrived.
struct Model {
    base_url: String,
    requests: Arc<AtomicUsize>,
    expected: Arc<AtomicUsize>,
}

impl Model {
    async fn start() -> Result<Model> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let requests = Arc::new(AtomicUsize::new(0));
        let expected = Arc::new(AtomicUsize::new(usize::MAX));
        let (r, e) = (requests.clone(), expected.clone());
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move || answer(r.clone(), e.clone())),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Model {
            base_url,
            requests,
            expected,
        })
    }
}

async fn answer(
    requests: Arc<AtomicUsize>,
    expected: Arc<AtomicUsize>,
) -> axum::response::Response {
    requests.fetch_add(1, Ordering::SeqCst);
    let held = Instant::now();
    while requests.load(Ordering::SeqCst) < expected.load(Ordering::SeqCst)
        && held.elapsed() < ARRIVAL_LIMIT
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chunk = |delta: Value, finish: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let pieces = futures_util::stream::unfold(0, move |i| async move {
        let data = match i {
            i if i < PIECES => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                chunk(
                    json!({"content": format!("piece {i} of the answer. ")}),
                    Value::Null,
                )
                .to_string()
            }
            i if i == PIECES => chunk(json!({}), json!("stop")).to_string(),
            i if i == PIECES + 1 => {
                json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 50}})
                    .to_string()
            }
            i if i == PIECES + 2 => "[DONE]".to_owned(),
            _ => return None,
        };
        Some((
            Ok::<_, Infallible>(Bytes::from(format!("data: {data}\n\n"))),
            i + 1,
        ))
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(pieces))
        .unwrap_or_default()
}

/// What one measurement found.
struct Found {
    steps: usize,
    /// From the first submit to the last request reaching the model: the
    /// submits (this process, 16 at a time, as a service's clients would)
    /// and the claims (the server) together.
    ramp_s: f64,
    /// From the first submit to the last one's answer.
    submit_s: f64,
    statements_per_s: f64,
    rss_per_step_kb: f64,
    peak_connections: Option<i64>,
    leases_lost: u64,
    all_succeeded: bool,
}

/// `cairn serve`, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /metrics` over a plain socket: the value of one counter.
fn metric(port: u16, name: &str) -> Result<u64> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .with_context(|| format!("no {name} in /metrics"))
}

/// The first column of `sql` (PostgreSQL only).
async fn count(pool: Option<&PgPool>, sql: &str) -> Option<i64> {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(pool?)
        .await
        .ok()
}

/// Resident memory of a process, KiB.
fn rss_kb(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .context("no VmRSS")
}

async fn measure(
    cairn: &Path,
    url: &str,
    n: usize,
    model: &Model,
    pg: Option<&PgSchema>,
) -> Result<Found> {
    let dir = tempfile::tempdir()?;
    let crew_file = dir.path().join("crew.toml");
    std::fs::write(
        &crew_file,
        format!(
            "name = \"in-flight\"\nversion = \"1\"\n[[agents]]\nrole = \"writer\"\nkind = \"llm\"\n\
             provider = \"openai\"\nmodel = \"fake-1\"\nbase_url = \"{}\"\n",
            model.base_url
        ),
    )?;
    let crew = Crew::from_file(&crew_file)?;
    let engine = Engine::open_with(url, &OpenOptions::default(), ExecutorConfig::default()).await?;
    let app = format!("cairn_inflight_{}", std::process::id());
    let serve_url = match pg {
        Some(_) => format!("{url}&application_name={app}"),
        None => url.to_owned(),
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let served = Served(
        Command::new(cairn)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--concurrency", &n.to_string(), "--db", &serve_url])
            .env("CAIRN_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("serve.log"))?)
            .spawn()
            .context("starting cairn serve")?,
    );
    let pid = served.0.id();
    let listening = Instant::now();
    while metric(port, "cairn_store_statements_total").is_err() {
        if listening.elapsed() > Duration::from_secs(30) {
            bail!("cairn serve did not answer /metrics within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_kb = rss_kb(pid)?;

    let arrived_before = model.requests.load(Ordering::SeqCst);
    model.expected.store(arrived_before + n, Ordering::SeqCst);
    let ramp = Instant::now();
    submit_all(&engine, &crew, n).await?;
    let submit_s = ramp.elapsed().as_secs_f64();
    let connections =
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'");
    let peak = |now: Option<i64>, peak: &mut Option<i64>| {
        if let Some(now) = now {
            *peak = Some(peak.unwrap_or(0).max(now));
        }
    };
    let mut peak_connections = None;
    let pool = match pg {
        Some(s) => Some(
            PgPoolOptions::new()
                .max_connections(1)
                .connect_with(s.options.clone())
                .await?,
        ),
        None => None,
    };
    let count_connections = || count(pool.as_ref(), &connections);
    let started = Instant::now();
    while model.requests.load(Ordering::SeqCst) < arrived_before + n {
        if started.elapsed() > ARRIVAL_LIMIT {
            bail!(
                "only {} of {n} requests reached the model",
                model.requests.load(Ordering::SeqCst) - arrived_before
            );
        }
        peak(count_connections().await, &mut peak_connections);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ramp_s = ramp.elapsed().as_secs_f64();
    // Every step now waits on its stream for ~10 s: the window.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (t0, s0) = (
        Instant::now(),
        metric(port, "cairn_store_statements_total")?,
    );
    let mut max_kb = 0;
    while t0.elapsed() < Duration::from_secs(PIECES as u64 - 3) {
        max_kb = max_kb.max(rss_kb(pid)?);
        peak(count_connections().await, &mut peak_connections);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let s1 = metric(port, "cairn_store_statements_total")?;
    let window = t0.elapsed().as_secs_f64();

    let filter = RunFilter {
        status: Some(RunStatus::Succeeded),
        limit: Some(1_000_000),
        ..RunFilter::default()
    };
    let done = Instant::now();
    let mut succeeded = 0;
    while done.elapsed() < Duration::from_secs(120) {
        peak(count_connections().await, &mut peak_connections);
        succeeded = engine.list(&filter).await?.len();
        if succeeded == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let leases_lost = engine.stats().await?.takeovers;
    drop(served);
    if leases_lost > 0 {
        print_warnings(&dir.path().join("serve.log"));
    }
    Ok(Found {
        steps: n,
        ramp_s,
        submit_s,
        statements_per_s: (s1 - s0) as f64 / window,
        rss_per_step_kb: max_kb.saturating_sub(idle_kb) as f64 / n as f64,
        peak_connections,
        leases_lost,
        all_succeeded: succeeded == n,
    })
}

/// The server's warnings, counted by message (to stderr): why leases were
/// lost.
fn print_warnings(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    for line in text
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
    {
        // The message without its time and fields: the text after the level.
        let message = line
            .split_once("WARN")
            .or_else(|| line.split_once("ERROR"))
            .map_or(line, |(_, m)| m);
        let head: String = message.chars().take(140).collect();
        *seen.entry(head).or_default() += 1;
    }
    for (message, n) in seen {
        eprintln!("  serve.log: {n} × {message}");
    }
}

/// Submitters at once: a burst from a service's many clients.
const SUBMITTERS: usize = 16;

/// `n` single-step runs, submitted by [`SUBMITTERS`] tasks at once.
async fn submit_all(engine: &Engine, crew: &Crew, n: usize) -> Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for first in 0..SUBMITTERS {
        let (engine, crew) = (engine.clone(), crew.clone());
        tasks.spawn(async move {
            for i in (first..n).step_by(SUBMITTERS) {
                engine
                    .submit(&crew, json!({ "i": i }), SubmitOptions::default())
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

fn row(db: &str, f: &Found) {
    println!(
        "{db:<10} {:>6} {:>8.1} {:>8.1} {:>14.1} {:>16.1} {:>10} {:>12} {:>10}",
        f.steps,
        f.submit_s,
        f.ramp_s,
        f.statements_per_s,
        f.rss_per_step_kb,
        f.peak_connections.map_or("-".to_owned(), |c| c.to_string()),
        f.leases_lost,
        if f.all_succeeded { "all" } else { "NOT ALL" },
    );
}

fn put(out: &mut Map<String, Value>, db: &str, f: &Found, last: bool) {
    let mut set = |key: &str, v: Value| {
        out.insert(format!("{db}_in_flight_{}_{key}", f.steps), v.clone());
        if last {
            out.insert(format!("{db}_in_flight_{key}"), v);
        }
    };
    set("ramp_s", json!(round2(f.ramp_s)));
    set("submit_s", json!(round2(f.submit_s)));
    set("statements_per_s", json!(round2(f.statements_per_s)));
    set("rss_per_step_kb", json!(round2(f.rss_per_step_kb)));
    set("leases_lost", json!(f.leases_lost));
    set("all_succeeded", json!(f.all_succeeded));
    if let Some(c) = f.peak_connections {
        set("peak_connections", json!(c));
    }
    if last {
        out.insert(format!("{db}_in_flight_steps"), json!(f.steps));
    }
}

pub(crate) async fn run(pg_url: &str) -> Result<()> {
    let cairn = crate::workers::cairn_binary()?;
    let model = Model::start().await?;
    let mut out = Map::new();
    println!("In flight: N single-step `llm` runs in one `cairn serve --concurrency N`, each answer streamed over {PIECES} s.");
    println!(
        "backend    steps submit s   ramp s   statements/s   RSS/step KiB   peak conns  leases lost  succeeded"
    );
    let counts: Vec<usize> = match std::env::var("CAIRN_BENCH_IN_FLIGHT") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) => COUNTS.to_vec(),
    };
    for (i, &n) in counts.iter().enumerate() {
        let last = i + 1 == counts.len();
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let sqlite = measure(&cairn, &url, n, &model, None)
            .await
            .context("SQLite")?;
        row("sqlite", &sqlite);
        put(&mut out, "sqlite", &sqlite, last);
        let pg = PgSchema::measured(pg_url, async |schema: &PgSchema| {
            measure(&cairn, &schema.url, n, &model, Some(schema)).await
        })
        .await?;
        if let Some(pg) = pg {
            row("postgres", &pg);
            put(&mut out, "postgres", &pg, last);
        }
    }
    println!("{}", Value::Object(out));
    Ok(())
}
