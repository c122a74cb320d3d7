//! Step commits through SQLite's C interface, on a thread of their own.
//!
//! Why: through sqlx every statement is a round trip to the connection's
//! worker thread, and a step commit cost 4× a commit through the C
//! interface on the same file (`docs/benchmarks.md`). Here one thread owns
//! one `rusqlite` connection (the same SQLite build: rusqlite and sqlx link
//! one `libsqlite3-sys`) with its statements prepared once, and a commit is
//! one hop to it and one back.
//!
//! It is also the group commit: the thread takes every commit queued while
//! it was flushing (up to [`MAX_BATCH`]) into one transaction, each in its
//! own savepoint, and answers each caller after the one flush. A commit whose
//! statements do not all apply (a stale epoch, a cancel, a step not running)
//! is rolled back to its savepoint alone; its caller learns why from the
//! run as it is now (`SqliteStore::refusal`). A caller that goes away does
//! not take its commit back: it lands or not as if its answer were lost.
//!
//! It also runs whole transactions of the storage script sent to it
//! (`Writer::script`: a submit, a claim, a load), each alone between
//! batches, on the same connection (`Conn::Direct`): one hop for a
//! transaction instead of one per statement. The other operations (journal
//! items, answers, actions, the API's reads) stay on sqlx; both are
//! connections to one WAL file, serialized by SQLite's write lock.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{named_params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use cairn_core::{Corruption, RunStatus};

use crate::raw::error_json;
use crate::script::ScriptFn;
use crate::sql::Conn;
use crate::{DbFault, Durability, Error, Result, StepCommit};

/// The most step commits one transaction carries.
const MAX_BATCH: usize = 64;

/// The database's clock, as every other write stamps it.
const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

/// What the group commit did so far (for the benchmark and the tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Transactions written (each one flush).
    pub batches: u64,
    /// Step commits they carried, refused ones included.
    pub commits: u64,
    /// The most commits one transaction carried.
    pub largest: usize,
}

/// What became of one commit.
pub(crate) enum Outcome {
    Committed,
    /// Its statements did not all apply; nothing of it was written.
    NotApplied,
}

/// What the thread is asked to do.
enum Job {
    /// A step commit, grouped with those queued with it.
    Commit {
        commit: Box<StepCommit>,
        done: oneshot::Sender<Result<Outcome>>,
    },
    /// A transaction of the storage script, alone ([`Writer::script`]).
    Script(ScriptJob),
}

/// A script transaction as the thread runs it: given the connection and
/// the file's name, it runs and answers its caller.
type ScriptJob = Box<dyn FnOnce(&Mutex<Connection>, &str) + Send>;

/// The writer thread and the way to it. Dropping the last handle ends the
/// thread and closes its connection (waited for, so the file is left clean).
pub(crate) struct Writer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Mutex<GroupStats>>,
    target: String,
}

impl Writer {
    /// Opens the writer's connection to `path` (already migrated by the
    /// pool) and starts its thread. `batch`: false writes one commit per
    /// transaction (for the benchmark's comparison only).
    pub fn open(path: &Path, durability: Durability, target: &str, batch: bool) -> Result<Writer> {
        let fail = |e: rusqlite::Error| db_error(target, None, &e);
        let conn = Connection::open(path).map_err(fail)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(fail)?;
        let synchronous = match durability {
            Durability::Sync => "FULL",
            Durability::Process => "NORMAL",
        };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
             PRAGMA foreign_keys = ON;"
        ))
        .map_err(fail)?;
        // The step commit's statements and the scripts' (submit, claim).
        conn.set_prepared_statement_cache_capacity(64);
        let (jobs, queue) = mpsc::channel();
        let stats = Arc::new(Mutex::new(GroupStats::default()));
        let thread_stats = stats.clone();
        let limit = if batch { MAX_BATCH } else { 1 };
        let thread_target = target.to_owned();
        let thread = std::thread::Builder::new()
            .name("cairn-sqlite-writer".into())
            .spawn(move || run(conn, queue, limit, &thread_stats, &thread_target))
            .map_err(|e| Error::Db {
                fault: DbFault::Other,
                target: target.to_owned(),
                run: None,
                message: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Writer {
            jobs: Some(jobs),
            thread: Some(thread),
            stats,
            target: target.to_owned(),
        })
    }

    /// Sends a commit to the thread and waits for its outcome (after the
    /// flush of the transaction that carried it).
    pub async fn commit(&self, c: &StepCommit) -> Result<Outcome> {
        let (done, answer) = oneshot::channel();
        let job = Job::Commit {
            commit: Box::new(c.clone()),
            done,
        };
        self.send(job, answer, Some(c.run_id)).await
    }

    /// Runs a transaction of the storage script on the thread, on its
    /// connection (`BEGIN IMMEDIATE` if it `writes`, else `BEGIN`; committed
    /// if `f` returns `Ok`, rolled back if not): one hop for the whole
    /// transaction, where sqlx makes one per statement. `f`'s statements run
    /// at once (the connection never waits), so its future is complete after
    /// one poll.
    pub async fn script<T: Send + 'static>(&self, f: ScriptFn<T>, writes: bool) -> Result<T> {
        let (done, answer) = oneshot::channel();
        let job = Job::Script(Box::new(move |conn, target| {
            let _ = done.send(run_script(conn, target, f, writes));
        }));
        self.send(job, answer, None).await
    }

    async fn send<T>(
        &self,
        job: Job,
        answer: oneshot::Receiver<Result<T>>,
        run: Option<cairn_core::RunId>,
    ) -> Result<T> {
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        let lost = || Error::Db {
            fault: DbFault::Connection,
            target: self.target.clone(),
            run,
            message: "the SQLite writer thread stopped before answering".into(),
        };
        match sent {
            true => answer.await.map_err(|_| lost())?,
            false => Err(lost()),
        }
    }

    pub fn stats(&self) -> GroupStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has answered what it holds.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: takes what is queued, writes it as one transaction, answers.
fn run(
    conn: Connection,
    queue: mpsc::Receiver<Job>,
    limit: usize,
    stats: &Mutex<GroupStats>,
    target: &str,
) {
    let conn = Mutex::new(conn);
    let mut held = None;
    while let Some(first) = held.take().or_else(|| next_job(&queue)) {
        let (commit, done) = match first {
            Job::Commit { commit, done } => (commit, done),
            Job::Script(script) => {
                script(&conn, target);
                continue;
            }
        };
        let mut batch = vec![(commit, done)];
        while batch.len() < limit {
            match queue.try_recv() {
                Ok(Job::Commit { commit, done }) => batch.push((commit, done)),
                // A script waits for the batch's flush.
                Ok(script) => {
                    held = Some(script);
                    break;
                }
                Err(_) => break,
            }
        }
        {
            let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
            s.batches += 1;
            s.commits += batch.len() as u64;
            s.largest = s.largest.max(batch.len());
        }
        let outcomes = {
            let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            write_batch(&conn, &batch, target)
        };
        for ((_, done), outcome) in batch.into_iter().zip(outcomes) {
            let _ = done.send(outcome);
        }
    }
    let conn = conn.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Err((_, e)) = conn.close() {
        tracing::debug!(error = %e, "the SQLite writer's connection did not close cleanly");
    }
}

/// How long the thread watches the queue before it sleeps. On this kind of
/// virtual machine, waking a sleeping thread takes 50 µs or more; a run's
/// next commit comes about 30–60 µs after the last one's answer, so a
/// short watch saves that wake-up on every step for at most this much CPU
/// each time the queue empties (measured: a round trip of 70 µs sleeping,
/// 21 µs watching).
const WATCH: Duration = Duration::from_micros(100);

/// The next job: watched for [`WATCH`], then waited for. `None` once the
/// queue is closed.
fn next_job(queue: &mpsc::Receiver<Job>) -> Option<Job> {
    let start = std::time::Instant::now();
    while start.elapsed() < WATCH {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    queue.recv().ok()
}

/// A script's transaction: `BEGIN`, its statements, `COMMIT` (or `ROLLBACK`
/// if it returned an error).
fn run_script<T>(
    conn: &Mutex<Connection>,
    target: &str,
    f: ScriptFn<T>,
    writes: bool,
) -> Result<T> {
    let exec = |sql: &str| {
        let c = conn.lock().unwrap_or_else(|p| p.into_inner());
        exec(&c, sql).map_err(|e| db_error(target, None, &e))
    };
    exec(if writes { "BEGIN IMMEDIATE" } else { "BEGIN" })?;
    let mut c = Conn::Direct(conn, target);
    let mut future = f(&mut c);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let result = match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(result) => result,
        std::task::Poll::Pending => Err(Error::Statement(
            "a storage script waited on the SQLite writer thread".into(),
        )),
    };
    drop(future);
    let ended = match &result {
        Ok(_) => exec("COMMIT"),
        Err(_) => exec("ROLLBACK"),
    };
    if let Err(e) = ended {
        let _ = exec("ROLLBACK");
        return Err(e);
    }
    result
}

/// One transaction for the batch; each commit's outcome. A commit shares
/// its transaction in a savepoint of its own, so one that is refused (a
/// stale epoch) is undone alone; a batch of one needs no savepoint, its
/// refusal undoes the transaction.
fn write_batch(
    conn: &Connection,
    batch: &[(Box<StepCommit>, oneshot::Sender<Result<Outcome>>)],
    target: &str,
) -> Vec<Result<Outcome>> {
    let all = |e: &rusqlite::Error| {
        batch
            .iter()
            .map(|(c, _)| Err(db_error(target, Some(c.run_id), e)))
            .collect()
    };
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        return all(&e);
    }
    let alone = batch.len() == 1;
    let mut outcomes = Vec::with_capacity(batch.len());
    for (c, _) in batch {
        let applied = match alone {
            true => apply(conn, c),
            false => exec(conn, "SAVEPOINT step_commit").and_then(|()| apply(conn, c)),
        };
        let outcome = match applied {
            Ok(Ok(true)) => Ok(Outcome::Committed),
            Ok(Ok(false)) => Ok(Outcome::NotApplied),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(db_error(target, Some(c.run_id), &e)),
        };
        let undo = !matches!(outcome, Ok(Outcome::Committed));
        let closed = match (alone, undo) {
            (true, true) => {
                // Nothing of the batch is kept: the transaction ends here.
                return match exec(conn, "ROLLBACK") {
                    // Already rolled back by SQLite itself (a full disk).
                    Err(_) if conn.is_autocommit() => vec![outcome],
                    Err(e) => all(&e),
                    Ok(()) => vec![outcome],
                };
            }
            (true, false) => Ok(()),
            (false, true) => exec(conn, "ROLLBACK TO step_commit")
                .and_then(|()| exec(conn, "RELEASE step_commit")),
            (false, false) => exec(conn, "RELEASE step_commit"),
        };
        if let Err(e) = closed {
            let _ = exec(conn, "ROLLBACK");
            return all(&e);
        }
        outcomes.push(outcome);
    }
    if let Err(e) = exec(conn, "COMMIT") {
        let _ = exec(conn, "ROLLBACK");
        return all(&e);
    }
    outcomes
}

/// A statement without parameters or rows, prepared once (a transaction's
/// `BEGIN`, `COMMIT`, savepoints): `execute_batch` would parse it each time.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Writes one commit's rows; `false` (and the caller rolls back) as soon as
/// one statement does not change what it must.
fn apply(conn: &Connection, c: &StepCommit) -> rusqlite::Result<Result<bool>> {
    let run = c.run_id.to_string();
    let finished = matches!(
        c.run_status,
        RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
    );
    let seconds = |d: Duration| format!("+{:.3} seconds", d.as_secs_f64());
    let n_events = c.events.len() as i64;
    // A run that stays running keeps `status` out of the SET list: SQLite
    // rewrites an index entry (`runs_by_status`) for every column named
    // there, changed or not, which is one more WAL page per step.
    let set_status = match c.run_status {
        RunStatus::Running => "",
        _ => "status = :status, ",
    };
    let event_seq: Option<i64> = conn
        .prepare_cached(&format!(
            "UPDATE runs SET {set_status}cursor = :cursor, error = :run_error, \
             event_seq = event_seq + :n_events, updated_at = {NOW}, \
             finished_at = CASE WHEN :finished THEN {NOW} ELSE finished_at END, \
             lease_owner = CASE WHEN :status = 'running' THEN lease_owner END, \
             lease_expires_at = CASE WHEN :status = 'running' THEN lease_expires_at END, \
             not_before = CASE WHEN :retry IS NULL THEN NULL \
               ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', :retry) END \
             WHERE id = :run AND lease_epoch = :epoch AND status = 'running' \
               AND (cancel_requested_at IS NULL OR :status = 'cancelled') \
             RETURNING event_seq"
        ))?
        .query_row(
            named_params! {
                ":status": c.run_status.as_str(),
                ":cursor": c.cursor.get(),
                ":run_error": error_json(&c.run_error).map(|v| v.to_string()),
                ":n_events": n_events,
                ":finished": finished,
                ":retry": c.retry_after.map(seconds),
                ":run": run,
                ":epoch": c.epoch.0,
            },
            |row| row.get(0),
        )
        .optional()?;
    let Some(event_seq) = event_seq else {
        return Ok(Ok(false));
    };
    let step = conn
        .prepare_cached(&format!(
            "UPDATE steps SET status = :status, output = :output, \
               input_tokens = :input_tokens, output_tokens = :output_tokens, \
               error = COALESCE(:error, error), finished_at = {NOW} \
             WHERE run_id = :run AND idx = :idx AND attempt = :attempt AND status = 'running'"
        ))?
        .execute(named_params! {
            ":status": c.status.as_str(),
            ":output": c.output.as_ref().map(|v| v.to_string()),
            ":input_tokens": c.usage.map(|u| u.input_tokens as i64),
            ":output_tokens": c.usage.map(|u| u.output_tokens as i64),
            ":error": error_json(&c.error).map(|v| v.to_string()),
            ":run": run,
            ":idx": c.idx.get(),
            ":attempt": c.attempt.get(),
        })?;
    if step != 1 {
        return Ok(Ok(false));
    }
    if let Some((next, role)) = &c.start_next {
        let inserted = conn
            .prepare_cached(&format!(
                "INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
                 VALUES (:run, :idx, :role, 'running', 1, {NOW})"
            ))?
            .execute(named_params! { ":run": run, ":idx": next.get(), ":role": role.as_str() })?;
        if inserted != 1 {
            return Ok(Ok(false));
        }
    }
    let mut insert_event = conn.prepare_cached(&format!(
        "INSERT INTO events (run_id, seq, at, kind, data) VALUES (:run, :seq, {NOW}, :kind, :data)"
    ))?;
    for (i, e) in c.events.iter().enumerate() {
        insert_event.execute(named_params! {
            ":run": run,
            ":seq": event_seq - n_events + i as i64 + 1,
            ":kind": e.kind.as_str(),
            ":data": e.data.to_string(),
        })?;
    }
    if let Some(w) = &c.open_wait {
        let on_deadline = match w.on_deadline.as_ref().map(serde_json::to_string) {
            Some(Ok(text)) => Some(text),
            Some(Err(e)) => {
                return Ok(Err(Corruption::new(
                    c.run_id,
                    format!("the wait's deadline outcome: {e}"),
                )
                .into()))
            }
            None => None,
        };
        conn.prepare_cached(&format!(
            "INSERT INTO waits (id, run_id, step_idx, attempt, kind, status, prompt, question_id, \
               deadline, on_deadline, created_at) \
             VALUES (:wait, :run, :idx, :attempt, :kind, 'open', :prompt, :question, \
               CASE WHEN :deadline IS NULL THEN NULL \
                 ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', :deadline) END, :on_deadline, {NOW})"
        ))?
        .execute(named_params! {
            ":wait": w.id.as_uuid().to_string(),
            ":run": run,
            ":idx": c.idx.get(),
            ":attempt": c.attempt.get(),
            ":kind": w.kind.as_str(),
            ":prompt": w.prompt.to_string(),
            ":question": w.question_id,
            ":deadline": w.deadline_ms.map(|ms| seconds(Duration::from_millis(ms))),
            ":on_deadline": on_deadline,
        })?;
    }
    Ok(Ok(true))
}

/// A SQLite error as the store reports database errors, classified by its
/// result code like sqlx's (`DbFault::of`).
pub(crate) fn db_error(target: &str, run: Option<cairn_core::RunId>, e: &rusqlite::Error) -> Error {
    let fault = match e.sqlite_error_code() {
        Some(code) => match code {
            rusqlite::ErrorCode::ReadOnly => DbFault::ReadOnly,
            rusqlite::ErrorCode::DiskFull => DbFault::DiskFull,
            rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase => {
                DbFault::Corrupt
            }
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                DbFault::Busy
            }
            rusqlite::ErrorCode::CannotOpen => DbFault::Connection,
            _ => DbFault::Other,
        },
        None => DbFault::Other,
    };
    Error::Db {
        fault,
        target: target.to_owned(),
        run,
        message: e.to_string(),
    }
}
