//! Threads: their summaries (`ThreadStore::threads`, `ThreadStore::thread`), the
//! conversation a run continues (`ThreadStore::thread_history`), and the order
//! of a thread's runs (`busy_before`, which a claim and a submit's
//! `on_busy` ask; `lock_thread`, which serialises a thread's submits).

use async_trait::async_trait;
use cairn_core::{Actor, Corruption, RunId, RunRecord, RunStatus, ThreadTurn};

use crate::contract::ThreadStore;
use crate::raw::{decode_listed, decode_thread, run_cols, run_cols_but_def};
use crate::sql::{query, Conn, Dialect};
use crate::{Error, Result, ThreadPage, ThreadSummary};

use super::boundary::placed;
use super::storable::text_ok;
use super::{ScriptHost, TxKind};

/// Every thread's summary (or one thread's, given `:thread`): runs counted
/// once each, tokens summed over their steps, the newest submit time; in
/// pages of `:limit` after thread `:after` (by newest run, then id).
const THREAD_SUMMARIES: &str = "SELECT r.thread_id AS thread_id, count(DISTINCT r.id) AS runs, \
     CAST(COALESCE(sum(s.input_tokens), 0) AS BIGINT) AS input_tokens, \
     CAST(COALESCE(sum(s.output_tokens), 0) AS BIGINT) AS output_tokens, \
     CAST(COALESCE(sum(s.cost_nanos), 0) AS BIGINT) AS cost_nanos, \
     max(r.created_at) AS last_run_at \
     FROM runs r LEFT JOIN steps s ON s.run_id = r.id \
     WHERE r.thread_id IS NOT NULL AND (:thread IS NULL OR r.thread_id = :thread) \
     GROUP BY r.thread_id \
     HAVING :after IS NULL OR (max(r.created_at), r.thread_id) > \
         ((SELECT max(created_at) FROM runs WHERE thread_id = :after), :after) \
     ORDER BY last_run_at, thread_id LIMIT :limit";

/// The runs of `thread` that are not done (queued, running, waiting or
/// interrupted) and were created before run `before`, oldest first.
const BUSY_BEFORE: &str = "SELECT id, status FROM runs WHERE thread_id = :thread \
     AND status IN ('queued', 'running', 'waiting', 'interrupted') \
     AND (created_at, id) < (SELECT created_at, id FROM runs WHERE id = :before) \
     ORDER BY created_at, id";

/// `ThreadStore::threads`. A cursor thread with no run is not found (it was
/// compacted away, or never existed).
pub(super) async fn threads_in(c: &mut Conn<'_>, page: &ThreadPage) -> Result<Vec<ThreadSummary>> {
    if let Some(after) = &page.after {
        let known = query("SELECT id FROM runs WHERE thread_id = :after LIMIT 1")
            .bind("after", after.as_str());
        if c.fetch_optional(known).await?.is_none() {
            return Err(Error::ThreadNotFound(after.clone()));
        }
    }
    let rows = c.fetch_all(summaries(None, page)).await?;
    rows.iter().map(decode_thread).collect()
}

/// The summaries query for one thread or a page of them.
fn summaries(thread: Option<&str>, page: &ThreadPage) -> crate::sql::Query {
    query(THREAD_SUMMARIES)
        .bind("thread", thread)
        .bind("after", page.after.as_deref())
        .bind("limit", page.limit.map_or(i64::MAX, i64::from))
}

/// `ThreadStore::thread`: the summary and the runs (from the caller's snapshot).
pub(super) async fn thread_in(
    c: &mut Conn<'_>,
    id: &str,
) -> Result<(ThreadSummary, Vec<RunRecord>)> {
    let summary = c
        .fetch_found(summaries(Some(id), &ThreadPage::default()), || {
            Error::ThreadNotFound(id.to_owned())
        })
        .await?;
    let sql = concat!(
        "SELECT ",
        run_cols!(),
        " FROM runs WHERE thread_id = :thread ORDER BY created_at, id"
    );
    let rows = c.fetch_all(query(sql).bind("thread", id)).await?;
    let runs = rows.iter().map(decode_listed).collect::<Result<Vec<_>>>()?;
    Ok((decode_thread(&summary)?, runs))
}

/// `ThreadStore::thread_history`: the newest `max_runs` succeeded runs of
/// `thread` before run `before`, oldest first, with their final outputs.
pub(super) async fn history_in(
    c: &mut Conn<'_>,
    thread: &str,
    before: RunId,
    max_runs: u32,
) -> Result<Vec<ThreadTurn>> {
    // A run's final output is its last step's (the step at
    // `step_count - 1`, which a succeeded run always has).
    let rows = c
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
    // Read newest first (so the limit keeps the newest); given oldest first.
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

/// Serialises the submits to one thread until the transaction ends, so a
/// submit's busy check (`on_busy`) sees every run submitted before it.
/// SQLite's write transactions already exclude each other; PostgreSQL
/// takes a transaction-scoped advisory lock on the thread's name (in a
/// key space of Cairn's own, the first half of the two-key form).
pub(super) async fn lock_thread(c: &mut Conn<'_>, thread: &str) -> Result<()> {
    if c.dialect() == Dialect::Postgres {
        c.execute(
            query("SELECT pg_advisory_xact_lock(1128878419, hashtext(:thread))")
                .bind("thread", thread),
        )
        .await?;
    }
    Ok(())
}

/// The runs of `thread` not done and created before run `before`, oldest
/// first, with their statuses.
pub(super) async fn busy_before(
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

/// `ThreadStore::set_thread_budget`: the check, the write and the read back in
/// one write transaction.
pub(super) async fn set_budget<H: super::ScriptHost + ?Sized>(
    host: &H,
    thread: &str,
    budget: &cairn_core::Budget,
    raise: bool,
    actor: &cairn_core::Actor,
) -> Result<crate::ThreadBudget> {
    super::boundary::bounded("set_thread_budget", host.target(), None, async {
        super::storable::actor_ok(actor)?;
        super::storable::text_ok("the thread id", Some(thread))?;
        let (thread, budget, actor) = (thread.to_owned(), *budget, actor.clone());
        host.tx(
            super::TxKind::Write,
            script!(|c| set_budget_in(c, &thread, &budget, raise, &actor).await),
        )
        .await
    })
    .await
}

async fn set_budget_in(
    c: &mut Conn<'_>,
    thread: &str,
    asked: &cairn_core::Budget,
    raise: bool,
    actor: &cairn_core::Actor,
) -> Result<crate::ThreadBudget> {
    if asked.wall_time.is_some() {
        return Err(Error::BadBudget {
            thread: thread.to_owned(),
            reason: "a thread has no wall time: give its runs one (--budget wall_time=… on \
                     each submit)"
                .into(),
        });
    }
    let had = budget_in(c, thread).await?.map(|b| b.budget);
    let budget = match (raise, had) {
        (false, had) => asked.over(had.unwrap_or_default()),
        (true, had) => {
            let had = had.unwrap_or_default();
            let raised = had.raised(*asked);
            // A limit asked to rise that the thread lacks stays absent.
            if raised.over(*asked) != raised {
                return Err(Error::BadBudget {
                    thread: thread.to_owned(),
                    reason: "it has no such limit to raise: set one (without +)".into(),
                });
            }
            raised
        }
    };
    c.execute(
        query(
            "INSERT INTO thread_budgets (thread_id, budget, set_by, reason, set_at) \
             VALUES (:thread, :budget, :by, :reason, {now}) ON CONFLICT (thread_id) DO UPDATE \
             SET budget = excluded.budget, set_by = excluded.set_by, \
             reason = excluded.reason, set_at = excluded.set_at",
        )
        .bind("thread", thread)
        .bind("budget", serde_json::json!(budget))
        .bind("by", actor.by.as_str())
        .bind("reason", actor.reason.as_deref()),
    )
    .await?;
    budget_in(c, thread).await?.ok_or_else(|| {
        Corruption::new(
            crate::raw::nil_run(),
            "a thread budget just written is gone",
        )
        .into()
    })
}

/// `ThreadStore::thread_budget`.
pub(super) async fn budget<H: super::ScriptHost + ?Sized>(
    host: &H,
    thread: &str,
) -> Result<Option<crate::ThreadBudget>> {
    let thread = thread.to_owned();
    let read = host.tx(
        super::TxKind::Read,
        script!(|c| budget_in(c, &thread).await),
    );
    super::boundary::placed(host.target(), None, read).await
}

pub(super) async fn budget_in(
    c: &mut Conn<'_>,
    thread: &str,
) -> Result<Option<crate::ThreadBudget>> {
    let row = c
        .fetch_optional(
            query("SELECT budget, set_by, reason, set_at FROM thread_budgets WHERE thread_id = :t")
                .bind("t", thread),
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let nil = crate::raw::nil_run();
    let what = "a thread budget";
    let budget = row.opt_json("budget", nil, what)?.unwrap_or_default();
    let budget = serde_json::from_value(budget)
        .map_err(|e| Corruption::new(nil, format!("thread `{thread}`'s budget: {e}")))?;
    Ok(Some(crate::ThreadBudget {
        thread_id: thread.to_owned(),
        budget,
        spent: super::journal::thread_spent_in(c, thread).await?,
        set_by: row.text("set_by")?,
        reason: row.opt_text("reason")?,
        set_at: row.time("set_at", nil, what)?,
    }))
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> ThreadStore for H {
    async fn thread_history(
        &self,
        thread: &str,
        before: RunId,
        max_runs: u32,
    ) -> Result<Vec<ThreadTurn>> {
        placed(self.target(), None, async {
            text_ok("the thread id", Some(thread))?;
            let thread = thread.to_owned();
            self.tx(
                TxKind::Single,
                script!(|c| history_in(c, &thread, before, max_runs).await),
            )
            .await
        })
        .await
    }

    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>> {
        let page = page.clone();
        let read = self.tx(TxKind::Read, script!(|c| threads_in(c, &page).await));
        placed(self.target(), None, read).await
    }

    async fn thread(&self, id: &str) -> Result<(ThreadSummary, Vec<RunRecord>)> {
        placed(self.target(), None, async {
            text_ok("the thread id", Some(id))?;
            let id = id.to_owned();
            self.tx(TxKind::Read, script!(|c| thread_in(c, &id).await))
                .await
        })
        .await
    }

    async fn set_thread_budget(
        &self,
        thread: &str,
        budget: &cairn_core::Budget,
        raise: bool,
        actor: &Actor,
    ) -> Result<crate::ThreadBudget> {
        set_budget(self, thread, budget, raise, actor).await
    }

    async fn thread_budget(&self, thread: &str) -> Result<Option<crate::ThreadBudget>> {
        budget(self, thread).await
    }
}
