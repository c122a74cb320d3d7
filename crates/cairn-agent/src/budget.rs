//! An `llm` step's budget checks and what its calls cost: before a call
//! (refused when the run's budget is spent or the call's input alone would
//! pass it), after one (`budget_warning` at 80 %), before a tool, and the
//! price of a finished or cut response from the process's price table.

use serde_json::json;

use cairn_core::Stop;
use cairn_core::{
    Budget, BudgetAsk, CallTokens, Deferral, ErrorInfo, ErrorKind, EventKind, JournalHandle,
    NewEvent, Price, Spent, StepContext, TreeAnswer, Usd,
};
use cairn_llm::{Request, TokenUsage};

use crate::failure::journal_failure;

/// Before a call: refused (`budget_exceeded`, which interrupts the run) if
/// the run's budget is spent, or this call's input alone (estimated) would
/// pass it; so a run passes its token budget by at most one call's output
/// (its `max_tokens`). A child run's call then asks its ancestors'
/// budgets too ([`tree_admits`]).
pub(crate) async fn within_budget(
    journal: &JournalHandle,
    cx: &StepContext,
    provider: &str,
    request: &Request,
) -> Result<Admitted, Stop> {
    let mut held = false;
    let estimate = cairn_llm::estimate_request_tokens(request);
    let price = price(cx, provider, &request.model);
    let input_cost = price.map_or(Usd(0), |p| p.cost(tokens(provider, estimate, 0, 0, 0)));
    let budget = budget_now(journal, cx).await?;
    let before = match budget {
        None => None,
        Some(budget) => {
            if let (Some(limit), None) = (budget.cost_usd, price) {
                let why = format!(
                    "the run's budget of {limit} cannot be kept: this process has no price for \
                     {provider} model `{}` (give it one in the price table, CAIRN_PRICES)",
                    request.model
                );
                return Err(ErrorInfo::new(ErrorKind::BudgetExceeded, why, false).into());
            }
            let spent = journal.spent().await.map_err(journal_failure)?;
            if let Some(why) = budget.refuses(spent, estimate, input_cost) {
                return Err(ErrorInfo::new(ErrorKind::BudgetExceeded, why, false).into());
            }
            Some(spent)
        }
    };
    if let Some((thread, budget)) = &cx.thread_budget {
        let (priced, est) = (price.is_some(), (estimate, input_cost));
        thread_admits(journal, thread, budget, priced, est).await?;
    }
    if cx.rolls_up {
        let max = u64::from(request.max_tokens);
        let ask = BudgetAsk {
            input_tokens: estimate,
            tokens: estimate + max,
            input_cost,
            cost: price.map_or(Usd(0), |p| p.cost(tokens(provider, estimate, max, 0, 0))),
            priced: price.is_some(),
        };
        held = tree_admits(journal, &ask).await?;
    }
    Ok(Admitted {
        before,
        budget,
        held,
    })
}

/// The run's budget in force now: an operator's raise since the step
/// began (`runs continue --budget` on a running run) is read here, before
/// each model call and tool. Nothing is read for a run that began with no
/// budget.
async fn budget_now(
    journal: &JournalHandle,
    cx: &StepContext,
) -> Result<Option<Budget>, ErrorInfo> {
    let Some(began) = cx.budget else {
        return Ok(None);
    };
    let now = journal.budget().await.map_err(journal_failure)?;
    Ok(Some(now.unwrap_or(began)))
}

/// What [`within_budget`] found: the run's spending before the call (for
/// a run with a budget of its own), and whether the call holds part of an
/// ancestor's budget (to release after it, [`release_hold`]).
pub(crate) struct Admitted {
    pub(crate) before: Option<Spent>,
    /// The run's budget the call was admitted under.
    pub(crate) budget: Option<Budget>,
    pub(crate) held: bool,
}

/// A call of a run in a thread with a budget: refused (`budget_exceeded`)
/// if what the thread's runs spent leaves no room for its input. A
/// thread's runs run one at a time, so nothing is held.
async fn thread_admits(
    journal: &JournalHandle,
    thread: &str,
    budget: &Budget,
    priced: bool,
    (estimate, input_cost): (u64, Usd),
) -> Result<(), ErrorInfo> {
    let refuse = |why: String| {
        let why = why.replacen("the run's budget", "its budget", 1);
        let why = format!(
            "thread `{thread}`: {why} (raise it with `cairn threads budget {thread} --budget \
             LIMIT=+N`, then `cairn runs continue RUN_ID`)"
        );
        Err(ErrorInfo::new(ErrorKind::BudgetExceeded, why, false))
    };
    if let (Some(limit), false) = (budget.cost_usd, priced) {
        return refuse(format!(
            "its budget of {limit} cannot be kept: the call is not priced"
        ));
    }
    let spent = journal
        .thread_spent(thread)
        .await
        .map_err(journal_failure)?;
    let limits = Budget {
        wall_time: None,
        ..*budget
    };
    match limits.refuses(spent, estimate, input_cost) {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// A child run's call against its ancestors' budgets: made (holding its
/// estimate until [`release_hold`], or nothing when no ancestor has a
/// budget: then `false`), deferred until a sibling's call ends (no attempt
/// spent), or refused (`budget_exceeded`).
async fn tree_admits(journal: &JournalHandle, ask: &BudgetAsk) -> Result<bool, Stop> {
    match journal.reserve(ask).await.map_err(journal_failure)? {
        TreeAnswer::Free => Ok(false),
        TreeAnswer::Go => Ok(true),
        TreeAnswer::Refused { why } => {
            Err(ErrorInfo::new(ErrorKind::BudgetExceeded, why, false).into())
        }
        TreeAnswer::Wait { why, key } => Err(Stop::deferred(
            format!("{why}; no call made, looking again when a call of the tree ends"),
            Deferral {
                key,
                after: TREE_WAIT,
                observed: false,
            },
        )),
    }
}

/// The longest a call deferred for room in its tree's budget waits before
/// it asks again (a hold's release wakes it sooner).
const TREE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// After a child run's call: drops what it held (best effort: a hold not
/// dropped here ends with the run's lease, or at its next call).
pub(crate) async fn release_hold(journal: &JournalHandle, admitted: &Admitted) {
    if admitted.held {
        let _ = journal.unreserve().await;
    }
}

/// After spending moved from `before` to `after`: a `budget_warning` for
/// each limit that crossed its soft threshold (best effort).
pub(crate) async fn warn_crossed(
    journal: &JournalHandle,
    cx: &StepContext,
    budget: Option<Budget>,
    (before, after): (Spent, Spent),
) {
    let Some(budget) = budget else {
        return;
    };
    for (limit, value, spent) in budget.crossed(before, after) {
        let event = NewEvent::new(
            EventKind::BudgetWarning,
            json!({"idx": cx.step.idx, "limit": limit, "budget": value, "spent": spent}),
        );
        let _ = journal.event(event).await;
    }
}

/// Before a tool executes: why not, if the run's tool calls are spent (the
/// caller journals the refusal as the call's result, so the model reads it
/// on a continue, and fails `budget_exceeded`, which interrupts the run).
pub(crate) async fn tool_budget_refuses(
    journal: &JournalHandle,
    cx: &StepContext,
) -> Result<Option<String>, ErrorInfo> {
    if let Some((thread, budget)) = cx
        .thread_budget
        .as_ref()
        .filter(|(_, b)| b.tool_calls.is_some())
    {
        let spent = journal
            .thread_spent(thread)
            .await
            .map_err(journal_failure)?;
        if let Some(why) = budget.refuses_tool(spent) {
            let why = why.replacen("the run's budget", "its budget", 1);
            return Ok(Some(format!("thread `{thread}`: {why}")));
        }
    }
    let Some(budget) = budget_now(journal, cx)
        .await?
        .filter(|b| b.tool_calls.is_some())
    else {
        return Ok(None);
    };
    let spent = journal.spent().await.map_err(journal_failure)?;
    if let Some(why) = budget.refuses_tool(spent) {
        return Ok(Some(why));
    }
    let after = Spent {
        tool_calls: spent.tool_calls + 1,
        ..spent
    };
    warn_crossed(journal, cx, Some(budget), (spent, after)).await;
    Ok(None)
}

/// Before a call of a run whose spending is limited (its budget, a
/// thread's, an ancestor's): the call recorded as sent at its estimate
/// (input estimated, plus `max_tokens`), so a process that dies mid-call
/// leaves it counted. `None` for a run nothing limits (nothing written).
pub(crate) async fn record_sent(
    journal: &JournalHandle,
    cx: &StepContext,
    provider: &str,
    request: &Request,
) -> Result<Option<cairn_core::SentCall>, ErrorInfo> {
    if cx.budget.is_none() && cx.thread_budget.is_none() && !cx.rolls_up {
        return Ok(None);
    }
    let (input, output) = (
        cairn_llm::estimate_request_tokens(request),
        u64::from(request.max_tokens),
    );
    let cost = cut_cost(cx, provider, &request.model, input, output).map_or(0, |c| c.0);
    let estimate = cairn_core::CallEstimate {
        idx: cx.step.idx.get(),
        turn: request.meta.turn,
        input,
        output,
        cost_nanos: cost,
    };
    journal.sent(&estimate).await.map_err(journal_failure)
}

/// The rates of `provider`'s `model` in the process's price table.
fn price<'a>(cx: &'a StepContext, provider: &str, model: &str) -> Option<&'a Price> {
    cx.prices.as_deref()?.of(provider, model)
}

/// A call's tokens as `provider` counts them: OpenAI's prompt tokens
/// include the cached ones, Anthropic's input tokens do not.
fn tokens(provider: &str, input: u64, output: u64, read: u64, write: u64) -> CallTokens {
    CallTokens {
        input,
        output,
        cache_read: read,
        cache_write: write,
        input_includes_cache: provider != "anthropic",
    }
}

/// What a finished call cost, with the price table's version; `None`
/// when the process prices nothing or not this model.
pub(crate) fn cost_of(
    cx: &StepContext,
    provider: &str,
    model: &str,
    usage: TokenUsage,
) -> Option<(Usd, String)> {
    let price = price(cx, provider, model)?;
    let t = tokens(
        provider,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    );
    Some((price.cost(t), cx.prices.as_deref()?.version.clone()))
}

/// What a response cut mid-stream cost, from its estimated tokens.
pub(crate) fn cut_cost(
    cx: &StepContext,
    provider: &str,
    model: &str,
    input: u64,
    output: u64,
) -> Option<Usd> {
    Some(price(cx, provider, model)?.cost(tokens(provider, input, output, 0, 0)))
}
