//! What an operator does to a run: an action (`OperatorStore::act`: retry,
//! continue, cancel), more context (`OperatorStore::add_context`), a fork
//! (`OperatorStore::fork`), a raised budget (`BudgetStore::raise_budget`), a move to
//! another crew version (`CrewStore::upgrade_crew`). Whether each is allowed
//! and what it records is `plan.rs`'s (`plan_action`, `check_fork`,
//! `fork_event`) or, for a move, `cairn_core::upgrade`'s.

use async_trait::async_trait;
use cairn_core::event::payload::BudgetRaised;
use cairn_core::{Actor, NewEvent, RunId, RunRecord, RunStatus};

use crate::contract::OperatorStore;
use crate::plan::{check_fork, fork_event};
use crate::sql::{query, Conn};
use crate::{Action, AfterRaise, Error, ForkRequest, Result};

use super::boundary::{bounded, retried};
use super::ends::{act_in, STOPPED};
use super::rows::{append_events, fetch_run};
use super::storable::{actor_ok, json_ok, text_ok};
use super::{ScriptHost, TxKind};

/// `OperatorStore::add_context`'s transaction.
pub(super) async fn add_context_in(
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
/// of a context, for a claim and for `OperatorStore::add_context`).
pub(super) async fn write_context(
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

/// `OperatorStore::fork`'s transaction: the new run, copying the source's crew,
/// input and steps `0..from_step`.
pub(super) async fn fork_in(
    c: &mut Conn<'_>,
    id: RunId,
    req: &ForkRequest,
    actor: &Actor,
) -> Result<RunRecord> {
    let source = fetch_run(c, id, true).await?;
    check_fork(&source, req)?;
    let child = RunId::new();
    let complete = req.from_step.get() == source.step_count;
    c.execute(
        query(
            "INSERT INTO runs (id, crew_name, crew_version, crew_fingerprint, crew_def, input, \
             thread_id, status, cursor, step_count, lease_epoch, event_seq, parent_run_id, \
             parent_step_idx, created_at, updated_at, finished_at, priority, claim_at, budget, \
             upgrade, tenant) \
             SELECT :child, crew_name, crew_version, crew_fingerprint, crew_def, :input, \
             COALESCE(:thread, thread_id), :status, :from, step_count, 0, 0, id, :from, {now}, {now}, \
             CASE WHEN :complete THEN {now} END, priority, {ahead:head}, budget, upgrade, tenant \
             FROM runs \
             WHERE id = :source",
        )
        .bind("head", source.priority.head_start_secs() as f64)
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
             output_tokens, cost_nanos, started_at, finished_at, error, takeovers) \
             SELECT :child, idx, role, status, attempt, output, input_tokens, output_tokens, \
             cost_nanos, started_at, finished_at, error, takeovers FROM steps \
             WHERE run_id = :source AND idx < :from",
        )
        .bind("child", child)
        .bind("source", id)
        .bind("from", req.from_step.get()),
    )
    .await?;
    append_events(c, child, &[fork_event(&source, req, actor)]).await?;
    if let Some(to) = &req.crew {
        // Judged on the fork as it stands: its copied steps are those it
        // has started. Refused, the whole fork rolls back.
        let upgrade = crate::CrewUpgrade {
            to: to.clone(),
            force: false,
            held: None,
            actor: actor.clone(),
        };
        super::crews::upgrade_crew_in(c, child, &upgrade).await?;
    }
    if let Some(trace) = source.trace {
        // A fork is a new run: a trace of its own, sampled as its source.
        super::traces::trace_fork_in(c, child, trace.sampled).await?;
    }
    c.notify_runnable(child).await?;
    fetch_run(c, child, false).await
}

/// `BudgetStore::raise_budget`: the run's own limits (its crew's where it has
/// none) raised by `by`, a `budget_raised` event with who, why, the raise
/// and the budget that stands, then what `then` asks, in one transaction.
pub(super) async fn raise_budget<H: super::ScriptHost + ?Sized>(
    host: &H,
    id: RunId,
    by: &cairn_core::Budget,
    then: AfterRaise,
    actor: &Actor,
) -> Result<RunRecord> {
    super::boundary::bounded("raise_budget", host.target(), Some(id), async {
        super::storable::actor_ok(actor)?;
        let (by, actor) = (*by, actor.clone());
        host.tx(
            super::TxKind::Write,
            script!(|c| raise_budget_in(c, id, &by, then, &actor).await),
        )
        .await
    })
    .await
}

async fn raise_budget_in(
    c: &mut Conn<'_>,
    id: RunId,
    by: &cairn_core::Budget,
    then: AfterRaise,
    actor: &Actor,
) -> Result<RunRecord> {
    let run = fetch_run(c, id, true).await?;
    if matches!(
        run.status,
        RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
    ) {
        return Err(Error::WrongState {
            run: id,
            status: run.status,
            action: "raise its budget",
        });
    }
    let crew = run.crew_definition.budget.unwrap_or_default();
    let now = run.budget.unwrap_or_default().over(crew).raised(*by);
    c.execute(
        query("UPDATE runs SET budget = :budget, updated_at = {now} WHERE id = :id")
            .bind("id", id)
            .bind("budget", serde_json::json!(now)),
    )
    .await?;
    let event = NewEvent::typed(cairn_core::EventData::BudgetRaised(BudgetRaised {
        actor: actor.clone(),
        raise: *by,
        budget: now,
    }));
    append_events(c, id, &[event]).await?;
    match (then, run.status) {
        (AfterRaise::Continue, RunStatus::Interrupted) => {
            act_in(c, id, Action::Continue, actor).await
        }
        // A waiting parent's stopped descendants carry on; a run waiting
        // for a person only takes the raise (its answer carries it on).
        (AfterRaise::Continue, RunStatus::Waiting) => {
            let stopped = c.fetch_all(query(STOPPED).bind("run", id)).await?;
            match stopped.is_empty() {
                true => fetch_run(c, id, false).await,
                false => act_in(c, id, Action::Continue, actor).await,
            }
        }
        (AfterRaise::Continue, RunStatus::Queued | RunStatus::Running) | (AfterRaise::Stay, _) => {
            fetch_run(c, id, false).await
        }
        (AfterRaise::Continue, status) => Err(Error::WrongState {
            run: id,
            status,
            action: "raise its budget and continue it",
        }),
    }
}

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> OperatorStore for H {
    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord> {
        actor_ok(actor)?;
        retried(
            "act",
            self,
            Some(id),
            || {
                let actor = actor.clone();
                self.tx(
                    TxKind::Write,
                    script!(|c| super::ends::act_in(c, id, action, &actor).await),
                )
            },
            || super::boundary::action_landed(self, id, action, actor),
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
            let (context, actor) = (context.clone(), actor.clone());
            self.tx(
                TxKind::Write,
                script!(|c| add_context_in(c, id, &context, &actor).await),
            )
            .await
        })
        .await
    }

    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord> {
        bounded("fork", self.target(), Some(id), async {
            actor_ok(actor)?;
            json_ok("the fork's input", req.input.as_ref())?;
            text_ok("the thread id", req.thread_id.as_deref())?;
            let (req, actor) = (req.clone(), actor.clone());
            self.tx(
                TxKind::Write,
                script!(|c| fork_in(c, id, &req, &actor).await),
            )
            .await
        })
        .await
    }
}
