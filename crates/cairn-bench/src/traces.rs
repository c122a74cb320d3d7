//! `--traces`: what tracing adds to a step. Runs of a no-op crew through
//! `Engine::run`, interleaved in rounds on one store, three ways: tracing
//! off; traced, with an exporter whose collector is down (connection
//! refused); traced, with an exporter sending to a collector that takes
//! every export (a socket in this process answering 200, decoding
//! nothing). Per step, µs; and what the exporter sent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use cairn::otel::{OtelConfig, TraceExporter};
use cairn::{Engine, ExecutorConfig};
use cairn_core::Sampler;

use crate::{median, noop_crew, on_both, round2, run_once, us, Target, STEPS};

const ROUNDS: usize = 5;
const RUNS: usize = 6;

struct Numbers {
    off: Vec<Duration>,
    down: Vec<Duration>,
    on: Vec<Duration>,
    requests: usize,
    bytes: usize,
}

/// A collector that takes everything: counts requests and body bytes.
#[derive(Clone, Default)]
struct Sink {
    requests: Arc<AtomicUsize>,
    bytes: Arc<AtomicUsize>,
}

impl Sink {
    async fn start(&self) -> Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let sink = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let sink = sink.clone();
                tokio::spawn(async move {
                    let _ = sink.take(stream).await;
                });
            }
        });
        Ok(endpoint)
    }

    async fn take(&self, stream: tokio::net::TcpStream) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream);
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(length, Ordering::Relaxed);
        reader
            .get_mut()
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await
    }
}

fn config(endpoint: &str) -> Result<OtelConfig> {
    OtelConfig::from_env(|k| match k {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(endpoint.to_owned()),
        "OTEL_BSP_SCHEDULE_DELAY" => Some("200".to_owned()),
        _ => None,
    })?
    .context("an endpoint configures traces")
}

/// `RUNS` runs on `engine`, each timed.
async fn runs(engine: &Engine, crew: &cairn::Crew, into: &mut Vec<Duration>) -> Result<()> {
    for i in 0..RUNS {
        let t = Instant::now();
        run_once(engine, crew, i).await?;
        into.push(t.elapsed());
    }
    Ok(())
}

async fn measure(target: &Target) -> Result<Numbers> {
    let (store, raw) = target.open().await?;
    let plain = Engine::with_store(store.clone(), ExecutorConfig::default());
    let traced = plain.clone().traced(Sampler::AlwaysOn);
    let sink = Sink::default();
    let up = config(&sink.start().await?)?;
    // A port nothing listens on: every export is refused at once.
    let down = config("http://127.0.0.1:9")?;
    let crew = noop_crew("trace-bench", STEPS, None)?;
    run_once(&plain, &crew, 0).await?;
    run_once(&traced, &crew, 0).await?;
    let mut n = Numbers {
        off: vec![],
        down: vec![],
        on: vec![],
        requests: 0,
        bytes: 0,
    };
    for _ in 0..ROUNDS {
        runs(&plain, &crew, &mut n.off).await?;
        let exporter = TraceExporter::start(&traced, down.clone());
        runs(&traced, &crew, &mut n.down).await?;
        exporter.stop().await;
        let exporter = TraceExporter::start(&traced, up.clone());
        runs(&traced, &crew, &mut n.on).await?;
        exporter.stop().await;
    }
    n.requests = sink.requests.load(Ordering::Relaxed);
    n.bytes = sink.bytes.load(Ordering::Relaxed);
    raw.close().await;
    Ok(n)
}

pub async fn run(pg_url: &str) -> Result<()> {
    let (sqlite, postgres) = on_both(pg_url, "traces.db", measure).await?;
    println!(
        "{ROUNDS} rounds of {RUNS} runs of {STEPS} steps each way (Engine::run); µs per step, \
         median run; the collector down refuses connections, up takes every export"
    );
    println!(
        "{:<10} {:>10} {:>14} {:>12} {:>10} {:>10} {:>14}",
        "backend", "off", "collector down", "collector up", "down/off", "up/off", "sent"
    );
    let mut out = serde_json::Map::new();
    for (name, n) in [("sqlite", Some(&sqlite)), ("postgres", postgres.as_ref())] {
        let Some(n) = n else { continue };
        let per_step = |v: &[Duration]| us(median(v)) / f64::from(STEPS);
        let (off, down, on) = (per_step(&n.off), per_step(&n.down), per_step(&n.on));
        println!(
            "{name:<10} {off:>10.1} {down:>14.1} {on:>12.1} {:>9.2}× {:>9.2}× {:>7} req {:>5} KB",
            down / off,
            on / off,
            n.requests,
            n.bytes / 1024
        );
        out.insert(format!("{name}_traces_off_step_us"), json!(round2(off)));
        out.insert(format!("{name}_traces_down_step_us"), json!(round2(down)));
        out.insert(format!("{name}_traces_on_step_us"), json!(round2(on)));
        out.insert(
            format!("{name}_traces_down_ratio"),
            json!(round2(down / off)),
        );
        out.insert(format!("{name}_traces_on_ratio"), json!(round2(on / off)));
        out.insert(format!("{name}_traces_export_bytes"), json!(n.bytes));
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
