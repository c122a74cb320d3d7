//! Retention: `MaintenanceStore::compact`, written once over the dialect layer. It
//! removes what a policy names and never what an unfinished run needs:
//! only succeeded and cancelled runs (and failed ones, by their own
//! separate age) are removed whole, and only their journals are dropped.
//! Deletes go in small batches, one short transaction each, so a large
//! compaction never holds a long lock or stalls step commits. Also the
//! other housekeeping: periodic tasks (`claim_task_in`) and SQLite's
//! integrity check (`quick_check`); the replication facts are read in
//! `replication.rs`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::contract::MaintenanceStore;
use crate::sql::{query, Conn, Dialect, Query, Row};
use crate::{Error, Result};

use super::boundary::{bounded, placed};
use super::{ScriptHost, TxKind};

/// What to remove. Every criterion is off unless set; a policy with none
/// set removes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactPolicy {
    /// Events of any run older than this (by their time).
    pub events_older_than: Option<Duration>,
    /// Journals of finished (succeeded or cancelled) runs.
    pub journals: bool,
    /// Whole succeeded or cancelled runs finished longer ago than this,
    /// with their steps, events, journals and waits.
    pub finished_older_than: Option<Duration>,
    /// Whole failed (parked) runs finished longer ago than this. A failed
    /// run is retryable until then.
    pub failed_older_than: Option<Duration>,
    /// Whole finished runs of a thread beyond its newest N finished ones.
    pub keep_per_thread: Option<u32>,
    /// Apply the criteria to this thread's runs only (agent runners'
    /// `compact_thread`); every run when `None`.
    pub thread: Option<String>,
    /// Count what would be removed; remove nothing.
    pub dry_run: bool,
}

impl CompactPolicy {
    /// Whether the policy names anything to remove.
    pub fn is_empty(&self) -> bool {
        self.events_older_than.is_none()
            && !self.journals
            && self.finished_older_than.is_none()
            && self.failed_older_than.is_none()
            && self.keep_per_thread.is_none()
    }
}

/// What a compaction removed (or, dry, would remove): rows by table. The
/// JSON of `cairn compact --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Compacted {
    pub runs: u64,
    pub steps: u64,
    pub events: u64,
    pub journal_items: u64,
    pub waits: u64,
    /// The `runs` by the rule that removes each (a dry run says which
    /// rule would remove how many).
    #[serde(default)]
    pub rules: RunsByRule,
    /// The runs removed whole (a dry run: that it would remove), oldest
    /// first: the `runs` counted above, by id. Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_ids: Vec<cairn_core::RunId>,
}

/// Runs removed whole, by rule: each run is counted under one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunsByRule {
    /// Succeeded or cancelled runs past `finished_older_than`.
    pub finished: u64,
    /// Failed runs past `failed_older_than`.
    pub failed: u64,
    /// A thread's finished runs beyond its newest `keep_per_thread`.
    pub beyond_keep: u64,
}

impl std::ops::AddAssign for Compacted {
    fn add_assign(&mut self, o: Compacted) {
        self.runs += o.runs;
        self.steps += o.steps;
        self.events += o.events;
        self.journal_items += o.journal_items;
        self.waits += o.waits;
        self.rules.finished += o.rules.finished;
        self.rules.failed += o.rules.failed;
        self.rules.beyond_keep += o.rules.beyond_keep;
        self.run_ids.extend(o.run_ids);
    }
}

/// Runs removed whole per transaction.
const RUN_BATCH: i64 = 200;
/// Journal items or events removed per transaction.
const ROW_BATCH: i64 = 2000;

/// The runs a policy removes whole: a condition on `runs` (unaliased),
/// never NULL. A criterion left out binds NULL and removes nothing by
/// itself; the others still apply (`COALESCE`, so that a NULL never turns
/// a `NOT` below into "nothing"). With `:keep`, a thread's finished runs
/// are ranked newest first: the newest `:keep` are kept whatever the
/// other criteria say, and the rest are removed.
macro_rules! whole_run {
    () => {
        "(CASE WHEN :keep IS NOT NULL AND thread_id IS NOT NULL \
              AND status IN ('succeeded', 'cancelled') \
            THEN (SELECT count(*) FROM runs n \
                WHERE n.thread_id = runs.thread_id AND n.status IN ('succeeded', 'cancelled') \
                AND (n.created_at, n.id) > (runs.created_at, runs.id)) >= :keep \
            ELSE COALESCE((status IN ('succeeded', 'cancelled') \
                  AND finished_at < {ago:finished_secs}) \
                OR (status = 'failed' AND finished_at < {ago:failed_secs}), FALSE) END)"
    };
}
/// The runs a policy looks at: those of `:thread`, or all.
macro_rules! in_scope {
    () => {
        "(:thread IS NULL OR runs.thread_id = :thread)"
    };
}
/// The ids of the runs a policy removes whole, in its scope.
macro_rules! whole_ids {
    () => {
        concat!(
            "SELECT id FROM runs WHERE ",
            in_scope!(),
            " AND ",
            whole_run!(),
            // A child is kept while its parent has not ended: the parent's
            // step reads its outcome when it runs again.
            " AND NOT EXISTS (SELECT 1 FROM runs p WHERE runs.child_key IS NOT NULL \
               AND p.id = runs.parent_run_id \
               AND p.status NOT IN ('succeeded', 'failed', 'cancelled'))"
        )
    };
}
/// Journal items of finished runs that no whole-run criterion removes.
macro_rules! finished_journals {
    () => {
        concat!(
            "SELECT j.run_id, j.step_idx, j.seq FROM journal j JOIN runs ON runs.id = j.run_id \
             WHERE :journals AND runs.status IN ('succeeded', 'cancelled') AND ",
            in_scope!(),
            " AND NOT ",
            whole_run!()
        )
    };
}
/// Events older than the policy's age, of runs no whole-run criterion removes.
macro_rules! old_events {
    () => {
        concat!(
            "SELECT e.run_id, e.seq FROM events e JOIN runs ON runs.id = e.run_id \
             WHERE e.at < {ago:events_secs} AND ",
            in_scope!(),
            " AND NOT ",
            whole_run!()
        )
    };
}
/// The rows of `$table` whose `$col` is among the ids the subquery `$ids`
/// selects, counted as `$alias`.
macro_rules! count_in {
    ($table:literal, $col:literal, $ids:expr, $alias:literal) => {
        concat!(
            "(SELECT count(*) FROM ",
            $table,
            " WHERE ",
            $col,
            " IN (",
            $ids,
            ")) AS ",
            $alias
        )
    };
}
/// The rows, by table, of the runs whose ids the subquery `$ids` selects.
macro_rules! counts_of {
    ($ids:expr) => {
        concat!(
            "SELECT ",
            count_in!("runs", "id", $ids, "runs"),
            ", ",
            count_in!("steps", "run_id", $ids, "steps"),
            ", ",
            count_in!("events", "run_id", $ids, "events"),
            ", ",
            count_in!("journal", "run_id", $ids, "journal_items"),
            ", ",
            count_in!("waits", "run_id", $ids, "waits")
        )
    };
}

/// The runs whose ids `$ids` selects, by the rule that removes each: those
/// a thread's `:keep` governs are beyond it, the others are past an age.
macro_rules! rules_of {
    ($ids:expr) => {
        concat!(
            "SELECT COALESCE(SUM(CASE WHEN :keep IS NOT NULL AND thread_id IS NOT NULL \
               AND status IN ('succeeded', 'cancelled') THEN 1 ELSE 0 END), 0) AS beyond_keep, \
             COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0) AS failed, \
             COALESCE(SUM(CASE WHEN status IN ('succeeded', 'cancelled') AND NOT \
               (:keep IS NOT NULL AND thread_id IS NOT NULL) THEN 1 ELSE 0 END), 0) AS finished \
             FROM runs WHERE id IN (",
            $ids,
            ")"
        )
    };
}

/// Binds every parameter the criteria use.
fn policy(q: Query, p: &CompactPolicy) -> Query {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    q.bind("finished_secs", secs(p.finished_older_than))
        .bind("failed_secs", secs(p.failed_older_than))
        .bind("keep", p.keep_per_thread)
        .bind("thread", p.thread.as_deref())
}

fn count(row: Option<&Row>, col: &str) -> Result<u64> {
    Ok(row
        .map(|r| r.int(col))
        .transpose()?
        .map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}

async fn counts(c: &mut Conn<'_>, q: Query, rules: Query) -> Result<Compacted> {
    let row = c.fetch_optional(q).await?;
    let row = row.as_ref();
    let by_rule = c.fetch_optional(rules).await?;
    let by_rule = by_rule.as_ref();
    Ok(Compacted {
        runs: count(row, "runs")?,
        steps: count(row, "steps")?,
        events: count(row, "events")?,
        journal_items: count(row, "journal_items")?,
        waits: count(row, "waits")?,
        rules: RunsByRule {
            finished: count(by_rule, "finished")?,
            failed: count(by_rule, "failed")?,
            beyond_keep: count(by_rule, "beyond_keep")?,
        },
        run_ids: vec![],
    })
}

/// `MaintenanceStore::compact`: a dry run counts in one read transaction; a real
/// pass removes whole runs a batch at a time, then journals and events.
pub(super) async fn compact<H: ScriptHost + ?Sized>(
    host: &H,
    p: &CompactPolicy,
) -> Result<Compacted> {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let journals = |q: Query| policy(q.bind("journals", p.journals), p);
    let events = |q: Query| policy(q.bind("events_secs", secs(p.events_older_than)), p);
    if p.dry_run {
        let whole = policy(query(counts_of!(whole_ids!())), p);
        let rules = policy(query(rules_of!(whole_ids!())), p);
        let ids = policy(query(concat!(whole_ids!(), " ORDER BY created_at, id")), p);
        let journal_items = journals(query(concat!(
            "SELECT count(*) AS n FROM (",
            finished_journals!(),
            ") x"
        )));
        let old = events(query(concat!(
            "SELECT count(*) AS n FROM (",
            old_events!(),
            ") x"
        )));
        // One snapshot, nothing written.
        return host
            .tx(
                TxKind::Read,
                script!(|c| let mut total = counts(c, whole, rules).await?;
                        total.journal_items +=
                            count(c.fetch_optional(journal_items).await?.as_ref(), "n")?;
                        total.events += count(c.fetch_optional(old).await?.as_ref(), "n")?;
                        let nil = cairn_core::RunId::from_uuid(uuid::Uuid::nil());
                        for row in c.fetch_all(ids).await? {
                            if let Some(id) = row.opt_uuid("id", nil, "a run id")? {
                                total.run_ids.push(cairn_core::RunId::from_uuid(id));
                            }
                        }
                        Ok(total)),
            )
            .await;
    }

    let mut total = Compacted::default();
    // Whole runs first (their rows are counted with them, not again below),
    // a batch of ids at a time: the ids are read once, so every delete of
    // the batch names the same runs.
    loop {
        let batch = policy(
            query(concat!(
                whole_ids!(),
                " ORDER BY created_at, id LIMIT :batch"
            )),
            p,
        )
        .bind("batch", RUN_BATCH);
        let keep = p.keep_per_thread;
        let removed = host
            .tx(
                TxKind::Write,
                script!(|c| remove_runs_in(c, batch, keep).await),
            )
            .await?;
        match removed {
            Some(removed) => total += removed,
            None => break,
        }
    }
    // Then the journals of finished runs, and old events.
    if p.journals {
        total.journal_items += delete_in_batches(host, &|| {
            journals(query(concat!(
                "DELETE FROM journal WHERE (run_id, step_idx, seq) IN (",
                finished_journals!(),
                " LIMIT :batch)"
            )))
            .bind("batch", ROW_BATCH)
        })
        .await?;
    }
    if p.events_older_than.is_some() {
        total.events += delete_in_batches(host, &|| {
            events(query(concat!(
                "DELETE FROM events WHERE (run_id, seq) IN (",
                old_events!(),
                " LIMIT :batch)"
            )))
            .bind("batch", ROW_BATCH)
        })
        .await?;
    }
    Ok(total)
}

/// Removes the runs `batch` selects with all their rows, counted; `None`
/// when it selects none.
async fn remove_runs_in(
    c: &mut Conn<'_>,
    batch: Query,
    keep: Option<u32>,
) -> Result<Option<Compacted>> {
    let rows = c.fetch_all(batch).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let nil = cairn_core::RunId::from_uuid(uuid::Uuid::nil());
    let ids = rows
        .iter()
        .map(|r| r.opt_uuid("id", nil, "a run id"))
        .collect::<Result<Vec<_>>>()?;
    let ids: Vec<uuid::Uuid> = ids.into_iter().flatten().collect();
    let texts = Value::from(ids.iter().map(|u| u.to_string()).collect::<Vec<_>>());
    let of_batch = |sql: &'static str| query(sql).bind("ids", texts.clone());
    let rules = of_batch(rules_of!("{ids:ids}")).bind("keep", keep);
    let mut removed = counts(c, of_batch(counts_of!("{ids:ids}")), rules).await?;
    removed.run_ids = ids.into_iter().map(cairn_core::RunId::from_uuid).collect();
    for sql in [
        "DELETE FROM journal WHERE run_id IN ({ids:ids})",
        "DELETE FROM waits WHERE run_id IN ({ids:ids})",
        "DELETE FROM signals WHERE run_id IN ({ids:ids})",
        "DELETE FROM signal_waits WHERE run_id IN ({ids:ids})",
        "DELETE FROM trace_exports WHERE run_id IN ({ids:ids})",
        "DELETE FROM budget_holds WHERE run_id IN ({ids:ids})",
        "DELETE FROM events WHERE run_id IN ({ids:ids})",
        "DELETE FROM steps WHERE run_id IN ({ids:ids})",
        "DELETE FROM runs WHERE id IN ({ids:ids})",
    ] {
        c.execute(of_batch(sql)).await?;
    }
    Ok(Some(removed))
}

/// Runs a delete of at most a batch of rows, one transaction each, until
/// it deletes nothing; the rows deleted.
async fn delete_in_batches<H: ScriptHost + ?Sized>(
    host: &H,
    q: &(dyn Fn() -> Query + Sync),
) -> Result<u64> {
    let mut deleted = 0;
    loop {
        let delete = q();
        let n = host
            .tx(TxKind::Write, script!(|c| c.execute(delete).await))
            .await?;
        deleted += n;
        if n == 0 {
            return Ok(deleted);
        }
    }
}

/// `MaintenanceStore::claim_task`: periodic `task` (a retention pass) for one process
/// per interval (`maintenance` table).
pub(super) async fn claim_task_in(
    c: &mut Conn<'_>,
    task: &str,
    every: Duration,
    owner: &str,
) -> Result<bool> {
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
    Ok(taken == 1)
}

/// `MaintenanceStore::vacuum`, outside any transaction (neither database vacuums
/// inside one).
pub(super) async fn vacuum_in(c: &mut Conn<'_>) -> Result<()> {
    let statements: &[&'static str] = match c.dialect() {
        Dialect::Sqlite => &["VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"],
        Dialect::Postgres => &["VACUUM runs, steps, events, journal, waits"],
    };
    for sql in statements {
        c.fetch_all(query(sql)).await?;
    }
    Ok(())
}

/// SQLite's `PRAGMA quick_check` (`MaintenanceStore::check`, and `SqliteStore::open`
/// after an unclean close): the problems it reports, none for "ok".
pub(crate) async fn quick_check(c: &mut Conn<'_>) -> Result<Vec<String>> {
    let rows = match c.fetch_all(query("PRAGMA quick_check")).await {
        Ok(rows) => rows,
        // A file too damaged for the check to finish (SQLITE_CORRUPT,
        // SQLITE_NOTADB, by primary code): that is the check's finding.
        Err(Error::Database(sqlx::Error::Database(db)))
            if db
                .code()
                .and_then(|code| code.parse::<i32>().ok())
                .is_some_and(|code| matches!(code & 0xff, 11 | 26)) =>
        {
            return Ok(vec![db.message().to_owned()]);
        }
        Err(e) => return Err(e),
    };
    let lines = rows
        .iter()
        .map(|r| r.text("quick_check"))
        .collect::<Result<Vec<_>>>()?;
    Ok(lines.into_iter().filter(|l| l != "ok").collect())
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> MaintenanceStore for H {
    async fn compact(&self, policy: &crate::CompactPolicy) -> Result<crate::Compacted> {
        let compaction = compact(self, policy);
        bounded("compact", self.target(), None, compaction).await
    }

    async fn vacuum(&self) -> Result<()> {
        let vacuum = self.tx(TxKind::Single, script!(|c| vacuum_in(c).await));
        placed(self.target(), None, vacuum).await
    }

    async fn check(&self) -> Result<Vec<String>> {
        // Unplaced, as it always was: `cairn doctor` prints the database's
        // own message.
        self.tx(
            TxKind::Single,
            script!(|c| match c.dialect() {
                Dialect::Postgres => Ok(vec![]),
                Dialect::Sqlite => quick_check(c).await,
            }),
        )
        .await
    }

    async fn replication(&self) -> Result<Option<crate::Replication>> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| super::replication::replication_in(c).await),
        );
        placed(self.target(), None, read).await
    }

    async fn claim_task(&self, task: &str, every: Duration, owner: &str) -> Result<bool> {
        let (task, owner) = (task.to_owned(), owner.to_owned());
        let write = self.tx(
            TxKind::Write,
            script!(|c| claim_task_in(c, &task, every, &owner).await),
        );
        bounded("claim_task", self.target(), None, write).await
    }
}
