//! PostgreSQL's group commit, as SQLite's writer does it. A step commit
//! goes straight to the server while no other commit or batch of this
//! store is under way ([`FLUSHES`]); past that it queues, and the flush
//! under way, when it ends, hands its place to a task that sends the queue (up to [`MOST`], one commit per
//! run) as one statement: [`COMMIT_STEPS`], [`super::COMMIT_STEP`] over a
//! JSON array, so one round trip and one transaction for all of them.
//!
//! Each commit in a batch is fenced on its own, as alone: a stale one
//! matches no run row, writes nothing, and is refused alone after the
//! batch (`refused_commit`), while the rest commit. A batch the server
//! refuses whole (the guard's raise, a deadlock) rolled back: each of its
//! commits is then sent alone, as before batching, so each gets its own
//! answer. A batch whose connection failed may have landed: each commit
//! gets a connection error, and the write boundary's retry asks whether it
//! landed (`script::boundary::retried`). Commits that write more in their
//! transaction (`StepCommit::follows_up`) never queue.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{json, Value};
use tokio::sync::oneshot;

use cairn_core::{Corruption, RunId};

use super::PgStore;
use crate::raw::error_value;
use crate::script::{ScriptHost, TxKind};
use crate::sql::query;
use crate::{DbFault, Error, GroupStats, Result, StepCommit};

/// Commits or batches of one store under way at once. One, as SQLite's
/// writer: measured with `cairn-bench --workers` (64 runs in flight), two
/// or more flushes made smaller batches and fewer steps a second on this
/// 2-core machine (one worker: one flush 4,693 steps/s, two 3,951, four
/// 2,159).
const FLUSHES: usize = 1;
/// The most commits one batch carries.
const MOST: usize = 64;

/// The queue of one store.
#[derive(Debug, Default)]
pub(crate) struct Batcher {
    state: Mutex<State>,
    stats: Mutex<GroupStats>,
}

#[derive(Debug, Default)]
struct State {
    flushing: usize,
    queue: Vec<Queued>,
}

#[derive(Debug)]
struct Queued {
    commit: StepCommit,
    done: oneshot::Sender<Result<()>>,
}

impl Batcher {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn stats(&self) -> GroupStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn counted(&self, commits: usize) {
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.batches += 1;
        s.commits += commits as u64;
        s.largest = s.largest.max(commits);
    }

    /// The next batch, keeping the caller's place; none (and the place
    /// given back) when nothing is queued. A run's second commit waits for
    /// the next batch, so a batch names each run once.
    fn next_batch(&self) -> Vec<Queued> {
        let mut state = self.state();
        let (mut batch, mut rest) = (Vec::new(), Vec::new());
        for q in state.queue.drain(..) {
            let run = q.commit.run_id;
            match batch.len() < MOST && !batch.iter().any(|b: &Queued| b.commit.run_id == run) {
                true => batch.push(q),
                false => rest.push(q),
            }
        }
        state.queue = rest;
        if batch.is_empty() {
            state.flushing -= 1;
        }
        batch
    }
}

/// A place among the [`FLUSHES`]: dropped, it goes to a task that sends
/// what queued meanwhile, or back to the store.
struct Place(PgStore);

impl Drop for Place {
    fn drop(&mut self) {
        let batch = self.0.batcher.next_batch();
        if batch.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let store = self.0.clone();
                rt.spawn(async move {
                    let _place = Place(store.clone());
                    flush(&store, batch).await;
                });
            }
            // No runtime left to send them: the waiters hear that the
            // queue is gone (a connection error, so nothing is assumed).
            Err(_) => self.0.batcher.state().flushing -= 1,
        }
    }
}

/// [`ScriptHost::commit_step`] for a commit that may share a batch.
pub(super) async fn commit(store: &PgStore, c: &StepCommit) -> Result<()> {
    let answer = {
        let mut state = store.batcher.state();
        if state.flushing < FLUSHES {
            state.flushing += 1;
            None
        } else {
            let (done, answer) = oneshot::channel();
            state.queue.push(Queued {
                commit: c.clone(),
                done,
            });
            Some(answer)
        }
    };
    match answer {
        None => {
            let _place = Place(store.clone());
            store.batcher.counted(1);
            store.commit_alone(c).await
        }
        Some(answer) => answer
            .await
            .unwrap_or_else(|_| Err(lost("the batch it queued for was never sent"))),
    }
}

/// Sends one batch and answers each of its commits.
async fn flush(store: &PgStore, mut batch: Vec<Queued>) {
    store.batcher.counted(batch.len());
    if batch.len() == 1 {
        if let Some(q) = batch.pop() {
            let _ = q.done.send(store.commit_alone(&q.commit).await);
        }
        return;
    }
    match commit_many(store, &batch).await {
        Ok(landed) => {
            for q in batch {
                let done = match landed.contains(&q.commit.run_id) {
                    true => Ok(()),
                    false => store.refused(&q.commit).await,
                };
                let _ = q.done.send(done);
            }
        }
        // The connection failed with the statement sent: it may have
        // landed, and each commit's retry asks.
        Err(Error::Database(e)) if !matches!(e, sqlx::Error::Database(_)) => {
            let text = e.to_string();
            for q in batch {
                let _ = q.done.send(Err(copy_of(&e, &text)));
            }
        }
        // The server refused the statement (nothing of it was kept), or it
        // was never sent (a commit's values did not encode): each alone,
        // with its own answer.
        Err(_) => {
            for q in batch {
                let _ = q.done.send(store.commit_alone(&q.commit).await);
            }
        }
    }
}

/// The batch as one statement; the runs whose commits it wrote.
async fn commit_many(store: &PgStore, batch: &[Queued]) -> Result<HashSet<RunId>> {
    let rows = batch
        .iter()
        .map(|q| commit_row(&q.commit))
        .collect::<Result<Vec<_>>>()?;
    let q = query(COMMIT_STEPS).bind("batch", Value::Array(rows));
    let first = batch.first().map(|q| q.commit.run_id);
    let rows = store
        .tx(TxKind::Single, script!(|conn| conn.fetch_all(q).await))
        .await?;
    rows.iter()
        .map(|row| {
            let run = first.unwrap_or_else(|| RunId::from_uuid(uuid::Uuid::nil()));
            match row.opt_uuid("run", run, "a batched commit's run")? {
                Some(id) => Ok(RunId::from_uuid(id)),
                None => Err(Corruption::new(run, "a batched commit returned no run").into()),
            }
        })
        .collect()
}

/// One commit's values, as [`COMMIT_STEPS`] reads them. `output` and
/// `prompt` are wrapped in an array: a JSON `null` stays JSON, not SQL
/// `NULL`.
fn commit_row(c: &StepCommit) -> Result<Value> {
    let r = c.rows();
    let wait = r.open_wait;
    let (events, on_deadline) = super::events_and_deadline(c)?;
    Ok(json!({
        "run": c.run_id,
        "epoch": c.fence.epoch.0,
        "owner": &*c.fence.owner,
        "run_status": r.run_status.as_str(),
        "cursor": r.cursor.get(),
        "run_error": error_value(r.run_error),
        "n_events": c.events.len(),
        "finished": r.finishes(),
        "retry_secs": r.retry_after.map(|d| d.as_secs_f64()),
        "idx": c.idx.get(),
        "attempt": c.attempt.get(),
        "status": r.status.as_str(),
        "output": r.output.map(|o| [o]),
        "input_tokens": c.usage.map(|u| u.input_tokens),
        "output_tokens": c.usage.map(|u| u.output_tokens),
        "cost_nanos": crate::commit::cost_nanos(c.usage),
        "error": error_value(r.error),
        "next_idx": r.start_next.map(|(i, _)| i.get()),
        "next_role": r.start_next.map(|(_, role)| role.as_str()),
        "events": events,
        "wait": wait.map(|w| w.id),
        "wait_kind": wait.map(|w| w.kind.as_str()),
        "prompt": wait.map(|w| [&w.prompt]),
        "question": wait.and_then(|w| w.question_id.as_deref()),
        "deadline_secs": wait.and_then(|w| w.deadline_ms).map(|ms| ms as f64 / 1000.0),
        "on_deadline": on_deadline,
    }))
}

/// A batch's failure, for each of its commits: a fault that may pass (a
/// lost connection, a server read-only for now) becomes a lost connection
/// (the write boundary then asks whether the commit landed).
fn copy_of(e: &sqlx::Error, text: &str) -> Error {
    match DbFault::of(e) {
        f if f.may_pass() => lost(text),
        _ => Error::Statement(format!("a batched step commit failed: {text}")),
    }
}

fn lost(why: &str) -> Error {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, why.to_owned());
    Error::Database(sqlx::Error::Io(io))
}

/// [`super::COMMIT_STEP`] for many runs: its values come from `:batch`,
/// one JSON object per commit ([`commit_row`]). The run rows are locked
/// first, in id order (`l`), as the heartbeat of many runs locks them
/// (`script::runs::heartbeat_many_in`): two statements that lock the same
/// rows in different orders deadlock, and PostgreSQL takes a second
/// (`deadlock_timeout`) to break it. Each commit is fenced by its own run's
/// epoch and owner; the guard aborts the whole statement if any run
/// matched but its step did not. Answers the runs it wrote.
const COMMIT_STEPS: &str = "WITH i AS ( \
       SELECT * FROM jsonb_to_recordset(:batch::jsonb) AS i(run uuid, epoch bigint, \
         owner text, run_status text, cursor int, run_error jsonb, n_events bigint, finished bool, \
         retry_secs float8, idx int, attempt int, status text, output jsonb, \
         input_tokens bigint, output_tokens bigint, cost_nanos bigint, error jsonb, \
         next_idx int, next_role text, events jsonb, wait uuid, wait_kind text, prompt jsonb, \
         question text, deadline_secs float8, on_deadline jsonb)), \
     l AS ( \
       SELECT id FROM runs WHERE id IN (SELECT run FROM i) ORDER BY id FOR UPDATE), \
     r AS ( \
       UPDATE runs SET status = i.run_status, cursor = i.cursor, error = i.run_error, \
         event_seq = runs.event_seq + i.n_events, updated_at = clock_timestamp(), \
         finished_at = CASE WHEN i.finished THEN clock_timestamp() ELSE runs.finished_at END, \
         lease_owner = CASE WHEN i.run_status = 'running' THEN runs.lease_owner END, \
         lease_expires_at = CASE WHEN i.run_status = 'running' \
           THEN runs.lease_expires_at END, \
         not_before = CASE WHEN i.retry_secs IS NULL THEN NULL \
           ELSE clock_timestamp() + make_interval(secs => i.retry_secs) END \
       FROM i JOIN l ON l.id = i.run \
       WHERE runs.id = i.run AND runs.lease_epoch = i.epoch AND runs.lease_owner = i.owner \
         AND runs.status = 'running' \
         AND (runs.cancel_requested_at IS NULL OR i.run_status = 'cancelled') \
       RETURNING runs.id, runs.event_seq), \
     s AS ( \
       UPDATE steps SET status = i.status, output = i.output->0, \
         input_tokens = i.input_tokens, output_tokens = i.output_tokens, \
         cost_nanos = i.cost_nanos, error = COALESCE(i.error, steps.error), \
         finished_at = clock_timestamp(), lease_epoch = i.epoch, lease_owner = i.owner \
       FROM r JOIN i ON i.run = r.id \
       WHERE steps.run_id = r.id AND steps.idx = i.idx AND steps.attempt = i.attempt \
         AND steps.status = 'running' \
       RETURNING steps.run_id), \
     n AS ( \
       INSERT INTO steps (run_id, idx, role, status, attempt, started_at) \
       SELECT r.id, i.next_idx, i.next_role, 'running', 1, clock_timestamp() \
       FROM r JOIN i ON i.run = r.id WHERE i.next_idx IS NOT NULL), \
     e AS ( \
       INSERT INTO events (run_id, seq, at, kind, data) \
       SELECT r.id, r.event_seq - i.n_events + u.ord, clock_timestamp(), u.e->>'kind', \
         u.e->'data' \
       FROM r JOIN i ON i.run = r.id \
         CROSS JOIN jsonb_array_elements(i.events) WITH ORDINALITY AS u(e, ord)), \
     w AS ( \
       INSERT INTO waits (id, run_id, step_idx, attempt, kind, status, prompt, question_id, \
         deadline, on_deadline, created_at) \
       SELECT i.wait, r.id, i.idx, i.attempt, i.wait_kind, 'open', i.prompt->0, i.question, \
         clock_timestamp() + make_interval(secs => i.deadline_secs), i.on_deadline, \
         clock_timestamp() \
       FROM r JOIN i ON i.run = r.id WHERE i.wait IS NOT NULL) \
     SELECT r.id AS run, \
       CASE WHEN (SELECT count(*) FROM s) <> (SELECT count(*) FROM r) \
         THEN cairn_raise('cairn: step row is not running at the committed attempt') \
         ELSE 0 END AS guard \
     FROM r";
