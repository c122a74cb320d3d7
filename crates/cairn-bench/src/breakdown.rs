//! `cairn-bench --breakdown`: where the time of a step and of a resume goes.
//! The store calls of a run one by one, the same commits with the disk flush
//! taken away (SQLite on tmpfs, PostgreSQL with `synchronous_commit=off`),
//! statements and WAL written per commit, and the parts of a resume.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, Row};

use cairn::{Engine, ExecutorConfig, RunId, Store};

use crate::{
    claim_request, direct_run, mean, median, noop_crew, park_run, raw_payload, step_commit, us,
    Gate, Raw, Target, RESUME_DONE, ROW_BYTES, STEPS,
};

const RUNS: usize = 20;
const COMMITS: usize = 300;
const REPS: usize = 3;

fn line(what: &str, v: &[Duration]) {
    println!(
        "  {what:<52} mean {:>8.1} µs  median {:>8.1} µs  p99 {:>8.1} µs",
        us(mean(v)),
        us(median(v)),
        us(p99(v))
    );
}

fn p99(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s.get((s.len() * 99 / 100).min(s.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// The same backend with durable commits turned off: what is left is CPU,
/// round trips and page writes.
fn without_flush(target: &Target, dir: &std::path::Path) -> Target {
    match target {
        Target::Sqlite(_) => Target::Sqlite(dir.join("bench.db")),
        Target::Postgres(o) => Target::Postgres(Box::new(
            PgConnectOptions::clone(o).options([("synchronous_commit", "off")]),
        )),
    }
}

/// What the WAL grew by, in bytes (PostgreSQL, server-wide) or frames
/// (SQLite, this file). `None` where it cannot be read.
async fn wal_mark(raw: &Raw) -> Result<i64> {
    Ok(match raw {
        Raw::Sqlite(pool) => {
            // The WAL is reset by a TRUNCATE checkpoint; the frame count
            // since then is the second column of a PASSIVE one.
            let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(pool)
                .await?;
            row.try_get::<i64, _>(1)?
        }
        Raw::Postgres(pool) => {
            sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint")
                .fetch_one(pool)
                .await?
        }
    })
}

async fn wal_reset(raw: &Raw) -> Result<()> {
    if let Raw::Sqlite(pool) = raw {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(pool)
            .await?;
    }
    Ok(())
}

/// The WAL written per raw commit and per step commit of the first `STEPS`
/// steps of `crew` (smallest of `REPS` batches, since the PostgreSQL counter
/// is server-wide), and the times of those step commits.
async fn wal_per_commit(
    store: &dyn Store,
    raw: &Raw,
    crew: &crate::Crew,
) -> Result<(f64, f64, Vec<Duration>)> {
    let payload = raw_payload();
    let mut times = vec![];
    let (mut raw_best, mut step_best) = (f64::MAX, f64::MAX);
    for _ in 0..REPS {
        wal_reset(raw).await?;
        let before = wal_mark(raw).await?;
        for _ in 0..STEPS {
            raw.commit(&payload).await?;
        }
        let per = (wal_mark(raw).await? - before) as f64 / f64::from(STEPS);
        raw_best = raw_best.min(per);

        let run = store
            .submit(crate::new_run(crew, json!({"wal": true})))
            .await?
            .run;
        let fence = store.claim(run.id, &claim_request(false)).await?.fence;
        wal_reset(raw).await?;
        let before = wal_mark(raw).await?;
        for i in 0..STEPS as usize {
            let commit = step_commit(crew, run.id, &fence, i);
            let t = Instant::now();
            store.commit_step(&commit).await?;
            times.push(t.elapsed());
        }
        let per = (wal_mark(raw).await? - before) as f64 / f64::from(STEPS);
        step_best = step_best.min(per);
    }
    Ok((raw_best, step_best, times))
}

/// SQLite only: `BEGIN IMMEDIATE` + `n` INSERTs of `ROW_BYTES / n` bytes +
/// COMMIT, i.e. the raw commit split into as many statements as a step
/// commit has.
async fn sqlite_statements(raw: &Raw, n: usize) -> Result<Option<Vec<Duration>>> {
    let Raw::Sqlite(pool) = raw else {
        return Ok(None);
    };
    let part = "y".repeat(ROW_BYTES / n);
    let mut times = Vec::with_capacity(COMMITS);
    for _ in 0..COMMITS {
        let t = Instant::now();
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        for _ in 0..n {
            sqlx::query("INSERT INTO bench_raw (payload) VALUES (?1)")
                .bind(&part)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        times.push(t.elapsed());
    }
    Ok(Some(times))
}

/// The raw commit on one connection held throughout: no pool acquire, so
/// no `test_before_acquire` ping (a round trip) before each commit.
async fn raw_commit_held(raw: &Raw) -> Result<Vec<Duration>> {
    let payload = raw_payload();
    let mut times = Vec::with_capacity(COMMITS);
    match raw {
        Raw::Sqlite(pool) => {
            let mut conn = pool.acquire().await?;
            for _ in 0..COMMITS {
                let t = Instant::now();
                let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
                sqlx::query("INSERT INTO bench_raw (payload) VALUES (?1)")
                    .bind(&payload)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                times.push(t.elapsed());
            }
        }
        Raw::Postgres(pool) => {
            let mut conn = pool.acquire().await?;
            for _ in 0..COMMITS {
                let t = Instant::now();
                sqlx::query("INSERT INTO bench_raw (payload) VALUES ($1)")
                    .bind(&payload)
                    .execute(&mut *conn)
                    .await?;
                times.push(t.elapsed());
            }
        }
    }
    Ok(times)
}

/// The raw commit through a second pool on the same database that skips
/// the ping before each acquire (`test_before_acquire(false)`); sqlx 0.8
/// still pings on release, in a spawned task.
async fn raw_commit_no_acquire_ping(target: &Target) -> Result<Vec<Duration>> {
    let raw = match target {
        Target::Sqlite(path) => Raw::Sqlite(
            SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .connect_with(
                    SqliteConnectOptions::new()
                        .filename(path)
                        .journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Full)
                        .foreign_keys(true)
                        .busy_timeout(Duration::from_secs(10)),
                )
                .await?,
        ),
        Target::Postgres(options) => Raw::Postgres(
            PgPoolOptions::new()
                .max_connections(8)
                .test_before_acquire(false)
                .connect_with(PgConnectOptions::clone(options))
                .await?,
        ),
    };
    let payload = raw_payload();
    let mut times = Vec::with_capacity(COMMITS);
    for _ in 0..COMMITS {
        let t = Instant::now();
        raw.commit(&payload).await?;
        times.push(t.elapsed());
    }
    raw.close().await;
    Ok(times)
}

/// SQLite only: the same transaction as `sqlite_statements(raw, n)` sent as
/// one multi-statement query: one round trip to SQLite's worker thread
/// instead of `n + 2`.
async fn sqlite_one_trip(raw: &Raw, n: usize) -> Result<Option<Vec<Duration>>> {
    let Raw::Sqlite(pool) = raw else {
        return Ok(None);
    };
    let part = "y".repeat(ROW_BYTES / n);
    let sql = format!(
        "BEGIN IMMEDIATE; {} COMMIT;",
        "INSERT INTO bench_raw (payload) VALUES (?1); ".repeat(n)
    );
    let mut conn = pool.acquire().await?;
    let mut times = Vec::with_capacity(COMMITS);
    for _ in 0..COMMITS {
        let t = Instant::now();
        sqlx::query(&sql).bind(&part).execute(&mut *conn).await?;
        times.push(t.elapsed());
    }
    Ok(Some(times))
}

/// Per-call costs of `Engine::run` and of one commit on `target`.
async fn commits(target: &Target, label: &str) -> Result<()> {
    let (store, raw) = target.open().await?;
    raw.setup().await?;
    let engine = Engine::with_store(store.clone(), ExecutorConfig::default());
    let crew = noop_crew("bench-steps", STEPS, None)?;
    let payload = raw_payload();
    for i in 0..2 {
        crate::run_once(&engine, &crew, i).await?;
        direct_run(&*store, &crew).await?;
    }
    let (mut runs, mut start, mut commit, mut get_run, mut direct) =
        (vec![], vec![], vec![], vec![], vec![]);
    for i in 0..RUNS {
        let t = Instant::now();
        crate::run_once(&engine, &crew, i).await?;
        runs.push(t.elapsed());
        let p = direct_run(&*store, &crew).await?;
        direct.push(p.start + p.commits.iter().sum::<Duration>() + p.get_run);
        start.push(p.start);
        get_run.push(p.get_run);
        commit.extend(p.commits);
    }
    let mut raws = Vec::with_capacity(COMMITS);
    for _ in 0..COMMITS {
        let t = Instant::now();
        raw.commit(&payload).await?;
        raws.push(t.elapsed());
    }
    println!("{label}: one run of the {STEPS}-step no-op crew, {RUNS} runs");
    line("Engine::run, whole run", &runs);
    line("the same store calls without the executor", &direct);
    line("  RunStore::start (submit and claim)", &start);
    line(&format!("  LeaseStore::commit_step (x{STEPS})"), &commit);
    line("  RunStore::get_run", &get_run);
    println!("{label}: one commit");
    line("raw commit (as the main table)", &raws);
    line("LeaseStore::commit_step", &commit);
    line(
        "raw commit on a held connection (no acquire ping)",
        &raw_commit_held(&raw).await?,
    );
    line(
        "raw commit, pool without the acquire ping",
        &raw_commit_no_acquire_ping(target).await?,
    );
    for n in [1, 2, 4, 6] {
        if let Some(t) = sqlite_statements(&raw, n).await? {
            line(&format!("BEGIN IMMEDIATE + {n} INSERTs + COMMIT"), &t);
        }
    }
    if let Some(t) = sqlite_one_trip(&raw, 4).await? {
        line("the same 4 INSERTs as one multi-statement query", &t);
    }
    let unit = match raw {
        Raw::Sqlite(_) => "WAL frames (4 KiB pages)",
        Raw::Postgres(_) => "WAL bytes",
    };
    let (raw_wal, step_wal, _) = wal_per_commit(&*store, &raw, &crew).await?;
    println!("  {unit} per commit: raw {raw_wal:.1}, commit_step {step_wal:.1}");
    let long = noop_crew("bench-long", RESUME_DONE + 1, None)?;
    let (_, long_wal, long_times) = wal_per_commit(&*store, &raw, &long).await?;
    line(
        &format!("LeaseStore::commit_step, {}-step crew", RESUME_DONE + 1),
        &long_times,
    );
    println!(
        "  {unit} per commit_step of the {}-step crew: {long_wal:.1}",
        RESUME_DONE + 1
    );
    raw.close().await;
    Ok(())
}

/// The parts of a resume of a run with `RESUME_DONE` finished steps, each
/// on a fresh engine (median of `REPS`).
async fn resume(target: &Target, label: &str) -> Result<()> {
    let gate = Gate::default();
    let crew = noop_crew("bench-resume", RESUME_DONE, Some(gate.clone()))?;
    let (store, raw) = target.open().await?;
    let engine = Engine::with_store(store, ExecutorConfig::default());
    let (mut build, mut stored, mut get_run, mut load, mut fetch, mut rebuild, mut claim) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut narrow, mut aggregated, mut parking, mut warm_load) = (vec![], vec![], vec![], vec![]);
    let mut def_bytes = 0;
    for _ in 0..REPS {
        let t = Instant::now();
        noop_crew("bench-resume", RESUME_DONE, Some(gate.clone()))?;
        build.push(t.elapsed());

        let t = Instant::now();
        let id = park_run(&engine, &crew, &gate).await?;
        parking.push(t.elapsed() / RESUME_DONE);
        cairn_checkpoint::forget_decoded_crews();
        let (fresh, fresh_raw) = target.open().await?;
        let resumer = Engine::with_store(fresh.clone(), ExecutorConfig::default());
        resumer.register(&crew);
        // The calls of `Engine::resume` up to the agent, in its order.
        let t = Instant::now();
        resumer.stored_crew(id).await?;
        stored.push(t.elapsed());
        let t = Instant::now();
        let (run, steps) = fresh.load(id).await?;
        load.push(t.elapsed());
        let t = Instant::now();
        cairn_core::rebuild(&run, &steps)?;
        rebuild.push(t.elapsed());
        let t = Instant::now();
        fresh.claim(id, &claim_request(true)).await?;
        claim.push(t.elapsed());
        // Alternatives, measured afterwards (caches warm).
        let t = Instant::now();
        let run = fresh.get_run(id).await?;
        get_run.push(t.elapsed());
        def_bytes = serde_json::to_string(&run.crew_definition)?.len();
        let t = Instant::now();
        fresh.load(id).await?;
        warm_load.push(t.elapsed());
        let t = Instant::now();
        fetch_steps(&fresh_raw, id, STEP_COLS).await?;
        fetch.push(t.elapsed());
        let t = Instant::now();
        fetch_steps(&fresh_raw, id, "idx, role, status, output").await?;
        narrow.push(t.elapsed());
        let t = Instant::now();
        let outputs = fetch_aggregated(&fresh_raw, id).await?;
        aggregated.push(t.elapsed());
        anyhow::ensure!(
            outputs == steps.len(),
            "aggregated {outputs} of {} rows",
            steps.len()
        );
        fresh_raw.close().await;
    }
    raw.close().await;
    println!(
        "{label}: parts of a resume ({RESUME_DONE} finished steps, fresh engine, median of {REPS}); \
         the stored crew definition is {def_bytes} bytes of JSON"
    );
    let ms = |what: &str, v: &[Duration]| {
        println!("  {what:<52} {:>8.2} ms", us(median(v)) / 1e3);
    };
    let sum = [&stored, &load, &rebuild, &claim]
        .iter()
        .map(|v| us(median(v)) / 1e3)
        .sum::<f64>();
    ms("Engine::stored_crew (get_run, registered crew)", &stored);
    ms("RunStore::load", &load);
    ms("cairn_core::rebuild", &rebuild);
    ms("LeaseStore::claim (takeover)", &claim);
    println!(
        "  {:<52} {sum:>8.2} ms",
        "sum (the agent is entered after these)"
    );
    println!("  afterwards, with warm caches:");
    ms("  RunStore::get_run", &get_run);
    ms("  RunStore::load", &warm_load);
    ms("  its step rows fetched without decoding", &fetch);
    ms("  only idx, role, status, output, not decoded", &narrow);
    ms("  one aggregated JSON row, fetched and parsed", &aggregated);
    ms(
        "  building a 1001-agent crew (validate + fingerprint)",
        &build,
    );
    println!(
        "  Engine::run of the first {RESUME_DONE} steps (park_run): {:.1} µs per step",
        us(median(&parking))
    );
    Ok(())
}

const STEP_COLS: &str =
    "idx, role, status, attempt, output, input_tokens, output_tokens, cost_nanos, \
                         started_at, finished_at, error, takeovers";

/// Step rows of a run, fetched but not decoded (`RunStore::load` reads
/// `STEP_COLS`).
async fn fetch_steps(raw: &Raw, id: RunId, cols: &str) -> Result<usize> {
    Ok(match raw {
        Raw::Sqlite(pool) => sqlx::query(&format!(
            "SELECT {cols} FROM steps WHERE run_id = ?1 ORDER BY idx"
        ))
        .bind(id.to_string())
        .fetch_all(pool)
        .await?
        .len(),
        Raw::Postgres(pool) => sqlx::query(&format!(
            "SELECT {cols} FROM steps WHERE run_id = $1 ORDER BY idx"
        ))
        .bind(id.as_uuid())
        .fetch_all(pool)
        .await?
        .len(),
    })
}

/// What a rebuild needs of the step rows (idx, role, status, output) as one
/// JSON array built by the database: one row instead of one per step.
async fn fetch_aggregated(raw: &Raw, id: RunId) -> Result<usize> {
    let text: String = match raw {
        Raw::Sqlite(pool) => {
            sqlx::query_scalar(
                "SELECT json_group_array(json_object('idx', idx, 'role', role, 'status', status, \
                 'output', json(output))) FROM (SELECT * FROM steps WHERE run_id = ?1 ORDER BY idx)",
            )
            .bind(id.to_string())
            .fetch_one(pool)
            .await?
        }
        Raw::Postgres(pool) => {
            sqlx::query_scalar(
                "SELECT coalesce(json_agg(json_build_object('idx', idx, 'role', role, \
                 'status', status, 'output', output) ORDER BY idx), '[]')::text \
                 FROM steps WHERE run_id = $1",
            )
            .bind(id.as_uuid())
            .fetch_one(pool)
            .await?
        }
    };
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text)?;
    Ok(rows.len())
}

/// The whole breakdown for one backend.
pub(crate) async fn run(target: &Target) -> Result<()> {
    let name = target.name();
    commits(target, name).await.context("commit breakdown")?;
    let tmp = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?;
    let unflushed = without_flush(target, tmp.path());
    let label = match target {
        Target::Sqlite(_) => format!("{name} on tmpfs (no disk flush)"),
        Target::Postgres(_) => format!("{name} with synchronous_commit=off"),
    };
    commits(&unflushed, &label)
        .await
        .context("commit breakdown without flush")?;
    if let Target::Postgres(o) = target {
        let generic = Target::Postgres(Box::new(PgConnectOptions::clone(o).options([
            ("synchronous_commit", "off"),
            ("plan_cache_mode", "force_generic_plan"),
        ])));
        commits(
            &generic,
            &format!("{name} with synchronous_commit=off, plan_cache_mode=force_generic_plan"),
        )
        .await
        .context("commit breakdown with generic plans")?;
    }
    resume(target, name).await.context("resume breakdown")?;
    Ok(())
}
