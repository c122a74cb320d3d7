//! `--aged`: what a database that has lived costs. On SQLite (a temporary
//! file) and PostgreSQL (a fresh schema), two stores side by side:
//!
//! - "aged": `CAIRN_BENCH_AGED_RUNS` finished runs of 5 steps (default
//!   1,000,000), one real run cloned in SQL (`retention::fill`), all
//!   finished a day ago;
//! - "young": 100 finished runs (a full first page) and what the
//!   measurements add.
//!
//! Measured on both, interleaved in rounds so that the machine's drift
//! falls on both alike: a step of the default 30-step run (`Engine::run`,
//! time per step), a step commit (`LeaseStore::commit_step`), a worker's
//! claim of a queued run (`claim_next`), a resume of a run 1,000 steps in
//! (warm engine, to the pending step's agent), `runs list`'s first page (50
//! newest) and the console's runs page, a run's page and a thread's page
//! (through `cairn serve`'s router). Each is reported as aged over young;
//! the target is at most 1.2. Then one compaction pass over the aged store
//! against the same over a store of `SMALL_RUNS` runs, as rows removed a
//! second (a ratio of at least 1/1.2 is on target).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde_json::{json, Map, Value};

use cairn::{Crew, Engine, ExecutorConfig, RunFilter, Store, SubmitOptions};
use cairn_checkpoint::{CompactPolicy, Compacted};
use cairn_server::{AppState, Crews};

use crate::console::get;
use crate::retention::fill_with;
use crate::{
    claim_request, direct_run, median, ms, new_run, noop_crew, park_run, round2, timed_resume, us,
    Gate, PgSchema, Raw, Target, RESUME_DONE, STEPS,
};

const DEFAULT_RUNS: u64 = 1_000_000;
/// Steps of each finished run in the aged store.
const RUN_STEPS: u32 = 5;
/// Finished runs of the young store: a full first page of runs.
const YOUNG_RUNS: u64 = 100;
/// Finished runs of the store the aged one's compaction is held against.
const SMALL_RUNS: u64 = 10_000;
/// Rounds; each takes every figure once on each store.
const ROUNDS: usize = 10;
/// Resumes per store (a run 1,000 steps in is built for each).
const RESUMES: usize = 3;
/// A crew of one `command` step: a claimer needs no code to take its runs
/// (the no-op crews' Rust agents must be registered by the claimer).
const CLAIMABLE: &str = "name = \"bench-aged-claim\"\nversion = \"1\"\n[[agents]]\n\
    role = \"one\"\nkind = \"command\"\ncommand = [\"true\"]\n";
/// The thread every store gets a few runs on, for its page.
const THREAD: &str = "bench-aged";

/// The figures, in the order printed: a name and its unit.
const FIGURES: [(&str, &str); 8] = [
    ("step", "µs"),
    ("commit", "µs"),
    ("claim", "µs"),
    ("resume", "ms"),
    ("runs_list", "ms"),
    ("console_runs_page", "ms"),
    ("console_run_page", "ms"),
    ("console_thread_page", "ms"),
];

/// One store under measurement, with what its pages and claims need.
struct Subject {
    store: Arc<dyn Store>,
    raw: Raw,
    engine: Engine,
    app: axum::Router,
    /// A run of the thread, for its page.
    run: String,
    /// Samples per figure, in `FIGURES` order.
    samples: [Vec<Duration>; 8],
}

impl Subject {
    async fn open(target: &Target) -> Result<Subject> {
        let (store, raw) = target.open().await?;
        let engine = Engine::with_store(store.clone(), ExecutorConfig::default());
        let app = cairn_server::router(AppState::new(engine.clone(), Crews::default()));
        Ok(Subject {
            store,
            raw,
            engine,
            app,
            run: String::new(),
            samples: Default::default(),
        })
    }

    /// A few finished runs on `THREAD`, the newest of them kept for its page.
    async fn prepare(&mut self, crew: &Crew) -> Result<()> {
        // The young store holds a full first page too (`YOUNG_RUNS`).
        let one = RunFilter {
            limit: Some(1),
            ..RunFilter::default()
        };
        if self.store.list_runs(&one).await?.is_empty() {
            fill_with(&self.store, &self.raw, YOUNG_RUNS, RUN_STEPS).await?;
        }
        for i in 0..3 {
            let opts = SubmitOptions {
                thread_id: Some(THREAD.to_owned()),
                ..SubmitOptions::default()
            };
            let done = self.engine.run(crew, json!({ "turn": i }), opts).await?;
            self.run = done.run.id.to_string();
        }
        Ok(())
    }

    /// Every figure once, but the resume. `claimable` is a crew of no Rust
    /// agent, which any claimer may take.
    async fn round(&mut self, crew: &Crew, claimable: &Crew) -> Result<()> {
        let t = Instant::now();
        let done = self
            .engine
            .run(crew, json!({}), SubmitOptions::default())
            .await?;
        ensure!(
            done.executed.len() == STEPS as usize,
            "the run stopped early"
        );
        self.samples[0].push(t.elapsed() / STEPS);
        let phases = direct_run(&*self.store, crew).await?;
        self.samples[1].push(median(&phases.commits));
        self.store
            .submit(new_run(claimable, json!({ "claim": true })))
            .await?;
        let t = Instant::now();
        let claimed = self.store.claim_next(&claim_request(false)).await?;
        self.samples[2].push(t.elapsed());
        ensure!(claimed.is_some(), "the claim took nothing");
        let filter = RunFilter {
            limit: Some(50),
            newest_first: true,
            ..RunFilter::default()
        };
        let t = Instant::now();
        ensure!(self.store.list_runs(&filter).await?.len() == 50);
        self.samples[4].push(t.elapsed());
        let pages = [
            "/".to_owned(),
            format!("/runs/{}", self.run),
            format!("/threads/{THREAD}"),
        ];
        for (i, uri) in pages.iter().enumerate() {
            self.samples[5 + i].push(get(&self.app, uri).await?);
        }
        Ok(())
    }

    /// One resume of a run `RESUME_DONE` steps in, to its pending step.
    async fn resume(&mut self, crew: &Crew, gate: &Gate) -> Result<()> {
        let id = park_run(&self.engine, crew, gate).await?;
        let (to_agent, _) = timed_resume(&self.engine, id, gate).await?;
        self.samples[3].push(to_agent);
        Ok(())
    }

    fn figure(&self, i: usize) -> f64 {
        let m = median(&self.samples[i]);
        match FIGURES[i].1 {
            "µs" => us(m),
            _ => ms(m),
        }
    }
}

/// Settles what a fill left: SQLite's WAL into the file; on PostgreSQL a
/// vacuum (as autovacuum would after so many inserts) and a checkpoint
/// (needs superuser; skipped otherwise).
async fn settle(raw: &Raw) -> Result<()> {
    match raw {
        Raw::Sqlite(_) => {
            raw.exec("PRAGMA wal_checkpoint(TRUNCATE)").await?;
        }
        Raw::Postgres(_) => {
            raw.exec("VACUUM ANALYZE runs, steps, events").await?;
            let _ = raw.exec("CHECKPOINT").await;
        }
    }
    Ok(())
}

/// One compaction pass removing every finished run: rows removed a second.
async fn compaction(store: &dyn Store) -> Result<(Compacted, f64)> {
    let policy = CompactPolicy {
        finished_older_than: Some(Duration::ZERO),
        ..CompactPolicy::default()
    };
    let t = Instant::now();
    let c = store.compact(&policy).await?;
    let rows = c.runs + c.steps + c.events + c.journal_items + c.waits;
    Ok((c, rows as f64 / t.elapsed().as_secs_f64()))
}

/// What one database showed.
struct Numbers {
    runs: u64,
    fill_s: f64,
    young: [f64; 8],
    aged: [f64; 8],
    compact_small_rows_per_s: f64,
    compact_aged_rows_per_s: f64,
    compacted_runs: u64,
}

async fn measure(name: &str, targets: [&Target; 3], n: u64) -> Result<Numbers> {
    let [young_t, aged_t, small_t] = targets;
    let mut young = Subject::open(young_t).await?;
    let mut aged = Subject::open(aged_t).await?;
    eprintln!("[{name}] filling the aged store with {n} runs of {RUN_STEPS} steps …");
    let (fill, _) = fill_with(&aged.store, &aged.raw, n, RUN_STEPS).await?;
    settle(&aged.raw).await?;
    eprintln!(
        "[{name}] {} runs in {:.1} s",
        fill.runs,
        fill.took.as_secs_f64()
    );

    let crew = noop_crew("bench-aged", STEPS, None)?;
    let claimable = Crew::from_toml(CLAIMABLE)?;
    let gate = Gate::default();
    let resume_crew = noop_crew("bench-aged-resume", RESUME_DONE, Some(gate.clone()))?;
    for s in [&mut young, &mut aged] {
        s.prepare(&crew).await?;
        s.round(&crew, &claimable).await?; // warm: pools and statement caches
        s.samples = Default::default();
    }
    eprintln!("[{name}] {ROUNDS} rounds …");
    for round in 0..ROUNDS {
        let (first, second) = match round % 2 {
            0 => (&mut young, &mut aged),
            _ => (&mut aged, &mut young),
        };
        first.round(&crew, &claimable).await?;
        second.round(&crew, &claimable).await?;
    }
    eprintln!("[{name}] {RESUMES} resumes each …");
    for _ in 0..RESUMES {
        young.resume(&resume_crew, &gate).await?;
        aged.resume(&resume_crew, &gate).await?;
    }
    let figures = |s: &Subject| std::array::from_fn(|i| s.figure(i));
    let (young_f, aged_f) = (figures(&young), figures(&aged));

    eprintln!("[{name}] compaction: {SMALL_RUNS} runs, then the aged store …");
    let (small_store, small_raw) = small_t.open().await?;
    fill_with(&small_store, &small_raw, SMALL_RUNS, RUN_STEPS).await?;
    settle(&small_raw).await?;
    let (_, small_rate) = compaction(&*small_store).await?;
    let (done, aged_rate) = compaction(&*aged.store).await?;
    for raw in [&young.raw, &aged.raw, &small_raw] {
        raw.close().await;
    }
    Ok(Numbers {
        runs: fill.runs,
        fill_s: fill.took.as_secs_f64(),
        young: young_f,
        aged: aged_f,
        compact_small_rows_per_s: small_rate,
        compact_aged_rows_per_s: aged_rate,
        compacted_runs: done.runs,
    })
}

fn print(db: &str, n: &Numbers, out: &mut Map<String, Value>) {
    println!();
    println!(
        "{db}: {} runs of {RUN_STEPS} steps (filled in {:.0} s)",
        n.runs, n.fill_s
    );
    println!(
        "  {:<22} {:>10} {:>10} {:>8}",
        "figure", "young", "aged", "ratio"
    );
    for (i, (figure, unit)) in FIGURES.iter().enumerate() {
        let ratio = n.aged[i] / n.young[i];
        println!(
            "  {:<22} {:>7.2} {unit:<2} {:>7.2} {unit:<2} {ratio:>8.2}",
            figure, n.young[i], n.aged[i]
        );
        let unit = if *unit == "µs" { "us" } else { "ms" };
        out.insert(
            format!("{db}_aged_{figure}_young_{unit}"),
            json!(round2(n.young[i])),
        );
        out.insert(
            format!("{db}_aged_{figure}_{unit}"),
            json!(round2(n.aged[i])),
        );
        out.insert(format!("{db}_aged_{figure}_ratio"), json!(round2(ratio)));
    }
    let ratio = n.compact_aged_rows_per_s / n.compact_small_rows_per_s;
    println!(
        "  compaction rows/s: {SMALL_RUNS} runs {:.0}, aged {:.0} ({} runs): {ratio:.2} of the small store's",
        n.compact_small_rows_per_s, n.compact_aged_rows_per_s, n.compacted_runs
    );
    out.insert(format!("{db}_aged_runs"), json!(n.runs));
    out.insert(
        format!("{db}_aged_compact_small_rows_per_s"),
        json!(n.compact_small_rows_per_s.round()),
    );
    out.insert(
        format!("{db}_aged_compact_rows_per_s"),
        json!(n.compact_aged_rows_per_s.round()),
    );
    out.insert(format!("{db}_aged_compact_ratio"), json!(round2(ratio)));
}

pub(crate) async fn run(pg_url: &str) -> Result<()> {
    let n = crate::retention::count_from_env("CAIRN_BENCH_AGED_RUNS", DEFAULT_RUNS)?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    eprintln!("SQLite: {}", dir.path().display());
    let files =
        ["young", "aged", "small"].map(|f| Target::Sqlite(dir.path().join(format!("{f}.db"))));
    let sqlite = measure("sqlite", [&files[0], &files[1], &files[2]], n)
        .await
        .context("SQLite")?;
    let mut out = Map::new();
    print("sqlite", &sqlite, &mut out);
    drop(files);

    let mut schemas = Vec::new();
    let postgres = async {
        for _ in 0..3 {
            schemas.push(PgSchema::create(pg_url).await?);
        }
        let t: Vec<Target> = schemas
            .iter()
            .map(|s| Target::Postgres(Box::new(s.options.clone())))
            .collect();
        measure("postgres", [&t[0], &t[1], &t[2]], n).await
    }
    .await;
    for schema in &schemas {
        if let Err(e) = schema.drop_schema().await {
            eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
        }
    }
    print("postgres", &postgres.context("PostgreSQL")?, &mut out);
    println!("{}", Value::Object(out));
    Ok(())
}
