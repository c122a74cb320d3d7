//! `cairn-bench --workers`: step commits per second of 1, 2 and 4 `cairn
//! worker` processes sharing one PostgreSQL database with 64 runs in flight,
//! next to the raw autocommit INSERT throughput of 64 concurrent connections,
//! and the latency from `submit` to the run being claimed by an idle worker.
//! First, SQLite in one process: one run alone against 64 in flight
//! (`concurrent.rs`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Map, Value};
use sqlx::postgres::{PgPool, PgPoolOptions};

use cairn::{Crew, Engine, ExecutorConfig, RunStatus, Store, SubmitOptions};
use cairn_checkpoint::{OpenOptions, PgStore};

use crate::{median, ms, raw_payload, round2, PgSchema};

/// Runs in flight across all workers.
const IN_FLIGHT: usize = 64;
/// Template steps per run.
const STEPS: usize = 20;
/// Runs submitted per measurement (several seconds of work).
const RUNS: usize = 320;
const WORKER_COUNTS: [usize; 3] = [1, 2, 4];
const POLL_MS: u64 = 20;
/// How long the raw INSERT tasks run (after `RAW_WARMUP`).
const RAW_FOR: Duration = Duration::from_secs(3);
const RAW_WARMUP: Duration = Duration::from_millis(500);
const LATENCY_REPS: usize = 30;
const LATENCY_POLL_MS: u64 = 500;
/// The target: worker steps/s at least this share of raw commits/s.
const TARGET: f64 = 1.0;

/// `cairn worker` processes, killed when dropped.
pub(crate) struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn cairn_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the bench binary")?;
    let dir = exe.parent().context("the bench binary has no directory")?;
    let cairn = dir.join(format!("cairn{}", std::env::consts::EXE_SUFFIX));
    if !cairn.is_file() {
        bail!(
            "{} does not exist: build it first with `cargo build --release -p cairn-cli`",
            cairn.display()
        );
    }
    Ok(cairn)
}

pub(crate) fn spawn_workers(
    cairn: &Path,
    url: &str,
    n: usize,
    concurrency: usize,
    poll_ms: u64,
    logs: &Path,
) -> Result<Workers> {
    let mut workers = Workers(Vec::with_capacity(n));
    for i in 0..n {
        let log = std::fs::File::create(logs.join(format!("worker-{n}-{i}.log")))?;
        let child = Command::new(cairn)
            .arg("--db")
            .arg(url)
            .arg("worker")
            .arg("--concurrency")
            .arg(concurrency.to_string())
            .arg("--poll-ms")
            .arg(poll_ms.to_string())
            .env_remove("CAIRN_DATABASE_URL")
            // `--rate-limit`'s fake model wants a key, and any will do.
            .envs(
                std::env::var_os("OPENAI_API_KEY")
                    .is_none()
                    .then_some(("OPENAI_API_KEY", "cairn-bench")),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", cairn.display()))?;
        workers.0.push(child);
    }
    Ok(workers)
}

/// Busy and total jiffies of the machine (`/proc/stat`), if readable.
fn machine_jiffies() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// User + system jiffies of a process (`/proc/PID/stat`), if readable.
fn process_jiffies(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

async fn xact_commits(pool: &PgPool) -> Result<i64> {
    // Flush this backend's counters; others flush within a second.
    let _ = sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(pool)
        .await;
    Ok(sqlx::query_scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(pool)
    .await?)
}

/// One worker measurement.
struct Throughput {
    steps_per_s: f64,
    /// Share of both cores busy during the measurement.
    machine_busy: Option<f64>,
    /// CPU time of the worker processes, as a share of one core.
    workers_cpu: Option<f64>,
    /// PostgreSQL transactions committed per step (all sessions).
    xacts_per_step: Option<f64>,
    /// CPU time of the worker processes per step, µs.
    worker_us_per_step: f64,
    /// CPU time of the whole machine (workers, PostgreSQL, this process)
    /// per step, µs.
    machine_us_per_step: Option<f64>,
}

/// The raw commits' rate, and the machine's CPU time per commit (µs, over
/// the warm-up and the count alike).
struct Raw {
    per_s: f64,
    machine_us_per_commit: Option<f64>,
}

fn template_crew(name: &str, steps: usize) -> Result<Crew> {
    let mut toml = format!("name = \"{name}\"\nversion = \"1\"\n");
    for i in 0..steps {
        toml.push_str(&format!(
            "\n[[agents]]\nrole = \"s{i:02}\"\nkind = \"template\"\ntemplate = \"ok {i}\"\n"
        ));
    }
    Ok(Crew::from_toml(&toml)?)
}

async fn count_status(pool: &PgPool, status: &str) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM runs WHERE status = $1")
            .bind(status)
            .fetch_one(pool)
            .await?,
    )
}

/// Steps/s of `n` workers: submits `RUNS` runs, starts the workers, waits
/// until every run has succeeded.
async fn worker_throughput(
    engine: &Engine,
    pool: &PgPool,
    cairn: &Path,
    url: &str,
    n: usize,
    logs: &Path,
) -> Result<Throughput> {
    let crew = template_crew(&format!("bench-workers-{n}"), STEPS)?;
    let before = count_status(pool, "succeeded").await?;
    for i in 0..RUNS {
        engine
            .submit(&crew, json!({"run": i}), SubmitOptions::default())
            .await?;
    }
    let target = before + RUNS as i64;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let xacts_before = xact_commits(pool).await.ok();
    let machine_before = machine_jiffies();
    let start = Instant::now();
    let workers = spawn_workers(cairn, url, n, IN_FLIGHT / n, POLL_MS, logs)?;
    let mut worker_jiffies = vec![0u64; n];
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        for (j, child) in worker_jiffies.iter_mut().zip(&workers.0) {
            if let Some(x) = process_jiffies(child.id()) {
                *j = x;
            }
        }
        if count_status(pool, "succeeded").await? >= target {
            break;
        }
        let failed = count_status(pool, "failed").await?;
        ensure!(
            failed == 0,
            "{failed} runs failed (logs in {})",
            logs.display()
        );
        ensure!(
            start.elapsed() < Duration::from_secs(300),
            "the runs did not finish within 300 s (logs in {})",
            logs.display()
        );
    }
    let secs = start.elapsed().as_secs_f64();
    let machine_after = machine_jiffies();
    drop(workers);
    let steps = (RUNS * STEPS) as f64;
    let machine_busy = match (machine_before, machine_after) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => Some((b1 - b0) as f64 / (t1 - t0) as f64),
        _ => None,
    };
    // Jiffies are 1/100 s on Linux.
    let worker_secs = worker_jiffies.iter().sum::<u64>() as f64 / 100.0;
    let workers_cpu = Some(worker_secs / secs);
    let machine_us_per_step = match (machine_before, machine_after) {
        (Some((b0, _)), Some((b1, _))) => Some((b1 - b0) as f64 / 100.0 / steps * 1e6),
        _ => None,
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let xacts_per_step = match (xacts_before, xact_commits(pool).await.ok()) {
        (Some(a), Some(b)) => Some((b - a) as f64 / steps),
        _ => None,
    };
    Ok(Throughput {
        steps_per_s: steps / secs,
        machine_busy,
        workers_cpu,
        xacts_per_step,
        worker_us_per_step: worker_secs / steps * 1e6,
        machine_us_per_step,
    })
}

/// Commits/s of `IN_FLIGHT` tasks doing autocommit INSERTs of a
/// `ROW_BYTES` row through a pool of `IN_FLIGHT` connections.
async fn raw_throughput(options: &sqlx::postgres::PgConnectOptions) -> Result<Raw> {
    let pool = PgPoolOptions::new()
        .max_connections(IN_FLIGHT as u32)
        .min_connections(IN_FLIGHT as u32)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_raw (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)",
    )
    .execute(&pool)
    .await?;
    // Open every connection before timing.
    let mut held = Vec::with_capacity(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        held.push(pool.acquire().await?);
    }
    drop(held);
    let payload = Arc::new(raw_payload());
    let tally = crate::Tally::default();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT {
        let (pool, payload, tally) = (pool.clone(), payload.clone(), tally.clone());
        tasks.spawn(async move {
            while tally.running() {
                sqlx::query("INSERT INTO bench_raw (payload) VALUES ($1)")
                    .bind(payload.as_str())
                    .execute(&pool)
                    .await?;
                tally.one();
            }
            Ok::<(), sqlx::Error>(())
        });
    }
    let before = machine_jiffies();
    let rate = tally.rate(tasks, RAW_WARMUP, RAW_FOR).await?;
    let after = machine_jiffies();
    pool.close().await;
    let commits = rate * (RAW_WARMUP + RAW_FOR).as_secs_f64();
    Ok(Raw {
        per_s: rate,
        machine_us_per_commit: match (before, after) {
            (Some((b0, _)), Some((b1, _))) => Some((b1 - b0) as f64 / 100.0 / commits * 1e6),
            _ => None,
        },
    })
}

pub(crate) fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    if s.is_empty() {
        return Duration::ZERO;
    }
    let i = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

struct Latency {
    claimed: Vec<Duration>,
    done: Vec<Duration>,
}

/// Submit-to-claim (run no longer `queued`) and submit-to-succeeded of a
/// one-step run, with one idle worker polling every `LATENCY_POLL_MS`.
async fn submit_latency(
    engine: &Engine,
    store: &dyn Store,
    cairn: &Path,
    url: &str,
    logs: &Path,
) -> Result<Latency> {
    let crew = template_crew("bench-latency", 1)?;
    let workers = spawn_workers(cairn, url, 1, 4, LATENCY_POLL_MS, logs)?;
    // Let the worker connect and go idle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (mut claimed, mut done) = (vec![], vec![]);
    for i in 0..LATENCY_REPS {
        // Spread the submits over the worker's poll phase.
        let offset = (i as u64 * 211) % LATENCY_POLL_MS;
        tokio::time::sleep(Duration::from_millis(offset + 50)).await;
        let start = Instant::now();
        let id = engine
            .submit(&crew, json!({"latency": i}), SubmitOptions::default())
            .await?
            .run
            .id;
        let mut seen_claim = None;
        loop {
            let run = store.get_run(id).await?;
            let now = start.elapsed();
            if run.status != RunStatus::Queued && seen_claim.is_none() {
                seen_claim = Some(now);
            }
            if run.status == RunStatus::Succeeded {
                claimed.push(seen_claim.unwrap_or(now));
                done.push(now);
                break;
            }
            ensure!(
                !matches!(run.status, RunStatus::Failed | RunStatus::Cancelled),
                "latency run {id} ended {}",
                run.status
            );
            ensure!(
                now < Duration::from_secs(30),
                "latency run {id} not done after 30 s (logs in {})",
                logs.display()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    drop(workers);
    let mut sorted: Vec<String> = claimed.iter().map(|d| format!("{:.0}", ms(*d))).collect();
    sorted.sort_by_key(|x| x.parse::<u64>().unwrap_or(0));
    eprintln!("[workers] submit-to-claim ms, sorted: {}", sorted.join(" "));
    Ok(Latency { claimed, done })
}

pub async fn run(base_url: &str) -> Result<()> {
    eprintln!(
        "[sqlite] one run alone, then {} runs in flight in one process …",
        crate::concurrent::IN_FLIGHT
    );
    let sqlite = crate::concurrent::measure().await?;
    let cairn = cairn_binary()?;
    let schema = PgSchema::create(base_url)
        .await
        .context("PostgreSQL (CAIRN_BENCH_DATABASE_URL) is unreachable")?;
    eprintln!(
        "PostgreSQL: {} schema {}; worker binary {}",
        crate::describe(&schema.base),
        schema.name,
        cairn.display()
    );
    let result = measure(&schema, &cairn, &sqlite).await;
    if let Err(e) = schema.drop_schema().await {
        eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
    }
    result
}

async fn measure(
    schema: &PgSchema,
    cairn: &Path,
    sqlite: &crate::concurrent::Concurrency,
) -> Result<()> {
    let logs = tempfile::tempdir()?;
    let store = PgStore::connect_with(schema.options.clone(), &OpenOptions::default()).await?;
    let pool = store.pool().clone();
    let store: Arc<dyn Store> = Arc::new(store);
    let engine = Engine::with_store(store.clone(), ExecutorConfig::default());

    let mut steps = Vec::new();
    for n in WORKER_COUNTS {
        eprintln!(
            "[workers] {n} worker(s) × --concurrency {}: {RUNS} runs × {STEPS} template steps …",
            IN_FLIGHT / n
        );
        let t = worker_throughput(&engine, &pool, cairn, &schema.url, n, logs.path()).await?;
        eprintln!("[workers] {n}: {:.0} steps/s", t.steps_per_s);
        steps.push((n, t));
    }
    eprintln!("[workers] raw INSERT commits, {IN_FLIGHT} connections …");
    let raw_run = raw_throughput(&schema.options).await?;
    let raw = raw_run.per_s;
    eprintln!("[workers] submit-to-claim latency, 1 idle worker, --poll-ms {LATENCY_POLL_MS} …");
    let latency = submit_latency(&engine, &*store, cairn, &schema.url, logs.path()).await?;
    pool.close().await;

    print_throughput(&steps, raw);
    println!();
    println!(
        "Submit to claim of a 1-step run, 1 idle worker (--poll-ms {LATENCY_POLL_MS}), \
         {LATENCY_REPS} runs: median {:.1} ms, p99 {:.1} ms; to succeeded: median {:.1} ms, \
         p99 {:.1} ms",
        ms(median(&latency.claimed)),
        ms(percentile(&latency.claimed, 0.99)),
        ms(median(&latency.done)),
        ms(percentile(&latency.done, 0.99)),
    );

    println!();
    println!(
        "SQLite, one process: one run alone {:.0} steps/s; {} runs in flight {:.0} steps/s: \
         {:.2}× (target ≥ 5×; each commit on its own flush: {:.0} steps/s, {:.2}×); group \
         commit: {} transactions carried {} step commits (mean {:.1}, largest {}).",
        sqlite.alone_steps_per_s,
        crate::concurrent::IN_FLIGHT,
        sqlite.in_flight_steps_per_s,
        sqlite.ratio(),
        sqlite.ungrouped_steps_per_s,
        sqlite.ungrouped_steps_per_s / sqlite.alone_steps_per_s,
        sqlite.batches,
        sqlite.commits,
        sqlite.commits as f64 / (sqlite.batches.max(1) as f64),
        sqlite.largest
    );

    let mut out = Map::new();
    // The best worker count against the raw commits.
    let best = steps
        .iter()
        .map(|(_, t)| t.steps_per_s / raw)
        .fold(0.0f64, f64::max);
    out.insert("workers_ratio".into(), Value::from(round2(best)));
    out.insert(
        "sqlite_concurrent_ratio".into(),
        Value::from(round2(sqlite.ratio())),
    );
    out.insert(
        "sqlite_alone_steps_per_s".into(),
        Value::from(round2(sqlite.alone_steps_per_s)),
    );
    out.insert(
        "sqlite_in_flight_steps_per_s".into(),
        Value::from(round2(sqlite.in_flight_steps_per_s)),
    );
    out.insert(
        "sqlite_ungrouped_concurrent_ratio".into(),
        Value::from(round2(
            sqlite.ungrouped_steps_per_s / sqlite.alone_steps_per_s,
        )),
    );
    out.insert(
        "sqlite_group_commit_mean_batch".into(),
        Value::from(round2(
            sqlite.commits as f64 / (sqlite.batches.max(1) as f64),
        )),
    );
    for (n, t) in &steps {
        out.insert(
            format!("postgres_workers_{n}_steps_per_s"),
            Value::from(round2(t.steps_per_s)),
        );
        out.insert(
            format!("postgres_workers_{n}_ratio"),
            Value::from(round2(t.steps_per_s / raw)),
        );
        out.insert(
            format!("postgres_workers_{n}_xacts_per_step"),
            t.xacts_per_step
                .map(round2)
                .map_or(Value::Null, Value::from),
        );
    }
    out.insert(
        format!("postgres_raw_commits_per_s_{IN_FLIGHT}"),
        Value::from(round2(raw)),
    );
    for (key, v) in [
        (
            "postgres_submit_to_claim_median_ms",
            median(&latency.claimed),
        ),
        (
            "postgres_submit_to_claim_p99_ms",
            percentile(&latency.claimed, 0.99),
        ),
        ("postgres_submit_to_done_median_ms", median(&latency.done)),
        (
            "postgres_submit_to_done_p99_ms",
            percentile(&latency.done, 0.99),
        ),
    ] {
        out.insert(key.into(), Value::from(round2(ms(v))));
    }
    out.insert(
        "postgres_latency_worker_poll_ms".into(),
        Value::from(LATENCY_POLL_MS),
    );
    cpu_report(&steps, &raw_run, &mut out);
    println!("{}", Value::Object(out));
    Ok(())
}

/// The worker measurements' table, against the raw commits.
fn print_throughput(steps: &[(usize, Throughput)], raw: f64) {
    println!();
    println!(
        "Worker throughput: {RUNS} runs × {STEPS} template steps, {IN_FLIGHT} runs in flight \
         in total (--concurrency {IN_FLIGHT}/N, --poll-ms {POLL_MS}); raw: {IN_FLIGHT} tasks \
         of autocommit INSERTs of a {}-byte row for {} s.",
        crate::ROW_BYTES,
        RAW_FOR.as_secs()
    );
    println!(
        "{:<8} {:>10} {:>15} {:>8} {:>8} {:>14} {:>13} {:>12}",
        "workers",
        "steps/s",
        "raw commits/s",
        "ratio",
        "≥1.00",
        "machine busy",
        "worker CPU",
        "xacts/step"
    );
    let opt = |x: Option<f64>, scale: f64, unit: &str| {
        x.map_or("-".to_owned(), |x| format!("{:.2}{unit}", x * scale))
    };
    for (n, t) in steps {
        let ratio = t.steps_per_s / raw;
        println!(
            "{:<8} {:>10.0} {:>15.0} {:>8.2} {:>8} {:>14} {:>13} {:>12}",
            n,
            t.steps_per_s,
            raw,
            ratio,
            if ratio >= TARGET { "met" } else { "MISSED" },
            opt(t.machine_busy, 100.0, " %"),
            opt(t.workers_cpu, 1.0, " core"),
            opt(t.xacts_per_step, 1.0, "")
        );
    }
}

/// The machine's CPU time per step against its CPU time per raw commit:
/// on a machine whose cores are all busy, the ratio cannot pass
/// raw-commit CPU over step CPU.
fn cpu_report(steps: &[(usize, Throughput)], raw: &Raw, out: &mut Map<String, Value>) {
    let opt = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.0}"));
    println!();
    println!(
        "CPU time per unit, µs (all cores; user + system): a raw commit {}",
        opt(raw.machine_us_per_commit)
    );
    for (n, t) in steps {
        let ceiling = raw
            .machine_us_per_commit
            .zip(t.machine_us_per_step)
            .map(|(c, s)| c / s);
        println!(
            "  {n} worker(s): a step {} (the workers' own {:.0}); ratio ceiling where the \
             cores are the limit {}",
            opt(t.machine_us_per_step),
            t.worker_us_per_step,
            ceiling.map_or("-".to_owned(), |c| format!("{c:.2}"))
        );
        out.insert(
            format!("postgres_workers_{n}_worker_cpu_us_per_step"),
            Value::from(round2(t.worker_us_per_step)),
        );
        out.insert(
            format!("postgres_workers_{n}_machine_cpu_us_per_step"),
            t.machine_us_per_step
                .map(round2)
                .map_or(Value::Null, Value::from),
        );
    }
    out.insert(
        "postgres_raw_machine_cpu_us_per_commit".into(),
        raw.machine_us_per_commit
            .map(round2)
            .map_or(Value::Null, Value::from),
    );
}
