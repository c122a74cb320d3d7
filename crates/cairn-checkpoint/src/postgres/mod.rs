//! The PostgreSQL backend: many processes on many machines. Every
//! operation but four is the storage script's (`script/`); this file
//! connects, keeps a `LISTEN` connection for idle workers, and holds the
//! fast paths: a step commit, a journal item and a fresh run's start in
//! one statement each (data-modifying CTEs), so each costs one round trip
//! instead of a transaction of five to ten (`start.rs`). Several hosts in
//! one URL, and following a failover among them: `hosts.rs`.

mod batch;
mod hosts;
mod start;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::types::Json;
use sqlx::{Connection, PgConnection};

use cairn_core::{Corruption, JournalEntry};

use crate::plan::{check_holder, refused_commit};
use crate::raw::{decode_journal, error_value};
use crate::script::{HostParts, ScriptFn, ScriptHost, TxKind};
use crate::sql::{Pool, Prepare, Query, PING_AFTER_IDLE, RUNNABLE};
use crate::{DbFault, Error, JournalAppend, OpenOptions, Pooler, Result, StepCommit};

use hosts::Failover;
pub use hosts::{PgHosts, SessionAttrs};

/// A Cairn store on a PostgreSQL server.
#[derive(Clone)]
pub struct PgStore {
    /// What the script reads: the same pool as the script takes it, and
    /// `PostgreSQL at HOST:PORT/DB` for messages among them.
    parts: HostParts,
    pool: PgPool,
    /// The `LISTEN cairn_runnable` connection, opened on first use, and
    /// how many failovers the store had followed then (`hosts.rs`).
    listener: std::sync::Arc<tokio::sync::Mutex<Option<(sqlx::postgres::PgListener, u64)>>>,
    /// Step commits queued for the next batch (`batch.rs`).
    batcher: Arc<batch::Batcher>,
    /// On a URL of several hosts: which one the pool uses, and how it
    /// follows a failover (`hosts.rs`).
    failover: Option<Arc<Failover>>,
}

impl PgStore {
    /// Connects to one server (failing within `opts.connect_timeout` with
    /// the server named) and applies migrations.
    pub async fn connect_with(pg: PgConnectOptions, opts: &OpenOptions) -> Result<Self> {
        Self::connect_hosts(PgHosts::one(pg), opts).await
    }

    /// Connects to the first of a URL's hosts that answers and fits its
    /// `target_session_attrs` (`hosts.rs`; failing, within
    /// `opts.connect_timeout` a host, with every host named and why it was
    /// refused) and applies migrations. With several hosts the store
    /// follows a failover to another of them (`hosts::Failover`).
    pub async fn connect_hosts(pg: PgHosts, opts: &OpenOptions) -> Result<Self> {
        let db = pg.hosts.first().and_then(|h| h.get_database());
        let names: Vec<String> = pg.hosts.iter().map(hosts::name).collect();
        let target = format!(
            "PostgreSQL at {}/{}",
            names.join(","),
            db.unwrap_or("(default database)")
        );
        let attrs = pg.attrs;
        let hosts = pg
            .hosts
            .into_iter()
            .map(|h| session(h, opts, &target))
            .collect::<Result<Vec<_>>>()?;
        // One direct attempt first: the pool would only say "timed out",
        // while the connection itself names the cause (refused, auth, …).
        let (at, first) = match hosts::first_fit(&hosts, attrs, opts.connect_timeout, 0).await {
            Ok(found) => found,
            Err(refused) => {
                return Err(Error::Unreachable {
                    reason: match refused.as_slice() {
                        [(_, why)] => why.clone(),
                        _ => format!(
                            "no host fits target_session_attrs={}: {}",
                            attrs.as_str(),
                            hosts::refusals(&refused)
                        ),
                    },
                    target,
                })
            }
        };
        let first = migrate(first, opts.create, &target).await?;
        // Lanes for single statements (`sql::Lanes`), carved out of the
        // cap; none behind a transaction-mode pooler (every statement
        // there is in a transaction).
        let pooled = opts.pooler == Pooler::Transaction;
        let prepare = match pooled {
            false => Prepare::Cached,
            true => Prepare::Unnamed,
        };
        let cap = opts.max_connections.max(1);
        let lanes = match prepare {
            Prepare::Cached => crate::sql::lanes_for(cap),
            Prepare::Unnamed => 0,
        };
        let failover = (hosts.len() > 1).then(|| {
            Arc::new(Failover::new(
                hosts.clone(),
                attrs,
                opts.connect_timeout,
                at,
            ))
        });
        let pool = pool_options(cap - lanes, opts, failover.as_ref().map(Arc::downgrade))
            .connect_with(hosts[at].clone())
            .await
            .map_err(|e| Error::Unreachable {
                target: target.clone(),
                reason: e.to_string(),
            })?;
        let live = match pooled {
            false => crate::LiveHub::postgres(pool.clone()),
            true => crate::LiveHub::local(),
        };
        // The migration's connection becomes the first lane: a process's
        // first statement (a resume's read) needs no connection opened.
        let lanes = crate::sql::Lanes::new(lanes);
        if let Some(unused) = lanes.adopt(first).await {
            let _ = unused.close().await;
        }
        if let Some(f) = &failover {
            f.attach(pool.clone(), lanes.clone());
        }
        Ok(PgStore {
            parts: HostParts {
                db: Pool::Postgres(pool.clone(), prepare, lanes),
                target,
                live,
                expiry: Default::default(),
                retry_for: opts.retry_for,
            },
            pool,
            listener: Default::default(),
            batcher: Default::default(),
            failover,
        })
    }

    /// A statement failed: after a fault that may pass (a lost connection,
    /// a server read-only now), a store on several hosts looks for the one
    /// that fits now before the error goes on to its write boundary, whose
    /// retry then reaches that host (`hosts.rs`). Nothing on one host.
    async fn after_fault(&self, e: &Error) {
        let Some(failover) = &self.failover else {
            return;
        };
        let passing = match e {
            Error::Database(e) => DbFault::of(e).may_pass(),
            Error::Db { fault, .. } => fault.may_pass(),
            _ => false,
        };
        if passing {
            failover.reprobe().await;
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// What the group commit did so far (`batch.rs`): flushes, and the
    /// step commits they carried.
    pub fn group_stats(&self) -> crate::GroupStats {
        self.batcher.stats()
    }

    /// One step commit in a statement of its own (and, for a commit that
    /// follows up, a transaction of its own).
    async fn commit_alone(&self, c: &StepCommit) -> Result<()> {
        let commit = commit_query(c)?;
        // A spawn, a child's end or a cancel writes more in the same
        // transaction (`script::children`); every other commit is the one
        // statement, in no transaction of its own.
        let follow_up = c.follows_up().then(|| c.clone());
        let kind = match follow_up {
            Some(_) => TxKind::Write,
            None => TxKind::Single,
        };
        let counted = self
            .tx(
                kind,
                script!(|conn| let runs = match conn.fetch_optional(commit).await? {
                            Some(row) => row.int("runs")?,
                            None => 0,
                        };
                        if let (1, Some(c)) = (runs, follow_up) {
                            crate::script::children::follow_up_in(conn, &c).await?;
                        }
                        Ok(runs)),
            )
            .await;
        match counted {
            Ok(0) => self.refused(c).await,
            Ok(_) => Ok(()),
            Err(Error::Database(sqlx::Error::Database(db)))
                if db.message().starts_with("cairn: ") =>
            {
                Err(Corruption::new(
                    c.run_id,
                    format!(
                        "step {} attempt {} is not running, so its result cannot be committed",
                        c.idx, c.attempt
                    ),
                )
                .into())
            }
            Err(e) => Err(e),
        }
    }

    /// Why a commit that matched no run row was refused.
    async fn refused(&self, c: &StepCommit) -> Result<()> {
        let (run, owner) = crate::script::run_and_owner(self, c.run_id).await?;
        Err(refused_commit(&run, owner.as_deref(), c))
    }
}

/// A host's options with the store's session settings: `durability`, and
/// what a transaction-mode pooler needs.
fn session(pg: PgConnectOptions, opts: &OpenOptions, target: &str) -> Result<PgConnectOptions> {
    let pooled = opts.pooler == Pooler::Transaction;
    // `process`: Cairn's own transactions return before their WAL is
    // flushed (a server crash may lose the last ~600 ms of them; a
    // crash of Cairn's process loses nothing). Other clients keep theirs.
    let pg = match (opts.durability, pooled) {
        (crate::Durability::Sync, _) => pg,
        (crate::Durability::Process, false) => pg.options([("synchronous_commit", "off")]),
        (crate::Durability::Process, true) => {
            return Err(Error::BadUrl {
                url: target.to_owned(),
                reason: "durability=process is a session setting, which a pooler in transaction \
                         mode does not keep: set it on the role instead \
                         (ALTER ROLE … SET synchronous_commit = off)"
                    .into(),
            })
        }
    };
    // Through a transaction-mode pooler: no named statements (another
    // client's may exist on the server connection we are given, ours
    // may be gone) and no startup parameter PgBouncer refuses.
    Ok(match pooled {
        false => pg,
        true => pg.statement_cache_capacity(0).extra_float_digits(None),
    })
}

/// The pool's options. sqlx pings every connection it hands out: a round
/// trip before each step commit. A connection used within the last
/// `PING_AFTER_IDLE` is taken as alive (as HikariCP's "alive bypass
/// window"); one idle for longer, as after a quiet spell or a server
/// restart, is still pinged, and replaced if dead. On several hosts, a
/// connection opened before a switch to another host is dropped, and a
/// failed ping makes the store look for the host that fits now.
fn pool_options(
    max: u32,
    opts: &OpenOptions,
    failover: Option<std::sync::Weak<Failover>>,
) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(opts.acquire_timeout.max(opts.connect_timeout))
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            let failover = failover.as_ref().and_then(std::sync::Weak::upgrade);
            Box::pin(async move {
                if failover.as_ref().is_some_and(|f| f.retired(meta.age)) {
                    return Ok(false);
                }
                if meta.idle_for >= PING_AFTER_IDLE {
                    if let Err(e) = conn.ping().await {
                        if let Some(f) = failover {
                            f.reprobe().await;
                        }
                        return Err(e);
                    }
                }
                Ok(true)
            })
        })
}

#[async_trait]
impl ScriptHost for PgStore {
    fn parts(&self) -> &HostParts {
        &self.parts
    }

    /// The pool's transaction; a fault that may pass makes a store on
    /// several hosts look for the one that fits now ([`PgStore::after_fault`]),
    /// so every operation, its one-statement fast paths included, follows
    /// a failover.
    async fn tx<T: Send + 'static>(&self, kind: TxKind, f: ScriptFn<T>) -> Result<T> {
        let done = crate::script::pool_tx(self.db(), kind, f).await;
        if let Err(e) = &done {
            self.after_fault(e).await;
        }
        done
    }

    async fn wait_for_work(&self, max: Duration) {
        if self.db().needs_transactions() {
            // A pooler in transaction mode cannot keep a `LISTEN`: poll.
            tokio::time::sleep(max).await;
            return;
        }
        // After a failover the `LISTEN` connection may still be on the
        // host left behind (alive, read-only): it is opened again, from
        // the pool, which now connects to the new one.
        let switches = self.failover.as_ref().map_or(0, |f| f.switches());
        let mut guard = self.listener.lock().await;
        if guard.as_ref().is_some_and(|(_, at)| *at != switches) {
            *guard = None;
        }
        if guard.is_none() {
            match sqlx::postgres::PgListener::connect_with(&self.pool).await {
                Ok(mut listener) => match listener.listen(RUNNABLE).await {
                    Ok(()) => *guard = Some((listener, switches)),
                    Err(e) => tracing::debug!(error = %e, "LISTEN failed; polling"),
                },
                Err(e) => tracing::debug!(error = %e, "no listener connection; polling"),
            }
        }
        let Some((listener, _)) = guard.as_mut() else {
            drop(guard);
            tokio::time::sleep(max).await;
            return;
        };
        match tokio::time::timeout(max, listener.recv()).await {
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "listener failed; reconnecting next time");
                *guard = None;
                drop(guard);
                self.after_fault(&Error::Database(e)).await;
            }
        }
    }

    async fn start_fresh(
        &self,
        new: &crate::NewRun,
        def: &Value,
        req: Option<&crate::ClaimRequest>,
    ) -> Result<Option<crate::Started>> {
        start::start_fresh(self, new, def, req).await
    }

    async fn commit_step(&self, c: &StepCommit) -> Result<()> {
        match c.follows_up() {
            true => self.commit_alone(c).await,
            false => batch::commit(self, c).await,
        }
    }

    async fn append_journal(&self, a: &JournalAppend) -> Result<JournalEntry> {
        // One statement, so one round trip: the fence (the run row updated
        // only at the holder's epoch, which also locks it against a claim),
        // the item at the step's next seq, and its event.
        let row = sqlx::query(
            "WITH r AS ( \
               UPDATE runs SET event_seq = event_seq + $8 \
               WHERE id = $1 AND lease_epoch = $7 AND lease_owner = $11 AND status = 'running' \
               RETURNING id, event_seq), \
             j AS ( \
               INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, \
                 created_at, lease_epoch, lease_owner) \
               SELECT r.id, $2, COALESCE((SELECT MAX(seq) FROM journal \
                 WHERE run_id = $1 AND step_idx = $2), 0) + 1, $3, $4, $5, $6, clock_timestamp(), \
                 $7, $11 \
               FROM r \
               RETURNING seq, attempt, generation, kind, payload, created_at), \
             e AS ( \
               INSERT INTO events (run_id, seq, at, kind, data) \
               SELECT r.id, r.event_seq, clock_timestamp(), $9, $10 FROM r WHERE $8 = 1) \
             SELECT * FROM j",
        )
        .bind(a.run_id.as_uuid())
        .bind(a.idx.get() as i32)
        .bind(a.attempt.get() as i32)
        .bind(a.generation as i32)
        .bind(a.kind.as_str())
        .bind(Json(&a.payload))
        .bind(a.fence.epoch.0)
        .bind(i64::from(a.event.is_some()))
        .bind(a.event.as_ref().map(|e| e.kind.as_str()))
        .bind(a.event.as_ref().map(|e| Json(&e.data)))
        .bind(&*a.fence.owner);
        // sqlx reads the whole answer, up to ReadyForQuery, so the item is
        // acknowledged only once its implicit transaction committed (tested).
        crate::counters::sent(1);
        let sent = async {
            Ok::<_, sqlx::Error>(match self.db().needs_transactions() {
                false => row.fetch_optional(&self.pool).await?,
                true => {
                    let mut tx = self.pool.begin().await?;
                    let row = row.persistent(false).fetch_optional(&mut *tx).await?;
                    tx.commit().await?;
                    row
                }
            })
        };
        let row = match sent.await {
            Ok(row) => row,
            Err(e) => {
                let e = Error::Database(e);
                self.after_fault(&e).await;
                return Err(e);
            }
        };
        match row {
            Some(row) => decode_journal(a.run_id, &crate::sql::Row::Postgres(row)),
            None => {
                // Nothing written: say why.
                let (run, owner) = crate::script::run_and_owner(self, a.run_id).await?;
                let now = (run.lease_epoch, owner.as_deref());
                check_holder(a.run_id, run.status, now, &a.fence)?;
                Err(Corruption::new(
                    a.run_id,
                    "a journal item matched the run but was not written",
                )
                .into())
            }
        }
    }
}

/// The step commit as one statement (one round trip, one implicit
/// transaction) of data-modifying CTEs: the run fenced by its epoch, the
/// step, the next step, the events and the wait. The guard aborts the whole
/// statement if the run matched but its step did not. Its values are the
/// commit's rows (`StepCommit::rows`), bound by name. The step row is
/// matched on the bound run id, not only through `r`: a prepared statement's
/// generic plan, made while the tables are young (no statistics yet), would
/// otherwise scan every step row (measured: 0.2 ms more per commit at 5,000
/// rows, growing with them).
const COMMIT_STEP: &str = "WITH r AS ( \
       UPDATE runs SET status = :run_status, cursor = :cursor, error = :run_error, \
         event_seq = event_seq + :n_events, updated_at = clock_timestamp(), \
         finished_at = CASE WHEN :finished THEN clock_timestamp() ELSE finished_at END, \
         lease_owner = CASE WHEN :run_status = 'running' THEN lease_owner END, \
         lease_expires_at = CASE WHEN :run_status = 'running' THEN lease_expires_at END, \
         not_before = CASE WHEN :retry_secs::float8 IS NULL THEN NULL \
           ELSE clock_timestamp() + make_interval(secs => :retry_secs::float8) END \
       WHERE id = :run AND lease_epoch = :epoch AND lease_owner = :owner \
         AND status = 'running' \
         AND (cancel_requested_at IS NULL OR :run_status = 'cancelled') \
       RETURNING id, event_seq), \
     s AS ( \
       UPDATE steps SET status = :status, output = :output, input_tokens = :input_tokens, \
         output_tokens = :output_tokens, cost_nanos = :cost_nanos, \
         error = COALESCE(:error, steps.error), \
         finished_at = clock_timestamp(), lease_epoch = :epoch, lease_owner = :owner \
       FROM r WHERE steps.run_id = :run AND steps.idx = :idx AND r.id = steps.run_id \
         AND steps.attempt = :attempt AND steps.status = 'running' \
       RETURNING steps.idx), \
     n AS ( \
       INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
       SELECT r.id, :next_idx, :next_role, 'running', 1, clock_timestamp() FROM r \
       WHERE :next_idx::int IS NOT NULL), \
     e AS ( \
       INSERT INTO events (run_id, seq, at, kind, data) \
       SELECT r.id, r.event_seq - :n_events + u.ord, clock_timestamp(), u.e->>'kind', u.e->'data' \
       FROM r CROSS JOIN jsonb_array_elements(:events::jsonb) WITH ORDINALITY AS u(e, ord)), \
     w AS ( \
       INSERT INTO waits (id, run_id, step_idx, attempt, kind, status, prompt, question_id, \
         deadline, on_deadline, created_at) \
       SELECT :wait::uuid, r.id, :idx, :attempt, :wait_kind, 'open', :prompt, :question, \
         clock_timestamp() + make_interval(secs => :deadline_secs::float8), :on_deadline, \
         clock_timestamp() \
       FROM r WHERE :wait::uuid IS NOT NULL) \
     SELECT CASE WHEN (SELECT count(*) FROM r) = 1 AND (SELECT count(*) FROM s) <> 1 \
         THEN cairn_raise('cairn: step row is not running at the committed attempt') \
         ELSE (SELECT count(*) FROM r) END AS runs";

/// Applies the migrations on the first connection, in one transaction
/// that holds a lock per schema (so processes starting together migrate
/// once), then drops the named statements sqlx's migrator prepared: through
/// a transaction-mode pooler they would stay on a server connection
/// another client gets next. A read-only open (`create` false) must not
/// create Cairn's tables in a database that has none (as SQLite refuses a
/// missing file). Gives the connection back: it becomes the store's
/// first lane.
async fn migrate(mut conn: PgConnection, create: bool, target: &str) -> Result<PgConnection> {
    let failed = |source| Error::Migrate {
        target: target.to_owned(),
        source,
    };
    let mut tx = conn.begin().await?;
    let present: bool = sqlx::query_scalar("SELECT to_regclass('runs') IS NOT NULL")
        .persistent(false)
        .fetch_one(&mut *tx)
        .await?;
    if !present && !create {
        return Err(Error::NoSchema(target.to_owned()));
    }
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('cairn migrations ' || current_schema()))")
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    let mut migrator = sqlx::migrate!("../../migrations/postgres");
    migrator.set_locking(false);
    migrator.run_direct(&mut *tx).await.map_err(failed)?;
    // Crew versions stored under an earlier release's fingerprint, under
    // the same lock (unnamed statements: the DEALLOCATE below is for sqlx's).
    crate::script::refingerprint_in(&mut crate::sql::Conn::Postgres(
        &mut tx,
        crate::sql::Prepare::Unnamed,
    ))
    .await?;
    sqlx::query("DEALLOCATE ALL")
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(conn)
}

/// A commit's events and its wait's deadline outcome, as JSON, for
/// [`COMMIT_STEP`] and a batch's row alike.
fn events_and_deadline(c: &StepCommit) -> Result<(Vec<Value>, Option<Value>)> {
    let events = c
        .events
        .iter()
        .map(|e| serde_json::json!({"kind": e.kind.as_str(), "data": e.data}))
        .collect();
    let on_deadline =
        match c.rows().open_wait.and_then(|w| w.on_deadline.as_ref()) {
            Some(o) => Some(serde_json::to_value(o).map_err(|e| {
                Corruption::new(c.run_id, format!("the wait's deadline outcome: {e}"))
            })?),
            None => None,
        };
    Ok((events, on_deadline))
}

/// [`COMMIT_STEP`] with the commit's values bound.
fn commit_query(c: &StepCommit) -> Result<Query> {
    let r = c.rows();
    let wait = r.open_wait;
    let (events, on_deadline) = events_and_deadline(c)?;
    Ok(Query::sized(COMMIT_STEP, 26)
        .bind("run", c.run_id)
        .bind("epoch", c.fence.epoch.0)
        .bind("owner", &*c.fence.owner)
        .bind("run_status", r.run_status.as_str())
        .bind("cursor", r.cursor.get())
        .bind("run_error", error_value(r.run_error))
        .bind("n_events", c.events.len() as i64)
        .bind("finished", r.finishes())
        .bind("retry_secs", r.retry_after.map(|d| d.as_secs_f64()))
        .bind("idx", c.idx.get())
        .bind("attempt", c.attempt.get())
        .bind("status", r.status.as_str())
        .bind("output", r.output.cloned())
        .bind("input_tokens", c.usage.map(|u| u.input_tokens as i64))
        .bind("output_tokens", c.usage.map(|u| u.output_tokens as i64))
        .bind("cost_nanos", crate::commit::cost_nanos(c.usage))
        .bind("error", error_value(r.error))
        .bind("next_idx", r.start_next.map(|(i, _)| i.get()))
        .bind("next_role", r.start_next.map(|(_, role)| role.as_str()))
        .bind("events", Value::Array(events))
        .bind("wait", wait.map(|w| w.id))
        .bind("wait_kind", wait.map(|w| w.kind.as_str()))
        .bind("prompt", wait.map(|w| w.prompt.clone()))
        .bind("question", wait.and_then(|w| w.question_id.as_deref()))
        .bind(
            "deadline_secs",
            wait.and_then(|w| w.deadline_ms)
                .map(|ms| ms as f64 / 1000.0),
        )
        .bind("on_deadline", on_deadline))
}
