//! `cairn-bench --rate-limit`: a rate-limited provider shared by a fleet.
//! A fake model speaking OpenAI's streamed Chat Completions (in this
//! process, on 127.0.0.1) enforces 60 requests and 20,000 tokens in any
//! sliding minute and answers "429 Too Many Requests" with `Retry-After`
//! (whole seconds until the window has room) beyond them. Three `cairn
//! worker` processes on PostgreSQL hold 64 runs in flight; each run has 4
//! `llm` steps of one call, with one attempt only (a 429 that spent an
//! attempt would fail its run). Measured over 3 minutes
//! (`CAIRN_BENCH_RATE_SECS`), twice: with no configuration (the provider's
//! `Retry-After` pauses the key for every worker) and with `cairn limits
//! set KEY --rpm 60 --tpm 20000`. Reported: the provider's allowed rate
//! used, the 429s, requests that reached it while a pause it announced
//! still stood (and of those, the ones over 250 ms after the 429 that
//! announced it: sent by a caller that could have known), failed runs and
//! retry attempts spent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::body::Bytes;
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;

use cairn::{Crew, Engine, ExecutorConfig, OpenOptions, SubmitOptions};

use crate::workers::{cairn_binary, spawn_workers};
use crate::{round2, PgSchema};

const RPM: usize = 60;
const TPM: usize = 20_000;
const WINDOW: Duration = Duration::from_secs(60);
const COMPLETION_TOKENS: usize = 100;
const RUNS: usize = 64;
const WORKERS: usize = 3;
const STEPS: usize = 4;

/// The provider's books.
#[derive(Default)]
struct Books {
    /// Accepted calls in the last minute: when, and their tokens.
    window: VecDeque<(Instant, usize)>,
    accepted: Vec<Instant>,
    refused: usize,
    /// Requests that arrived before the end of a pause this provider had
    /// announced in a `Retry-After`.
    during_pause: usize,
    /// Of those, the ones that arrived over [`SENT_BEFORE`] after the 429
    /// that announced it: sent by a caller that should have known.
    late_in_pause: usize,
    paused_until: Option<Instant>,
    announced: Option<Instant>,
}

/// A request that reaches the provider within this of a 429 was very
/// likely sent before the caller could have recorded the pause (a race
/// between callers, not a call on a key known to be paused).
const SENT_BEFORE: Duration = Duration::from_millis(250);

impl Books {
    /// Whether a call of `tokens` fits now; else the whole seconds to wait.
    fn admit(&mut self, now: Instant, tokens: usize) -> Option<u64> {
        if self.paused_until.is_some_and(|p| now < p) {
            self.during_pause += 1;
            if self.announced.is_some_and(|a| now - a > SENT_BEFORE) {
                self.late_in_pause += 1;
            }
        }
        while self.window.front().is_some_and(|(t, _)| now - *t >= WINDOW) {
            self.window.pop_front();
        }
        let used: usize = self.window.iter().map(|(_, n)| n).sum();
        if self.window.len() < RPM && used + tokens <= TPM {
            self.window.push_back((now, tokens));
            self.accepted.push(now);
            return None;
        }
        // Room comes when enough of the oldest calls leave the window.
        let (mut count, mut left) = (self.window.len(), used);
        let mut at = now;
        for (t, n) in &self.window {
            if count < RPM && left + tokens <= TPM {
                break;
            }
            count -= 1;
            left -= n;
            at = *t + WINDOW;
        }
        let secs = (at - now).as_secs_f64().ceil().max(1.0) as u64;
        let until = now + Duration::from_secs(secs);
        if self.paused_until.is_none_or(|p| p <= now) {
            self.announced = Some(now);
        }
        self.paused_until = Some(self.paused_until.map_or(until, |p| p.max(until)));
        self.refused += 1;
        Some(secs)
    }
}

async fn answer(books: Arc<Mutex<Books>>, body: Bytes) -> axum::response::Response {
    let prompt = body.len().div_ceil(4);
    let verdict = match books.lock() {
        Ok(mut b) => b.admit(Instant::now(), prompt + COMPLETION_TOKENS),
        Err(_) => Some(1),
    };
    let builder = axum::response::Response::builder();
    if let Some(secs) = verdict {
        let error = json!({"error": {"message": "Rate limit reached", "type": "requests"}});
        return builder
            .status(429)
            .header("content-type", "application/json")
            .header("retry-after", secs.to_string())
            .body(axum::body::Body::from(error.to_string()))
            .unwrap_or_default();
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).to_string()
    };
    let usage = json!({"choices": [], "usage": {"prompt_tokens": prompt,
                                                "completion_tokens": COMPLETION_TOKENS}});
    let text = [
        chunk(json!({"content": "an answer"}), Value::Null),
        chunk(json!({}), json!("stop")),
        usage.to_string(),
        "[DONE]".to_owned(),
    ]
    .map(|d| format!("data: {d}\n\n"))
    .concat();
    builder
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from(text))
        .unwrap_or_default()
}

struct Found {
    used: f64,
    accepted: usize,
    refused: usize,
    during_pause: usize,
    late_in_pause: usize,
    failed: i64,
    attempts_spent: i64,
    succeeded: i64,
}

async fn measure(schema: &PgSchema, limited: bool, secs: u64) -> Result<Found> {
    let books = Arc::new(Mutex::new(Books::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base_url = format!("http://{}/v1", listener.local_addr()?);
    let b = books.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: Bytes| answer(b.clone(), body)),
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir()?;
    let mut crew = String::from("name = \"rate-limit\"\nversion = \"1\"\n");
    for i in 0..STEPS {
        crew.push_str(&format!(
            "[[agents]]\nrole = \"r{i}\"\nkind = \"llm\"\nprovider = \"openai\"\n\
             model = \"fake-1\"\nbase_url = \"{base_url}\"\nmax_tokens = 200\n\
             retry = {{ max_attempts = 1 }}\n"
        ));
    }
    let crew_file = dir.path().join("crew.toml");
    std::fs::write(&crew_file, crew)?;
    let crew = Crew::from_file(&crew_file)?;
    let engine = Engine::open_with(
        &schema.url,
        &OpenOptions::default(),
        ExecutorConfig::default(),
    )
    .await?;
    if limited {
        let key = format!("provider=openai,url={base_url},key=OPENAI_API_KEY");
        let limits = cairn::KeyLimits {
            in_flight: None,
            rpm: Some(RPM as u32),
            tpm: Some(TPM as u32),
            max_pause_ms: None,
        };
        engine.set_limits(&key, &limits).await?;
    }
    let cairn = cairn_binary()?;
    let per = RUNS.div_ceil(WORKERS);
    let workers = spawn_workers(&cairn, &schema.url, WORKERS, per, 50, dir.path())?;
    let started = Instant::now();
    for i in 0..RUNS {
        engine
            .submit(&crew, json!({ "i": i }), SubmitOptions::default())
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed())).await;
    drop(workers);
    server.abort();
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(schema.options.clone())
        .await?;
    let count = async |sql: &str| -> Result<i64> {
        Ok(sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await?)
    };
    let failed = count("SELECT count(*) FROM runs WHERE status = 'failed'").await?;
    let succeeded = count("SELECT count(*) FROM runs WHERE status = 'succeeded'").await?;
    let attempts_spent = count("SELECT count(*) FROM steps WHERE attempt > 1").await?;
    let books = books
        .lock()
        .map_err(|_| anyhow::anyhow!("the provider's books"))?;
    let end = started + Duration::from_secs(secs);
    let accepted = books.accepted.iter().filter(|t| **t <= end).count();
    let allowed = RPM as f64 * secs as f64 / 60.0;
    Ok(Found {
        used: accepted as f64 / allowed,
        accepted,
        refused: books.refused,
        during_pause: books.during_pause,
        late_in_pause: books.late_in_pause,
        failed,
        attempts_spent,
        succeeded,
    })
}

pub async fn run(pg_url: &str) -> Result<()> {
    let secs: u64 = std::env::var("CAIRN_BENCH_RATE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180);
    println!(
        "A provider allowing {RPM} requests and {TPM} tokens a minute; {WORKERS} `cairn worker` \
         on PostgreSQL, {RUNS} runs of {STEPS} one-call `llm` steps in flight, {secs} s"
    );
    println!(
        "{:<24} {:>8} {:>9} {:>6} {:>13} {:>15} {:>7} {:>9} {:>10}",
        "configuration",
        "used",
        "accepted",
        "429s",
        "during pause",
        "of them >250ms",
        "failed",
        "retries",
        "succeeded"
    );
    let mut out = serde_json::Map::new();
    for (name, limited) in [("pauses only", false), ("limits set rpm+tpm", true)] {
        let found =
            PgSchema::measured(pg_url, async |s: &PgSchema| measure(s, limited, secs).await)
                .await
                .with_context(|| name.to_owned())?;
        let Some(f) = found else { continue };
        println!(
            "{name:<24} {:>7.1}% {:>9} {:>6} {:>13} {:>15} {:>7} {:>9} {:>10}",
            f.used * 100.0,
            f.accepted,
            f.refused,
            f.during_pause,
            f.late_in_pause,
            f.failed,
            f.attempts_spent,
            f.succeeded
        );
        let prefix = if limited { "limited" } else { "pauses" };
        out.insert(format!("{prefix}_used"), json!(round2(f.used)));
        out.insert(format!("{prefix}_429s"), json!(f.refused));
        out.insert(format!("{prefix}_during_pause"), json!(f.during_pause));
        out.insert(format!("{prefix}_late_in_pause"), json!(f.late_in_pause));
        out.insert(format!("{prefix}_failed"), json!(f.failed));
        out.insert(format!("{prefix}_retries"), json!(f.attempts_spent));
    }
    println!("{}", Value::Object(out));
    Ok(())
}
