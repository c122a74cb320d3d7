//! `cairn-bench`: what a Cairn step costs next to a raw commit of the same
//! database, and how long resuming a 1,000-step run takes, on SQLite and
//! PostgreSQL. The last line of stdout is one JSON object with the numbers;
//! `docs/benchmarks.md` explains each of them. `--breakdown` (in
//! `breakdown.rs`) shows where the time goes instead. `--workers` (in
//! `workers.rs`) measures `cairn worker` processes on PostgreSQL instead.
//! `--journal` (in `journal.rs`) measures journal writes of agent steps.
//! `--retention` (in `retention.rs`) measures `MaintenanceStore::compact`, step commits
//! next to a million stored steps, and the bytes a row takes. `--floor`
//! (in `floor.rs`) measures what the data model's writes cost at the least.

mod aged;
mod breakdown;
mod children;
mod concurrent;
mod console;
mod floor;
mod in_flight;
mod journal;
mod overhead;
mod permits;
mod rate_limit;
mod resume_floor;
mod retention;
mod round_trips;
mod signals;
mod traces;
mod workers;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Map, Value};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::sqlite::SqlitePool;
use sqlx::{ConnectOptions, Connection};
use tokio::sync::oneshot;

use cairn::event::payload::{RunSucceeded, StepSucceeded};
use cairn::{
    async_trait, Agent, Crew, Engine, EventData, ExecutorConfig, ResumeOptions, RunId, RunStatus,
    StepContext, StepIdx, StepOutput, StepStatus, Stop, Store, SubmitOptions,
};
use cairn_checkpoint::{
    ClaimRequest, Durability, NewRun, Next, OpenOptions, PgStore, SqliteStore, StepCommit,
    StepTransition,
};
use cairn_core::{Attempt, Fence, NewEvent};

const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Steps of the crew whose per-step cost is measured.
const STEPS: u32 = 30;
/// Timed runs of that crew (after `WARMUP_RUNS`).
const RUNS: usize = 50;
const WARMUP_RUNS: usize = 2;
/// Timed raw commits (after `WARMUP_COMMITS`).
const RAW_COMMITS: usize = 1500;
const WARMUP_COMMITS: usize = 50;
/// The measurements are interleaved in this many rounds, so that a change of
/// load on the machine touches all of them alike.
const ROUNDS: usize = 5;
/// Finished steps of the run that is resumed; one more step is pending.
const RESUME_DONE: u32 = 1000;
const RESUME_REPS: usize = 5;
/// The size of a raw row (and roughly of a step's checkpoint row).
const ROW_BYTES: usize = 300;

// ---------------------------------------------------------------- agents

/// A step that answers at once with a small JSON output.
struct Noop;

#[async_trait]
impl Agent for Noop {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        Ok(StepOutput::new(json!({"ok": true, "step": cx.step.idx})))
    }
}

#[derive(Default)]
struct GateState {
    /// Armed: the next call reports its run and never returns (a step in
    /// flight when its process dies).
    park: Mutex<Option<oneshot::Sender<RunId>>>,
    /// When an unarmed call was entered.
    entered: Mutex<Option<Instant>>,
}

/// The last step of the resume crew: parks the first run, passes on resume.
#[derive(Clone, Default)]
struct Gate(Arc<GateState>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Agent for Gate {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        let now = Instant::now();
        let park = lock(&self.0.park).take();
        if let Some(parked) = park {
            let _ = parked.send(cx.run_id);
            std::future::pending::<()>().await;
        }
        *lock(&self.0.entered) = Some(now);
        Ok(StepOutput::new(json!({"gate": "passed"})))
    }
}

fn noop_crew(name: &str, steps: u32, gate: Option<Gate>) -> Result<Crew> {
    let mut builder = Crew::builder(name, "1");
    for i in 0..steps {
        builder = builder.agent_named(format!("step-{i:04}"), "bench.noop", Noop);
    }
    if let Some(gate) = gate {
        builder = builder.agent_named("gate", "bench.gate", gate);
    }
    Ok(builder.build()?)
}

// ---------------------------------------------------------------- databases

/// Where a backend's store lives; opened again for a fresh engine.
#[derive(Clone)]
enum Target {
    Sqlite(PathBuf),
    Postgres(Box<PgConnectOptions>),
}

/// The store's own pool, for the raw commits: same file or schema, same
/// pragmas, same connections.
enum Raw {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Sqlite(_) => "sqlite",
            Target::Postgres(_) => "postgres",
        }
    }

    async fn open(&self) -> Result<(Arc<dyn Store>, Raw)> {
        self.open_with(Durability::Sync).await
    }

    /// The store with this durability, and its pool (which has it too).
    async fn open_with(&self, durability: Durability) -> Result<(Arc<dyn Store>, Raw)> {
        let opts = OpenOptions {
            durability,
            ..OpenOptions::default()
        };
        Ok(match self {
            Target::Sqlite(path) => {
                let store = SqliteStore::open_with(path, &opts).await?;
                let pool = store.pool().clone();
                (Arc::new(store), Raw::Sqlite(pool))
            }
            Target::Postgres(options) => {
                let store = PgStore::connect_with(PgConnectOptions::clone(options), &opts).await?;
                let pool = store.pool().clone();
                (Arc::new(store), Raw::Postgres(pool))
            }
        })
    }
}

impl Raw {
    async fn setup(&self) -> Result<()> {
        match self {
            Raw::Sqlite(pool) => sqlx::query(
                "CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)",
            )
            .execute(pool)
            .await
            .map(drop),
            Raw::Postgres(pool) => sqlx::query(
                "CREATE TABLE IF NOT EXISTS bench_raw (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)",
            )
            .execute(pool)
            .await
            .map(drop),
        }
        .context("creating the scratch table bench_raw")
    }

    /// One durable commit of one row, taken the way the store takes its
    /// step commits: `BEGIN IMMEDIATE` + INSERT + COMMIT on SQLite, one
    /// autocommit statement on PostgreSQL.
    async fn commit(&self, payload: &str) -> Result<()> {
        match self {
            Raw::Sqlite(pool) => {
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                sqlx::query("INSERT INTO bench_raw (payload) VALUES (?1)")
                    .bind(payload)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
            }
            Raw::Postgres(pool) => {
                sqlx::query("INSERT INTO bench_raw (payload) VALUES ($1)")
                    .bind(payload)
                    .execute(pool)
                    .await?;
            }
        }
        Ok(())
    }

    /// PostgreSQL only: the same row in an explicit BEGIN/INSERT/COMMIT.
    async fn commit_in_tx(&self, payload: &str) -> Result<bool> {
        let Raw::Postgres(pool) = self else {
            return Ok(false);
        };
        let mut tx = pool.begin().await?;
        sqlx::query("INSERT INTO bench_raw (payload) VALUES ($1)")
            .bind(payload)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn close(&self) {
        match self {
            Raw::Sqlite(pool) => pool.close().await,
            Raw::Postgres(pool) => pool.close().await,
        }
    }
}

/// The reference commit through SQLite's C interface (rusqlite on the same
/// libsqlite3-sys as sqlx): the same file, WAL, `synchronous=FULL`, the
/// same `BEGIN IMMEDIATE` + INSERT + COMMIT, a statement prepared once.
/// What the store's commit is compared with when the question is "how
/// close to SQLite itself", not "how close to sqlx".
struct CRaw(rusqlite::Connection);

impl CRaw {
    fn open(path: &std::path::Path) -> Result<CRaw> {
        let conn = rusqlite::Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "wal")?;
        conn.pragma_update(None, "synchronous", "full")?;
        Ok(CRaw(conn))
    }

    fn commit(&self, payload: &str) -> Result<()> {
        self.0.execute_batch("BEGIN IMMEDIATE")?;
        self.0
            .prepare_cached("INSERT INTO bench_raw (payload) VALUES (?1)")?
            .execute([payload])?;
        self.0.execute_batch("COMMIT")?;
        Ok(())
    }
}

/// A fresh schema on the PostgreSQL server, dropped at the end.
struct PgSchema {
    base: PgConnectOptions,
    name: String,
    options: PgConnectOptions,
    /// The URL of `options`, for child processes.
    url: String,
}

/// `measure` on a fresh SQLite file (`file`, in a temporary directory)
/// and in a fresh PostgreSQL schema (`None` when PostgreSQL does not
/// answer).
async fn on_both<T>(
    pg_url: &str,
    file: &str,
    measure: impl AsyncFn(&Target) -> Result<T>,
) -> Result<(T, Option<T>)> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let sqlite = measure(&Target::Sqlite(dir.path().join(file)))
        .await
        .context("SQLite")?;
    let postgres = PgSchema::measured(pg_url, async |schema: &PgSchema| {
        measure(&Target::Postgres(Box::new(schema.options.clone()))).await
    })
    .await?;
    Ok((sqlite, postgres))
}

impl PgSchema {
    /// `measure` in a fresh schema, dropped after; `None` (and a note) when
    /// PostgreSQL does not answer, so the other database's numbers stand.
    async fn measured<T>(
        base_url: &str,
        measure: impl AsyncFnOnce(&PgSchema) -> Result<T>,
    ) -> Result<Option<T>> {
        let schema = match PgSchema::create(base_url).await {
            Ok(schema) => schema,
            Err(e) => {
                println!("note: PostgreSQL is unreachable ({e:#}); its numbers are null.");
                return Ok(None);
            }
        };
        let result = measure(&schema).await;
        if let Err(e) = schema.drop_schema().await {
            eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
        }
        Ok(Some(result.context("PostgreSQL")?))
    }

    async fn create(base_url: &str) -> Result<PgSchema> {
        // As `cairn` connects (no TLS on loopback unless the URL asks).
        let base = cairn_checkpoint::pg_options(base_url)
            .context("CAIRN_BENCH_DATABASE_URL is not a PostgreSQL URL")?;
        let name = format!("cairn_bench_{}", uuid::Uuid::now_v7().simple());
        let mut conn = tokio::time::timeout(Duration::from_secs(3), base.connect())
            .await
            .context("no answer within 3 s")??;
        sqlx::raw_sql(&format!("CREATE SCHEMA {name}"))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        let sep = if base_url.contains('?') { '&' } else { '?' };
        let url = format!("{base_url}{sep}options[search_path]={name}");
        let options = cairn_checkpoint::pg_options(&url)?;
        Ok(PgSchema {
            base,
            name,
            options,
            url,
        })
    }

    async fn drop_schema(&self) -> Result<()> {
        let mut conn = self.base.connect().await?;
        sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", self.name))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(())
    }
}

fn describe(o: &PgConnectOptions) -> String {
    format!(
        "{}:{}/{}",
        o.get_host(),
        o.get_port(),
        o.get_database().unwrap_or("(default)")
    )
}

// ---------------------------------------------------------------- statistics

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / (v.len().max(1) as u32)
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    match s.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2,
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The commits of tasks that each loop until told to stop, for a rate:
/// a task asks [`Tally::running`] before each commit and calls
/// [`Tally::one`] after it; [`Tally::rate`] counts only after a warm-up.
#[derive(Clone, Default)]
struct Tally(Arc<TallyState>);

#[derive(Default)]
struct TallyState {
    counting: std::sync::atomic::AtomicBool,
    stop: std::sync::atomic::AtomicBool,
    count: std::sync::atomic::AtomicU64,
}

impl Tally {
    fn running(&self) -> bool {
        !self.0.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn one(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.0.counting.load(Relaxed) {
            self.0.count.fetch_add(1, Relaxed);
        }
    }

    /// Lets `tasks` run for `warmup`, counts their commits for `window`,
    /// then stops them and waits for them: commits per second.
    async fn rate<E: Into<anyhow::Error> + Send + 'static>(
        &self,
        mut tasks: tokio::task::JoinSet<std::result::Result<(), E>>,
        warmup: Duration,
        window: Duration,
    ) -> Result<f64> {
        use std::sync::atomic::Ordering::Relaxed;
        tokio::time::sleep(warmup).await;
        self.0.counting.store(true, Relaxed);
        let start = Instant::now();
        tokio::time::sleep(window).await;
        let n = self.0.count.load(Relaxed);
        let secs = start.elapsed().as_secs_f64();
        self.0.stop.store(true, Relaxed);
        while let Some(r) = tasks.join_next().await {
            r?.map_err(Into::into)?;
        }
        Ok(n as f64 / secs)
    }
}

// ---------------------------------------------------------------- measurements

/// Per-step and raw-commit numbers of one backend.
struct StepNumbers {
    /// SQLite with `sync` durability: the C-interface reference commit.
    c_raw_mean_us: Option<f64>,
    step_us: f64,
    step_median_run_us: f64,
    raw_mean_us: f64,
    raw_median_us: f64,
    raw_tx_mean_us: Option<f64>,
    commit_step_mean_us: f64,
    commit_step_median_us: f64,
    /// Cairn's commit written by hand (`floor::Hand`), in the same rounds.
    hand_mean_us: Option<f64>,
}

impl StepNumbers {
    /// Mean per step / mean raw commit: the headline ratio.
    fn ratio(&self) -> f64 {
        self.step_us / self.raw_mean_us
    }

    /// Median run / steps, over the median raw commit: less moved by other
    /// load on the machine than the means.
    fn ratio_median(&self) -> f64 {
        self.step_median_run_us / self.raw_median_us
    }

    /// The target is met only if both ratios meet it.
    fn verdict(&self) -> &'static str {
        if self.ratio() <= 1.25 && self.ratio_median() <= 1.25 {
            "met"
        } else {
            "MISSED"
        }
    }
}

/// Resume numbers of one backend (medians over `RESUME_REPS`).
struct ResumeNumbers {
    to_agent_ms: f64,
    full_ms: f64,
    load_ms: f64,
    rebuild_ms: f64,
    warm_to_agent_ms: f64,
    /// PostgreSQL: the same resume written by hand (`resume_floor`), on a
    /// new connection and on a warm one.
    hand_ms: Option<f64>,
    hand_warm_ms: Option<f64>,
}

impl ResumeNumbers {
    /// A fresh engine's resume over the hand-written one on a new
    /// connection.
    fn floor_ratio(&self) -> Option<f64> {
        self.hand_ms.map(|h| self.to_agent_ms / h)
    }
}

async fn run_once(engine: &Engine, crew: &Crew, i: usize) -> Result<()> {
    let done = engine
        .run(crew, json!({"run": i}), SubmitOptions::default())
        .await?;
    ensure!(
        done.run.status == RunStatus::Succeeded && done.executed.len() == STEPS as usize,
        "run {} ended {} after {} steps",
        done.run.id,
        done.run.status,
        done.executed.len()
    );
    Ok(())
}

/// The store calls of one run, timed: what `Executor::drive` does for a
/// fresh run, minus the agents.
struct Phases {
    start: Duration,
    commits: Vec<Duration>,
    get_run: Duration,
}

/// One run of `crew` through the `Store` calls `Engine::run` makes (start,
/// that is submit and claim in one transaction, one `commit_step` per step,
/// get_run), without the executor.
async fn direct_run(store: &dyn Store, crew: &Crew) -> Result<Phases> {
    let def = crew.def();
    let t = Instant::now();
    let started = store
        .start(
            new_run(crew, json!({"direct": true})),
            &claim_request(false),
        )
        .await?;
    let start = t.elapsed();
    let claimed = started.claimed.context("the start claimed nothing")?;
    let (run, fence) = (claimed.run.id, &claimed.fence);
    let n = def.agents.len();
    let mut commits = Vec::with_capacity(n);
    for i in 0..n {
        let commit = step_commit(crew, run, fence, i);
        let t = Instant::now();
        store.commit_step(&commit).await?;
        commits.push(t.elapsed());
    }
    let t = Instant::now();
    store.get_run(run).await?;
    let get_run = t.elapsed();
    Ok(Phases {
        start,
        commits,
        get_run,
    })
}

/// A run of `crew` as a plain submit makes it.
fn new_run(crew: &Crew, input: Value) -> NewRun {
    NewRun::new(crew.def().clone(), input)
}

/// The commit `Executor::drive` makes when step `i` of `crew` succeeds.
fn step_commit(crew: &Crew, run_id: RunId, fence: &Fence, i: usize) -> StepCommit {
    let agents = &crew.def().agents;
    let idx = StepIdx(i as u32);
    let last = i + 1 == agents.len();
    let role = agents.get(i).map(|a| a.role.clone());
    let mut events = vec![NewEvent::typed(EventData::StepSucceeded(StepSucceeded {
        idx,
        attempt: Attempt::FIRST,
        role,
        duration_ms: Some(0),
        input_tokens: None,
        output_tokens: None,
        reviewed_by: None,
    }))];
    if last {
        events.push(NewEvent::typed(EventData::RunSucceeded(RunSucceeded {
            steps: Some(agents.len() as u32),
            copied_from: None,
        })));
    }
    StepCommit {
        run_id,
        fence: fence.clone(),
        idx,
        attempt: Attempt::FIRST,
        usage: None,
        events,
        transition: StepTransition::Succeeded {
            output: json!({"ok": true, "step": idx}),
            next: match agents.get(i + 1) {
                Some(a) => Next::Step(a.role.clone()),
                None => Next::RunSucceeded,
            },
        },
        child: false,
    }
}

fn claim_request(takeover: bool) -> ClaimRequest {
    ClaimRequest::new("cairn-bench", Duration::from_secs(30), 3).forced(takeover)
}

fn raw_payload() -> String {
    format!(
        "{{\"bench\":\"raw\",\"fill\":\"{}\"}}",
        "x".repeat(ROW_BYTES)
    )
    .chars()
    .take(ROW_BYTES)
    .collect()
}

async fn bench_steps(target: &Target, durability: Durability) -> Result<StepNumbers> {
    let (store, raw) = target.open_with(durability).await?;
    raw.setup().await?;
    let c_raw = match (target, durability) {
        (Target::Sqlite(path), Durability::Sync) => Some(CRaw::open(path)?),
        _ => None,
    };
    let engine = Engine::with_store(store.clone(), ExecutorConfig::default());
    let crew = noop_crew("bench-steps", STEPS, None)?;
    let payload = raw_payload();
    let mut hand = match (target, durability) {
        (Target::Sqlite(path), Durability::Sync) => {
            Some(floor::Hand::open(&raw, Some(path)).await?)
        }
        (Target::Postgres(_), Durability::Sync) => Some(floor::Hand::open(&raw, None).await?),
        _ => None,
    };

    for i in 0..WARMUP_RUNS {
        run_once(&engine, &crew, i).await?;
    }
    for _ in 0..WARMUP_COMMITS {
        raw.commit(&payload).await?;
        raw.commit_in_tx(&payload).await?;
        if let Some(c) = &c_raw {
            c.commit(&payload)?;
        }
        if let Some(h) = hand.as_mut() {
            h.commit().await?;
        }
    }
    direct_run(&*store, &crew).await?;

    let (mut runs, mut raws, mut raw_txs, mut commits) = (vec![], vec![], vec![], vec![]);
    let (mut c_raws, mut hands) = (vec![], vec![]);
    for round in 0..ROUNDS {
        for i in 0..RUNS / ROUNDS {
            let t = Instant::now();
            run_once(&engine, &crew, round * RUNS + i).await?;
            runs.push(t.elapsed());
        }
        for _ in 0..RAW_COMMITS / ROUNDS {
            let t = Instant::now();
            raw.commit(&payload).await?;
            raws.push(t.elapsed());
            let t = Instant::now();
            if raw.commit_in_tx(&payload).await? {
                raw_txs.push(t.elapsed());
            }
        }
        // Its own loop: interleaved one by one with the sqlx commits, the C
        // commits made those measure about 25 % faster (why is not known),
        // which would move the headline ratio by the method alone.
        if let Some(c) = &c_raw {
            for _ in 0..RAW_COMMITS / ROUNDS {
                let t = Instant::now();
                c.commit(&payload)?;
                c_raws.push(t.elapsed());
            }
        }
        for _ in 0..RUNS / ROUNDS {
            commits.extend(direct_run(&*store, &crew).await?.commits);
        }
        if let Some(h) = hand.as_mut() {
            for _ in 0..RAW_COMMITS / ROUNDS {
                let t = Instant::now();
                h.commit().await?;
                hands.push(t.elapsed());
            }
        }
    }
    drop(hand);
    raw.close().await;
    let per_run = us(runs.iter().sum::<Duration>()) / (runs.len() as f64);
    Ok(StepNumbers {
        c_raw_mean_us: (!c_raws.is_empty()).then(|| us(mean(&c_raws))),
        step_us: per_run / f64::from(STEPS),
        step_median_run_us: us(median(&runs)) / f64::from(STEPS),
        raw_mean_us: us(mean(&raws)),
        raw_median_us: us(median(&raws)),
        raw_tx_mean_us: (!raw_txs.is_empty()).then(|| us(mean(&raw_txs))),
        commit_step_mean_us: us(mean(&commits)),
        commit_step_median_us: us(median(&commits)),
        hand_mean_us: (!hands.is_empty()).then(|| us(mean(&hands))),
    })
}

/// Leaves a run as a killed process does: `running`, cursor at
/// `RESUME_DONE`, that step marked running, its agent never finished.
async fn park_run(engine: &Engine, crew: &Crew, gate: &Gate) -> Result<RunId> {
    let (parked_tx, parked_rx) = oneshot::channel();
    *lock(&gate.0.park) = Some(parked_tx);
    let (e, c) = (engine.clone(), crew.clone());
    let mut task = tokio::spawn(async move {
        e.run(&c, json!({"bench": "resume"}), SubmitOptions::default())
            .await
    });
    let id = tokio::select! {
        parked = parked_rx => parked.context("the gate agent was dropped")?,
        ended = &mut task => match ended {
            Ok(Ok(d)) => bail!("run {} ended {} before reaching the gate", d.run.id, d.run.status),
            Ok(Err(e)) => return Err(e).context("building the run to resume"),
            Err(e) => bail!("the run task died: {e}"),
        },
    };
    task.abort();
    let _ = task.await;
    let view = engine.show(id).await?;
    let at_cursor = view.steps.get(RESUME_DONE as usize).map(|s| s.status);
    ensure!(
        view.run.status == RunStatus::Running
            && view.run.cursor == StepIdx(RESUME_DONE)
            && at_cursor == Some(StepStatus::Running),
        "run {id} is {} at cursor {} (step {RESUME_DONE}: {at_cursor:?}), not in flight at step {RESUME_DONE}",
        view.run.status,
        view.run.cursor
    );
    Ok(id)
}

/// Resumes a parked run: (time until the pending step's agent is entered,
/// time of the whole resume call).
async fn timed_resume(engine: &Engine, id: RunId, gate: &Gate) -> Result<(Duration, Duration)> {
    *lock(&gate.0.entered) = None;
    let start = Instant::now();
    // The parked run's lease is live (its "process" is this one): a
    // takeover, as `cairn resume --takeover` after a kill.
    let opts = ResumeOptions {
        takeover: true,
        ..ResumeOptions::default()
    };
    let done = engine.resume(id, opts).await?;
    let full = start.elapsed();
    let entered = lock(&gate.0.entered)
        .take()
        .context("resume finished without entering the pending step")?;
    ensure!(
        done.run.status == RunStatus::Succeeded && done.executed == [StepIdx(RESUME_DONE)],
        "resume of {id} ended {} after executing {:?}",
        done.run.status,
        done.executed
    );
    Ok((entered.saturating_duration_since(start), full))
}

async fn bench_resume(target: &Target) -> Result<ResumeNumbers> {
    let gate = Gate::default();
    let crew = noop_crew("bench-resume", RESUME_DONE, Some(gate.clone()))?;
    let (store, raw) = target.open().await?;
    let engine = Engine::with_store(store, ExecutorConfig::default());
    let (mut to_agent, mut full, mut load, mut rebuild, mut warm) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut hand, mut hand_warm) = (vec![], vec![]);
    for _ in 0..RESUME_REPS {
        // Cold: a fresh engine and pool, as in a process started to resume.
        let id = park_run(&engine, &crew, &gate).await?;
        // Nothing decoded yet either, as in a new process.
        cairn_checkpoint::forget_decoded_crews();
        let (fresh, fresh_raw) = target.open().await?;
        let t = Instant::now();
        let (run, steps) = fresh.load(id).await?;
        load.push(t.elapsed());
        let t = Instant::now();
        let rebuilt = cairn_core::rebuild(&run, &steps)?;
        rebuild.push(t.elapsed());
        ensure!(rebuilt.previous.len() == RESUME_DONE as usize);
        fresh_raw.close().await;
        drop(fresh);

        cairn_checkpoint::forget_decoded_crews();
        let (fresh, fresh_raw) = target.open().await?;
        let resumer = Engine::with_store(fresh, ExecutorConfig::default());
        resumer.register(&crew);
        let (a, f) = timed_resume(&resumer, id, &gate).await?;
        to_agent.push(a);
        full.push(f);
        fresh_raw.close().await;

        // Warm: the engine (and pool) that ran the steps.
        let id = park_run(&engine, &crew, &gate).await?;
        warm.push(timed_resume(&engine, id, &gate).await?.0);

        if let Target::Postgres(options) = target {
            let id = park_run(&engine, &crew, &gate).await?;
            let (fresh, warm) = resume_floor::hand_resume(options, id).await?;
            hand.push(fresh);
            hand_warm.push(warm);
        }
    }
    raw.close().await;
    Ok(ResumeNumbers {
        to_agent_ms: ms(median(&to_agent)),
        full_ms: ms(median(&full)),
        load_ms: ms(median(&load)),
        rebuild_ms: ms(median(&rebuild)),
        warm_to_agent_ms: ms(median(&warm)),
        hand_ms: (!hand.is_empty()).then(|| ms(median(&hand))),
        hand_warm_ms: (!hand_warm.is_empty()).then(|| ms(median(&hand_warm))),
    })
}

struct Backend {
    steps: StepNumbers,
    /// The same with `?durability=process` (its raw commits too).
    process: StepNumbers,
    resume: ResumeNumbers,
}

async fn bench(target: &Target) -> Result<Backend> {
    eprintln!("[{}] per-step and raw-commit costs …", target.name());
    let steps = bench_steps(target, Durability::Sync).await?;
    eprintln!("[{}] the same with durability=process …", target.name());
    let process = bench_steps(target, Durability::Process).await?;
    eprintln!("[{}] resume of a {RESUME_DONE}-step run …", target.name());
    let resume = bench_resume(target).await?;
    Ok(Backend {
        steps,
        process,
        resume,
    })
}

// ---------------------------------------------------------------- report

fn print_report(sqlite: &Backend, postgres: Option<&Backend>) {
    println!();
    println!(
        "Per step: {RUNS} runs of a {STEPS}-step crew of no-op Rust steps through Engine::run \
         (wall time / {}); raw: {RAW_COMMITS} commits of a {ROW_BYTES}-byte row.",
        RUNS * STEPS as usize
    );
    println!(
        "{:<9} {:>9} {:>14} {:>14} {:>9} {:>13} {:>8} {:>20}",
        "backend",
        "step µs",
        "raw commit µs",
        "raw median µs",
        "step/raw",
        "median ratio",
        "≤1.25×",
        "commit_step µs"
    );
    let rows = [("sqlite", Some(sqlite)), ("postgres", postgres)];
    for (name, b) in rows {
        match b {
            Some(b) => {
                let s = &b.steps;
                println!(
                    "{:<9} {:>9.1} {:>14.1} {:>14.1} {:>8.2}× {:>12.2}× {:>8} {:>10.1} / {:<7.1}",
                    name,
                    s.step_us,
                    s.raw_mean_us,
                    s.raw_median_us,
                    s.ratio(),
                    s.ratio_median(),
                    s.verdict(),
                    s.commit_step_mean_us,
                    s.commit_step_median_us
                );
            }
            None => println!("{name:<9} (not measured)"),
        }
    }
    if let Some(tx) = postgres.and_then(|p| p.steps.raw_tx_mean_us) {
        println!("postgres raw BEGIN+INSERT+COMMIT: {tx:.1} µs (mean)");
    }
    if let Some(c) = sqlite.steps.c_raw_mean_us {
        println!(
            "sqlite raw commit through the C interface (rusqlite, same SQLite): {c:.1} µs (mean); \
             step / C commit {:.2}× (target ≤ 1.5×)",
            sqlite.steps.step_us / c
        );
    }
    println!();
    println!("durability=process (survives the process, not a power cut):");
    println!(
        "{:<9} {:>9} {:>14} {:>9} {:>19}",
        "backend", "step µs", "raw commit µs", "step/raw", "step vs sync step"
    );
    for (name, b) in rows {
        if let Some(b) = b {
            let p = &b.process;
            println!(
                "{:<9} {:>9.1} {:>14.1} {:>8.2}× {:>18.2}×",
                name,
                p.step_us,
                p.raw_mean_us,
                p.ratio(),
                p.step_us / b.steps.step_us
            );
        }
    }
    println!();
    println!(
        "Resume of a run with {RESUME_DONE} finished steps and 1 pending (median of {RESUME_REPS}; \
         target ≤ 5 ms from the call to the pending step's agent):"
    );
    println!(
        "{:<9} {:>14} {:>8} {:>12} {:>9} {:>11} {:>15}",
        "backend",
        "to agent ms",
        "≤5 ms",
        "full call ms",
        "load ms",
        "rebuild ms",
        "warm engine ms"
    );
    for (name, b) in rows {
        if let Some(b) = b {
            let r = &b.resume;
            println!(
                "{:<9} {:>14.2} {:>8} {:>12.2} {:>9.2} {:>11.2} {:>15.2}",
                name,
                r.to_agent_ms,
                if r.to_agent_ms <= 5.0 {
                    "met"
                } else {
                    "MISSED"
                },
                r.full_ms,
                r.load_ms,
                r.rebuild_ms,
                r.warm_to_agent_ms
            );
        }
    }
}

fn json_fields(out: &mut Map<String, Value>, prefix: &str, b: Option<&Backend>) {
    let f = |x: Option<f64>| x.map(round2).map_or(Value::Null, Value::from);
    let s = b.map(|b| &b.steps);
    let r = b.map(|b| &b.resume);
    let p = b.map(|b| &b.process);
    for (key, value) in [
        ("step_us", s.map(|s| s.step_us)),
        ("durability_process_step_us", p.map(|p| p.step_us)),
        ("durability_process_raw_commit_us", p.map(|p| p.raw_mean_us)),
        ("raw_commit_us", s.map(|s| s.raw_mean_us)),
        ("raw_commit_median_us", s.map(|s| s.raw_median_us)),
        ("step_ratio", s.map(StepNumbers::ratio)),
        ("step_ratio_median", s.map(StepNumbers::ratio_median)),
        ("step_median_run_us", s.map(|s| s.step_median_run_us)),
        ("commit_step_us", s.map(|s| s.commit_step_mean_us)),
        ("commit_step_median_us", s.map(|s| s.commit_step_median_us)),
        ("hand_commit_us", s.and_then(|s| s.hand_mean_us)),
        (
            "commit_floor_ratio",
            s.and_then(|s| s.hand_mean_us.map(|h| s.commit_step_mean_us / h)),
        ),
        (
            "step_floor_ratio",
            s.and_then(|s| s.hand_mean_us.map(|h| s.step_us / h)),
        ),
        ("resume_1000_ms", r.map(|r| r.to_agent_ms)),
        ("resume_1000_full_ms", r.map(|r| r.full_ms)),
        ("resume_1000_load_ms", r.map(|r| r.load_ms)),
        ("resume_1000_rebuild_ms", r.map(|r| r.rebuild_ms)),
        ("resume_1000_warm_ms", r.map(|r| r.warm_to_agent_ms)),
        ("resume_1000_hand_ms", r.and_then(|r| r.hand_ms)),
        ("resume_1000_hand_warm_ms", r.and_then(|r| r.hand_warm_ms)),
        ("resume_floor_ratio", r.and_then(ResumeNumbers::floor_ratio)),
    ] {
        out.insert(format!("{prefix}_{key}"), f(value));
    }
}

/// `cairn-bench --help`.
fn usage() -> String {
    format!(
        "usage: cairn-bench [--breakdown | --workers | --journal | --retention | --console | --floor | --children | --in-flight | --permits | --rate-limit | --traces | --resume | --signals | --aged | --model-overhead]\n\nMeasures per-step cost \
                     against a raw commit and resume time on SQLite and PostgreSQL \
                     (CAIRN_BENCH_DATABASE_URL, default {DEFAULT_PG_URL}).\n\
                     --breakdown  where the time goes instead (store calls, statements, WAL)\n\
                     --workers    PostgreSQL only: steps/s of 1, 2 and 4 `cairn worker` \
                     processes against raw commits/s, and submit-to-claim latency \
                     (needs `cargo build --release -p cairn-cli`)\n\
                     --journal    one agent journal item against a raw commit, and a \
                     10-turn agent step\n\
                     --console    the console's pages on 100,000 stored runs (SQLite; \
                     CAIRN_BENCH_CONSOLE_RUNS)\n\
                     --aged       step, commit, claim, resume, runs list and console pages on \
                     1,000,000 finished runs (CAIRN_BENCH_AGED_RUNS) against a young \
                     database, and a compaction pass\n\
                     --floor      the least a step commit can cost in this data model: \
                     its writes by hand, shape by shape, against the raw commit\n\
                     --children   a step with 1,000 children: spawn, the children, \
                     the parent's wake (one process, both databases)\n\
                     --in-flight  2,000 and 4,000 `llm` steps in flight in one `cairn serve`: \
                     statements/s while they wait, memory per step, connections, leases lost \
                     (needs `cargo build --release -p cairn-cli`)\n\
                     --model-overhead what Cairn adds to a model call streaming 500 tokens: \
                     first and last token through an `llm` step watched over SSE against \
                     the model read directly, p50/p99, tokens/s, journal writes\n\
                     --permits    a provider key's admission (no limits: a read; limits: \
                     a permit taken and released) against a step commit\n\
                     --rate-limit a provider allowing 60 requests and 20,000 tokens a minute, \
                     3 workers, 64 runs in flight, 3 minutes (CAIRN_BENCH_RATE_SECS): the \
                     rate used, 429s, calls during a pause (needs `cargo build --release -p cairn-cli`)\n\
                     --traces     per step with tracing off, traced with the collector \
                     down, and traced with it up (OTLP export of every run's spans)\n\
                     --resume     only the resume of a 1,000-step run, both databases\n\
                     --signals    an idle `cairn serve`'s statements/s with 1,000 schedules \
                     not due against none, and a signal's delivery (send to the consuming \
                     commit) at p50 and p99 (needs `cargo build --release -p cairn-cli`)\n\
                     --retention  MaintenanceStore::compact of 100,000 finished runs \
                     (CAIRN_BENCH_RETENTION_RUNS), commit_step with and without them, \
                     bytes per stored row"
    )
}

/// `--resume`: the default run's resume of a 1,000-step run alone, on both
/// databases (the same keys as the default run's).
async fn resume_only(pg_url: &str) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let sqlite = bench_resume(&Target::Sqlite(dir.path().join("bench.db"))).await?;
    let schema = PgSchema::create(pg_url).await?;
    let postgres = bench_resume(&Target::Postgres(Box::new(schema.options.clone()))).await;
    if let Err(e) = schema.drop_schema().await {
        eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
    }
    let postgres = postgres?;
    let mut out = Map::new();
    for (db, r) in [("sqlite", &sqlite), ("postgres", &postgres)] {
        println!(
            "{db}: to agent {:.2} ms (target ≤ 5), full call {:.2}, load {:.2}, rebuild {:.2}, \
             warm engine {:.2}",
            r.to_agent_ms, r.full_ms, r.load_ms, r.rebuild_ms, r.warm_to_agent_ms
        );
        if let (Some(hand), Some(warm), Some(ratio)) = (r.hand_ms, r.hand_warm_ms, r.floor_ratio())
        {
            println!(
                "{db}: by hand (resume_floor.rs) {hand:.2} ms on a new connection, {warm:.2} warm; \
                 Cairn over it {ratio:.2}"
            );
        }
        for (key, v) in [
            ("resume_1000_ms", Some(r.to_agent_ms)),
            ("resume_1000_full_ms", Some(r.full_ms)),
            ("resume_1000_load_ms", Some(r.load_ms)),
            ("resume_1000_warm_ms", Some(r.warm_to_agent_ms)),
            ("resume_1000_hand_ms", r.hand_ms),
            ("resume_1000_hand_warm_ms", r.hand_warm_ms),
            ("resume_floor_ratio", r.floor_ratio()),
        ] {
            if let Some(v) = v {
                out.insert(format!("{db}_{key}"), Value::from(round2(v)));
            }
        }
    }
    round_trips::report(pg_url, &mut out).await;
    println!("{}", Value::Object(out));
    Ok(())
}

/// A mode that runs alone (`--console`, `--floor`, …).
async fn run_alone(mode: &str, pg_url: &str) -> Result<()> {
    match mode {
        "--console" => console::run().await,
        "--aged" => aged::run(pg_url).await,
        "--floor" => floor::run(pg_url).await,
        "--children" => children::run(pg_url).await,
        "--in-flight" => in_flight::run(pg_url).await,
        "--model-overhead" => overhead::run(pg_url).await,
        "--permits" => permits::run(pg_url).await,
        "--rate-limit" => rate_limit::run(pg_url).await,
        "--traces" => traces::run(pg_url).await,
        "--signals" => signals::run(pg_url).await,
        "--resume" => resume_only(pg_url).await,
        other => anyhow::bail!("no mode {other}"),
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut breakdown = false;
    let mut workers = false;
    let mut journal = false;
    let mut retention = false;
    // A mode that runs alone and prints its own report.
    let mut alone: Option<String> = None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--journal" => journal = true,
            "--retention" => retention = true,
            "--console" | "--floor" | "--children" | "--in-flight" | "--permits"
            | "--rate-limit" | "--traces" | "--resume" | "--signals" | "--aged"
            | "--model-overhead" => alone = Some(arg),
            "--breakdown" => breakdown = true,
            "--workers" => workers = true,
            "-h" | "--help" => {
                println!("{}", usage());
                return Ok(());
            }
            other => {
                eprintln!("cairn-bench: unknown argument `{other}` (try --help)");
                std::process::exit(2);
            }
        }
    }
    let pg_url =
        std::env::var("CAIRN_BENCH_DATABASE_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned());
    if let Some(mode) = alone {
        return run_alone(&mode, &pg_url).await;
    }
    if retention {
        ensure!(
            !breakdown && !workers && !journal,
            "--retention is a mode of its own"
        );
        return retention::run(&pg_url).await;
    }
    if journal {
        ensure!(!breakdown && !workers, "--journal is a mode of its own");
        return journal::run(&pg_url).await;
    }
    if workers {
        ensure!(!breakdown, "--workers and --breakdown are separate modes");
        return workers::run(&pg_url).await;
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let sqlite_target = Target::Sqlite(dir.path().join("bench.db"));
    eprintln!("SQLite: {}", dir.path().join("bench.db").display());
    if breakdown {
        breakdown::run(&sqlite_target).await?;
    }
    let sqlite = match breakdown {
        true => None,
        false => Some(bench(&sqlite_target).await.context("SQLite benchmark")?),
    };

    let mut pg_failed = false;
    let postgres = match PgSchema::create(&pg_url).await {
        Err(e) => {
            let at = PgConnectOptions::from_str(&pg_url)
                .map(|o| describe(&o))
                .unwrap_or_else(|_| "CAIRN_BENCH_DATABASE_URL".to_owned());
            println!("note: PostgreSQL at {at} is unreachable ({e:#}); its numbers are null.");
            None
        }
        Ok(schema) => {
            eprintln!(
                "PostgreSQL: {} schema {}",
                describe(&schema.base),
                schema.name
            );
            let target = Target::Postgres(Box::new(schema.options.clone()));
            let result = match breakdown {
                true => breakdown::run(&target).await.map(|()| None),
                false => bench(&target).await.map(Some),
            };
            if let Err(e) = schema.drop_schema().await {
                eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
            }
            match result {
                Ok(b) => b,
                Err(e) => {
                    println!(
                        "note: the PostgreSQL benchmark failed ({e:#}); its numbers are null."
                    );
                    pg_failed = true;
                    None
                }
            }
        }
    };
    let Some(sqlite) = sqlite else {
        return Ok(());
    };

    print_report(&sqlite, postgres.as_ref());
    let mut out = Map::new();
    json_fields(&mut out, "sqlite", Some(&sqlite));
    json_fields(&mut out, "postgres", postgres.as_ref());
    out.insert(
        "postgres_raw_tx_commit_us".into(),
        postgres
            .as_ref()
            .and_then(|p| p.steps.raw_tx_mean_us)
            .map(round2)
            .map_or(Value::Null, Value::from),
    );
    let c_raw = sqlite.steps.c_raw_mean_us;
    out.insert(
        "sqlite_c_raw_commit_us".into(),
        c_raw.map(round2).map_or(Value::Null, Value::from),
    );
    out.insert(
        "sqlite_step_c_ratio".into(),
        c_raw
            .map(|c| round2(sqlite.steps.step_us / c))
            .map_or(Value::Null, Value::from),
    );
    round_trips::report(&pg_url, &mut out).await;
    // The headline resume number is SQLite's (the embedded default).
    out.insert(
        "resume_1000_ms".into(),
        Value::from(round2(sqlite.resume.to_agent_ms)),
    );
    println!("{}", Value::Object(out));
    if pg_failed {
        std::process::exit(1);
    }
    Ok(())
}
