//! `postgres_run_round_trips`: the round trips `cairn run` makes on
//! PostgreSQL before the first step's agent is entered, counted on the
//! wire. The engine's store connects through a relay on 127.0.0.1 that
//! reads the client's side of the protocol and counts each message the
//! client then waits on: a startup message (a connection opened), and each
//! `Sync` or simple `Query` (a statement's answer; sqlx prepares a
//! statement the first time a connection uses it, one round trip more).
//! Counted from after the store opened (its migration check is `cairn
//! run`'s too, but it is the open's, not the run's) to the agent's entry:
//! a fresh engine's first run, as a new `cairn run` process makes it, then
//! a second run on the same engine (warm).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use cairn::{
    async_trait, Agent, Crew, Engine, ExecutorConfig, StepContext, StepOutput, Stop, SubmitOptions,
};

use crate::{PgSchema, Target};

/// PostgreSQL's code for an SSL request, sent before the startup message.
const SSL_REQUEST: u32 = 80_877_103;

/// Round trips of a fresh engine's first run and of its second.
pub(crate) struct RoundTrips {
    pub fresh: u64,
    pub warm: u64,
}

/// The agent that reads the count when it is entered.
#[derive(Clone)]
struct Probe {
    trips: Arc<AtomicU64>,
    seen: Arc<AtomicU64>,
}

#[async_trait]
impl Agent for Probe {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        self.seen
            .store(self.trips.load(Ordering::SeqCst), Ordering::SeqCst);
        Ok(StepOutput::new(json!({"probe": "entered"})))
    }
}

/// Measures both counts, prints them, and puts them in `out`
/// (`postgres_run_round_trips`, `_warm`; null when not measured).
pub(crate) async fn report(pg_url: &str, out: &mut Map<String, Value>) {
    let trips = match measure(pg_url).await {
        Ok(trips) => trips,
        Err(e) => {
            println!("note: counting `cairn run`'s round trips failed ({e:#}); they are null.");
            None
        }
    };
    if let Some(t) = &trips {
        println!(
            "PostgreSQL: round trips before the first step's agent: {} (a fresh engine, as \
             `cairn run`; target ≤ 3), {} warm",
            t.fresh, t.warm
        );
    }
    for (key, value) in [
        ("postgres_run_round_trips", trips.as_ref().map(|t| t.fresh)),
        (
            "postgres_run_round_trips_warm",
            trips.as_ref().map(|t| t.warm),
        ),
    ] {
        out.insert(key.into(), value.map_or(Value::Null, Value::from));
    }
}

/// Both counts, in a schema of their own; `None` when PostgreSQL does not
/// answer.
async fn measure(pg_url: &str) -> Result<Option<RoundTrips>> {
    PgSchema::measured(pg_url, async |schema: &PgSchema| {
        let upstream = format!(
            "{}:{}",
            schema.options.get_host(),
            schema.options.get_port()
        );
        let upstream: SocketAddr = tokio::net::lookup_host(&upstream)
            .await?
            .next()
            .context("the PostgreSQL host has no address")?;
        let trips = Arc::new(AtomicU64::new(0));
        let port = relay(upstream, trips.clone()).await?;
        let options = schema.options.clone().host("127.0.0.1").port(port);
        let (store, raw) = Target::Postgres(Box::new(options)).open().await?;
        let probe = Probe {
            trips: trips.clone(),
            seen: Arc::new(AtomicU64::new(u64::MAX)),
        };
        let crew = Crew::builder("bench-round-trips", "1")
            .agent_named("probe", "bench.probe", probe.clone())
            .build()?;
        let engine = Engine::with_store(store, ExecutorConfig::default());
        engine.register(&crew);
        let mut counts = [0; 2];
        for count in &mut counts {
            trips.store(0, Ordering::SeqCst);
            let opts = SubmitOptions {
                by: Some(cairn::local_actor(None, None)),
                ..SubmitOptions::default()
            };
            engine
                .run(&crew, json!({"bench": "round trips"}), opts)
                .await?;
            *count = probe.seen.load(Ordering::SeqCst);
        }
        raw.close().await;
        Ok(RoundTrips {
            fresh: counts[0],
            warm: counts[1],
        })
    })
    .await
}

/// A relay to `upstream` on a port of 127.0.0.1, counting into `trips`.
async fn relay(upstream: SocketAddr, trips: Arc<AtomicU64>) -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let trips = trips.clone();
            tokio::spawn(async move {
                let _ = pipe(client, upstream, trips).await;
            });
        }
    });
    Ok(port)
}

/// One connection: the server's side copied as it is, the client's side
/// copied and counted.
async fn pipe(client: TcpStream, upstream: SocketAddr, trips: Arc<AtomicU64>) -> Result<()> {
    let server = TcpStream::connect(upstream).await?;
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let down = tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let mut counter = Counter::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = from_client.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        to_server.write_all(&chunk[..n]).await?;
        trips.fetch_add(counter.feed(&chunk[..n]), Ordering::SeqCst);
    }
    down.abort();
    Ok(())
}

/// The client's side of the protocol, split into messages.
#[derive(Default)]
struct Counter {
    buf: Vec<u8>,
    /// Past the startup message: every message has a type byte.
    started: bool,
}

impl Counter {
    /// The round trips the client's `bytes` complete.
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.buf.extend_from_slice(bytes);
        let mut trips = 0;
        loop {
            // Before the startup: length, then a code; after: type, length.
            let (head, at) = if self.started { (5, 1) } else { (8, 0) };
            if self.buf.len() < head {
                return trips;
            }
            let len = u32::from_be_bytes([
                self.buf[at],
                self.buf[at + 1],
                self.buf[at + 2],
                self.buf[at + 3],
            ]) as usize
                + at;
            if self.buf.len() < len {
                return trips;
            }
            if self.started {
                // `Sync`, a simple `Query`, a password: the client waits.
                trips += u64::from(matches!(self.buf[0], b'S' | b'Q' | b'p'));
            } else {
                let code = u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
                self.started = code != SSL_REQUEST;
                trips += 1;
            }
            self.buf.drain(..len.max(head));
        }
    }
}
