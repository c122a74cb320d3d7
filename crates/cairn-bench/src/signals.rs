//! `cairn-bench --signals`: what schedules cost while none is due, and how
//! long a signal takes to wake its step. One `cairn serve` on SQLite and on
//! PostgreSQL (its embedded runner is the worker; its `/metrics` count the
//! statements it sends):
//!
//! - **Idle schedules**: statements per second of the idle server over
//!   10 s, with no schedule and then with 1,000 that are not due (cron once
//!   a year); the difference is what the schedule set costs.
//! - **Signal latency**: 100 runs each wait at a `signal` step; one at a
//!   time, a signal is sent through `POST /v1/signals`, and the time from
//!   its `sent_at` to its run's `signal_consumed` event (both by the
//!   database's clock) is the delivery: the wake, the claim, the read and
//!   the consuming commit. Median and p99.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use cairn::schedule::{CatchUp, Overlap};
use cairn::{Cadence, Crew, Engine, EventKind, ExecutorConfig, NewSchedule, OpenOptions};
use cairn::{RunStatus, SubmitOptions};

use crate::{round2, PgSchema};

const SCHEDULES: usize = 1_000;
const SIGNALED_RUNS: usize = 100;
const WINDOW: Duration = Duration::from_secs(10);

struct Served(Child, u16);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.0 request over a plain socket: the answer's body.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> Result<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned())
}

fn statements(port: u16) -> Result<u64> {
    let text = http(port, "GET", "/metrics", None)?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("cairn_store_statements_total ")?
                .trim()
                .parse()
                .ok()
        })
        .context("no cairn_store_statements_total in /metrics")
}

fn serve(cairn: &Path, url: &str, log: &Path) -> Result<Served> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(cairn)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--db",
            url,
        ])
        .env("CAIRN_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .context("starting cairn serve")?;
    let served = Served(child, port);
    let start = Instant::now();
    while statements(port).is_err() {
        if start.elapsed() > Duration::from_secs(30) {
            bail!("cairn serve did not answer /metrics within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(served)
}

/// Statements per second the server sends over the window.
async fn idle_rate(port: u16) -> Result<f64> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (t0, s0) = (Instant::now(), statements(port)?);
    tokio::time::sleep(WINDOW).await;
    Ok((statements(port)? - s0) as f64 / t0.elapsed().as_secs_f64())
}

struct Found {
    idle_per_s: f64,
    idle_schedules_per_s: f64,
    latency_ms: Vec<f64>,
}

async fn measure(cairn: &Path, url: &str) -> Result<Found> {
    let dir = tempfile::tempdir()?;
    let crew_file = dir.path().join("wait.toml");
    std::fs::write(
        &crew_file,
        "name = \"wait\"\nversion = \"1\"\n[[agents]]\nrole = \"go\"\nkind = \"signal\"\nsignal = \"go\"\n",
    )?;
    let crew = Crew::from_file(&crew_file)?;
    let engine = Engine::open_with(url, &OpenOptions::default(), ExecutorConfig::default()).await?;
    let served = serve(cairn, url, &dir.path().join("serve.log"))?;
    let idle_per_s = idle_rate(served.1).await?;
    let yearly = Cadence::cron("0 0 1 1 *", None).map_err(|e| anyhow::anyhow!("{e}"))?;
    for i in 0..SCHEDULES {
        let new = NewSchedule {
            name: format!("s{i}"),
            crew: crew.def().clone(),
            input: json!({}),
            cadence: yearly.clone(),
            overlap: Overlap::Skip,
            catch_up: CatchUp::Latest,
            thread: None,
            priority: Default::default(),
            tenant: None,
            by: None,
        };
        engine.create_schedule(&new).await?;
    }
    let idle_schedules_per_s = idle_rate(served.1).await?;
    let mut ids = vec![];
    for _ in 0..SIGNALED_RUNS {
        ids.push(
            engine
                .submit(&crew, json!({}), SubmitOptions::default())
                .await?
                .run
                .id,
        );
    }
    wait_for(&engine, &ids, RunStatus::Waiting).await?;
    let mut latency_ms = vec![];
    for id in &ids {
        let body = json!({"target": id.to_string(), "name": "go"}).to_string();
        let answer = http(served.1, "POST", "/v1/signals", Some(&body))?;
        let sent: cairn::Sent = serde_json::from_str(&answer).context("POST /v1/signals")?;
        wait_for(&engine, &[*id], RunStatus::Succeeded).await?;
        let consumed = engine
            .events(*id)
            .await?
            .into_iter()
            .find(|e| e.kind == EventKind::SignalConsumed)
            .context("no signal_consumed")?;
        let took = consumed.at - sent.signal.sent_at;
        latency_ms.push(took.num_microseconds().unwrap_or(0) as f64 / 1000.0);
    }
    latency_ms.sort_by(f64::total_cmp);
    Ok(Found {
        idle_per_s,
        idle_schedules_per_s,
        latency_ms,
    })
}

async fn wait_for(engine: &Engine, ids: &[cairn::RunId], status: RunStatus) -> Result<()> {
    let start = Instant::now();
    for id in ids {
        while engine.get_run(*id).await?.status != status {
            if start.elapsed() > Duration::from_secs(120) {
                bail!("run {id} did not become {status} within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

fn report(out: &mut Map<String, Value>, db: &str, f: &Found) {
    let (p50, p99) = (
        percentile(&f.latency_ms, 0.5),
        percentile(&f.latency_ms, 0.99),
    );
    let cost = f.idle_schedules_per_s - f.idle_per_s;
    println!(
        "{db:<10} {:>16.2} {:>24.2} {:>14.2} {:>12.1} {:>12.1}",
        f.idle_per_s, f.idle_schedules_per_s, cost, p50, p99
    );
    out.insert(
        format!("{db}_idle_statements_per_s"),
        json!(round2(f.idle_per_s)),
    );
    out.insert(
        format!("{db}_idle_1000_schedules_statements_per_s"),
        json!(round2(f.idle_schedules_per_s)),
    );
    out.insert(
        format!("{db}_schedule_set_statements_per_s"),
        json!(round2(cost)),
    );
    out.insert(format!("{db}_signal_latency_p50_ms"), json!(round2(p50)));
    out.insert(format!("{db}_signal_latency_p99_ms"), json!(round2(p99)));
}

pub(crate) async fn run(pg_url: &str) -> Result<()> {
    let cairn = crate::workers::cairn_binary()?;
    let mut out = Map::new();
    println!("Signals and schedules: one idle `cairn serve`, then {SCHEDULES} schedules not due; then {SIGNALED_RUNS} signals sent one at a time through POST /v1/signals.");
    println!("backend    idle statements/s   with 1,000 schedules /s   schedules /s   signal p50 ms  p99 ms");
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let sqlite = measure(&cairn, &url).await.context("SQLite")?;
    report(&mut out, "sqlite", &sqlite);
    let pg = PgSchema::measured(pg_url, async |schema: &PgSchema| {
        measure(&cairn, &schema.url).await
    })
    .await?;
    if let Some(pg) = pg {
        report(&mut out, "postgres", &pg);
    }
    println!("{}", Value::Object(out));
    Ok(())
}
