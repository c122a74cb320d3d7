//! `--model-overhead`: what Cairn adds to a model call as a client sees it.
//! A fake model (`cairn_testkit::PacedModel`, a thread of this process)
//! streams 500 tokens at a fixed pace: the first 25 ms after the request,
//! then one every 4 ms. Each round reads it twice, in alternating order:
//! directly (reqwest and the SSE decoder, as any client of the provider),
//! and through Cairn: `POST /v1/runs` of a one-step crew whose `llm` agent
//! calls the same model, then `GET /v1/runs/{id}/events` (what `cairn runs
//! watch --server` reads), its `output_delta` text timed as it arrives.
//! Both clocks start when the client starts (the request to the model; the
//! submit) and stop at the arrival of the first and of the last piece of
//! text. The model's own notes (when a request arrived, when its first and
//! last token left) split Cairn's extra time into getting to the model
//! (submit, claim, the step's start) and the way back (model → step → live
//! stream → SSE client).
//!
//! Shapes: SQLite, one `cairn serve` (its runner runs the step); and on
//! PostgreSQL the same, and a fleet: a server that only serves and a
//! worker (another `Engine` on its own pool and live hub, as `cairn
//! worker` in another process), the text crossing through `NOTIFY`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};

use cairn::{Crew, Engine, ExecutorConfig, OpenOptions, WorkOptions};
use cairn_server::{ServeOptions, Server};
use cairn_testkit::{PacedCall, PacedModel};

use crate::workers::percentile;
use crate::{ms, round2, PgSchema};

/// Tokens per answer.
const TOKENS: usize = 500;
/// The model's time to its first token.
const FIRST_AFTER: Duration = Duration::from_millis(25);
/// Between tokens: 250 tokens a second.
const GAP: Duration = Duration::from_millis(4);
/// Measured rounds, unless `CAIRN_BENCH_OVERHEAD_RUNS` says otherwise.
const DEFAULT_RUNS: usize = 40;
/// Rounds first, not counted (connections, statement caches, crews).
const WARMUP: usize = 3;
const CREW: &str = "overhead";

/// Where the step runs and who serves its watcher.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// One server whose runner runs the step (`cairn serve`).
    OneProcess,
    /// A server that only serves, a worker that runs the step.
    Fleet,
}

/// One answer as a client saw it, from the client's start.
#[derive(Clone, Copy)]
struct Seen {
    /// To the first piece of text.
    first: Duration,
    /// To the last piece (the text complete).
    last: Duration,
    /// To the model's reading the request.
    to_model: Duration,
    /// From the model's writing its first token to the client's having it.
    first_hop: Duration,
    /// The same for the last token.
    last_hop: Duration,
}

impl Seen {
    /// Tokens a second as the client sees them stream (first to last).
    fn tokens_per_s(&self) -> f64 {
        (TOKENS - 1) as f64 / (self.last - self.first).as_secs_f64()
    }
}

/// One run watched through Cairn.
struct Watched {
    seen: Seen,
    /// `POST /v1/runs` until its answer.
    submit: Duration,
    /// Until the claim (its event's time, the database's or the process's
    /// wall clock).
    to_claim: Duration,
    /// The run's journal items (each one write).
    journal_writes: usize,
    /// Statements this process sent a second while the text streamed.
    statements_per_s: f64,
}

/// One shape's rounds.
struct Found {
    direct: Vec<Seen>,
    cairn: Vec<Watched>,
    /// Runs whose first pieces went out before the watcher listened.
    missed: usize,
}

fn request_body() -> Value {
    json!({"model": "fake-1", "stream": true,
           "messages": [{"role": "user", "content": "Write 500 tokens."}]})
}

/// The model's note of the answer after the first `before`.
async fn call_after(model: &PacedModel, before: usize) -> Result<PacedCall> {
    let t = Instant::now();
    loop {
        if let Some(c) = model.calls().get(before) {
            return Ok(*c);
        }
        ensure!(
            t.elapsed() < Duration::from_secs(5),
            "the model noted no answer"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn seen(
    t0: Instant,
    first: Option<Instant>,
    last: Option<Instant>,
    call: PacedCall,
) -> Result<Seen> {
    let (first, last) = (first.context("no text")?, last.context("no text")?);
    Ok(Seen {
        first: first - t0,
        last: last - t0,
        to_model: call.arrived.saturating_duration_since(t0),
        first_hop: first.saturating_duration_since(call.first_sent),
        last_hop: last.saturating_duration_since(call.last_sent),
    })
}

/// The model read directly, as a client of the provider would.
async fn direct(http: &reqwest::Client, model: &PacedModel) -> Result<Seen> {
    let before = model.calls().len();
    let t0 = Instant::now();
    let response = http
        .post(format!("{}/chat/completions", model.base_url))
        .json(&request_body())
        .send()
        .await?
        .error_for_status()?;
    let events = cairn::sse::events(response.bytes_stream(), cairn::sse::Decoder::new());
    let mut events = std::pin::pin!(events);
    let (mut text, mut first, mut last) = (String::new(), None, None);
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| anyhow!("the model's stream broke: {e}"))?;
        let Ok(chunk) = serde_json::from_str::<Value>(&event.data) else {
            continue; // [DONE]
        };
        if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
            let now = Instant::now();
            text.push_str(piece);
            first.get_or_insert(now);
            last = Some(now);
        }
    }
    ensure!(text == model.text(), "the direct read lost text");
    seen(t0, first, last, call_after(model, before).await?)
}

/// The text of a run as its event stream carries it.
#[derive(Default)]
struct Heard {
    text: String,
    first: Option<Instant>,
    last: Option<Instant>,
    statements: Option<(u64, u64)>,
    succeeded: bool,
    /// When the run was claimed, µs since the epoch.
    claimed_us: Option<i64>,
}

impl Heard {
    fn hear(&mut self, event: &cairn::sse::Event) -> Result<()> {
        match event.event.as_str() {
            "output_delta" => {
                let delta: Value = serde_json::from_str(&event.data)?;
                let now = Instant::now();
                self.text
                    .push_str(delta["text"].as_str().unwrap_or_default());
                self.first.get_or_insert(now);
                self.last = Some(now);
                let s = cairn::store_statements();
                let (s0, _) = self.statements.unwrap_or((s, s));
                self.statements = Some((s0, s));
            }
            "run_claimed" => {
                let record: cairn::EventRecord = serde_json::from_str(&event.data)?;
                self.claimed_us = Some(record.at.timestamp_micros());
            }
            "run_succeeded" => self.succeeded = true,
            "run_failed" | "run_cancelled" => {
                bail!("the run ended {}: {}", event.event, event.data)
            }
            _ => {}
        }
        Ok(())
    }
}

/// One run through Cairn: submitted, then watched over SSE. `None`: its
/// first pieces went out before the watcher listened.
async fn watched(
    http: &reqwest::Client,
    server: &str,
    model: &PacedModel,
) -> Result<Option<Watched>> {
    let before = model.calls().len();
    let t0 = Instant::now();
    let wall_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_micros() as i64;
    let run: Value = http
        .post(format!("{server}/v1/runs"))
        .json(&json!({"crew": CREW, "input": {"ask": "500 tokens"}}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let submit = t0.elapsed();
    let id = run["id"].as_str().context("the submit answered no id")?;
    let response = http
        .get(format!("{server}/v1/runs/{id}/events"))
        .send()
        .await?
        .error_for_status()?;
    let events = cairn::sse::events(response.bytes_stream(), cairn::sse::Decoder::new());
    let mut events = std::pin::pin!(events);
    let mut heard = Heard::default();
    while let Some(event) = events.next().await {
        heard.hear(&event.map_err(|e| anyhow!("the event stream broke: {e}"))?)?;
    }
    ensure!(heard.succeeded, "run {id}: the stream ended before the run");
    let whole = model.text();
    if heard.text != whole {
        ensure!(
            whole.ends_with(&heard.text),
            "run {id}: the live text is not the model's ({} of {} bytes)",
            heard.text.len(),
            whole.len()
        );
        return Ok(None);
    }
    let journal: Value = http
        .get(format!("{server}/v1/runs/{id}/journal"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let seen = seen(
        t0,
        heard.first,
        heard.last,
        call_after(model, before).await?,
    )?;
    let (s0, s1) = heard.statements.unwrap_or_default();
    Ok(Some(Watched {
        seen,
        submit,
        to_claim: Duration::from_micros(
            heard
                .claimed_us
                .map_or(0, |c| c.saturating_sub(wall_us).max(0) as u64),
        ),
        journal_writes: journal["items"].as_array().map_or(0, Vec::len),
        statements_per_s: (s1 - s0) as f64 / (seen.last - seen.first).as_secs_f64(),
    }))
}

/// A `cairn serve` in this process (and, for a fleet, a worker), stopped
/// when dropped.
struct Served {
    url: String,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start(db_url: &str, model: &PacedModel, shape: Shape) -> Result<Served> {
        let dir = tempfile::tempdir()?;
        let crews = dir.path().join("crews");
        std::fs::create_dir_all(&crews)?;
        let toml = format!(
            "name = \"{CREW}\"\nversion = \"1\"\n[[agents]]\nrole = \"writer\"\nkind = \"llm\"\n\
             provider = \"openai\"\nmodel = \"fake-1\"\nbase_url = \"{}\"\n",
            model.base_url
        );
        std::fs::write(crews.join("overhead.toml"), &toml)?;
        let server = Server::bind(ServeOptions {
            db_url: db_url.to_owned(),
            crews_dir: crews.clone(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            concurrency: match shape {
                Shape::OneProcess => 1,
                Shape::Fleet => 0,
            },
            ..ServeOptions::default()
        })
        .await?;
        let url = format!("http://{}", server.local_addr()?);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let mut tasks = vec![tokio::spawn({
            let until = until(stopped.clone());
            async move {
                if let Err(e) = server.run_until(until).await {
                    eprintln!("the server stopped: {e:#}");
                }
            }
        })];
        if shape == Shape::Fleet {
            let worker =
                Engine::open_with(db_url, &OpenOptions::default(), ExecutorConfig::default())
                    .await?;
            worker.register(&Crew::from_file(crews.join("overhead.toml"))?);
            let until = until(stopped);
            tasks.push(tokio::spawn(async move {
                let opts = WorkOptions {
                    concurrency: 1,
                    poll: Duration::from_millis(200),
                    ..WorkOptions::default()
                };
                if let Err(e) = worker.work(opts, until).await {
                    eprintln!("the worker stopped: {e:#}");
                }
            }));
        }
        Ok(Served {
            url,
            stop: Some(stop),
            tasks,
            _dir: dir,
        })
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

fn runs() -> usize {
    std::env::var("CAIRN_BENCH_OVERHEAD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_RUNS)
}

/// Rounds of one direct read and one watched run, in alternating order.
async fn measure(db_url: &str, model: &PacedModel, shape: Shape) -> Result<Found> {
    let served = Served::start(db_url, model, shape).await?;
    let http = reqwest::Client::new();
    let mut found = Found {
        direct: vec![],
        cairn: vec![],
        missed: 0,
    };
    let rounds = WARMUP + runs();
    for round in 0..rounds {
        let watched_first = round % 2 == 0;
        let mut w = None;
        if watched_first {
            w = Some(watched(&http, &served.url, model).await?);
        }
        let d = direct(&http, model).await?;
        if !watched_first {
            w = Some(watched(&http, &served.url, model).await?);
        }
        if round < WARMUP {
            continue;
        }
        found.direct.push(d);
        match w.flatten() {
            Some(w) => found.cairn.push(w),
            None => found.missed += 1,
        }
    }
    served.stop().await;
    Ok(found)
}

/// p50 and p99 of `f` over `v`, ms.
fn p50_p99<T>(v: &[T], f: impl Fn(&T) -> Duration) -> (f64, f64) {
    let d: Vec<Duration> = v.iter().map(f).collect();
    (ms(percentile(&d, 0.5)), ms(percentile(&d, 0.99)))
}

fn median_of(v: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One shape's figures: printed, and put in `out` under `prefix`.
fn report(out: &mut Map<String, Value>, prefix: &str, f: &Found) -> Result<()> {
    ensure!(!f.cairn.is_empty(), "{prefix}: no watched run counted");
    let cairn: Vec<Seen> = f.cairn.iter().map(|w| w.seen).collect();
    let (d_first, c_first) = (
        p50_p99(&f.direct, |s| s.first),
        p50_p99(&cairn, |s| s.first),
    );
    let (d_last, c_last) = (p50_p99(&f.direct, |s| s.last), p50_p99(&cairn, |s| s.last));
    let (d_to, c_to) = (
        p50_p99(&f.direct, |s| s.to_model),
        p50_p99(&cairn, |s| s.to_model),
    );
    let (d_hop, c_hop) = (
        p50_p99(&f.direct, |s| s.first_hop),
        p50_p99(&cairn, |s| s.first_hop),
    );
    let (d_lhop, c_lhop) = (
        p50_p99(&f.direct, |s| s.last_hop),
        p50_p99(&cairn, |s| s.last_hop),
    );
    let submit = p50_p99(&f.cairn, |w| w.submit);
    let claim = p50_p99(&f.cairn, |w| w.to_claim);
    let (d_tps, c_tps) = (
        median_of(f.direct.iter().map(Seen::tokens_per_s)),
        median_of(cairn.iter().map(Seen::tokens_per_s)),
    );
    let writes = f.cairn.iter().map(|w| w.journal_writes).max().unwrap_or(0);
    let statements = median_of(f.cairn.iter().map(|w| w.statements_per_s));
    let added = |c: (f64, f64), d: (f64, f64)| (c.0 - d.0, c.1 - d.1);
    let (first_added, last_added) = (added(c_first, d_first), added(c_last, d_last));
    println!(
        "{prefix}: {} runs ({} more missed their first pieces), ms p50 / p99",
        f.cairn.len(),
        f.missed
    );
    println!(
        "  first token   direct {:7.2} / {:7.2}   via Cairn {:7.2} / {:7.2}   added {:6.2} / {:6.2} (target ≤ 5 at p50)",
        d_first.0, d_first.1, c_first.0, c_first.1, first_added.0, first_added.1
    );
    println!(
        "    to the model: direct {:.2} / {:.2}, Cairn {:.2} / {:.2} (submit answered {:.2} / {:.2}, \
         claim begun {:.2} / {:.2}); model → client of the first token: direct {:.2} / {:.2}, \
         Cairn {:.2} / {:.2}",
        d_to.0, d_to.1, c_to.0, c_to.1, submit.0, submit.1, claim.0, claim.1,
        d_hop.0, d_hop.1, c_hop.0, c_hop.1
    );
    println!(
        "  last token    direct {:7.2} / {:7.2}   via Cairn {:7.2} / {:7.2}   added {:6.2} / {:6.2} \
         (model → client: direct {:.2} / {:.2}, Cairn {:.2} / {:.2})",
        d_last.0, d_last.1, c_last.0, c_last.1, last_added.0, last_added.1,
        d_lhop.0, d_lhop.1, c_lhop.0, c_lhop.1
    );
    println!(
        "  tokens/s      direct {d_tps:.1}   via Cairn {c_tps:.1}   ratio {:.3} (target ≥ 0.97); \
         journal writes per response {writes}; statements/s while streaming {statements:.1}",
        c_tps / d_tps
    );
    let key = |k: &str| format!("{prefix}_model_overhead_{k}");
    for (k, v) in [
        ("first_token_added_ms_p50", first_added.0),
        ("first_token_added_ms_p99", first_added.1),
        ("last_token_added_ms_p50", last_added.0),
        ("last_token_added_ms_p99", last_added.1),
        ("to_model_added_ms_p50", c_to.0 - d_to.0),
        ("first_token_hop_added_ms_p50", c_hop.0 - d_hop.0),
        ("last_token_hop_added_ms_p50", c_lhop.0 - d_lhop.0),
        ("submit_ms_p50", submit.0),
        ("claim_ms_p50", claim.0),
        ("tokens_per_s_ratio", c_tps / d_tps),
        ("statements_per_s_streaming", statements),
    ] {
        out.insert(key(k), json!(round2(v)));
    }
    out.insert(key("journal_writes_per_response"), json!(writes));
    out.insert(key("missed"), json!(f.missed));
    Ok(())
}

/// The keys without a prefix: the worst shape's figure.
fn worst(out: &mut Map<String, Value>, prefixes: &[&str]) {
    let of = |k: &str, pick: fn(f64, f64) -> f64| {
        prefixes
            .iter()
            .filter_map(|p| out.get(&format!("{p}_model_overhead_{k}"))?.as_f64())
            .reduce(pick)
    };
    let worst: Vec<(&str, Option<f64>)> = vec![
        (
            "first_token_added_ms_p50",
            of("first_token_added_ms_p50", f64::max),
        ),
        (
            "first_token_added_ms_p99",
            of("first_token_added_ms_p99", f64::max),
        ),
        ("tokens_per_s_ratio", of("tokens_per_s_ratio", f64::min)),
        (
            "journal_writes_per_response",
            of("journal_writes_per_response", f64::max),
        ),
    ];
    for (k, v) in worst {
        if let Some(v) = v {
            out.insert(format!("model_overhead_{k}"), json!(v));
        }
    }
}

pub(crate) async fn run(pg_url: &str) -> Result<()> {
    let model = PacedModel::start(TOKENS, FIRST_AFTER, GAP)?;
    println!(
        "Model overhead: {TOKENS} tokens, the first {} ms after the request, then one every {} ms; \
         {} rounds of one direct read and one run watched over `GET /v1/runs/{{id}}/events`",
        FIRST_AFTER.as_millis(),
        GAP.as_millis(),
        runs()
    );
    let mut out = Map::new();
    let mut prefixes = vec!["sqlite"];
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("overhead.db").display());
    let sqlite = measure(&url, &model, Shape::OneProcess)
        .await
        .context("SQLite")?;
    report(&mut out, "sqlite", &sqlite)?;
    let pg = PgSchema::measured(pg_url, async |schema: &PgSchema| {
        let one = measure(&schema.url, &model, Shape::OneProcess).await?;
        let fleet = measure(&schema.url, &model, Shape::Fleet).await?;
        Ok((one, fleet))
    })
    .await?;
    if let Some((one, fleet)) = pg {
        report(&mut out, "postgres", &one)?;
        report(&mut out, "postgres_fleet", &fleet)?;
        prefixes.extend(["postgres", "postgres_fleet"]);
    }
    worst(&mut out, &prefixes);
    println!("{}", Value::Object(out));
    Ok(())
}
