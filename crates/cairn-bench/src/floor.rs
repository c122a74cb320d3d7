//! `cairn-bench --floor`: what Cairn's data model costs at the least, with
//! no engine, no pool and no storage layer: each shape of a step commit
//! written by hand as the fewest statements that make it, on one held
//! connection (rusqlite for SQLite, a prepared `PgConnection` for
//! PostgreSQL), against the raw one-row commit measured the same way in
//! the same rounds. It answers "how close to the raw commit can a step
//! commit get without changing what a step commit guarantees", which is
//! what issue 12's ratio targets are to be read against.
//!
//! The shapes, each but the last one more write than the one before:
//! - `raw`: one INSERT of a 300-byte row (the reference).
//! - `fence`: only the run row's fenced UPDATE (lease epoch and status in
//!   the WHERE, cursor and event counter moved): what makes a stale
//!   holder's commit land nowhere.
//! - `fence + step`: the fence and one checkpoint row INSERTed: the least
//!   a fenced, checkpointed step writes.
//! - `+ next step`: the step row UPDATEd and the next step's row INSERTed
//!   (`running`), as Cairn does so that a crash mid-step leaves a row.
//! - `+ event` (Cairn today): and its `step_succeeded` event row.
//! - `no foreign keys`: Cairn's shape again, where `steps` and `events`
//!   have no foreign key to `runs` (SQLite: a second connection with the
//!   pragma off; PostgreSQL: a second scratch schema with the constraints
//!   dropped), taking its turns with the others, to price that choice.
//!
//! On PostgreSQL also the throughput of 64 connections, each with a run of
//! its own, for `raw`, `fence + step`, Cairn's shape and the same without
//! foreign keys: the ceiling of `--workers`' `workers_ratio` before any
//! worker spends a cycle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Map, Value};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

use crate::{mean, median, noop_crew, raw_payload, round2, us, PgSchema, STEPS};

/// Commits of each shape per round; shapes take turns, round by round.
const COMMITS: usize = 200;
const ROUNDS: usize = 5;
/// PostgreSQL throughput: connections, and how long each shape is counted.
const IN_FLIGHT: usize = 64;
const FOR: Duration = Duration::from_secs(3);
const WARMUP: Duration = Duration::from_millis(500);

/// In the order of [`SHAPES`] (`shape as usize` is its place there).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Raw,
    Fence,
    FenceStep,
    Next,
    Cairn,
    NoKeys,
}

const SHAPES: [Shape; 6] = [
    Shape::Raw,
    Shape::Fence,
    Shape::FenceStep,
    Shape::Next,
    Shape::Cairn,
    Shape::NoKeys,
];

impl Shape {
    fn label(self) -> &'static str {
        match self {
            Shape::Raw => "raw: INSERT one 300-byte row",
            Shape::Fence => "fence: UPDATE the run row (epoch, status)",
            Shape::FenceStep => "fence + step: and INSERT the step row",
            Shape::Next => "+ next step: UPDATE step, INSERT next",
            Shape::Cairn => "+ event: Cairn's step commit today",
            Shape::NoKeys => "Cairn's, no foreign keys to runs",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Shape::Raw => "raw",
            Shape::Fence => "fence",
            Shape::FenceStep => "fence_step",
            Shape::Next => "next_step",
            Shape::Cairn => "cairn",
            Shape::NoKeys => "cairn_no_fk",
        }
    }
}

/// The step output each shape writes (as the main benchmark's steps do).
const OUTPUT: &str = r#"{"ok": true, "step": 7}"#;
const EVENT: &str = r#"{"idx": 7, "role": "step-0007", "attempt": 1, "duration_ms": 0}"#;

pub async fn run(pg_url: &str) -> Result<()> {
    let def = noop_crew("bench-steps", STEPS, None)?
        .def()
        .to_json()
        .to_string();
    let mut out = Map::new();
    let dir = tempfile::tempdir()?;
    eprintln!("[sqlite] the shapes of a step commit, by hand …");
    let sqlite = sqlite(&dir.path().join("floor.db"), &def).await?;
    report(
        "sqlite (rusqlite, WAL, synchronous=FULL, one connection)",
        &sqlite,
        "sqlite",
        &mut out,
    );

    let unreachable = "PostgreSQL (CAIRN_BENCH_DATABASE_URL) is unreachable";
    let schema = PgSchema::create(pg_url).await.context(unreachable)?;
    let result = async {
        let no_keys = PgSchema::create(pg_url).await.context(unreachable)?;
        eprintln!(
            "[postgres] the shapes of a step commit, by hand (schemas {}, {}) …",
            schema.name, no_keys.name
        );
        let result = postgres(&schema.options, &no_keys.options, &def).await;
        if let Err(e) = no_keys.drop_schema().await {
            eprintln!("warning: could not drop schema {}: {e:#}", no_keys.name);
        }
        result
    }
    .await;
    if let Err(e) = schema.drop_schema().await {
        eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
    }
    let (pg, through) = result?;
    report(
        "postgres (one prepared statement per commit, one connection)",
        &pg,
        "postgres",
        &mut out,
    );
    println!(
        "postgres, {IN_FLIGHT} connections, a run each ({} s per shape, after {} ms):",
        FOR.as_secs(),
        WARMUP.as_millis()
    );
    let raw = through.iter().find(|(s, _)| *s == Shape::Raw).map(|t| t.1);
    for (shape, per_s) in &through {
        let ratio = raw.map(|r| per_s / r);
        println!(
            "  {:<44} {:>8.0} commits/s  {:>5.2}× raw",
            shape.label(),
            per_s,
            ratio.unwrap_or(f64::NAN)
        );
        out.insert(
            format!("floor_postgres_{}_per_s_{IN_FLIGHT}", shape.key()),
            Value::from(per_s.round()),
        );
        if *shape != Shape::Raw {
            out.insert(
                format!("floor_postgres_{}_throughput_ratio", shape.key()),
                ratio.map(round2).map_or(Value::Null, Value::from),
            );
        }
    }
    println!("{}", Value::Object(out));
    Ok(())
}

/// Per shape: the latencies of its commits, all rounds together.
type Latencies = Vec<(Shape, Vec<Duration>)>;

fn report(title: &str, l: &Latencies, db: &str, out: &mut Map<String, Value>) {
    println!("{title}: {ROUNDS} rounds × {COMMITS} commits of each shape");
    let raw = l
        .iter()
        .find(|(s, _)| *s == Shape::Raw)
        .map(|(_, v)| us(mean(v)));
    for (shape, v) in l {
        let m = us(mean(v));
        let ratio = raw.map(|r| m / r).unwrap_or(f64::NAN);
        println!(
            "  {:<44} mean {:>7.1} µs  median {:>7.1} µs  {:>5.2}× raw",
            shape.label(),
            m,
            us(median(v)),
            ratio
        );
        out.insert(
            format!("floor_{db}_{}_us", shape.key()),
            Value::from(round2(m)),
        );
        if *shape != Shape::Raw {
            out.insert(
                format!("floor_{db}_{}_ratio", shape.key()),
                Value::from(round2(ratio)),
            );
        }
    }
}

/// Takes turns: each round runs `COMMITS` of every shape, one shape after
/// the other, so a change of load touches them alike.
async fn rounds<F, Fut>(mut commit: F) -> Result<Latencies>
where
    F: FnMut(Shape) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut l: Latencies = SHAPES.iter().map(|s| (*s, Vec::new())).collect();
    for shape in SHAPES {
        for _ in 0..COMMITS / 10 {
            commit(shape).await?;
        }
    }
    for _ in 0..ROUNDS {
        for (shape, v) in l.iter_mut() {
            for _ in 0..COMMITS {
                let t = Instant::now();
                commit(*shape).await?;
                v.push(t.elapsed());
            }
        }
    }
    Ok(l)
}

// ---------------------------------------------------------------- SQLite

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

async fn sqlite(path: &std::path::Path, def: &str) -> Result<Latencies> {
    // Cairn's schema, as the store migrates it.
    drop(
        cairn_checkpoint::SqliteStore::open_with(path, &cairn_checkpoint::OpenOptions::default())
            .await?,
    );
    let open = |keys: &str| -> Result<rusqlite::Connection> {
        let conn = rusqlite::Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = {keys};"
        ))?;
        Ok(conn)
    };
    let conn = open("ON")?;
    let no_keys = open("OFF")?;
    conn.execute_batch("CREATE TABLE bench_raw (id INTEGER PRIMARY KEY, payload TEXT NOT NULL);")?;
    let runs: Vec<String> = SHAPES
        .iter()
        .map(|_| uuid::Uuid::now_v7().to_string())
        .collect();
    for (shape, id) in SHAPES.iter().zip(&runs) {
        conn.execute(
            &format!(
                "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
                 status, cursor, step_count, lease_epoch, event_seq, created_at, updated_at, \
                 claim_at) VALUES (?1, 'floor', '1', 'sha256:floor', ?2, '{{}}', 'running', 0, \
                 1000000, 1, 0, {NOW}, {NOW}, {NOW})"
            ),
            rusqlite::params![id, def],
        )?;
        if matches!(shape, Shape::Next | Shape::Cairn | Shape::NoKeys) {
            conn.execute(
                &format!(
                    "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                     VALUES (?1, 0, 'step', 'running', 1, {NOW})"
                ),
                [id],
            )?;
        }
    }
    let payload = raw_payload();
    rounds(|shape| {
        let id = &runs[shape as usize];
        let c = match shape {
            Shape::NoKeys => &no_keys,
            _ => &conn,
        };
        std::future::ready(sqlite_commit(c, shape, id, &payload))
    })
    .await
}

fn sqlite_commit(c: &rusqlite::Connection, shape: Shape, run: &str, payload: &str) -> Result<()> {
    let exec = |sql: &str| c.prepare_cached(sql)?.execute([]).map(drop);
    exec("BEGIN IMMEDIATE")?;
    if shape == Shape::Raw {
        c.prepare_cached("INSERT INTO bench_raw (payload) VALUES (?1)")?
            .execute([payload])?;
        return Ok(exec("COMMIT")?);
    }
    let (cursor, seq): (i64, i64) = c
        .prepare_cached(&format!(
            "UPDATE runs SET cursor = cursor + 1, event_seq = event_seq + 1, updated_at = {NOW} \
             WHERE id = ?1 AND lease_epoch = 1 AND status = 'running' RETURNING cursor, event_seq"
        ))?
        .query_row([run], |r| Ok((r.get(0)?, r.get(1)?)))?;
    match shape {
        Shape::Raw | Shape::Fence => {}
        Shape::FenceStep => {
            c.prepare_cached(&format!(
                "INSERT INTO steps (run_id, idx, role, status, attempt, output, started_at, \
                 finished_at) VALUES (?1, ?2, 'step', 'succeeded', 1, ?3, {NOW}, {NOW})"
            ))?
            .execute(rusqlite::params![run, cursor, OUTPUT])?;
        }
        Shape::Next | Shape::Cairn | Shape::NoKeys => {
            let updated = c
                .prepare_cached(&format!(
                    "UPDATE steps SET status = 'succeeded', output = ?3, finished_at = {NOW} \
                     WHERE run_id = ?1 AND idx = ?2 AND attempt = 1 AND status = 'running'"
                ))?
                .execute(rusqlite::params![run, cursor - 1, OUTPUT])?;
            anyhow::ensure!(updated == 1, "the floor's step row was not running");
            c.prepare_cached(&format!(
                "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                 VALUES (?1, ?2, 'step', 'running', 1, {NOW})"
            ))?
            .execute(rusqlite::params![run, cursor])?;
            if shape != Shape::Next {
                c.prepare_cached(&format!(
                    "INSERT INTO events (run_id, seq, at, kind, data) \
                     VALUES (?1, ?2, {NOW}, 'step_succeeded', ?3)"
                ))?
                .execute(rusqlite::params![run, seq, EVENT])?;
            }
        }
    }
    Ok(exec("COMMIT")?)
}

// ---------------------------------------------------------------- PostgreSQL

/// One statement per shape (Cairn's commit is one statement too). `$1` is
/// the run (the raw row's payload for `raw`), `$2` the step's output,
/// `$3` the step that ends (the next one is `$3 + 1`), `$4` the event's
/// data. The last INSERT reads `s`, so a step row that was not running
/// leaves it empty and `pg_commit` fails. The step is named by parameters, as Cairn's statement names it: a
/// join on the run row's new cursor instead gets a generic plan that scans
/// `steps` when the statement was first planned on a near-empty table.
fn pg_statement(shape: Shape) -> &'static str {
    macro_rules! fence {
        () => {
            "UPDATE runs SET cursor = cursor + 1, event_seq = event_seq + 1, \
             updated_at = clock_timestamp() WHERE id = $1 AND lease_epoch = 1 \
             AND status = 'running'"
        };
    }
    macro_rules! step_and_next {
        () => {
            "s AS (UPDATE steps SET status = 'succeeded', output = $2::jsonb, \
             finished_at = clock_timestamp() FROM r WHERE steps.run_id = $1 \
             AND steps.idx = $3 AND steps.attempt = 1 AND steps.status = 'running' \
             RETURNING steps.idx)"
        };
    }
    match shape {
        Shape::Raw => "INSERT INTO bench_raw (payload) VALUES ($1)",
        Shape::Fence => fence!(),
        Shape::FenceStep => concat!(
            "WITH r AS (",
            fence!(),
            " RETURNING id, cursor) \
             INSERT INTO steps (run_id, idx, role, status, attempt, output, started_at, \
             finished_at) SELECT r.id, r.cursor, 'step', 'succeeded', 1, $2::jsonb, \
             clock_timestamp(), clock_timestamp() FROM r"
        ),
        Shape::Next => concat!(
            "WITH r AS (",
            fence!(),
            " RETURNING id, cursor), ",
            step_and_next!(),
            " INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
             SELECT r.id, $3 + 1, 'step', 'running', 1, clock_timestamp() FROM r, s"
        ),
        Shape::Cairn | Shape::NoKeys => concat!(
            "WITH r AS (",
            fence!(),
            " RETURNING id, cursor, event_seq), ",
            step_and_next!(),
            ", n AS (INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
             SELECT r.id, $3 + 1, 'step', 'running', 1, clock_timestamp() FROM r) \
             INSERT INTO events (run_id, seq, at, kind, data) \
             SELECT r.id, r.event_seq, clock_timestamp(), 'step_succeeded', $4::jsonb \
             FROM r, s"
        ),
    }
}

/// A run written by one shape, and the step it is at (the shapes that
/// update a step row).
pub(crate) struct PgRun {
    id: uuid::Uuid,
    step: i32,
}

async fn pg_commit(
    c: &mut PgConnection,
    shape: Shape,
    run: &mut PgRun,
    payload: &str,
) -> Result<()> {
    let q = sqlx::query(pg_statement(shape));
    let q = match shape {
        Shape::Raw => q.bind(payload),
        Shape::Fence => q.bind(run.id),
        Shape::FenceStep => q.bind(run.id).bind(OUTPUT),
        Shape::Next => q.bind(run.id).bind(OUTPUT).bind(run.step),
        Shape::Cairn | Shape::NoKeys => q.bind(run.id).bind(OUTPUT).bind(run.step).bind(EVENT),
    };
    run.step += 1;
    let done = q.execute(c).await?;
    anyhow::ensure!(done.rows_affected() == 1, "a floor commit wrote nothing");
    Ok(())
}

/// A run of its own for `shape`, its step 0 running where the shape
/// updates it.
async fn pg_run(c: &mut PgConnection, shape: Shape, def: &str) -> Result<PgRun> {
    let id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
         status, cursor, step_count, lease_epoch, event_seq, created_at, updated_at, claim_at) \
         VALUES ($1, 'floor', '1', 'sha256:floor', $2::jsonb, '{}', 'running', 0, 1000000, 1, 0, \
         now(), now(), now())",
    )
    .bind(id)
    .bind(def)
    .execute(&mut *c)
    .await?;
    if matches!(shape, Shape::Next | Shape::Cairn | Shape::NoKeys) {
        sqlx::query(
            "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
             VALUES ($1, 0, 'step', 'running', 1, now())",
        )
        .bind(id)
        .execute(&mut *c)
        .await?;
    }
    Ok(PgRun { id, step: 0 })
}

/// Cairn's schema, as the store migrates it, in the scratch schema that
/// `options` name; without the foreign keys of `steps` and `events` to
/// `runs` if not `keys`.
async fn pg_schema(options: &PgConnectOptions, keys: bool) -> Result<PgConnection> {
    let store = cairn_checkpoint::PgStore::connect_with(
        options.clone(),
        &cairn_checkpoint::OpenOptions::default(),
    )
    .await?;
    store.pool().close().await;
    let mut conn = options.connect().await?;
    if !keys {
        sqlx::raw_sql(
            "ALTER TABLE steps DROP CONSTRAINT steps_run_id_fkey; \
             ALTER TABLE events DROP CONSTRAINT events_run_id_fkey",
        )
        .execute(&mut conn)
        .await
        .context("dropping the foreign keys of the scratch schema")?;
    }
    Ok(conn)
}

/// `options`: the scratch schema as migrated; `no_keys`: another, whose
/// foreign keys to `runs` are dropped (for [`Shape::NoKeys`]).
async fn postgres(
    options: &PgConnectOptions,
    no_keys: &PgConnectOptions,
    def: &str,
) -> Result<(Latencies, Vec<(Shape, f64)>)> {
    let mut conn = pg_schema(options, true).await?;
    let mut bare = pg_schema(no_keys, false).await?;
    sqlx::query("CREATE TABLE bench_raw (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)")
        .execute(&mut conn)
        .await?;
    let mut runs = Vec::new();
    for shape in SHAPES {
        let c = match shape {
            Shape::NoKeys => &mut bare,
            _ => &mut conn,
        };
        runs.push(pg_run(c, shape, def).await?);
    }
    let payload = raw_payload();
    let held = tokio::sync::Mutex::new((conn, bare, runs));
    let latencies = rounds(|shape| {
        let (held, payload) = (&held, &payload);
        async move {
            let (conn, bare, runs) = &mut *held.lock().await;
            let c = match shape {
                Shape::NoKeys => bare,
                _ => conn,
            };
            pg_commit(c, shape, &mut runs[shape as usize], payload).await
        }
    })
    .await?;
    let (conn, bare, _) = held.into_inner();
    conn.close().await?;
    bare.close().await?;

    let mut through = Vec::new();
    for shape in [Shape::Raw, Shape::FenceStep, Shape::Cairn, Shape::NoKeys] {
        eprintln!("[postgres] {IN_FLIGHT} connections: {} …", shape.key());
        let o = match shape {
            Shape::NoKeys => no_keys,
            _ => options,
        };
        through.push((shape, pg_throughput(o, shape, def).await?));
    }
    Ok((latencies, through))
}

/// Commits/s of `IN_FLIGHT` connections writing `shape`, each on a run of
/// its own (runs do not wait for each other's row locks, as in Cairn).
async fn pg_throughput(options: &PgConnectOptions, shape: Shape, def: &str) -> Result<f64> {
    let payload = Arc::new(raw_payload());
    let mut conns = Vec::with_capacity(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        let mut c = options.connect().await?;
        let run = pg_run(&mut c, shape, def).await?;
        conns.push((c, run));
    }
    let tally = crate::Tally::default();
    let mut tasks = tokio::task::JoinSet::new();
    for (mut c, mut run) in conns {
        let (tally, payload) = (tally.clone(), payload.clone());
        tasks.spawn(async move {
            while tally.running() {
                pg_commit(&mut c, shape, &mut run, &payload).await?;
                tally.one();
            }
            c.close().await?;
            Ok::<(), anyhow::Error>(())
        });
    }
    tally.rate(tasks, WARMUP, FOR).await
}

// ------------------------------------------------- the default run's floor

/// Cairn's step commit written by hand (the `cairn` shape: fence, step,
/// next step, event) on a run of its own in the store's database: the
/// denominator of the default run's `commit_floor_ratio` and
/// `step_floor_ratio`, taken in the same rounds as the store's commits.
pub(crate) enum Hand {
    Sqlite {
        conn: rusqlite::Connection,
        run: String,
        payload: String,
    },
    Postgres {
        conn: sqlx::pool::PoolConnection<sqlx::Postgres>,
        run: PgRun,
        payload: String,
    },
}

impl Hand {
    /// A run for the hand-written commits, beside the store's runs.
    pub(crate) async fn open(raw: &crate::Raw, sqlite: Option<&std::path::Path>) -> Result<Hand> {
        let payload = raw_payload();
        match (raw, sqlite) {
            (crate::Raw::Sqlite(_), Some(path)) => {
                let conn = rusqlite::Connection::open(path)?;
                conn.busy_timeout(Duration::from_secs(10))?;
                conn.execute_batch(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
                )?;
                let run = uuid::Uuid::now_v7().to_string();
                conn.execute(
                    &format!(
                        "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, \
                         input, status, cursor, step_count, lease_epoch, event_seq, created_at, \
                         updated_at, claim_at) VALUES (?1, 'floor', '1', 'sha256:floor', 'null', \
                         '{{}}', 'running', 0, 1000000, 1, 0, {NOW}, {NOW}, {NOW})"
                    ),
                    [&run],
                )?;
                conn.execute(
                    &format!(
                        "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                         VALUES (?1, 0, 'step', 'running', 1, {NOW})"
                    ),
                    [&run],
                )?;
                Ok(Hand::Sqlite { conn, run, payload })
            }
            (crate::Raw::Postgres(pool), _) => {
                let mut conn = pool.acquire().await?;
                let run = pg_run(&mut conn, Shape::Cairn, "null").await?;
                Ok(Hand::Postgres { conn, run, payload })
            }
            (crate::Raw::Sqlite(_), None) => anyhow::bail!("the SQLite file to write by hand"),
        }
    }

    pub(crate) async fn commit(&mut self) -> Result<()> {
        match self {
            Hand::Sqlite { conn, run, payload } => sqlite_commit(conn, Shape::Cairn, run, payload),
            Hand::Postgres { conn, run, payload } => {
                pg_commit(conn, Shape::Cairn, run, payload).await
            }
        }
    }
}
