//! `--retention`: what keeping history costs and what removing it costs.
//! On SQLite (a temporary file) and PostgreSQL (a fresh schema), two stores
//! side by side:
//!
//! - "full": one real run of a 10-step crew of no-op agents through
//!   `Engine::run`, cloned in SQL (`INSERT … SELECT` over a recursive CTE /
//!   `generate_series`) into `CAIRN_BENCH_RETENTION_RUNS` finished runs
//!   (default 100,000, so 1,000,000 step rows), all finished a day ago;
//! - "empty": nothing but what the measurements add.
//!
//! Measured: the bytes a run, step, event and journal item take (the journal
//! from one real agent step, cloned on the empty store); `LeaseStore::commit_step`
//! on the empty store against the full one, interleaved in rounds; and
//! `MaintenanceStore::compact` with `finished_older_than: Some(Duration::ZERO)` on the
//! full store, as rows deleted per second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde_json::{json, Map, Value};
use sqlx::Row;

use cairn::{Crew, Engine, ExecutorConfig, RunStatus, Store, SubmitOptions};
use cairn_checkpoint::{CompactPolicy, Compacted};

use crate::{
    direct_run, mean, median, noop_crew, round2, us, PgSchema, Raw, Target, ROUNDS, STEPS,
};

const DEFAULT_RUNS: u64 = 100_000;
/// Steps of each finished run in the full store.
const RUN_STEPS: u32 = 10;
/// Direct runs (of the `STEPS`-step crew) per store and round.
const COMMIT_RUNS_PER_ROUND: usize = 4;
/// Journal items cloned on the empty store, for their size.
const JOURNAL_ITEMS: i64 = 100_000;

/// The SQL that differs between the two databases.
struct Dialect {
    /// Before `INSERT`: what defines `g(i)` (SQLite's recursive CTE).
    with: fn(i64) -> String,
    /// In `FROM`: what defines `g(i)` (PostgreSQL's `generate_series`).
    from: fn(i64) -> String,
    /// A run id made of `g.i`: 00000000-0000-7000-8000-<i as 12 hex digits>.
    id: &'static str,
    /// A time `offset` seconds before a day ago.
    past: fn(&str) -> String,
    /// The size of a JSON value in its column.
    json_len: &'static str,
}

const SQLITE: Dialect = Dialect {
    with: |n| {
        format!("WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n}) ")
    },
    from: |_| "g".to_owned(),
    id: "printf('00000000-0000-7000-8000-%012x', g.i)",
    past: |offset| {
        format!("strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day', '-' || ({offset}) || ' seconds')")
    },
    json_len: "length({})",
};

const POSTGRES: Dialect = Dialect {
    with: |_| String::new(),
    from: |n| format!("generate_series(1, {n}) AS g(i)"),
    id: "('00000000-0000-7000-8000-' || lpad(to_hex(g.i), 12, '0'))::uuid",
    past: |offset| format!("now() - interval '1 day' - ({offset}) * interval '1 second'"),
    json_len: "pg_column_size({})",
};

impl Raw {
    fn dialect(&self) -> &'static Dialect {
        match self {
            Raw::Sqlite(_) => &SQLITE,
            Raw::Postgres(_) => &POSTGRES,
        }
    }

    pub(crate) async fn exec(&self, sql: &str) -> Result<u64> {
        Ok(match self {
            Raw::Sqlite(pool) => sqlx::query(sql).execute(pool).await?.rows_affected(),
            Raw::Postgres(pool) => sqlx::query(sql).execute(pool).await?.rows_affected(),
        })
    }

    /// The first column of the first row, as a number (NULL as 0).
    async fn number(&self, sql: &str) -> Result<f64> {
        Ok(match self {
            Raw::Sqlite(pool) => {
                let sql = format!("SELECT CAST(({sql}) AS REAL)");
                sqlx::query_scalar::<_, Option<f64>>(&sql)
                    .fetch_one(pool)
                    .await?
                    .unwrap_or(0.0)
            }
            Raw::Postgres(pool) => {
                let sql = format!("SELECT ({sql})::float8");
                sqlx::query_scalar::<_, Option<f64>>(&sql)
                    .fetch_one(pool)
                    .await?
                    .unwrap_or(0.0)
            }
        })
    }

    async fn count(&self, table: &str) -> Result<u64> {
        Ok(self
            .number(&format!("SELECT count(*) FROM {table}"))
            .await? as u64)
    }

    /// The columns of `table`, in order.
    async fn columns(&self, table: &str) -> Result<Vec<String>> {
        let cols: Vec<String> = match self {
            Raw::Sqlite(pool) => {
                sqlx::query(&format!("SELECT name FROM pragma_table_info('{table}')"))
                    .fetch_all(pool)
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect()
            }
            Raw::Postgres(pool) => sqlx::query(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1 \
                 ORDER BY ordinal_position",
            )
            .bind(table)
            .fetch_all(pool)
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect(),
        };
        ensure!(!cols.is_empty(), "no table {table}");
        Ok(cols)
    }

    /// Inserts `n` copies of the rows of `table` where `key = value`, with
    /// the columns in `set` replaced by expressions over `g.i` (1..=n) and
    /// `t` (the copied row). Returns the rows inserted.
    async fn clone_rows(
        &self,
        table: &str,
        key: &str,
        value: &str,
        n: i64,
        set: &[Set<'_>],
    ) -> Result<u64> {
        if n <= 0 {
            return Ok(0);
        }
        let d = self.dialect();
        let cols = self.columns(table).await?;
        let exprs: Vec<String> = cols
            .iter()
            .map(|c| match set.iter().find(|(name, _)| name == c) {
                Some((_, e)) => e.clone(),
                None => format!("t.{c}"),
            })
            .collect();
        let sql = format!(
            "{with}INSERT INTO {table} ({cols}) SELECT {exprs} FROM {from}, {table} t \
             WHERE t.{key} = '{value}'",
            with = (d.with)(n),
            cols = cols.join(", "),
            exprs = exprs.join(", "),
            from = (d.from)(n),
        );
        self.exec(&sql)
            .await
            .with_context(|| format!("cloning {table}"))
    }

    /// Bytes the database file holds in use (SQLite only): page_count minus
    /// the free list, times the page size.
    async fn sqlite_used_bytes(&self) -> Result<f64> {
        let pages = self
            .number(
                "SELECT page_count - freelist_count FROM pragma_page_count, pragma_freelist_count",
            )
            .await?;
        let size = self
            .number("SELECT page_size FROM pragma_page_size")
            .await?;
        Ok(pages * size)
    }

    /// Bytes `table` takes with its indexes (and, on PostgreSQL, its
    /// TOAST): `pg_total_relation_size`, or SQLite's `dbstat` (None if this
    /// SQLite has no `dbstat`).
    async fn table_bytes(&self, table: &str) -> Result<Option<f64>> {
        match self {
            Raw::Postgres(_) => Ok(Some(
                self.number(&format!("SELECT pg_total_relation_size('{table}')"))
                    .await?,
            )),
            Raw::Sqlite(_) => Ok(self
                .number(&format!(
                    "SELECT sum(d.pgsize) FROM dbstat d JOIN sqlite_schema m ON m.name = d.name \
                     WHERE m.tbl_name = '{table}'"
                ))
                .await
                .ok()),
        }
    }
}

/// Bytes per row of one table, and the mean size of its JSON column.
#[derive(Clone, Copy, Default)]
struct RowSize {
    rows: u64,
    bytes_per_row: f64,
    json_bytes: f64,
}

/// Measures `table` after a fill; `delta` is the SQLite file growth of the
/// fill, used when `dbstat` is missing.
async fn row_size(raw: &Raw, table: &str, json_col: &str, delta: f64) -> Result<RowSize> {
    let rows = raw.count(table).await?;
    let bytes = raw.table_bytes(table).await?.unwrap_or(delta);
    let len = raw.dialect().json_len.replace("{}", json_col);
    let json_bytes = raw
        .number(&format!("SELECT avg({len}) FROM {table}"))
        .await?;
    Ok(RowSize {
        rows,
        bytes_per_row: bytes / (rows.max(1) as f64),
        json_bytes,
    })
}

struct Sizes {
    method: &'static str,
    run: RowSize,
    step: RowSize,
    event: RowSize,
    journal: RowSize,
}

/// A column of a cloned row and the expression it gets.
type Set<'a> = (&'a str, String);

pub(crate) struct Fill {
    pub(crate) runs: u64,
    pub(crate) steps: u64,
    events: u64,
    events_per_run: u64,
    pub(crate) took: Duration,
}

/// Fills `full` with `n` finished runs of `RUN_STEPS` steps ([`fill_with`]).
pub(crate) async fn fill(store: &Arc<dyn Store>, raw: &Raw, n: u64) -> Result<(Fill, [f64; 3])> {
    fill_with(store, raw, n, RUN_STEPS).await
}

/// Fills `full` with `n` finished runs: one real run of a crew of `steps`
/// no-op steps, and `n - 1` copies of it made in SQL. Returns the fill and,
/// per table, the SQLite file growth it caused.
pub(crate) async fn fill_with(
    store: &Arc<dyn Store>,
    raw: &Raw,
    n: u64,
    steps: u32,
) -> Result<(Fill, [f64; 3])> {
    let crew = noop_crew("bench-retention", steps, None)?;
    let template = run_once(store, &crew, "the template run").await?;
    let events_per_run = raw
        .count(&format!("events WHERE run_id = '{template}'"))
        .await?;
    let d = raw.dialect();
    let copies = n as i64 - 1;
    let offset = format!("{copies} - g.i");
    let past = (d.past)(&offset);
    let id = d.id.to_owned();
    let start = Instant::now();
    let mut delta = [0.0; 3];
    let is_sqlite = matches!(raw, Raw::Sqlite(_));
    let tables: [(&str, &str, Vec<Set>); 3] = [
        (
            "runs",
            "id",
            vec![
                ("id", id.clone()),
                ("idempotency_key", "NULL".into()),
                ("created_at", past.clone()),
                ("updated_at", past.clone()),
                ("finished_at", past.clone()),
            ],
        ),
        (
            "steps",
            "run_id",
            vec![
                ("run_id", id.clone()),
                ("started_at", past.clone()),
                ("finished_at", past.clone()),
            ],
        ),
        (
            "events",
            "run_id",
            vec![("run_id", id.clone()), ("at", past.clone())],
        ),
    ];
    for (i, (table, key, set)) in tables.iter().enumerate() {
        let before = match is_sqlite {
            true => raw.sqlite_used_bytes().await?,
            false => 0.0,
        };
        raw.clone_rows(table, key, &template, copies, set).await?;
        if is_sqlite {
            delta[i] = raw.sqlite_used_bytes().await? - before;
        }
        eprintln!("  {table}: {:.1} s", start.elapsed().as_secs_f64());
    }
    if let Raw::Postgres(_) = raw {
        raw.exec("ANALYZE runs, steps, events").await?;
    }
    let took = start.elapsed();
    Ok((
        Fill {
            runs: raw.count("runs").await?,
            steps: raw.count("steps").await?,
            events: raw.count("events").await?,
            events_per_run,
            took,
        },
        delta,
    ))
}

/// One real agent step's journal (82 items) on `store`, cloned in SQL under
/// the same step to about `JOURNAL_ITEMS` items. Returns the SQLite file
/// growth of the clone.
async fn fill_journal(store: &Arc<dyn Store>, raw: &Raw) -> Result<f64> {
    let crew = crate::journal::agent_crew()?;
    let id = run_once(store, &crew, "the agent run").await?;
    let items = raw.count(&format!("journal WHERE run_id = '{id}'")).await? as i64;
    ensure!(items > 0, "the agent step journaled nothing");
    let stride = raw
        .number(&format!(
            "SELECT max(seq) + 1 FROM journal WHERE run_id = '{id}'"
        ))
        .await? as i64;
    let before = match raw {
        Raw::Sqlite(_) => raw.sqlite_used_bytes().await?,
        Raw::Postgres(_) => 0.0,
    };
    let copies = JOURNAL_ITEMS / items - 1;
    raw.clone_rows(
        "journal",
        "run_id",
        &id,
        copies,
        &[("seq", format!("t.seq + g.i * {stride}"))],
    )
    .await?;
    Ok(match raw {
        Raw::Sqlite(_) => raw.sqlite_used_bytes().await? - before,
        Raw::Postgres(_) => {
            raw.exec("ANALYZE journal").await?;
            0.0
        }
    })
}

/// `LeaseStore::commit_step` on the empty and the full store, interleaved in
/// `ROUNDS` rounds of `COMMIT_RUNS_PER_ROUND` direct runs each.
async fn commit_costs(
    empty: &dyn Store,
    full: &dyn Store,
) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let crew = noop_crew("bench-steps", STEPS, None)?;
    direct_run(empty, &crew).await?;
    direct_run(full, &crew).await?;
    let (mut e, mut f) = (vec![], vec![]);
    for round in 0..ROUNDS {
        // Alternate which store goes first.
        for which in [round % 2 == 0, round % 2 == 1] {
            for _ in 0..COMMIT_RUNS_PER_ROUND {
                match which {
                    true => e.extend(direct_run(empty, &crew).await?.commits),
                    false => f.extend(direct_run(full, &crew).await?.commits),
                }
            }
        }
    }
    Ok((e, f))
}

struct Numbers {
    fill: Fill,
    sizes: Sizes,
    commit_empty_mean_us: f64,
    commit_empty_median_us: f64,
    commit_full_mean_us: f64,
    commit_full_median_us: f64,
    compact: Compacted,
    compact_dry: Compacted,
    compact_took: Duration,
    compact_dry_took: Duration,
    runs_left: u64,
}

impl Numbers {
    fn ratio(&self) -> f64 {
        self.commit_full_mean_us / self.commit_empty_mean_us
    }
    fn ratio_median(&self) -> f64 {
        self.commit_full_median_us / self.commit_empty_median_us
    }
    fn rows(c: &Compacted) -> u64 {
        c.runs + c.steps + c.events + c.journal_items + c.waits
    }
    fn runs_per_s(&self) -> f64 {
        self.compact.runs as f64 / self.compact_took.as_secs_f64()
    }
    fn rows_per_s(&self) -> f64 {
        Numbers::rows(&self.compact) as f64 / self.compact_took.as_secs_f64()
    }
}

async fn measure(name: &str, empty: &Target, full: &Target, n: u64) -> Result<Numbers> {
    let (empty_store, empty_raw) = empty.open().await?;
    let (full_store, full_raw) = full.open().await?;

    eprintln!("[{name}] filling the full store with {n} runs of {RUN_STEPS} steps …");
    let (fill, delta) = fill(&full_store, &full_raw, n).await?;
    eprintln!(
        "[{name}] {} runs, {} steps, {} events in {:.1} s",
        fill.runs,
        fill.steps,
        fill.events,
        fill.took.as_secs_f64()
    );
    let run = row_size(&full_raw, "runs", "crew_def", delta[0]).await?;
    let step = row_size(&full_raw, "steps", "output", delta[1]).await?;
    let event = row_size(&full_raw, "events", "data", delta[2]).await?;

    // Settle what the fill left behind before timing commits: SQLite's WAL
    // into the file; on PostgreSQL a vacuum (as autovacuum would do after so
    // many inserts) and a checkpoint (needs superuser; skipped otherwise).
    match &full_raw {
        Raw::Sqlite(_) => {
            full_raw.exec("PRAGMA wal_checkpoint(TRUNCATE)").await?;
        }
        Raw::Postgres(_) => {
            full_raw.exec("VACUUM runs, steps, events").await?;
            let _ = full_raw.exec("CHECKPOINT").await;
        }
    }
    eprintln!("[{name}] commit_step on the empty and the full store …");
    let (e, f) = commit_costs(&*empty_store, &*full_store).await?;

    eprintln!("[{name}] journal items for their size …");
    let journal_delta = fill_journal(&empty_store, &empty_raw).await?;
    let journal = row_size(&empty_raw, "journal", "payload", journal_delta).await?;
    let method = match (&full_raw, full_raw.table_bytes("steps").await?) {
        (Raw::Postgres(_), _) => "pg_total_relation_size",
        (Raw::Sqlite(_), Some(_)) => "dbstat",
        (Raw::Sqlite(_), None) => "page_count deltas",
    };

    eprintln!("[{name}] compact …");
    let policy = CompactPolicy {
        finished_older_than: Some(Duration::ZERO),
        ..Default::default()
    };
    let t = Instant::now();
    let compact_dry = full_store
        .compact(&CompactPolicy {
            dry_run: true,
            ..policy.clone()
        })
        .await?;
    let compact_dry_took = t.elapsed();
    let t = Instant::now();
    let compact = full_store.compact(&policy).await?;
    let compact_took = t.elapsed();
    let runs_left = full_raw.count("runs").await?;

    empty_raw.close().await;
    full_raw.close().await;
    Ok(Numbers {
        fill,
        sizes: Sizes {
            method,
            run,
            step,
            event,
            journal,
        },
        commit_empty_mean_us: us(mean(&e)),
        commit_empty_median_us: us(median(&e)),
        commit_full_mean_us: us(mean(&f)),
        commit_full_median_us: us(median(&f)),
        compact,
        compact_dry,
        compact_took,
        compact_dry_took,
        runs_left,
    })
}

fn print(name: &str, n: &Numbers, out: &mut Map<String, Value>) {
    let c = &n.compact;
    println!();
    println!(
        "{name}: {} runs, {} step rows, {} events ({} per run) filled in {:.1} s",
        n.fill.runs,
        n.fill.steps,
        n.fill.events,
        n.fill.events_per_run,
        n.fill.took.as_secs_f64()
    );
    println!(
        "  compact(finished_older_than: 0): {:.2} s, deleted {} runs, {} steps, {} events, \
         {} journal items, {} waits ({} rows); {:.0} runs/s, {:.0} rows/s; {} runs left",
        n.compact_took.as_secs_f64(),
        c.runs,
        c.steps,
        c.events,
        c.journal_items,
        c.waits,
        Numbers::rows(c),
        n.runs_per_s(),
        n.rows_per_s(),
        n.runs_left
    );
    println!(
        "  dry run first: {:.2} s, would delete {} runs ({} rows)",
        n.compact_dry_took.as_secs_f64(),
        n.compact_dry.runs,
        Numbers::rows(&n.compact_dry)
    );
    println!(
        "  commit_step µs mean (median): empty {:.1} ({:.1}), full {:.1} ({:.1}); \
         full/empty {:.2}× ({:.2}×)",
        n.commit_empty_mean_us,
        n.commit_empty_median_us,
        n.commit_full_mean_us,
        n.commit_full_median_us,
        n.ratio(),
        n.ratio_median()
    );
    println!(
        "  bytes per row ({}, indexes included): run {:.0}, step {:.0}, event {:.0}, journal item {:.0}",
        n.sizes.method,
        n.sizes.run.bytes_per_row,
        n.sizes.step.bytes_per_row,
        n.sizes.event.bytes_per_row,
        n.sizes.journal.bytes_per_row
    );
    println!(
        "  mean JSON size in those rows: crew_def {:.0}, output {:.0}, data {:.0}, payload {:.0} \
         (journal: {} items)",
        n.sizes.run.json_bytes,
        n.sizes.step.json_bytes,
        n.sizes.event.json_bytes,
        n.sizes.journal.json_bytes,
        n.sizes.journal.rows
    );
    let r = |x: f64| json!(round2(x));
    for (key, value) in [
        ("retention_runs", json!(n.fill.runs)),
        ("retention_step_rows", json!(n.fill.steps)),
        ("retention_fill_s", r(n.fill.took.as_secs_f64())),
        ("compact_s", r(n.compact_took.as_secs_f64())),
        ("compact_runs", json!(c.runs)),
        ("compact_rows", json!(Numbers::rows(c))),
        ("compact_runs_per_s", r(n.runs_per_s())),
        ("compact_rows_per_s", r(n.rows_per_s())),
        ("compact_dry_run_s", r(n.compact_dry_took.as_secs_f64())),
        ("commit_step_empty_us", r(n.commit_empty_mean_us)),
        ("commit_step_full_us", r(n.commit_full_mean_us)),
        ("commit_step_empty_median_us", r(n.commit_empty_median_us)),
        ("commit_step_full_median_us", r(n.commit_full_median_us)),
        ("commit_step_full_ratio", r(n.ratio())),
        ("commit_step_full_ratio_median", r(n.ratio_median())),
        ("bytes_per_run", r(n.sizes.run.bytes_per_row)),
        ("bytes_per_step", r(n.sizes.step.bytes_per_row)),
        ("bytes_per_event", r(n.sizes.event.bytes_per_row)),
        ("bytes_per_journal_item", r(n.sizes.journal.bytes_per_row)),
    ] {
        out.insert(format!("{name}_{key}"), value);
    }
}

/// A count from the environment variable `var`: `default` when it is
/// unset, an error unless it is a positive whole number.
pub(crate) fn count_from_env(var: &str, default: u64) -> Result<u64> {
    match std::env::var(var) {
        Ok(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .with_context(|| format!("{var} is not a positive number")),
        Err(_) => Ok(default),
    }
}

pub async fn run(pg_url: &str) -> Result<()> {
    let n = count_from_env("CAIRN_BENCH_RETENTION_RUNS", DEFAULT_RUNS)?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    eprintln!("SQLite: {}", dir.path().display());
    let sqlite = measure(
        "sqlite",
        &Target::Sqlite(dir.path().join("empty.db")),
        &Target::Sqlite(dir.path().join("full.db")),
        n,
    )
    .await
    .context("SQLite")?;

    let mut schemas = Vec::new();
    let postgres = async {
        for _ in 0..2 {
            schemas.push(PgSchema::create(pg_url).await?);
        }
        let [empty, full] =
            [&schemas[0], &schemas[1]].map(|s| Target::Postgres(Box::new(s.options.clone())));
        measure("postgres", &empty, &full, n).await
    }
    .await;
    for schema in &schemas {
        if let Err(e) = schema.drop_schema().await {
            eprintln!("warning: could not drop schema {}: {e:#}", schema.name);
        }
    }
    let postgres = match postgres {
        Ok(p) => Some(p),
        Err(e) if schemas.len() < 2 => {
            println!("note: PostgreSQL is unreachable ({e:#}); its numbers are null.");
            None
        }
        Err(e) => return Err(e).context("PostgreSQL"),
    };

    let mut out = Map::new();
    print("sqlite", &sqlite, &mut out);
    if let Some(p) = &postgres {
        print("postgres", p, &mut out);
    }
    println!("{}", Value::Object(out));
    Ok(())
}

/// Runs `crew` once to the end on `store`; the run's id, or an error naming
/// `what` if it did not succeed.
async fn run_once(store: &Arc<dyn Store>, crew: &Crew, what: &str) -> Result<String> {
    let engine = Engine::with_store(store.clone(), ExecutorConfig::default());
    let done = engine
        .run(
            crew,
            json!({"bench": "retention"}),
            SubmitOptions::default(),
        )
        .await?;
    ensure!(done.run.status == RunStatus::Succeeded, "{what} failed");
    Ok(done.run.id.to_string())
}
