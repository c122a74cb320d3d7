//! Step commits through SQLite's C interface, on a thread of their own.
//!
//! Why: through sqlx every statement is a round trip to the connection's
//! worker thread, and a step commit cost 4× a commit through the C
//! interface on the same file (`docs/benchmarks.md`). Here one thread owns
//! one `rusqlite` connection (the same SQLite build: rusqlite and sqlx link
//! one `libsqlite3-sys`) with its statements prepared once, and a commit is
//! one hop to it and one back. A caller that finds the thread idle does
//! without both hops: it writes in the thread's place, on its own thread,
//! under the same turn lock (`Writer::write_here`).
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
//! (`Writer::script`) on the same connection (`Conn::Direct`): one hop for
//! a transaction instead of one per statement. A write (a submit, a claim)
//! joins the batch like a step commit, in its own savepoint, and shares its
//! flush; a read (a load) runs alone between batches. The other operations
//! (journal items, answers, actions, the API's reads) stay on sqlx; both
//! are connections to one WAL file, serialized by SQLite's write lock.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{named_params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use cairn_core::Corruption;

use crate::raw::error_value;
use crate::script::ScriptFn;
use crate::sql::Conn;
use crate::{DbFault, Durability, Error, Result, StepCommit};

/// The most step commits one transaction carries.
const MAX_BATCH: usize = 64;

/// How long the thread waits for SQLite's write lock held by another
/// connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The database's clock, as every other write stamps it.
const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

/// What the group commit did so far (for the benchmark and the tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Transactions written that carried step commits (each one flush).
    pub batches: u64,
    /// Step commits they carried, refused ones included.
    pub commits: u64,
    /// The most commits one transaction carried.
    pub largest: usize,
    /// Write transactions of the storage script (submits, claims) that
    /// shared such a transaction with step commits.
    pub shared_scripts: u64,
    /// Step commits written on the caller's thread, the writer being idle
    /// (each also counted in `batches` and `commits`).
    pub here: u64,
}

/// What became of one commit.
pub(crate) enum Outcome {
    Committed,
    /// Its statements did not all apply; nothing of it was written.
    NotApplied,
}

/// What the thread is asked to do.
enum Job {
    /// Grouped with what is queued with it, in one transaction.
    Batched(Entry),
    /// A read transaction of the storage script, alone.
    Read(ReadJob),
}

/// A read as the thread runs it: given the connection and the file's name,
/// it runs its transaction and answers its caller.
type ReadJob = Box<dyn FnOnce(&Mutex<Connection>, &str) + Send>;

/// A write as the thread runs it, inside the batch's open transaction:
/// whether its statements stand (if not, the thread undoes them), and how
/// to answer its caller once the transaction's end is known. Given an
/// error instead (its transaction failed before it), it runs nothing.
type WriteJob =
    Box<dyn FnOnce(&Mutex<Connection>, &str, Option<&rusqlite::Error>) -> (bool, Answer) + Send>;

/// Answers a write's caller: `None` once its transaction committed, else
/// why it did not.
type Answer = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;

/// One entry of a batch, in the order it was queued.
enum Entry {
    /// A step commit.
    Commit(Box<StepCommit>, oneshot::Sender<Result<Outcome>>),
    /// A write transaction of the storage script (a submit, a claim),
    /// grouped like a step commit ([`Writer::script`]).
    Write(WriteJob),
}

/// The writer thread and the way to it. Dropping the last handle ends the
/// thread and closes its connection (waited for, so the file is left clean).
pub(crate) struct Writer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    target: String,
}

/// What the thread and a caller that writes in its place share.
struct Shared {
    conn: Mutex<Connection>,
    /// Held by whoever writes a batch or a read (the thread, or a caller in
    /// its place): `conn` is locked statement by statement inside one.
    turn: Mutex<()>,
    /// Jobs sent and not yet taken by the thread.
    queued: AtomicUsize,
    /// Whether a caller may write in the thread's place (not when every
    /// commit must be alone, the benchmark's comparison).
    inline: bool,
    stats: Mutex<GroupStats>,
}

impl Writer {
    /// Opens the writer's connection to `path` (already migrated by the
    /// pool) and starts its thread. `batch`: false writes one commit per
    /// transaction (for the benchmark's comparison only).
    pub fn open(path: &Path, durability: Durability, target: &str, batch: bool) -> Result<Writer> {
        let fail = |e: rusqlite::Error| db_error(target, None, &e);
        let conn = Connection::open(path).map_err(fail)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
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
        let shared = Arc::new(Shared {
            conn: Mutex::new(conn),
            turn: Mutex::new(()),
            queued: AtomicUsize::new(0),
            inline: batch,
            stats: Mutex::new(GroupStats::default()),
        });
        let thread_shared = shared.clone();
        let limit = if batch { MAX_BATCH } else { 1 };
        let thread_target = target.to_owned();
        let thread = std::thread::Builder::new()
            .name("cairn-sqlite-writer".into())
            .spawn(move || run(&thread_shared, queue, limit, &thread_target))
            .map_err(|e| Error::Db {
                fault: DbFault::Other,
                target: target.to_owned(),
                run: None,
                message: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Writer {
            jobs: Some(jobs),
            thread: Some(thread),
            shared,
            target: target.to_owned(),
        })
    }

    /// Sends a commit to the thread and waits for its outcome (after the
    /// flush of the transaction that carried it).
    pub async fn commit(&self, c: &StepCommit) -> Result<Outcome> {
        let (done, answer) = oneshot::channel();
        let job = Job::Batched(Entry::Commit(Box::new(c.clone()), done));
        self.send(job, answer, Some(c.run_id)).await
    }

    /// Runs a transaction of the storage script on the thread, on its
    /// connection: one hop for the whole transaction, where sqlx makes one
    /// per statement. A write goes into the next batch, in a savepoint of
    /// its own (undone alone if `f` returns an error), and is answered after
    /// that batch's flush, so a claim or a submit shares its flush with the
    /// step commits of other runs. A read (`writes` false) is a transaction
    /// of its own between batches. `f`'s statements run at once (the
    /// connection never waits), so its future is complete after one poll.
    pub async fn script<T: Send + 'static>(&self, f: ScriptFn<T>, writes: bool) -> Result<T> {
        let (done, answer) = oneshot::channel();
        let job = match writes {
            true => Job::Batched(Entry::Write(Box::new(move |conn, target, failed| {
                let result = match failed {
                    None => poll_script(conn, target, f),
                    Some(e) => Err(db_error(target, None, e)),
                };
                let stands = result.is_ok();
                let target = target.to_owned();
                let answer: Answer = Box::new(move |ended| {
                    let _ = done.send(match ended {
                        Some(e) if result.is_ok() => Err(db_error(&target, None, e)),
                        _ => result,
                    });
                });
                (stands, answer)
            }))),
            false => Job::Read(Box::new(move |conn, target| {
                let _ = done.send(run_read(conn, target, f));
            })),
        };
        self.send(job, answer, None).await
    }

    async fn send<T>(
        &self,
        job: Job,
        answer: oneshot::Receiver<Result<T>>,
        run: Option<cairn_core::RunId>,
    ) -> Result<T> {
        let job = match self.write_here(job) {
            None => return answer.await.map_err(|_| self.lost(run))?,
            Some(job) => job,
        };
        self.shared.queued.fetch_add(1, Ordering::SeqCst);
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        match sent {
            true => answer.await.map_err(|_| self.lost(run))?,
            false => Err(self.lost(run)),
        }
    }

    fn lost(&self, run: Option<cairn_core::RunId>) -> Error {
        Error::Db {
            fault: DbFault::Connection,
            target: self.target.clone(),
            run,
            message: "the SQLite writer thread stopped before answering".into(),
        }
    }

    /// Writes `job` on the caller's thread when the writer is idle (nothing
    /// queued, no batch being written), as the thread would have written it
    /// alone; gives it back otherwise. Saves the two hops between threads
    /// (a sleeping thread takes 50 µs or more to wake on this kind of
    /// machine): a step commit costs what its statements and flush cost.
    ///
    /// The caller's thread blocks for that time, as a synchronous commit
    /// would; never longer waiting for another process: if another
    /// connection holds SQLite's write lock, the job goes to the thread,
    /// which waits its turn. Not on a runtime of one thread, whose other
    /// tasks would all wait (there the thread writes, and they go on).
    /// Not `block_in_place`: it panics inside a `LocalSet`, which a
    /// library cannot rule out.
    fn write_here(&self, job: Job) -> Option<Job> {
        let Some(_turn) = self.idle_turn() else {
            return Some(job);
        };
        match job {
            Job::Read(read) => read(&self.shared.conn, &self.target),
            Job::Batched(entry) => {
                if !self.shared.begin_now() {
                    return Some(Job::Batched(entry));
                }
                if matches!(entry, Entry::Commit(..)) {
                    self.shared.count(|s| s.here += 1);
                }
                self.shared.write_batch(vec![entry], &self.target, true);
            }
        }
        None
    }

    /// Runs a read transaction of the storage script on the caller's
    /// thread if the writer is idle ([`Writer::write_here`]'s rule); gives
    /// `f` back otherwise, for the pool.
    pub fn read_here<T>(&self, f: ScriptFn<T>) -> std::result::Result<Result<T>, ScriptFn<T>> {
        match self.idle_turn() {
            Some(_turn) => Ok(run_read(&self.shared.conn, &self.target, f)),
            None => Err(f),
        }
    }

    /// The writer's turn, if a caller may take it now: nothing queued, no
    /// batch being written, a runtime of more than one thread.
    fn idle_turn(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if !self.shared.inline || !multi_thread || self.shared.queued.load(Ordering::SeqCst) > 0 {
            return None;
        }
        self.shared.turn.try_lock().ok()
    }

    pub fn stats(&self) -> GroupStats {
        *self.shared.stats.lock().unwrap_or_else(|p| p.into_inner())
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
fn run(shared: &Shared, queue: mpsc::Receiver<Job>, limit: usize, target: &str) {
    let mut held = None;
    while let Some(first) = held.take().or_else(|| next_job(&queue)) {
        shared.queued.fetch_sub(1, Ordering::SeqCst);
        let mut batch = match first {
            Job::Batched(entry) => vec![entry],
            Job::Read(read) => {
                let _turn = shared.turn.lock().unwrap_or_else(|p| p.into_inner());
                read(&shared.conn, target);
                continue;
            }
        };
        while batch.len() < limit {
            match queue.try_recv() {
                Ok(Job::Batched(entry)) => batch.push(entry),
                // A read waits for the batch's flush.
                Ok(read) => {
                    held = Some(read);
                    break;
                }
                Err(_) => break,
            }
            shared.queued.fetch_sub(1, Ordering::SeqCst);
        }
        let _turn = shared.turn.lock().unwrap_or_else(|p| p.into_inner());
        shared.write_batch(batch, target, false);
    }
}

impl Shared {
    /// `BEGIN IMMEDIATE` at once, or `false` if SQLite's write lock is
    /// not free now (held by another connection) or the statement failed:
    /// the thread, which waits for the lock, then writes (and reports).
    fn begin_now(&self) -> bool {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if conn.busy_timeout(Duration::ZERO).is_err() {
            return false;
        }
        let begun = exec(&conn, "BEGIN IMMEDIATE").is_ok();
        // The thread's own waits are the connection's setting.
        if conn.busy_timeout(BUSY_TIMEOUT).is_err() {
            if begun {
                let _ = exec(&conn, "ROLLBACK");
            }
            return false;
        }
        begun
    }

    /// Counts the batch, then writes it (`write_batch`). The caller holds
    /// the turn.
    fn write_batch(&self, batch: Vec<Entry>, target: &str, begun: bool) {
        let commits = batch
            .iter()
            .filter(|e| matches!(e, Entry::Commit(..)))
            .count();
        if commits > 0 {
            self.count(|s| {
                s.batches += 1;
                s.commits += commits as u64;
                s.largest = s.largest.max(commits);
                s.shared_scripts += (batch.len() - commits) as u64;
            });
        }
        write_batch(&self.conn, batch, target, begun);
    }

    fn count(&self, f: impl FnOnce(&mut GroupStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
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

/// A read's transaction: `BEGIN`, its statements, `COMMIT` (or `ROLLBACK`
/// if it returned an error).
fn run_read<T>(conn: &Mutex<Connection>, target: &str, f: ScriptFn<T>) -> Result<T> {
    let exec_locked = |sql: &str| {
        let c = conn.lock().unwrap_or_else(|p| p.into_inner());
        exec(&c, sql).map_err(|e| db_error(target, None, &e))
    };
    exec_locked("BEGIN")?;
    let result = poll_script(conn, target, f);
    let ended = match &result {
        Ok(_) => exec_locked("COMMIT"),
        Err(_) => exec_locked("ROLLBACK"),
    };
    if let Err(e) = ended {
        let _ = exec_locked("ROLLBACK");
        return Err(e);
    }
    result
}

/// Runs a script's statements in the transaction that is open.
fn poll_script<T>(conn: &Mutex<Connection>, target: &str, f: ScriptFn<T>) -> Result<T> {
    let mut c = Conn::Direct(conn, target);
    let mut future = f(&mut c);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(result) => result,
        // The writer-thread rule (`script/mod.rs`): its connection never
        // waits, so a script that pends waits on something foreign.
        std::task::Poll::Pending => Err(Error::ScriptWaited),
    }
}

/// One transaction for the batch, then each entry's answer. An entry shares
/// the transaction in a savepoint of its own, so one that is refused (a
/// stale epoch, a script's error) is undone alone; a batch of one needs no
/// savepoint, its refusal undoes the transaction. `begun`: its `BEGIN
/// IMMEDIATE` ran already.
fn write_batch(conn: &Mutex<Connection>, batch: Vec<Entry>, target: &str, begun: bool) {
    let lock = || conn.lock().unwrap_or_else(|p| p.into_inner());
    let alone = batch.len() == 1;
    let mut answers: Vec<Pending> = Vec::with_capacity(batch.len());
    let mut entries = batch.into_iter();
    // An error here ends the whole transaction: every entry learns it.
    let ended: rusqlite::Result<()> = (|| {
        if !begun {
            exec(&lock(), "BEGIN IMMEDIATE")?;
        }
        for entry in entries.by_ref() {
            if !alone {
                exec(&lock(), "SAVEPOINT step_commit")?;
            }
            let stands = match entry {
                Entry::Commit(c, done) => {
                    // Its own statement: the lock is released before a
                    // follow-up takes it again.
                    let applied = apply(&lock(), &c);
                    let outcome = match applied {
                        Ok(Ok(true)) if c.follows_up() => follow_up(conn, target, &c),
                        Ok(Ok(true)) => Ok(Outcome::Committed),
                        Ok(Ok(false)) => Ok(Outcome::NotApplied),
                        Ok(Err(e)) => Err(e),
                        Err(e) => Err(db_error(target, Some(c.run_id), &e)),
                    };
                    let stands = matches!(outcome, Ok(Outcome::Committed));
                    answers.push(Pending::Commit(c.run_id, outcome, done));
                    stands
                }
                Entry::Write(write) => {
                    let (stands, answer) = write(conn, target, None);
                    answers.push(Pending::Write(answer));
                    stands
                }
            };
            match (alone, stands) {
                (true, false) => {
                    // The batch is this one refused entry: its answer is
                    // its own, whatever the rollback does (SQLite may have
                    // rolled back already, after a full disk).
                    let c = lock();
                    return match exec(&c, "ROLLBACK") {
                        Err(e) if !c.is_autocommit() => Err(e),
                        _ => Ok(()),
                    };
                }
                (true, true) => {}
                (false, false) => {
                    let c = lock();
                    exec(&c, "ROLLBACK TO step_commit")?;
                    exec(&c, "RELEASE step_commit")?;
                }
                (false, true) => exec(&lock(), "RELEASE step_commit")?,
            }
        }
        exec(&lock(), "COMMIT")
    })();
    let failed = ended.err();
    if failed.is_some() {
        let c = lock();
        if !c.is_autocommit() {
            let _ = exec(&c, "ROLLBACK");
        }
    }
    for pending in answers {
        match pending {
            Pending::Commit(run, outcome, done) => {
                let _ = done.send(match &failed {
                    Some(e) => Err(db_error(target, Some(run), e)),
                    None => outcome,
                });
            }
            Pending::Write(answer) => answer(failed.as_ref()),
        }
    }
    // Entries the failed transaction never reached.
    if let Some(e) = &failed {
        for entry in entries {
            match entry {
                Entry::Commit(c, done) => {
                    let _ = done.send(Err(db_error(target, Some(c.run_id), e)));
                }
                Entry::Write(write) => write(conn, target, Some(e)).1(Some(e)),
            }
        }
    }
}

/// What a commit writes beyond its rows (a spawn, a child's end, a
/// cancel's cascade: `script::children`), in its savepoint.
fn follow_up(conn: &Mutex<Connection>, target: &str, c: &StepCommit) -> Result<Outcome> {
    let c = c.clone();
    poll_script(
        conn,
        target,
        script!(|conn| crate::script::children::follow_up_in(conn, &c).await),
    )
    .map(|()| Outcome::Committed)
}

/// An entry's answer, held until the batch's transaction has ended.
enum Pending {
    Commit(
        cairn_core::RunId,
        Result<Outcome>,
        oneshot::Sender<Result<Outcome>>,
    ),
    Write(Answer),
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
    let r = c.rows();
    let finished = r.finishes();
    let seconds = |d: Duration| format!("+{:.3} seconds", d.as_secs_f64());
    let n_events = c.events.len() as i64;
    crate::counters::sent(
        2 + u64::from(r.start_next.is_some())
            + c.events.len() as u64
            + u64::from(r.open_wait.is_some()),
    );
    // A run that stays running keeps `status` out of the SET list: SQLite
    // rewrites an index entry (`runs_by_status`) for every column named
    // there, changed or not, which is one more WAL page per step.
    let set_status = match r.run_status {
        cairn_core::RunStatus::Running => "",
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
             WHERE id = :run AND lease_epoch = :epoch AND lease_owner = :owner \
               AND status = 'running' \
               AND (cancel_requested_at IS NULL OR :status = 'cancelled') \
             RETURNING event_seq"
        ))?
        .query_row(
            named_params! {
                ":status": r.run_status.as_str(),
                ":cursor": r.cursor.get(),
                ":run_error": error_value(r.run_error).map(|v| v.to_string()),
                ":n_events": n_events,
                ":finished": finished,
                ":retry": r.retry_after.map(seconds),
                ":run": run,
                ":epoch": c.fence.epoch.0,
                ":owner": &*c.fence.owner,
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
               cost_nanos = :cost_nanos, \
               error = COALESCE(:error, error), finished_at = {NOW}, \
               lease_epoch = :epoch, lease_owner = :owner \
             WHERE run_id = :run AND idx = :idx AND attempt = :attempt AND status = 'running'"
        ))?
        .execute(named_params! {
            ":epoch": c.fence.epoch.0,
            ":owner": &*c.fence.owner,
            ":status": r.status.as_str(),
            ":output": r.output.map(|v| v.to_string()),
            ":input_tokens": c.usage.map(|u| u.input_tokens as i64),
            ":output_tokens": c.usage.map(|u| u.output_tokens as i64),
            ":cost_nanos": crate::commit::cost_nanos(c.usage),
            ":error": error_value(r.error).map(|v| v.to_string()),
            ":run": run,
            ":idx": c.idx.get(),
            ":attempt": c.attempt.get(),
        })?;
    if step != 1 {
        return Ok(Ok(false));
    }
    if let Some((next, role)) = r.start_next {
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
    if let Some(w) = r.open_wait {
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
