//! A step's journal: the script's append (a transaction of three
//! statements; PostgreSQL has a one-statement fast path of its own,
//! `postgres/mod.rs`) and its reads.

use async_trait::async_trait;
use cairn_core::{Corruption, JournalEntry, RunId, StepIdx};

use crate::contract::JournalStore;
use crate::raw::decode_journal;
use crate::sql::{query, Conn};
use crate::{JournalAppend, Result};

use super::boundary::{placed, retried};
use super::rows::{append_events, at_step, check_held};
use super::storable::{events_ok, json_ok};
use super::{ScriptHost, TxKind};

/// `JournalStore::append_journal`'s transaction: fenced by the run's lease, the
/// item at the step's next `seq`, and its event.
pub(super) async fn append_in(c: &mut Conn<'_>, a: &JournalAppend) -> Result<JournalEntry> {
    check_held(c, a.run_id, &a.fence).await?;
    let row = c
        .fetch_found(
            query(
                "INSERT INTO journal (run_id, step_idx, seq, attempt, generation, kind, payload, \
                 created_at, lease_epoch, lease_owner) SELECT :run, :idx, \
                 COALESCE(MAX(seq), 0) + 1, :attempt, :generation, :kind, :payload, {now}, \
                 :epoch, :owner FROM journal \
                 WHERE run_id = :run AND step_idx = :idx \
                 RETURNING seq, attempt, generation, kind, payload, created_at",
            )
            .bind("run", a.run_id)
            .bind("idx", a.idx.get())
            .bind("attempt", a.attempt.get())
            .bind("generation", a.generation)
            .bind("kind", a.kind.as_str())
            .bind("payload", &a.payload)
            .bind("epoch", a.fence.epoch.0)
            .bind("owner", &*a.fence.owner),
            || Corruption::new(a.run_id, "a journal item was not written").into(),
        )
        .await?;
    let entry = decode_journal(a.run_id, &row)?;
    if let Some(event) = &a.event {
        append_events(c, a.run_id, std::slice::from_ref(event)).await?;
    }
    Ok(entry)
}

/// `JournalStore::journal`: one generation of step `idx`, or all, by `seq`.
pub(super) async fn journal_in(
    c: &mut Conn<'_>,
    id: RunId,
    idx: StepIdx,
    generation: Option<u32>,
) -> Result<Vec<JournalEntry>> {
    let rows = c
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

/// The newest item of step `idx`, if any (whether an append landed).
pub(super) async fn newest_in(
    c: &mut Conn<'_>,
    id: RunId,
    idx: StepIdx,
) -> Result<Option<JournalEntry>> {
    const NEWEST: &str = "SELECT seq, attempt, generation, kind, payload, created_at FROM journal \
                          WHERE run_id = :run AND step_idx = :idx ORDER BY seq DESC LIMIT 1";
    at_step(c, NEWEST, id, idx, |r| decode_journal(id, r)).await
}

/// The runs a seed query names (default: run `:run`) and their
/// descendants (children, theirs, …), as a table `tree` to prefix a query
/// with: a budget limits them together.
macro_rules! tree_cte {
    ($seed:literal) => {
        concat!(
            "WITH RECURSIVE tree(id) AS (",
            $seed,
            " UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id \
             WHERE r.child_key IS NOT NULL) "
        )
    };
    () => {
        "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = :run \
         UNION ALL SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id \
         WHERE r.child_key IS NOT NULL) "
    };
}
pub(super) use tree_cte;

/// What the model calls of `tree` recorded sent but never resolved (no
/// `model_called` of them: their process died mid-call) add, at their
/// estimate: each `model_call_sent`'s `$sent` minus each resolving
/// `model_called`'s `$resolved`, both leaving out the calls of a holder
/// that still holds its lease (an ancestor's tree holds cover those).
macro_rules! lost_of_tree {
    ($sent:literal, $resolved:literal, $as:literal) => {
        concat!(
            "(SELECT CAST(COALESCE(SUM(CASE WHEN s.kind = 'model_call_sent' \
               THEN CAST(s.data->>'",
            $sent,
            "' AS BIGINT) ELSE -CAST(s.data->>'",
            $resolved,
            "' AS BIGINT) END), 0) AS BIGINT) \
             FROM events s JOIN runs r ON r.id = s.run_id \
             WHERE s.run_id IN (SELECT id FROM tree) \
             AND (s.kind = 'model_call_sent' OR (s.kind = 'model_called' \
               AND s.data->>'sent_epoch' IS NOT NULL)) \
             AND NOT (r.status = 'running' AND r.lease_expires_at > {now} AND r.lease_epoch = \
               CAST(COALESCE(s.data->>'epoch', s.data->>'sent_epoch') AS BIGINT))) AS ",
            $as,
            ", "
        )
    };
}

/// What the runs of `tree` spent (after a [`tree_cte`]), and the age of
/// run `:run`.
macro_rules! spent_of_tree {
    () => {
        concat!(
            "SELECT CAST(COALESCE(SUM(CAST(payload->>'input_tokens' AS BIGINT)), 0) AS BIGINT) \
           AS input, \
           CAST(COALESCE(SUM(CAST(payload->>'output_tokens' AS BIGINT)), 0) AS BIGINT) \
           AS output, \
           COUNT(*) AS calls, \
           CAST(COALESCE(SUM(CAST(payload->>'cost_nanos' AS BIGINT)), 0) AS BIGINT) \
           AS cost, \
           (SELECT COUNT(*) FROM events WHERE run_id IN (SELECT id FROM tree) \
             AND kind = 'tool_executed') AS tools, \
           (SELECT CAST(COALESCE(SUM(CAST(data->>'cut_tokens' AS BIGINT)), 0) AS BIGINT) \
             FROM events WHERE run_id IN (SELECT id FROM tree) AND kind = 'model_called' \
             AND data->>'cut_tokens' IS NOT NULL) AS cut, \
           (SELECT CAST(COALESCE(SUM(CAST(data->>'cut_output_tokens' AS BIGINT)), 0) \
             AS BIGINT) FROM events WHERE run_id IN (SELECT id FROM tree) \
             AND kind = 'model_called' AND data->>'cut_output_tokens' IS NOT NULL) \
             AS cut_output, \
           (SELECT CAST(COALESCE(SUM(CAST(data->>'cut_cost_nanos' AS BIGINT)), 0) \
             AS BIGINT) FROM events WHERE run_id IN (SELECT id FROM tree) \
             AND kind = 'model_called' AND data->>'cut_cost_nanos' IS NOT NULL) AS cut_cost, \
           (SELECT CAST(COALESCE(SUM(CAST(data->>'input_tokens' AS BIGINT)), 0) AS BIGINT) \
             FROM events WHERE run_id IN (SELECT id FROM tree) \
             AND kind = 'usage_reported') AS reported_input, \
           (SELECT CAST(COALESCE(SUM(CAST(data->>'output_tokens' AS BIGINT)), 0) AS BIGINT) \
             FROM events WHERE run_id IN (SELECT id FROM tree) \
             AND kind = 'usage_reported') AS reported_output, \
           (SELECT {age_secs} FROM runs WHERE id = :run) AS age, ",
            lost_of_tree!("estimate_input", "sent_input", "lost_input"),
            lost_of_tree!("estimate_output", "sent_output", "lost_output"),
            lost_of_tree!("estimate_cost_nanos", "sent_cost_nanos", "lost_cost"),
            "(SELECT COUNT(*) FROM events s JOIN runs r ON r.id = s.run_id \
             WHERE s.run_id IN (SELECT id FROM tree) AND s.kind = 'model_call_sent' \
             AND NOT (r.status = 'running' AND r.lease_expires_at > {now} \
               AND r.lease_epoch = CAST(s.data->>'epoch' AS BIGINT))) - \
           (SELECT COUNT(*) FROM events s JOIN runs r ON r.id = s.run_id \
             WHERE s.run_id IN (SELECT id FROM tree) AND s.kind = 'model_called' \
             AND s.data->>'sent_epoch' IS NOT NULL \
             AND NOT (r.status = 'running' AND r.lease_expires_at > {now} \
               AND r.lease_epoch = CAST(s.data->>'sent_epoch' AS BIGINT))) AS lost_calls \
         FROM journal WHERE run_id IN (SELECT id FROM tree) AND kind = 'turn_end'"
        )
    };
}

/// `BudgetStore::spent`: the tokens, model calls and cost of every finished
/// response of the run and its descendants (their `turn_end` items, any
/// step, attempt or generation), what responses cut mid-stream cost, the
/// tokens their `command` steps reported, their tool executions, and the
/// run's own age.
pub(super) async fn spent_in(c: &mut Conn<'_>, id: RunId) -> Result<cairn_core::Spent> {
    const SPENT: &str = concat!(tree_cte!(), spent_of_tree!());
    spent_of(c, query(SPENT).bind("run", id)).await
}

/// What thread `thread`'s runs and their descendants spent, counted as
/// [`spent_in`] counts (no age: a thread has none).
pub(super) async fn thread_spent_in(c: &mut Conn<'_>, thread: &str) -> Result<cairn_core::Spent> {
    const SPENT: &str = concat!(
        tree_cte!("SELECT id FROM runs WHERE thread_id = :thread"),
        spent_of_tree!()
    );
    let q = query(SPENT)
        .bind("thread", thread)
        .bind("run", crate::raw::nil_run());
    spent_of(c, q).await
}

async fn spent_of(c: &mut Conn<'_>, q: crate::sql::Query) -> Result<cairn_core::Spent> {
    let row = c.fetch_optional(q).await?;
    let count = |col: &str| -> Result<u64> {
        Ok(match &row {
            Some(r) => u64::try_from(r.opt_int(col)?.unwrap_or(0)).unwrap_or(0),
            None => 0,
        })
    };
    // A cut response's tokens count whole; its split, where its event has
    // one (before, it counts as input). A call lost with its process
    // counts at its estimate (negative sums cannot happen; `count` reads
    // them as 0).
    let cut = count("cut")?;
    let output =
        count("output")? + count("cut_output")? + count("reported_output")? + count("lost_output")?;
    let input = count("input")?
        + cut.saturating_sub(count("cut_output")?)
        + count("reported_input")?
        + count("lost_input")?;
    Ok(cairn_core::Spent {
        tokens: input + output,
        input_tokens: input,
        output_tokens: output,
        model_calls: count("calls")? + count("lost_calls")?,
        tool_calls: count("tools")?,
        wall_time: count("age")?,
        cost_usd: cairn_core::Usd(count("cost")? + count("cut_cost")? + count("lost_cost")?),
    })
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> JournalStore for H {
    fn live(&self) -> &crate::LiveHub {
        ScriptHost::live(self)
    }

    async fn journal(
        &self,
        id: RunId,
        idx: StepIdx,
        generation: Option<u32>,
    ) -> Result<Vec<JournalEntry>> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| journal_in(c, id, idx, generation).await),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn append_journal(&self, item: &JournalAppend) -> Result<JournalEntry> {
        json_ok("a journal item", Some(&item.payload))?;
        events_ok(item.event.as_slice())?;
        retried(
            "append_journal",
            self,
            Some(item.run_id),
            || ScriptHost::append_journal(self, item),
            || journal_landed(self, item),
        )
        .await
    }
}

/// Whether a journal item landed: the step's newest item is this one.
/// (Two equal items in a row do not occur: tool calls and results carry
/// their call ids, model calls their whole request.)
pub(super) async fn journal_landed<H: ScriptHost + ?Sized>(
    host: &H,
    a: &JournalAppend,
) -> Result<Option<JournalEntry>> {
    let (id, idx) = (a.run_id, a.idx);
    let newest = host
        .tx(TxKind::Single, script!(|c| newest_in(c, id, idx).await))
        .await?;
    let Some(last) = newest else { return Ok(None) };
    let same = last.attempt == a.attempt
        && last.generation == a.generation
        && last.kind == a.kind
        && last.payload == a.payload;
    Ok(same.then_some(last))
}
