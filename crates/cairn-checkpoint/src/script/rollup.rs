//! Budgets over a run's tree: a run's budget limits the run and its
//! descendants together (`BudgetStore::spent` counts them all), and a child's
//! model call holds its estimate against every budgeted ancestor while it
//! runs (`budget_holds`), so children in flight at once cannot pass a
//! budget together. A hold counts only while its run holds the lease it
//! was taken under, so a process that dies drops its holds with its
//! leases, as permits do.
//!
//! Serialized per tree: on PostgreSQL every reservation of a tree first
//! takes a transaction-scoped advisory lock on its root's id (no row lock,
//! so none can meet a cancel's or a commit's row locks in another order);
//! SQLite's write transactions already exclude each other.

use async_trait::async_trait;
use cairn_core::event::payload::BudgetWarning;
use cairn_core::{
    Actor, BudgetAsk, EventData, EventKind, LeaseEpoch, NewEvent, RunId, RunRecord, Spent,
    TreeAnswer, Usd,
};

use crate::contract::BudgetStore;
use crate::sql::{query, Conn, Dialect};
use crate::Result;

use super::boundary::placed;
use super::journal::tree_cte;
use super::{ScriptHost, TxKind};

/// `BudgetStore::reserve_budget`: a read when no ancestor has a budget (most
/// trees), else one write transaction.
pub(super) async fn reserve<H: super::ScriptHost + ?Sized>(
    host: &H,
    id: RunId,
    epoch: LeaseEpoch,
    ask: BudgetAsk,
) -> Result<TreeAnswer> {
    let read = host.tx(super::TxKind::Read, script!(|c| budgeted_in(c, id).await));
    if !super::boundary::placed(host.target(), Some(id), read).await? {
        return Ok(TreeAnswer::Free);
    }
    let write = host.tx(
        super::TxKind::Write,
        script!(|c| reserve_in(c, id, epoch, &ask).await),
    );
    super::boundary::bounded("reserve_budget", host.target(), Some(id), write).await
}

/// `BudgetStore::release_budget`.
pub(super) async fn release<H: super::ScriptHost + ?Sized>(host: &H, id: RunId) -> Result<()> {
    let write = host.tx(super::TxKind::Write, script!(|c| release_in(c, id).await));
    super::boundary::bounded("release_budget", host.target(), Some(id), write).await
}

async fn reserve_in(
    c: &mut Conn<'_>,
    id: RunId,
    epoch: LeaseEpoch,
    ask: &BudgetAsk,
) -> Result<TreeAnswer> {
    let chain = ancestors_in(c, id).await?;
    let Some(root) = chain.last() else {
        return Ok(TreeAnswer::Free);
    };
    if c.dialect() == Dialect::Postgres {
        c.fetch_optional(
            query("SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtextextended(:root, 7))) l")
                .bind("root", root.to_string()),
        )
        .await?;
    }
    // The root first: the widest budget names the tree.
    for ancestor in chain.iter().rev() {
        let run = super::rows::fetch_run(c, *ancestor, false).await?;
        let Some(budget) = cairn_core::Budget::in_force(run.budget, run.crew_definition.budget)
        else {
            continue;
        };
        let spent = super::journal::spent_in(c, *ancestor).await?;
        warn_in(c, *ancestor, &budget, spent, id).await?;
        let held = held_in(c, *ancestor, id).await?;
        let ours = |why: String| why.replacen("the run's budget", "its budget", 1);
        let answer = match budget.answer(spent, held, ask) {
            TreeAnswer::Go | TreeAnswer::Free => continue,
            TreeAnswer::Wait { why, .. } => TreeAnswer::Wait {
                why: format!("run {ancestor} and its children: {}", ours(why)),
                key: cairn_core::budget_key(*root),
            },
            TreeAnswer::Refused { why } => TreeAnswer::Refused {
                why: format!(
                    "run {ancestor} and its children: {} (raise it and carry on with \
                     `cairn runs continue {ancestor} --budget LIMIT=+N`)",
                    ours(why)
                ),
            },
        };
        return Ok(answer);
    }
    c.execute(query("DELETE FROM budget_holds WHERE run_id = :run").bind("run", id))
        .await?;
    c.execute(
        query(
            "INSERT INTO budget_holds (run_id, epoch, tokens, cost_nanos, held_at) \
             VALUES (:run, :epoch, :tokens, :cost, {now})",
        )
        .bind("run", id)
        .bind("epoch", epoch.0)
        .bind("tokens", i64::try_from(ask.tokens).unwrap_or(i64::MAX))
        .bind("cost", i64::try_from(ask.cost.0).unwrap_or(i64::MAX)),
    )
    .await?;
    Ok(TreeAnswer::Go)
}

/// A `budget_warning` on `ancestor` for each limit its tree's spending
/// has reached 80 % of and no warning of it names yet (at that limit), so
/// a parent that makes no call of its own while its children spend still
/// warns; `child` is the run whose call found it.
async fn warn_in(
    c: &mut Conn<'_>,
    ancestor: RunId,
    budget: &cairn_core::Budget,
    spent: Spent,
    child: RunId,
) -> Result<()> {
    let crossed = budget.crossed(Spent::default(), spent);
    if crossed.is_empty() {
        return Ok(());
    }
    let rows = c
        .fetch_all(
            query("SELECT data FROM events WHERE run_id = :run AND kind = 'budget_warning'")
                .bind("run", ancestor),
        )
        .await?;
    let mut warned = Vec::with_capacity(rows.len());
    for row in &rows {
        let data = row.opt_json("data", ancestor, "an event's data")?;
        if let Some(Ok(EventData::BudgetWarning(w))) =
            data.map(|d| EventData::decode(EventKind::BudgetWarning, &d))
        {
            warned.push((w.limit, w.budget));
        }
    }
    let events: Vec<NewEvent> = crossed
        .into_iter()
        .filter(|c| !warned.contains(&(c.limit, c.budget)))
        .map(|c| {
            NewEvent::typed(EventData::BudgetWarning(BudgetWarning {
                idx: None,
                child: Some(child),
                limit: c.limit,
                budget: c.budget,
                spent: c.spent,
            }))
        })
        .collect();
    if events.is_empty() {
        return Ok(());
    }
    super::rows::append_events(c, ancestor, &events).await
}

/// Whether an ancestor of run `id` has a budget in force.
async fn budgeted_in(c: &mut Conn<'_>, id: RunId) -> Result<bool> {
    for ancestor in ancestors_in(c, id).await? {
        let run = super::rows::fetch_run(c, ancestor, false).await?;
        if cairn_core::Budget::in_force(run.budget, run.crew_definition.budget).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Run `id`'s ancestors through child links, its parent first.
async fn ancestors_in(c: &mut Conn<'_>, id: RunId) -> Result<Vec<RunId>> {
    let mut chain = vec![];
    let mut at = id;
    // Depth is bounded (`children` steps refuse past it); so is this walk.
    for _ in 0..64 {
        let row = c
            .fetch_optional(
                query(
                    "SELECT parent_run_id FROM runs WHERE id = :run \
                     AND child_key IS NOT NULL AND parent_run_id IS NOT NULL",
                )
                .bind("run", at),
            )
            .await?;
        let parent = match row {
            Some(row) => row.opt_uuid("parent_run_id", at, "a child's parent")?,
            None => None,
        };
        let Some(parent) = parent else {
            break;
        };
        at = RunId::from_uuid(parent);
        chain.push(at);
    }
    Ok(chain)
}

/// What the live holds of `ancestor`'s tree hold, besides `me`'s.
async fn held_in(c: &mut Conn<'_>, ancestor: RunId, me: RunId) -> Result<Spent> {
    const HELD: &str = concat!(
        tree_cte!(),
        "SELECT CAST(COALESCE(SUM(h.tokens), 0) AS BIGINT) AS tokens, \
           CAST(COALESCE(SUM(h.cost_nanos), 0) AS BIGINT) AS cost, COUNT(*) AS calls \
         FROM budget_holds h JOIN runs r ON r.id = h.run_id \
         WHERE h.run_id IN (SELECT id FROM tree) AND h.run_id <> :me \
         AND r.status = 'running' AND r.lease_epoch = h.epoch AND r.lease_expires_at > {now}"
    );
    let row = c
        .fetch_optional(query(HELD).bind("run", ancestor).bind("me", me))
        .await?;
    let count = |col: &str| -> Result<u64> {
        Ok(match &row {
            Some(r) => u64::try_from(r.opt_int(col)?.unwrap_or(0)).unwrap_or(0),
            None => 0,
        })
    };
    Ok(Spent {
        tokens: count("tokens")?,
        model_calls: count("calls")?,
        cost_usd: Usd(count("cost")?),
        ..Spent::default()
    })
}

/// Drops the run's hold, and makes the run of its tree that has waited
/// longest for room claimable now.
async fn release_in(c: &mut Conn<'_>, id: RunId) -> Result<()> {
    let gone = c
        .execute(query("DELETE FROM budget_holds WHERE run_id = :run").bind("run", id))
        .await?;
    if gone == 0 {
        return Ok(());
    }
    let Some(root) = ancestors_in(c, id).await?.last().copied() else {
        return Ok(());
    };
    let woken = c
        .fetch_all(
            query(
                "UPDATE runs SET not_before = {now} WHERE id IN (SELECT id FROM runs \
                 WHERE deferred_key = :key AND status = 'queued' AND not_before > {now} \
                 ORDER BY not_before LIMIT 1) RETURNING id",
            )
            .bind("key", cairn_core::budget_key(root)),
        )
        .await?;
    if !woken.is_empty() {
        c.notify_runnable(crate::raw::nil_run()).await?;
    }
    Ok(())
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> BudgetStore for H {
    async fn spent(&self, id: RunId) -> Result<cairn_core::Spent> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| super::journal::spent_in(c, id).await),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn reserve_budget(
        &self,
        id: RunId,
        epoch: LeaseEpoch,
        ask: &cairn_core::BudgetAsk,
    ) -> Result<cairn_core::TreeAnswer> {
        reserve(self, id, epoch, *ask).await
    }

    async fn release_budget(&self, id: RunId) -> Result<()> {
        release(self, id).await
    }

    async fn raise_budget(
        &self,
        id: RunId,
        by: &cairn_core::Budget,
        then: crate::AfterRaise,
        actor: &Actor,
    ) -> Result<RunRecord> {
        super::operator::raise_budget(self, id, by, then, actor).await
    }
}
