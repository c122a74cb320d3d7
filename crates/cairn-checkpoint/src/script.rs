//! The storage script: every `Store` operation written once, over the
//! dialect layer (`sql`). A backend supplies its pool and, where a
//! measured fast path pays for it, its own version of an operation
//! ([`Backend::commit_step`], [`Backend::append_journal`]); everything else
//! is here, so the two databases cannot drift apart in meaning.
//!
//! What each operation decides (a claim's effect on the cursor's step, an
//! answer's effect on the run) is in `plan.rs`, pure; this file reads what
//! a plan needs, asks it, and writes what it says, in one transaction.

use std::time::Duration;

use async_trait::async_trait;

use cairn_core::{
    Actor, Answer, Corruption, ErrorInfo, ErrorKind, EventKind, EventRecord, JournalEntry,
    LeaseEpoch, NewEvent, RunId, RunRecord, RunStatus, StepIdx, StepRecord, StepStatus, ThreadTurn,
    WaitId, WaitRecord,
};

use crate::failpoint;
use crate::plan::{
    check_fork, check_holder, claim_events, fork_event, plan_action, plan_answer, plan_claim,
    plan_expire, AnswerPlan, ClaimStep, StepChange,
};
use crate::raw::{
    check_same_submission, decode_event, decode_journal, decode_run, decode_run_with, decode_step,
    decode_wait, error_json, run_cols, run_cols_but_def, stats_from, step_cols, wait_cols,
};
use crate::raw::{decode_listed, decode_thread};
use crate::sql::{query, Conn, Dialect, Pool};
use crate::DbFault;
use crate::ThreadSummary;
use crate::{
    Action, ClaimRequest, Claimed, Error, ForkRequest, JournalAppend, Lease, NewRun, OnBusy,
    Result, RunFilter, StepCommit, Store, StoreStats, Submitted, Takeover, WaitFilter,
};

/// What a backend brings to the script: its pool, and its fast paths. Not
/// nameable outside this crate (a sealed trait): every [`Store`] is one of
/// Cairn's backends.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    fn db(&self) -> &Pool;

    /// The database in messages: the SQLite file, or the PostgreSQL server
    /// and database (never a password).
    fn target(&self) -> &str;

    /// The live text of the store's `llm` steps (`live.rs`).
    fn live(&self) -> &crate::LiveHub;

    /// The end of a step: on both databases a measured fast path of one
    /// round trip, so each backend writes its own.
    async fn commit_step(&self, c: &StepCommit) -> Result<()>;

    /// One journal item; the script's version is a transaction of three
    /// statements.
    async fn append_journal(&self, a: &JournalAppend) -> Result<JournalEntry> {
        append_journal(self.db(), a).await
    }

    /// A worker's idle wait; without notifications, a sleep.
    async fn wait_for_work(&self, max: Duration) {
        tokio::time::sleep(max).await;
    }

    /// One write transaction of the script: `f` runs on a transaction of
    /// the pool, committed if it returns `Ok`. SQLite runs it on its writer
    /// thread instead (no hop per statement).
    async fn write_tx<T: Send + 'static>(&self, f: ScriptFn<T>) -> Result<T> {
        let mut tx = self.db().write().await?;
        let out = f(&mut tx.conn()).await?;
        tx.commit().await?;
        Ok(out)
    }

    /// [`Backend::write_tx`] for a transaction that only reads (one
    /// snapshot).
    async fn read_tx<T: Send + 'static>(&self, f: ScriptFn<T>) -> Result<T> {
        let mut tx = self.db().read().await?;
        let out = f(&mut tx.conn()).await?;
        tx.commit().await?;
        Ok(out)
    }
}

/// A future of the storage script, boxed so a transaction can be handed
/// over as a value ([`Backend::write_tx`]).
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A transaction of the storage script: given its connection, its work.
pub(crate) type ScriptFn<T> =
    Box<dyn for<'a, 'b> FnOnce(&'a mut Conn<'b>) -> BoxFuture<'a, Result<T>> + Send>;

/// SQLite's `PRAGMA quick_check`: the problems it reports, none for "ok".
pub(crate) async fn quick_check(c: &mut Conn<'_>) -> Result<Vec<String>> {
    let rows = c.fetch_all(query("PRAGMA quick_check")).await?;
    let lines = rows
        .iter()
        .map(|r| r.text("quick_check"))
        .collect::<Result<Vec<_>>>()?;
    Ok(lines.into_iter().filter(|l| l != "ok").collect())
}

/// How many corrupt runs one `claim_next` sets aside before it answers.
const SET_ASIDE_PER_CLAIM: usize = 16;

// ------------------------------------------------------------- reads

const RUN_BY_ID: &str = concat!("SELECT ", run_cols!(), " FROM runs WHERE id = :id");
const RUN_BY_ID_LOCKED: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE id = :id {for_update}"
);

/// `list_runs`, each way: one keyset condition and order per direction.
macro_rules! list_runs_sql {
    ($cmp:literal, $order:literal) => {
        concat!(
            "SELECT ",
            run_cols!(),
            " FROM runs WHERE (:status IS NULL OR status = :status) \
             AND (:crew IS NULL OR crew_name = :crew) \
             AND (:thread IS NULL OR thread_id = :thread) \
             AND (:after IS NULL OR (created_at, id) ",
            $cmp,
            " (SELECT created_at, id FROM runs WHERE id = :after)) ORDER BY ",
            $order,
            " LIMIT :limit"
        )
    };
}
const LIST_OLDEST_FIRST: &str = list_runs_sql!(">", "created_at, id");
const LIST_NEWEST_FIRST: &str = list_runs_sql!("<", "created_at DESC, id DESC");

const RUN_BUT_DEF_BY_ID: &str =
    concat!("SELECT ", run_cols_but_def!(), " FROM runs WHERE id = :id");

/// The run read again in a transaction that already holds its crew
/// definition (`def`), which is not read nor decoded again.
async fn fetch_run_again(
    c: &mut Conn<'_>,
    id: RunId,
    def: cairn_core::CrewDef,
) -> Result<RunRecord> {
    let row = c
        .fetch_optional(query(RUN_BUT_DEF_BY_ID).bind("id", id))
        .await?
        .ok_or(Error::RunNotFound(id))?;
    decode_run_with(&row, Some(def))
}

/// The run, locked against other writers until the transaction ends when
/// `lock` (PostgreSQL; SQLite's write transaction already is).
pub(crate) async fn fetch_run(c: &mut Conn<'_>, id: RunId, lock: bool) -> Result<RunRecord> {
    let sql = if lock { RUN_BY_ID_LOCKED } else { RUN_BY_ID };
    let row = c
        .fetch_optional(query(sql).bind("id", id))
        .await?
        .ok_or(Error::RunNotFound(id))?;
    decode_run(&row)
}

async fn fetch_step(c: &mut Conn<'_>, id: RunId, idx: StepIdx) -> Result<Option<StepRecord>> {
    let row = c
        .fetch_optional(
            query(concat!(
                "SELECT ",
                step_cols!(),
                " FROM steps WHERE run_id = :run AND idx = :idx"
            ))
            .bind("run", id)
            .bind("idx", idx.get()),
        )
        .await?;
    row.map(|r| decode_step(id, &r)).transpose()
}

async fn fetch_wait(c: &mut Conn<'_>, id: WaitId) -> Result<WaitRecord> {
    let row = c
        .fetch_optional(
            query(concat!(
                "SELECT ",
                wait_cols!(),
                " FROM waits WHERE id = :id {for_update}"
            ))
            .bind("id", id),
        )
        .await?
        .ok_or(Error::WaitNotFound(id))?;
    decode_wait(&row)
}

async fn latest_wait(c: &mut Conn<'_>, id: RunId, idx: StepIdx) -> Result<Option<WaitRecord>> {
    let row = c
        .fetch_optional(
            query(concat!(
                "SELECT ",
                wait_cols!(),
                " FROM waits WHERE run_id = :run AND step_idx = :idx \
                 ORDER BY created_at DESC, id DESC LIMIT 1"
            ))
            .bind("run", id)
            .bind("idx", idx.get()),
        )
        .await?;
    row.map(|r| decode_wait(&r)).transpose()
}

pub(crate) async fn events(db: &Pool, id: RunId, after: i64) -> Result<Vec<EventRecord>> {
    // One snapshot: the run exists, and these are its events.
    let mut tx = db.read().await?;
    let mut c = tx.conn();
    // Only that it exists: a corrupt run's events stay readable.
    c.fetch_optional(query("SELECT 1 AS one FROM runs WHERE id = :id").bind("id", id))
        .await?
        .ok_or(Error::RunNotFound(id))?;
    let rows = c
        .fetch_all(
            query(
                "SELECT seq, at, kind, data FROM events WHERE run_id = :run AND seq > :after \
                 ORDER BY seq",
            )
            .bind("run", id)
            .bind("after", after),
        )
        .await?;
    tx.commit().await?;
    rows.iter().map(|r| decode_event(id, r)).collect()
}

async fn waits_where(db: &Pool, q: crate::sql::Query) -> Result<Vec<WaitRecord>> {
    let mut held = db.acquire().await?;
    let rows = held.conn().fetch_all(q).await?;
    rows.iter().map(decode_wait).collect()
}

// ------------------------------------------------------------- writes

/// Appends events at the run's next sequence numbers.
async fn append_events(c: &mut Conn<'_>, id: RunId, events: &[NewEvent]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let row = c
        .fetch_optional(
            query("UPDATE runs SET event_seq = event_seq + :n WHERE id = :id RETURNING event_seq")
                .bind("id", id)
                .bind("n", events.len() as i64),
        )
        .await?
        .ok_or(Error::RunNotFound(id))?;
    insert_events(c, id, row.int("event_seq")?, events).await
}

/// Inserts `events` numbered so the last one is `last_seq`.
async fn insert_events(
    c: &mut Conn<'_>,
    id: RunId,
    last_seq: i64,
    events: &[NewEvent],
) -> Result<()> {
    let first = last_seq - events.len() as i64 + 1;
    for (i, e) in events.iter().enumerate() {
        c.execute(
            query("INSERT INTO events (run_id, seq, at, kind, data) VALUES (:run, :seq, {now}, :kind, :data)")
                .bind("run", id)
                .bind("seq", first + i as i64)
                .bind("kind", e.kind.as_str())
                .bind("data", &e.data),
        )
        .await?;
    }
    Ok(())
}

/// Checks, inside a write transaction, that the run is `running` at `held`
/// (and on PostgreSQL locks it against a concurrent claim).
async fn check_held(c: &mut Conn<'_>, id: RunId, held: LeaseEpoch) -> Result<()> {
    let row = c
        .fetch_optional(
            query("SELECT lease_epoch, status FROM runs WHERE id = :id {for_update}")
                .bind("id", id),
        )
        .await?
        .ok_or(Error::RunNotFound(id))?;
    let status: RunStatus = row
        .text("status")?
        .parse()
        .map_err(|e: String| Corruption::new(id, format!("run status: {e}")))?;
    check_holder(id, status, LeaseEpoch(row.int("lease_epoch")?), held)
}

/// `Store::set_aside`, inside the caller's transaction: reads nothing it
/// would have to decode.
async fn set_aside_in(
    c: &mut Conn<'_>,
    corruption: &Corruption,
    held: Option<LeaseEpoch>,
) -> Result<bool> {
    let id = corruption.run;
    let error = ErrorInfo::new(ErrorKind::Corruption, corruption.to_string(), false);
    let json = error_json(&Some(error.clone()));
    let changed = c
        .execute(
            query(
                "UPDATE runs SET status = 'failed', error = :error, lease_owner = NULL, \
                 lease_expires_at = NULL, not_before = NULL, finished_at = {now}, \
                 updated_at = {now} WHERE id = :id AND status IN ('queued', 'running') \
                 AND (:held IS NULL OR lease_epoch = :held)",
            )
            .bind("id", id)
            .bind("error", json.clone())
            .bind("held", held.map(|e| e.0)),
        )
        .await?;
    if changed == 0 {
        return Ok(false);
    }
    c.execute(
        query(
            "UPDATE steps SET status = 'failed', error = :error, finished_at = {now} \
             WHERE run_id = :run AND status = 'running'",
        )
        .bind("run", id)
        .bind("error", json),
    )
    .await?;
    let event = NewEvent::new(
        EventKind::RunFailed,
        serde_json::json!({"error": error, "set_aside": true}),
    );
    append_events(c, id, &[event]).await?;
    Ok(true)
}

/// Refuses to take over a run whose lease has not expired (database clock).
async fn check_lease_takeable(c: &mut Conn<'_>, id: RunId, takeover: &Takeover) -> Result<()> {
    let row = c
        .fetch_optional(
            query(
                "SELECT lease_owner, lease_expires_at, \
                 CASE WHEN lease_expires_at > {now} THEN 1 ELSE 0 END AS live \
                 FROM runs WHERE id = :id",
            )
            .bind("id", id),
        )
        .await?
        .ok_or(Error::RunNotFound(id))?;
    let owner = row.opt_text("lease_owner")?.unwrap_or_default();
    let dead = matches!(takeover, Takeover::IfHeldBy(dead) if *dead == owner);
    if row.int("live")? == 0 || dead {
        return Ok(());
    }
    Err(Error::LeaseHeld {
        run: id,
        owner,
        expires_at: row.time("lease_expires_at", id, "lease_expires_at")?,
    })
}

/// `Store::add_context`'s transaction.
async fn add_context_in(
    c: &mut Conn<'_>,
    id: RunId,
    context: &serde_json::Value,
    actor: &Actor,
) -> Result<RunRecord> {
    let run = fetch_run(c, id, true).await?;
    match run.status {
        RunStatus::Queued => {}
        RunStatus::Interrupted => {
            act_in(c, id, Action::Continue, actor).await?;
        }
        status => {
            return Err(Error::WrongState {
                run: id,
                status,
                action: "add context to it",
            })
        }
    }
    write_context(c, id, &run.input, context).await?;
    let event = NewEvent::context_added(&run.input, context, actor);
    append_events(c, id, std::slice::from_ref(&event)).await?;
    fetch_run(c, id, false).await
}

/// Stores run `id`'s `input` with `context` merged into it (the one write
/// of a context, for a claim and for `Store::add_context`).
async fn write_context(
    c: &mut Conn<'_>,
    id: RunId,
    input: &serde_json::Value,
    context: &serde_json::Value,
) -> Result<()> {
    let merged = merged_input(id, input, context)?;
    json_ok("the run input with its context", Some(&merged))?;
    c.execute(
        query("UPDATE runs SET input = :input, updated_at = {now} WHERE id = :id")
            .bind("id", id)
            .bind("input", &merged),
    )
    .await?;
    Ok(())
}

/// `input` with the keys of `context` set (both JSON objects).
fn merged_input(
    run: RunId,
    input: &serde_json::Value,
    context: &serde_json::Value,
) -> Result<serde_json::Value> {
    let refuse = |reason: &str| Error::BadContext {
        run,
        reason: reason.to_owned(),
    };
    let (Some(input), Some(context)) = (input.as_object(), context.as_object()) else {
        return Err(match context.is_object() {
            false => refuse("the context must be a JSON object"),
            true => {
                refuse("the run's input is not a JSON object, so there is nothing to merge it into")
            }
        });
    };
    let mut merged = input.clone();
    merged.extend(context.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(serde_json::Value::Object(merged))
}

/// The claim of `Store::claim`, inside the caller's transaction.
async fn claim_in(c: &mut Conn<'_>, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
    let mut before = fetch_run(c, id, true).await?;
    match before.status {
        RunStatus::Queued => {}
        RunStatus::Running if req.takeover == Takeover::Force => {}
        RunStatus::Running if req.takeover.allowed() => {
            check_lease_takeable(c, id, &req.takeover).await?
        }
        status => {
            return Err(Error::WrongState {
                run: id,
                status,
                action: "claim it",
            })
        }
    }
    if let (RunStatus::Queued, Some(thread)) = (before.status, &before.thread_id) {
        // Runs of a thread run in submission order.
        if let Some((behind, _)) = busy_before(c, thread, id).await?.first() {
            return Err(Error::QueuedBehind {
                run: id,
                behind: *behind,
            });
        }
    }
    if let Some(def) = &req.replace_crew {
        c.execute(
            query(
                "UPDATE runs SET crew_name = :name, crew_version = :version, \
                 crew_fingerprint = :fingerprint, crew_def = :def, step_count = :steps \
                 WHERE id = :id",
            )
            .bind("id", id)
            .bind("name", def.name.as_str())
            .bind("version", def.version.as_str())
            .bind("fingerprint", def.fingerprint().as_str())
            .bind("def", def.to_json())
            .bind("steps", def.step_count()),
        )
        .await?;
        before.step_count = def.step_count();
        before.crew_definition = def.clone();
    }
    if before.not_before.is_some() {
        let wait_ms = c
            .fetch_optional(
                query("SELECT {not_before_ms} AS wait_ms FROM runs WHERE id = :id").bind("id", id),
            )
            .await?
            .map(|r| r.int("wait_ms"))
            .transpose()?
            .unwrap_or(0);
        if wait_ms > 0 {
            return Err(Error::NotYet {
                run: id,
                wait: Duration::from_millis(wait_ms as u64),
            });
        }
    }
    let cursor = before.cursor;
    let row = fetch_step(c, id, cursor).await?;
    let waited = match &row {
        Some(r) if r.status == StepStatus::Waiting => latest_wait(c, id, r.idx).await?,
        _ => None,
    };
    let plan = plan_claim(&before, row.clone(), waited.as_ref(), req)?;
    if let Some(context) = &req.context {
        write_context(c, id, &before.input, context).await?;
    }
    // The run row is locked (PostgreSQL) or the file is (SQLite), so the
    // new epoch is known before it is written, and with it the events.
    let epoch = LeaseEpoch(before.lease_epoch.0 + 1);
    let events = claim_events(req, epoch, &before, &plan);
    // One statement for the lease, the events' numbers and the run as the
    // claim leaves it.
    let claimed = c
        .fetch_optional(
            query(concat!(
                "UPDATE runs SET status = 'running', lease_epoch = lease_epoch + 1, \
                 lease_owner = :owner, lease_expires_at = {lease_until}, not_before = NULL, \
                 event_seq = event_seq + :events, updated_at = {now} WHERE id = :id \
                 RETURNING event_seq, ",
                run_cols_but_def!()
            ))
            .bind("id", id)
            .bind("owner", req.owner.as_str())
            .bind("lease_secs", req.lease.as_secs_f64())
            .bind("events", events.len() as i64),
        )
        .await?
        .ok_or(Error::RunNotFound(id))?;
    let last_seq = claimed.int("event_seq")?;
    let mut run = decode_run_with(&claimed, Some(before.crew_definition))?;
    if run.lease_epoch != epoch {
        return Err(Error::Statement(format!(
            "the claim of run {id} wrote epoch {} where it read {}",
            run.lease_epoch.0, before.lease_epoch.0
        )));
    }
    let at_cursor = match &plan.step {
        ClaimStep::Nothing => row,
        ClaimStep::Insert { role } => {
            let inserted = c
                .fetch_optional(
                    query(concat!(
                        "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                         VALUES (:run, :idx, :role, 'running', 1, {now}) RETURNING ",
                        step_cols!()
                    ))
                    .bind("run", id)
                    .bind("idx", cursor.get())
                    .bind("role", role.as_str()),
                )
                .await?;
            inserted.map(|r| decode_step(id, &r)).transpose()?
        }
        ClaimStep::Restart {
            attempt,
            takeovers_delta,
        } => {
            let restarted = c
                .fetch_optional(
                    query(concat!(
                        "UPDATE steps SET status = 'running', attempt = :attempt, \
                         takeovers = CASE WHEN :delta = 0 THEN 0 ELSE takeovers + :delta END, \
                         finished_at = NULL, started_at = {now} WHERE run_id = :run AND idx = :idx \
                         RETURNING ",
                        step_cols!()
                    ))
                    .bind("run", id)
                    .bind("idx", cursor.get())
                    .bind("attempt", *attempt)
                    .bind("delta", *takeovers_delta),
                )
                .await?;
            restarted.map(|r| decode_step(id, &r)).transpose()?
        }
        ClaimStep::CrashLoop { error } => {
            let err = error_json(&Some(error.clone()));
            c.execute(
                query(
                    "UPDATE steps SET status = 'failed', error = :error, finished_at = {now} \
                     WHERE run_id = :run AND idx = :idx",
                )
                .bind("run", id)
                .bind("idx", cursor.get())
                .bind("error", err.clone()),
            )
            .await?;
            c.execute(
                query(
                    "UPDATE runs SET status = 'failed', error = :error, lease_owner = NULL, \
                     lease_expires_at = NULL, finished_at = {now} WHERE id = :id",
                )
                .bind("id", id)
                .bind("error", err),
            )
            .await?;
            run = fetch_run_again(c, id, run.crew_definition).await?;
            fetch_step(c, id, cursor).await?
        }
    };
    insert_events(c, id, last_seq, &events).await?;
    Ok(Claimed {
        run,
        at_cursor,
        took_over: plan.took_over,
        first_run: matches!(plan.step, ClaimStep::Insert { .. }),
    })
}

/// A waiting step's end as an answer or a deadline decided it.
async fn apply_step_change(
    c: &mut Conn<'_>,
    run: RunId,
    idx: StepIdx,
    change: &StepChange,
) -> Result<()> {
    let (status, output, error) = match change {
        StepChange::Keep => return Ok(()),
        StepChange::Succeed(output) => ("succeeded", Some(output.clone()), None),
        StepChange::Fail(e) => ("failed", None, error_json(&Some(e.clone()))),
    };
    c.execute(
        query(
            "UPDATE steps SET status = :status, output = COALESCE(:output, output), \
             error = COALESCE(:error, error), finished_at = {now} \
             WHERE run_id = :run AND idx = :idx AND status = 'waiting'",
        )
        .bind("run", run)
        .bind("idx", idx.get())
        .bind("status", status)
        .bind("output", output)
        .bind("error", error),
    )
    .await?;
    Ok(())
}

/// The run after one of its waits closed.
async fn set_run_after_wait(
    c: &mut Conn<'_>,
    run: RunId,
    to: RunStatus,
    cursor: StepIdx,
    error: Option<&ErrorInfo>,
) -> Result<()> {
    c.execute(
        query(
            "UPDATE runs SET status = :to, cursor = :cursor, error = :error, updated_at = {now}, \
             finished_at = CASE WHEN :finish THEN {now} ELSE finished_at END WHERE id = :id",
        )
        .bind("id", run)
        .bind("to", to.as_str())
        .bind("cursor", cursor.get())
        .bind("error", error_json(&error.cloned()))
        .bind(
            "finish",
            matches!(to, RunStatus::Succeeded | RunStatus::Failed),
        ),
    )
    .await?;
    if to == RunStatus::Queued {
        c.notify_runnable(run).await?;
    }
    Ok(())
}

pub(crate) async fn append_journal(db: &Pool, a: &JournalAppend) -> Result<JournalEntry> {
    let mut tx = db.write().await?;
    let mut c = tx.conn();
    check_held(&mut c, a.run_id, a.epoch).await?;
    let row = c
        .fetch_optional(
            query(
                "INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, \
                 created_at) SELECT :run, :idx, COALESCE(MAX(seq), 0) + 1, :attempt, \
                 :generation, :kind, :payload, {now} FROM journal \
                 WHERE run_id = :run AND step_idx = :idx \
                 RETURNING seq, attempt, generation, kind, payload, created_at",
            )
            .bind("run", a.run_id)
            .bind("idx", a.idx.get())
            .bind("attempt", a.attempt.get())
            .bind("generation", a.generation)
            .bind("kind", a.kind.as_str())
            .bind("payload", &a.payload),
        )
        .await?
        .ok_or_else(|| Corruption::new(a.run_id, "a journal item was not written"))?;
    let entry = decode_journal(a.run_id, &row)?;
    if let Some(event) = &a.event {
        append_events(&mut c, a.run_id, std::slice::from_ref(event)).await?;
    }
    tx.commit().await?;
    Ok(entry)
}

/// An operator action inside the caller's transaction (see `Store::act`).
async fn act_in(c: &mut Conn<'_>, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord> {
    let run = fetch_run(c, id, true).await?;
    let plan = plan_action(&run, action, actor)?;
    c.execute(
        query(
            "UPDATE runs SET status = :to, \
             error = CASE WHEN :clear THEN NULL ELSE error END, \
             not_before = CASE WHEN :clear THEN NULL ELSE not_before END, \
             finished_at = CASE WHEN :finish THEN {now} ELSE finished_at END, \
             cancel_requested_at = CASE WHEN :cancel THEN {now} ELSE cancel_requested_at END, \
             lease_owner = CASE WHEN :to = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN :to = 'running' THEN lease_expires_at END, \
             updated_at = {now} WHERE id = :id",
        )
        .bind("id", id)
        .bind("to", plan.to.as_str())
        .bind("clear", plan.clears_error())
        .bind("finish", plan.finishes())
        .bind("cancel", plan.request_cancel),
    )
    .await?;
    if plan.finishes() {
        // A step paused at the cursor ends with its run.
        c.execute(
            query(
                "UPDATE steps SET status = 'cancelled', finished_at = {now} \
                 WHERE run_id = :run AND idx = :idx AND status IN ('waiting', 'interrupted')",
            )
            .bind("run", id)
            .bind("idx", run.cursor.get()),
        )
        .await?;
        c.execute(
            query("UPDATE waits SET status = 'cancelled' WHERE run_id = :run AND status = 'open'")
                .bind("run", id),
        )
        .await?;
    }
    append_events(c, id, std::slice::from_ref(&plan.event)).await?;
    if plan.to == RunStatus::Queued {
        c.notify_runnable(id).await?;
    }
    fetch_run(c, id, false).await
}

/// Serialises the submits to one thread until the transaction ends, so a
/// submit's busy check (`on_busy`) sees every run submitted before it.
/// SQLite's write transactions already exclude each other; PostgreSQL
/// takes a transaction-scoped advisory lock on the thread's name (in a
/// key space of Cairn's own, the first half of the two-key form).
async fn lock_thread(c: &mut Conn<'_>, thread: &str) -> Result<()> {
    if c.dialect() == Dialect::Postgres {
        c.execute(
            query("SELECT pg_advisory_xact_lock(1128878419, hashtext(:thread))")
                .bind("thread", thread),
        )
        .await?;
    }
    Ok(())
}

/// The runs of `thread` that are not done (queued, running, waiting or
/// interrupted) and were created before run `before`, oldest first.
const BUSY_BEFORE: &str = "SELECT id, status FROM runs WHERE thread_id = :thread \
     AND status IN ('queued', 'running', 'waiting', 'interrupted') \
     AND (created_at, id) < (SELECT created_at, id FROM runs WHERE id = :before) \
     ORDER BY created_at, id";

async fn busy_before(
    c: &mut Conn<'_>,
    thread: &str,
    before: RunId,
) -> Result<Vec<(RunId, RunStatus)>> {
    let rows = c
        .fetch_all(
            query(BUSY_BEFORE)
                .bind("thread", thread)
                .bind("before", before),
        )
        .await?;
    rows.iter()
        .map(|r| {
            let id = RunId::from_uuid(
                r.opt_uuid("id", before, "a thread run's id")?
                    .ok_or_else(|| Corruption::new(before, "a thread run has no id"))?,
            );
            let status = r
                .text("status")?
                .parse()
                .map_err(|e: String| Corruption::new(id, format!("run status: {e}")))?;
            Ok((id, status))
        })
        .collect()
}

// ------------------------------------------------------------- threads

/// Every thread's summary (or one thread's, given `:thread`): runs counted
/// once each, tokens summed over their steps, the newest submit time.
const THREAD_SUMMARIES: &str = "SELECT r.thread_id AS thread_id, count(DISTINCT r.id) AS runs, \
     CAST(COALESCE(sum(s.input_tokens), 0) AS BIGINT) AS input_tokens, \
     CAST(COALESCE(sum(s.output_tokens), 0) AS BIGINT) AS output_tokens, \
     max(r.created_at) AS last_run_at \
     FROM runs r LEFT JOIN steps s ON s.run_id = r.id \
     WHERE r.thread_id IS NOT NULL AND (:thread IS NULL OR r.thread_id = :thread) \
     GROUP BY r.thread_id ORDER BY last_run_at, thread_id";

/// `Store::threads`.
async fn threads(db: &Pool) -> Result<Vec<ThreadSummary>> {
    let mut held = db.acquire().await?;
    let rows = held
        .conn()
        .fetch_all(query(THREAD_SUMMARIES).bind("thread", None::<&str>))
        .await?;
    rows.iter().map(decode_thread).collect()
}

/// `Store::thread`: the summary and the runs, from one snapshot.
async fn thread(db: &Pool, id: &str) -> Result<(ThreadSummary, Vec<RunRecord>)> {
    let mut tx = db.read().await?;
    let mut c = tx.conn();
    let summary = c
        .fetch_optional(query(THREAD_SUMMARIES).bind("thread", Some(id)))
        .await?
        .ok_or_else(|| Error::ThreadNotFound(id.to_owned()))?;
    let rows = c
        .fetch_all(
            query(concat!(
                "SELECT ",
                run_cols!(),
                " FROM runs WHERE thread_id = :thread ORDER BY created_at, id"
            ))
            .bind("thread", id),
        )
        .await?;
    tx.commit().await?;
    let runs = rows.iter().map(decode_listed).collect::<Result<Vec<_>>>()?;
    Ok((decode_thread(&summary)?, runs))
}

// ------------------------------------------------------------- storable values

/// The NUL rule (`cairn_core::Unstorable`) on what an operation would
/// store, checked before its transaction with the field named as a user
/// knows it. The dialect layer refuses any NUL it binds as a backstop; the
/// backends' fast paths bind directly, so this is what guards them.
fn text_ok(what: &str, text: Option<&str>) -> Result<()> {
    match text {
        Some(t) => Ok(cairn_core::check_text(what, t)?),
        None => Ok(()),
    }
}

fn json_ok(what: &str, value: Option<&serde_json::Value>) -> Result<()> {
    match value {
        Some(v) => Ok(cairn_core::check_storable(what, v)?),
        None => Ok(()),
    }
}

fn actor_ok(actor: &Actor) -> Result<()> {
    text_ok("`by`", Some(&actor.by))?;
    text_ok("`reason`", actor.reason.as_deref())
}

fn claim_ok(req: &ClaimRequest) -> Result<()> {
    text_ok("the lease owner", Some(&req.owner))?;
    events_ok(&req.events)?;
    json_ok(
        "the crew definition",
        req.replace_crew.as_ref().map(|d| d.to_json()).as_ref(),
    )
}

fn events_ok(events: &[NewEvent]) -> Result<()> {
    for e in events {
        json_ok(
            &format!("the data of a `{}` event", e.kind.as_str()),
            Some(&e.data),
        )?;
    }
    Ok(())
}

/// A step commit's values (the scheduler checks the output first and fails
/// the step `unstorable` instead; this refuses whatever slips past).
pub(crate) fn commit_ok(c: &StepCommit) -> Result<()> {
    let step = c.idx;
    json_ok(&format!("step {step}'s output"), c.output.as_ref())?;
    json_ok(
        &format!("step {step}'s error"),
        error_json(&c.error).as_ref(),
    )?;
    json_ok("the run's error", error_json(&c.run_error).as_ref())?;
    events_ok(&c.events)?;
    if let Some(w) = &c.open_wait {
        json_ok("the wait's prompt", Some(&w.prompt))?;
        text_ok("the question id", w.question_id.as_deref())?;
    }
    Ok(())
}

// ------------------------------------------------------ write boundaries

/// How long a write whose connection failed is tried again: well inside
/// the default 30 s lease, so a retry ends before another process could
/// take the run over (and fencing refuses it if one did).
const RETRY_LOST_FOR: Duration = Duration::from_secs(10);
const RETRY_FIRST_PAUSE: Duration = Duration::from_millis(50);
const RETRY_MAX_PAUSE: Duration = Duration::from_secs(1);

/// One write operation: its crash points before and after (nothing without
/// the `failpoints` feature), its errors placed.
async fn bounded<T>(
    op: &'static str,
    target: &str,
    run: Option<RunId>,
    write: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    failpoint::store("before", op);
    let done = write.await.map_err(|e| e.placed(target, run))?;
    failpoint::store("after", op);
    if failpoint::lose_ack(op) {
        let lost = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "failpoint lose_ack: the commit landed, its acknowledgement was lost",
        );
        return Err(Error::Database(sqlx::Error::Io(lost)).placed(target, run));
    }
    Ok(done)
}

/// A commit that survives a lost acknowledgement: when `write` fails with
/// a lost connection, it is tried again with back-off for up to
/// [`RETRY_LOST_FOR`], and before each new try `landed` reads whether the
/// earlier one committed after all (the answer was lost, not the write):
/// then its result is the commit's. A write that did not land is sent
/// again and fenced like the first, so a real loss of the lease is still
/// refused.
async fn retried<T, W, L>(
    op: &'static str,
    target: &str,
    run: Option<RunId>,
    mut write: impl FnMut() -> W,
    mut landed: impl FnMut() -> L,
) -> Result<T>
where
    W: std::future::Future<Output = Result<T>>,
    L: std::future::Future<Output = Result<Option<T>>>,
{
    let give_up = std::time::Instant::now() + RETRY_LOST_FOR;
    let mut pause = RETRY_FIRST_PAUSE;
    let mut again = false;
    loop {
        let tried = async {
            if again {
                if let Some(done) = landed().await.map_err(|e| e.placed(target, run))? {
                    tracing::info!(op, run = ?run, "a write whose answer was lost had landed");
                    return Ok(done);
                }
            }
            bounded(op, target, run, write()).await
        }
        .await;
        match tried {
            Err(
                e @ Error::Db {
                    fault: DbFault::Connection,
                    ..
                },
            ) if std::time::Instant::now() + pause < give_up => {
                tracing::warn!(op, error = %e, "lost the connection during a write; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX_PAUSE);
                again = true;
            }
            done => return done,
        }
    }
}

/// Whether a step commit landed: the run is still at the commit's epoch
/// and the step's row holds the commit's status, attempt and output.
/// Before the commit the row was `running` (the claim made it so), and
/// only the epoch's holder commits it. If the epoch moved, another process
/// claimed the run: the commit is sent again and refused as stale, landed
/// or not, and the executor stops as after any loss of its lease.
async fn commit_landed(db: &Pool, commit: &StepCommit) -> Result<Option<()>> {
    let mut tx = db.read().await?;
    let mut c = tx.conn();
    let run = fetch_run(&mut c, commit.run_id, false).await?;
    let row = fetch_step(&mut c, commit.run_id, commit.idx).await?;
    tx.commit().await?;
    let ours = run.lease_epoch == commit.epoch
        && row.is_some_and(|r| {
            r.status == commit.status && r.attempt == commit.attempt && r.output == commit.output
        });
    Ok(ours.then_some(()))
}

/// Whether a journal item landed: the step's newest item is this one.
/// (Two equal items in a row do not occur: tool calls and results carry
/// their call ids, model calls their whole request.)
async fn journal_landed(db: &Pool, a: &JournalAppend) -> Result<Option<JournalEntry>> {
    let mut held = db.acquire().await?;
    let row = held
        .conn()
        .fetch_optional(
            query(
                "SELECT seq, attempt, generation, kind, payload, created_at FROM journal \
                 WHERE run_id = :run AND step_idx = :idx ORDER BY seq DESC LIMIT 1",
            )
            .bind("run", a.run_id)
            .bind("idx", a.idx.get()),
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let last = decode_journal(a.run_id, &row)?;
    let same = last.attempt == a.attempt
        && last.generation == a.generation
        && last.kind == a.kind
        && last.payload == a.payload;
    Ok(same.then_some(last))
}

/// Whether an operator action landed: the run's newest event is this
/// action's, by this actor for this reason.
async fn action_landed(
    db: &Pool,
    id: RunId,
    action: Action,
    actor: &Actor,
) -> Result<Option<RunRecord>> {
    let mut held = db.acquire().await?;
    let mut c = held.conn();
    let run = fetch_run(&mut c, id, false).await?;
    let newest = c
        .fetch_optional(
            query("SELECT seq, at, kind, data FROM events WHERE run_id = :run ORDER BY seq DESC LIMIT 1")
                .bind("run", id),
        )
        .await?;
    let Some(row) = newest else { return Ok(None) };
    let event = decode_event(id, &row)?;
    let kinds: &[EventKind] = match action {
        Action::Retry => &[EventKind::RunRetried],
        Action::Continue => &[EventKind::RunContinued],
        Action::Cancel => &[EventKind::RunCancelRequested, EventKind::RunCancelled],
    };
    let ours = kinds.contains(&event.kind)
        && event.data["by"] == serde_json::json!(actor.by)
        && event.data["reason"] == serde_json::json!(actor.reason);
    Ok(ours.then_some(run))
}

/// `Store::submit`'s transaction; `def` is the crew definition as stored.
async fn submit_in(c: &mut Conn<'_>, new: NewRun, def: serde_json::Value) -> Result<Submitted> {
    if let Some(thread) = &new.thread_id {
        lock_thread(c, thread).await?;
    }
    let fingerprint = new.crew.fingerprint();
    let id = RunId::new();
    // The new run as stored, read back by the insert itself; no row
    // when the idempotency key is taken.
    let inserted = c
        .fetch_optional(
            query(concat!(
                "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, \
                 input, idempotency_key, thread_id, status, cursor, step_count, lease_epoch, \
                 event_seq, created_at, updated_at) VALUES (:id, :name, :version, \
                 :fingerprint, :def, :input, :key, :thread, 'queued', 0, :steps, 0, 1, {now}, \
                 {now}) ON CONFLICT (idempotency_key) DO NOTHING RETURNING ",
                run_cols_but_def!()
            ))
            .bind("id", id)
            .bind("name", new.crew.name.as_str())
            .bind("version", new.crew.version.as_str())
            .bind("fingerprint", fingerprint.as_str())
            .bind("def", def)
            .bind("input", &new.input)
            .bind("key", &new.idempotency_key)
            .bind("thread", &new.thread_id)
            .bind("steps", new.crew.step_count()),
        )
        .await?;
    let Some(inserted) = inserted else {
        let row = c
            .fetch_optional(
                query(concat!(
                    "SELECT ",
                    run_cols!(),
                    " FROM runs WHERE idempotency_key = :key"
                ))
                .bind("key", &new.idempotency_key),
            )
            .await?
            .ok_or_else(|| Error::Statement("a conflicting run vanished".into()))?;
        let run = decode_run(&row)?;
        check_same_submission(&run, &new)?;
        return Ok(Submitted {
            run,
            created: false,
        });
    };
    let event = NewEvent::new(
        EventKind::RunSubmitted,
        serde_json::json!({
            "crew": new.crew.name,
            "fingerprint": fingerprint,
            "idempotency_key": new.idempotency_key,
            "thread_id": new.thread_id,
        }),
    );
    insert_events(c, id, 1, &[event]).await?;
    if let (Some(thread), OnBusy::Reject | OnBusy::Interrupt) = (&new.thread_id, new.on_busy) {
        for (busy, status) in busy_before(c, thread, id).await? {
            if new.on_busy == OnBusy::Reject {
                // Returning drops the transaction: nothing is stored.
                return Err(Error::ThreadBusy {
                    thread: thread.clone(),
                    run: busy,
                    status,
                });
            }
            // Under the thread's lock nothing else submits to it, but a
            // worker may have finished the run since it was read: a run
            // that is already over needs no interrupt.
            let now = fetch_run(c, busy, true).await?.status;
            if matches!(
                now,
                RunStatus::Succeeded | RunStatus::Cancelled | RunStatus::Failed
            ) {
                continue;
            }
            let actor = Actor {
                by: "on_busy=interrupt".into(),
                reason: Some(format!("run {id} was submitted to thread `{thread}`")),
            };
            act_in(c, busy, Action::Cancel, &actor).await?;
        }
    }
    c.notify_runnable(id).await?;
    let run = decode_run_with(&inserted, Some(new.crew))?;
    Ok(Submitted { run, created: true })
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<B: Backend> Store for B {
    fn backend(&self) -> crate::Backend {
        self.db().backend()
    }

    fn live(&self) -> &crate::LiveHub {
        Backend::live(self)
    }

    async fn submit(&self, run: NewRun) -> Result<Submitted> {
        bounded("submit", self.target(), None, async {
            let new = run;
            json_ok("the run input", Some(&new.input))?;
            text_ok("the idempotency key", new.idempotency_key.as_deref())?;
            text_ok("the thread id", new.thread_id.as_deref())?;
            let def = new.crew.to_json();
            json_ok("the crew definition", Some(&def))?;
            self.write_tx(Box::new(move |c| Box::pin(submit_in(c, new, def))))
                .await
        })
        .await
    }

    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)> {
        let result: Result<(RunRecord, Vec<StepRecord>)> = async {
            // One read transaction: one snapshot, so run and steps agree.
            // The rows are decoded after it, off SQLite's writer thread.
            let (run, rows) = self
                .read_tx(Box::new(move |c| {
                    Box::pin(async move {
                        let run = fetch_run(c, id, false).await?;
                        let rows = c
                            .fetch_all(
                                query(concat!(
                                    "SELECT ",
                                    step_cols!(),
                                    " FROM steps WHERE run_id = :run ORDER BY idx"
                                ))
                                .bind("run", id),
                            )
                            .await?;
                        Ok((run, rows))
                    })
                }))
                .await?;
            let steps = rows
                .iter()
                .map(|r| decode_step(id, r))
                .collect::<Result<Vec<_>>>()?;
            Ok((run, steps))
        }
        .await;
        result.map_err(|e| e.placed(self.target(), Some(id)))
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord> {
        let result: Result<RunRecord> = async {
            let mut held = self.db().acquire().await?;
            fetch_run(&mut held.conn(), id, false).await
        }
        .await;
        result.map_err(|e| e.placed(self.target(), Some(id)))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let result: Result<Vec<RunRecord>> = async {
            text_ok("the crew filter", filter.crew.as_deref())?;
            text_ok("the thread filter", filter.thread.as_deref())?;
            let db = self.db();
            let mut held = db.acquire().await?;
            let mut c = held.conn();
            if let Some(after) = filter.after {
                // The cursor must name a run, or the page would silently be
                // empty; only that it exists: a corrupt run pages like another.
                c.fetch_optional(
                    query("SELECT 1 AS one FROM runs WHERE id = :id").bind("id", after),
                )
                .await?
                .ok_or(Error::RunNotFound(after))?;
            }
            let sql = match filter.newest_first {
                false => LIST_OLDEST_FIRST,
                true => LIST_NEWEST_FIRST,
            };
            let rows = c
                .fetch_all(
                    query(sql)
                        .bind("status", filter.status.map(|s| s.as_str()))
                        .bind("crew", filter.crew.as_deref())
                        .bind("thread", filter.thread.as_deref())
                        .bind("after", filter.after)
                        .bind("limit", filter.limit.map_or(i64::MAX, i64::from)),
                )
                .await?;
            rows.iter().map(decode_listed).collect()
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn stats(&self) -> Result<StoreStats> {
        let result: Result<StoreStats> = async {
            let db = self.db();
            let mut held = db.acquire().await?;
            let mut c = held.conn();
            let rows = c
                .fetch_all(query(
                    "SELECT status, count(*) AS n FROM runs GROUP BY status ORDER BY status",
                ))
                .await?;
            let by_status = rows
                .iter()
                .map(|r| Ok((r.text("status")?, r.int("n")?)))
                .collect::<Result<Vec<_>>>()?;
            let row = c
                .fetch_optional(query(
                    "SELECT (SELECT count(*) FROM runs WHERE status = 'queued' \
                             AND (not_before IS NULL OR not_before <= {now})) AS ready, \
                            (SELECT count(*) FROM events WHERE kind = 'run_claimed' \
                             AND data->>'from_status' = 'running') AS takeovers",
                ))
                .await?
                .ok_or_else(|| Error::Statement("the stats query returned no row".into()))?;
            Ok(stats_from(
                by_status,
                row.int("ready")?,
                row.int("takeovers")?,
            )?)
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn claim(&self, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
        bounded("claim", self.target(), Some(id), async {
            claim_ok(req)?;
            let req = req.clone();
            self.write_tx(Box::new(move |c| {
                Box::pin(async move { claim_in(c, id, &req).await })
            }))
            .await
        })
        .await
    }

    async fn claim_next(&self, req: &ClaimRequest) -> Result<Option<Claimed>> {
        // Not `bounded`: only a claim that took a run is a write boundary.
        failpoint::store("before", "claim_next");
        let result: Result<Option<Claimed>> = async {
            claim_ok(req)?;
            let db = self.db();
            let req = ClaimRequest {
                takeover: match &req.takeover {
                    Takeover::Never => Takeover::IfExpired,
                    other => other.clone(),
                },
                ..req.clone()
            };
            // A run that does not decode or judge is set aside (failed
            // `corruption`) and the next one tried, so one corrupt run never
            // stalls the queue behind it. Bounded, so a database full of them
            // still answers.
            for _ in 0..SET_ASIDE_PER_CLAIM {
                let mut tx = db.write().await?;
                let mut c = tx.conn();
                // The oldest runnable run: queued and due, or running under an
                // expired lease (its holder died or hung: a takeover). PostgreSQL
                // skips rows other claimers hold; SQLite's write lock admits one
                // claimer at a time.
                let picked = c
                    .fetch_optional(query(
                        "SELECT id FROM runs WHERE ((status = 'queued' AND (not_before IS NULL \
                         OR not_before <= {now})) OR (status = 'running' AND lease_expires_at < {now})) \
                         AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.thread_id = runs.thread_id \
                           AND e.status IN ('queued', 'running', 'waiting', 'interrupted') \
                           AND (e.created_at, e.id) < (runs.created_at, runs.id)) \
                         ORDER BY created_at, id LIMIT 1 {skip_locked}",
                    ))
                    .await?;
                let Some(row) = picked else {
                    tx.commit().await?;
                    return Ok(None);
                };
                let nil = RunId::from_uuid(uuid::Uuid::nil());
                let id = RunId::from_uuid(
                    row.opt_uuid("id", nil, "a runnable run's id")?
                        .ok_or_else(|| Corruption::new(nil, "a runnable run has no id"))?,
                );
                match claim_in(&mut c, id, &req).await {
                    Ok(claimed) => {
                        tx.commit().await?;
                        failpoint::store("after", "claim_next");
                        return Ok(Some(claimed));
                    }
                    Err(Error::Corruption(corrupt)) => {
                        tx.rollback().await?;
                        // The run the corruption names (another run of the
                        // thread, possibly), else the one picked.
                        let corrupt = if corrupt.run == nil {
                            Corruption::new(id, corrupt.detail)
                        } else {
                            corrupt
                        };
                        self.set_aside(&corrupt, None).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(None)
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn wait_for_work(&self, max: Duration) {
        Backend::wait_for_work(self, max).await
    }

    async fn heartbeat(&self, id: RunId, epoch: LeaseEpoch, lease: Duration) -> Result<Lease> {
        bounded("heartbeat", self.target(), Some(id), async {
            let db = self.db();
            let mut held = db.acquire().await?;
            let row = held
                .conn()
                .fetch_optional(
                    query(
                        "UPDATE runs SET lease_expires_at = {lease_until} \
                         WHERE id = :id AND lease_epoch = :epoch AND status = 'running' \
                         RETURNING CASE WHEN cancel_requested_at IS NULL THEN 0 ELSE 1 END AS cancel",
                    )
                    .bind("id", id)
                    .bind("epoch", epoch.0)
                    .bind("lease_secs", lease.as_secs_f64()),
                )
                .await?;
            Ok(Lease::from_beat(
                row.map(|r| r.int("cancel").map(|n| n != 0)).transpose()?,
            ))
        })
        .await
    }

    async fn set_aside(&self, corruption: &Corruption, held: Option<LeaseEpoch>) -> Result<bool> {
        bounded("set_aside", self.target(), Some(corruption.run), async {
            let mut tx = self.db().write().await?;
            let set = set_aside_in(&mut tx.conn(), corruption, held).await?;
            tx.commit().await?;
            if set {
                tracing::error!(run = %corruption.run, detail = %corruption.detail,
                    "set aside a corrupt run: failed with kind `corruption`");
            }
            Ok(set)
        })
        .await
    }

    async fn commit_step(&self, commit: &StepCommit) -> Result<()> {
        commit_ok(commit).map_err(|e| e.placed(self.target(), Some(commit.run_id)))?;
        // A commit that opens a wait is its own crash point.
        let op = match commit.open_wait {
            Some(_) => "open_wait",
            None => "commit_step",
        };
        retried(
            op,
            self.target(),
            Some(commit.run_id),
            || Backend::commit_step(self, commit),
            || commit_landed(self.db(), commit),
        )
        .await
    }

    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord> {
        actor_ok(actor)?;
        retried(
            "act",
            self.target(),
            Some(id),
            || async move {
                let mut tx = self.db().write().await?;
                let run = act_in(&mut tx.conn(), id, action, actor).await?;
                tx.commit().await?;
                Ok(run)
            },
            || action_landed(self.db(), id, action, actor),
        )
        .await
    }

    async fn add_context(
        &self,
        id: RunId,
        context: &serde_json::Value,
        actor: &Actor,
    ) -> Result<RunRecord> {
        bounded("add_context", self.target(), Some(id), async {
            actor_ok(actor)?;
            json_ok("the context", Some(context))?;
            let mut tx = self.db().write().await?;
            let run = add_context_in(&mut tx.conn(), id, context, actor).await?;
            tx.commit().await?;
            Ok(run)
        })
        .await
    }

    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord> {
        bounded("fork", self.target(), Some(id), async {
            actor_ok(actor)?;
            json_ok("the fork's input", req.input.as_ref())?;
            text_ok("the thread id", req.thread_id.as_deref())?;
            let db = self.db();
            let mut tx = db.write().await?;
            let mut c = tx.conn();
            let source = fetch_run(&mut c, id, true).await?;
            check_fork(&source, req)?;
            let child = RunId::new();
            let complete = req.from_step.get() == source.step_count;
            c.execute(
                query(
                    "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
                     thread_id, status, cursor, step_count, lease_epoch, event_seq, parent_run_id, \
                     parent_step_idx, created_at, updated_at, finished_at) \
                     SELECT :child, crew_name, crew_version, crew_fingerprint, crew_def, :input, \
                     COALESCE(:thread, thread_id), :status, :from, step_count, 0, 0, id, :from, {now}, {now}, \
                     CASE WHEN :complete THEN {now} END FROM runs WHERE id = :source",
                )
                .bind("child", child)
                .bind("input", req.input.as_ref().unwrap_or(&source.input))
                .bind("thread", req.thread_id.as_deref())
                .bind("status", if complete { "succeeded" } else { "queued" })
                .bind("from", req.from_step.get())
                .bind("complete", complete)
                .bind("source", id),
            )
            .await?;
            c.execute(
                query(
                    "INSERT INTO steps (run_id, idx, role, status, attempt, output, input_tokens, \
                     output_tokens, started_at, finished_at, error, takeovers) \
                     SELECT :child, idx, role, status, attempt, output, input_tokens, output_tokens, \
                     started_at, finished_at, error, takeovers FROM steps \
                     WHERE run_id = :source AND idx < :from",
                )
                .bind("child", child)
                .bind("source", id)
                .bind("from", req.from_step.get()),
            )
            .await?;
            append_events(&mut c, child, &[fork_event(&source, req, actor)]).await?;
            c.notify_runnable(child).await?;
            let run = fetch_run(&mut c, child, false).await?;
            tx.commit().await?;
            Ok(run)
        })
        .await
    }

    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let result: Result<Vec<WaitRecord>> = async {
            let q = query(concat!(
                "SELECT ",
                wait_cols!(),
                " FROM waits WHERE (:run IS NULL OR run_id = :run) \
                 AND (:idx IS NULL OR step_idx = :idx) AND (:status IS NULL OR status = :status) \
                 ORDER BY created_at, id"
            ))
            .bind("run", filter.run)
            .bind("idx", filter.step.map(|s| s.get()))
            .bind("status", filter.status.map(|s| s.as_str()));
            waits_where(self.db(), q).await
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &Actor) -> Result<WaitRecord> {
        text_ok("`by`", Some(&by.by))?;
        text_ok("the reason", by.reason.as_deref())?;
        json_ok("the answer", serde_json::to_value(answer).ok().as_ref())?;
        // Sending the same answer again is a no-op that returns the wait
        // (`plan_answer`), so a retry needs no separate check.
        let unknown = || async { Ok(None) };
        retried(
            "answer_wait",
            self.target(),
            None,
            move || async move {
                let db = self.db();
                let mut tx = db.write().await?;
                let mut c = tx.conn();
                let wait = fetch_wait(&mut c, id).await?;
                let run = fetch_run(&mut c, wait.run_id, true).await?;
                let step = fetch_step(&mut c, run.id, run.cursor).await?;
                let AnswerPlan::Apply {
                    run_to,
                    cursor_to,
                    step: change,
                    run_error,
                    events,
                } = plan_answer(&wait, &run, step.as_ref(), answer, by)?
                else {
                    return Ok(wait);
                };
                c.execute(
                query(
                    "UPDATE waits SET status = 'answered', answer = :answer, answered_by = :by, \
                     answered_at = {now} WHERE id = :id AND status = 'open'",
                )
                .bind("id", id)
                .bind("answer", serde_json::to_value(answer).ok())
                .bind("by", by.by.as_str()),
            )
            .await?;
                apply_step_change(&mut c, run.id, wait.step_idx, &change).await?;
                set_run_after_wait(&mut c, run.id, run_to, cursor_to, run_error.as_ref()).await?;
                append_events(&mut c, run.id, &events).await?;
                let wait = fetch_wait(&mut c, id).await?;
                tx.commit().await?;
                Ok(wait)
            },
            unknown,
        )
        .await
    }

    async fn due_waits(&self) -> Result<Vec<WaitRecord>> {
        let result: Result<Vec<WaitRecord>> = async {
            let q = query(concat!(
                "SELECT ",
                wait_cols!(),
                " FROM waits WHERE status = 'open' AND deadline IS NOT NULL \
                 AND deadline <= {now} ORDER BY deadline"
            ));
            waits_where(self.db(), q).await
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord> {
        bounded("expire_wait", self.target(), None, async {
            let db = self.db();
            let mut tx = db.write().await?;
            let mut c = tx.conn();
            let wait = fetch_wait(&mut c, id).await?;
            let (error, events) = plan_expire(&wait)?;
            c.execute(query("UPDATE waits SET status = 'expired' WHERE id = :id").bind("id", id))
                .await?;
            let fail = StepChange::Fail(error.clone());
            apply_step_change(&mut c, wait.run_id, wait.step_idx, &fail).await?;
            set_run_after_wait(
                &mut c,
                wait.run_id,
                RunStatus::Failed,
                wait.step_idx,
                Some(&error),
            )
            .await?;
            append_events(&mut c, wait.run_id, &events).await?;
            let wait = fetch_wait(&mut c, id).await?;
            tx.commit().await?;
            Ok(wait)
        })
        .await
    }

    async fn events(&self, id: RunId) -> Result<Vec<EventRecord>> {
        let result: Result<Vec<EventRecord>> = async { events(self.db(), id, 0).await }.await;
        result.map_err(|e| e.placed(self.target(), Some(id)))
    }

    async fn thread_history(
        &self,
        thread: &str,
        before: RunId,
        max_runs: u32,
    ) -> Result<Vec<ThreadTurn>> {
        let result: Result<Vec<ThreadTurn>> = async {
            text_ok("the thread id", Some(thread))?;
            let mut held = self.db().acquire().await?;
            // A run's final output is its last step's (the step at
            // `step_count - 1`, which a succeeded run always has).
            let rows = held
                .conn()
                .fetch_all(
                    query(
                        "SELECT r.id, r.input, s.output FROM runs r \
                         JOIN steps s ON s.run_id = r.id AND s.idx = r.step_count - 1 \
                         WHERE r.thread_id = :thread AND r.status = 'succeeded' \
                         AND (r.created_at, r.id) < (SELECT created_at, id FROM runs WHERE id = :before) \
                         ORDER BY r.created_at DESC, r.id DESC LIMIT :max",
                    )
                    .bind("thread", thread)
                    .bind("before", before)
                    .bind("max", i64::from(max_runs)),
                )
                .await?;
            // Read newest first (so the limit keeps the newest); given
            // oldest first.
            rows.iter()
                .rev()
                .map(|r| {
                    let nil = RunId::from_uuid(uuid::Uuid::nil());
                    let run_id = RunId::from_uuid(
                        r.opt_uuid("id", nil, "a thread run's id")?
                            .ok_or_else(|| Corruption::new(nil, "a thread run has no id"))?,
                    );
                    Ok(ThreadTurn {
                        run_id,
                        input: r.json("input", run_id, "input")?,
                        output: r
                            .opt_json("output", run_id, "final output")?
                            .unwrap_or_default(),
                    })
                })
                .collect()
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn events_after(&self, id: RunId, after: i64) -> Result<Vec<EventRecord>> {
        let result: Result<Vec<EventRecord>> = async { events(self.db(), id, after).await }.await;
        result.map_err(|e| e.placed(self.target(), Some(id)))
    }

    async fn journal(
        &self,
        id: RunId,
        idx: StepIdx,
        generation: Option<u32>,
    ) -> Result<Vec<JournalEntry>> {
        let result: Result<Vec<JournalEntry>> = async {
            let db = self.db();
            let mut held = db.acquire().await?;
            let rows = held
                .conn()
                .fetch_all(
                    query(
                        "SELECT seq, attempt, generation, kind, payload, created_at FROM journal \
                         WHERE run_id = :run AND step_idx = :idx \
                         AND (:generation IS NULL OR generation = :generation) ORDER BY seq",
                    )
                    .bind("run", id)
                    .bind("idx", idx.get())
                    .bind("generation", generation),
                )
                .await?;
            rows.iter().map(|r| decode_journal(id, r)).collect()
        }
        .await;
        result.map_err(|e| e.placed(self.target(), Some(id)))
    }

    async fn append_journal(&self, item: &JournalAppend) -> Result<JournalEntry> {
        json_ok("a journal item", Some(&item.payload))?;
        events_ok(item.event.as_slice())?;
        retried(
            "append_journal",
            self.target(),
            Some(item.run_id),
            || Backend::append_journal(self, item),
            || journal_landed(self.db(), item),
        )
        .await
    }

    async fn record_events(&self, id: RunId, epoch: LeaseEpoch, events: &[NewEvent]) -> Result<()> {
        bounded("record_events", self.target(), Some(id), async {
            events_ok(events)?;
            let db = self.db();
            let mut tx = db.write().await?;
            let mut c = tx.conn();
            check_held(&mut c, id, epoch).await?;
            append_events(&mut c, id, events).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn threads(&self) -> Result<Vec<ThreadSummary>> {
        let result: Result<Vec<ThreadSummary>> = async { threads(self.db()).await }.await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn thread(&self, id: &str) -> Result<(ThreadSummary, Vec<RunRecord>)> {
        let result: Result<(ThreadSummary, Vec<RunRecord>)> = async {
            text_ok("the thread id", Some(id))?;
            thread(self.db(), id).await
        }
        .await;
        result.map_err(|e| e.placed(self.target(), None))
    }

    async fn compact(&self, policy: &crate::CompactPolicy) -> Result<crate::Compacted> {
        bounded(
            "compact",
            self.target(),
            None,
            crate::retention::compact(self.db(), policy),
        )
        .await
    }

    async fn check(&self) -> Result<Vec<String>> {
        let mut held = self.db().acquire().await?;
        let mut c = held.conn();
        if c.dialect() == Dialect::Postgres {
            return Ok(vec![]);
        }
        quick_check(&mut c).await
    }

    async fn claim_task(&self, task: &str, every: Duration, owner: &str) -> Result<bool> {
        bounded("claim_task", self.target(), None, async {
            let mut tx = self.db().write().await?;
            let mut c = tx.conn();
            c.execute(
                query(
                    "INSERT INTO maintenance (task, owner, next_at) VALUES (:task, NULL, {now}) \
                     ON CONFLICT (task) DO NOTHING",
                )
                .bind("task", task),
            )
            .await?;
            let taken = c
                .execute(
                    query(
                        "UPDATE maintenance SET owner = :owner, next_at = {lease_until} \
                         WHERE task = :task AND next_at <= {now}",
                    )
                    .bind("task", task)
                    .bind("owner", owner)
                    .bind("lease_secs", every.as_secs_f64()),
                )
                .await?;
            tx.commit().await?;
            Ok(taken == 1)
        })
        .await
    }
}
