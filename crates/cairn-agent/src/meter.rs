//! An `llm` step's meter around each model call ([`CallGuard`]): before
//! it, the run's budget, its thread's and its ancestors' (refused when
//! spent, or when the call's input alone would pass one), the provider
//! key's pause and limits (deferred while none is free), and the call
//! recorded as sent; after it, what it held released and a
//! `budget_warning` at 80 %. Also the check before a tool, and the price
//! of a finished or cut response from the process's price table. All of
//! it through the step's `cairn_core::Meter`.

use std::borrow::Cow;
use std::time::Duration;

use cairn_core::event::payload::BudgetWarning;
use cairn_core::Stop;
use cairn_core::{
    Admission, Budget, BudgetAsk, CallTokens, Declared, Deferral, ErrorInfo, ErrorKind, EventData,
    Held, JournalHandle, Meter, NewEvent, Permit, SentCall, Spent, StepContext, StepMeter,
    TreeAnswer, Usd,
};
use cairn_llm::{LlmError, Request, TokenUsage};

use crate::failure::journal_failure;

/// The meter of one `llm` step's model calls: [`CallGuard::before`] each
/// call, [`CallGuard::after`] it.
pub(crate) struct CallGuard<'a> {
    cx: &'a StepContext,
    meter: &'a StepMeter,
    port: &'a dyn Meter,
    journal: &'a JournalHandle,
    provider: &'a str,
    /// The provider key of the step's calls, and its declared limits.
    key: Cow<'a, str>,
    declared: Option<Declared>,
}

/// What [`CallGuard::before`] let through: the run's spending before the
/// call (for a run with a budget of its own) and the budget it was
/// admitted under, whether the call holds part of an ancestor's budget,
/// the key's permit, and the call as recorded sent.
pub(crate) struct Admitted {
    before: Option<Spent>,
    budget: Option<Budget>,
    held: bool,
    permit: Option<Permit>,
    /// The call as recorded sent (a run whose spending is limited): each
    /// of its `model_called` events says so, which resolves it.
    pub(crate) sent: Option<SentCall>,
}

impl<'a> CallGuard<'a> {
    pub(crate) fn new(
        cx: &'a StepContext,
        journal: &'a JournalHandle,
        provider: &'a str,
        key: Cow<'a, str>,
        own: Option<&cairn_core::KeyLimits>,
    ) -> Self {
        let meter = &cx.services.meter;
        CallGuard {
            cx,
            meter,
            port: meter.port(),
            journal,
            provider,
            declared: meter.declared(own, &key),
            key,
        }
    }

    /// The provider key of the step's calls.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// Before a call: refused (`budget_exceeded`) or deferred, or let
    /// through holding what it needs; on refusal nothing stays held.
    pub(crate) async fn before(&self, request: &Request) -> Result<Admitted, Stop> {
        let (before, budget, held) = self.within_budget(request).await?;
        let mut admitted = Admitted {
            before,
            budget,
            held,
            permit: None,
            sent: None,
        };
        match self.admit(request).await {
            Ok(permit) => admitted.permit = permit,
            Err(deferred) => {
                self.release(&admitted, 0).await;
                return Err(deferred);
            }
        }
        match self.record_sent(request).await {
            Ok(sent) => admitted.sent = sent,
            Err(e) => {
                self.release(&admitted, 0).await;
                return Err(Stop::from(e));
            }
        }
        Ok(admitted)
    }

    /// After a call that spent `call` (its tokens and cost; `finished`:
    /// the response finished): releases what it held, and warns of each
    /// limit of the run's budget it crossed.
    pub(crate) async fn after(&self, admitted: &Admitted, call: Spent, finished: bool) {
        self.release(admitted, call.tokens).await;
        if let (true, Some(before)) = (finished, admitted.before) {
            let after = Spent {
                tokens: before.tokens + call.tokens,
                input_tokens: before.input_tokens + call.input_tokens,
                output_tokens: before.output_tokens + call.output_tokens,
                model_calls: before.model_calls + call.model_calls,
                cost_usd: before.cost_usd.saturating_add(call.cost_usd),
                ..before
            };
            warn_crossed(self.journal, self.cx, admitted.budget, (before, after)).await;
        }
    }

    /// Best effort: a permit not released here counts until the run's next
    /// call or the end of its lease; a hold until the end of its lease.
    async fn release(&self, admitted: &Admitted, used: u64) {
        if let Some(permit) = &admitted.permit {
            let _ = self.port.release(permit, used).await;
        }
        if admitted.held {
            let _ = self.port.unreserve().await;
        }
    }

    /// The run's budgets: refused if the run's is spent, or this call's
    /// input alone (estimated) would pass it; so a run passes its token
    /// budget by at most one call's output (its `max_tokens`). Then its
    /// thread's, and a child run's ancestors' ([`tree_admits`]).
    async fn within_budget(
        &self,
        request: &Request,
    ) -> Result<(Option<Spent>, Option<Budget>, bool), Stop> {
        let (provider, port) = (self.provider, self.port);
        let estimate = cairn_llm::estimate_request_tokens(request);
        let price = self.meter.price(provider, &request.model);
        let input_cost = price.map_or(Usd(0), |p| p.cost(tokens(provider, estimate, 0, 0, 0)));
        let budget = budget_now(port, self.meter).await?;
        let before = match budget {
            None => None,
            Some(budget) => {
                if let (Some(limit), None) = (budget.cost_usd, price) {
                    let why = format!(
                        "the run's budget of {limit} cannot be kept: this process has no price \
                         for {provider} model `{}` (give it one in the price table, CAIRN_PRICES)",
                        request.model
                    );
                    return Err(ErrorInfo::new(ErrorKind::BudgetExceeded, why, false).into());
                }
                let spent = port.spent().await.map_err(journal_failure)?;
                if let Some(why) = budget.refuses(spent, estimate, input_cost) {
                    return Err(ErrorInfo::new(ErrorKind::BudgetExceeded, why, false).into());
                }
                Some(spent)
            }
        };
        if let Some((thread, budget)) = &self.meter.thread_budget {
            let (priced, est) = (price.is_some(), (estimate, input_cost));
            thread_admits(port, thread, budget, priced, est).await?;
        }
        let mut held = false;
        if self.meter.rolls_up {
            let max = u64::from(request.max_tokens);
            let ask = BudgetAsk {
                input_tokens: estimate,
                tokens: estimate + max,
                input_cost,
                cost: price.map_or(Usd(0), |p| p.cost(tokens(provider, estimate, max, 0, 0))),
                priced: price.is_some(),
            };
            held = tree_admits(port, &ask).await?;
        }
        Ok((before, budget, held))
    }

    /// A step whose provider key is paused, or whose key's limits have no
    /// permit free, makes no call and waits instead (deferred, holding
    /// nothing). A limited key grants a permit, released after the call.
    async fn admit(&self, request: &Request) -> Result<Option<Permit>, Stop> {
        let key = self.key();
        let tokens = cairn_llm::estimate_request_tokens(request) + u64::from(request.max_tokens);
        match self
            .port
            .admit(key, tokens, self.declared)
            .await
            .map_err(journal_failure)?
        {
            Admission::Go(permit) => Ok(permit),
            Admission::Wait { after, why } => Err(Stop::deferred(
                match why {
                    Held::Paused => format!(
                        "{key} is paused for {} ms after a provider's rate limit; no call made",
                        after.as_millis()
                    ),
                    other => format!(
                        "{key}: {}; no call made, looking again in at most {} ms",
                        other.as_str(),
                        after.as_millis()
                    ),
                },
                Deferral {
                    key: key.to_owned(),
                    after,
                    observed: false,
                },
            )),
        }
    }

    /// Before a call of a run whose spending is limited (its budget, a
    /// thread's, an ancestor's): the call recorded as sent at its estimate
    /// (input estimated, plus `max_tokens`), so a process that dies
    /// mid-call leaves it counted. `None` for a run nothing limits
    /// (nothing written).
    async fn record_sent(&self, request: &Request) -> Result<Option<SentCall>, ErrorInfo> {
        if !self.meter.limited() {
            return Ok(None);
        }
        let (input, output) = (
            cairn_llm::estimate_request_tokens(request),
            u64::from(request.max_tokens),
        );
        let cost = self
            .cut_cost(&request.model, input, output)
            .map_or(0, |c| c.0);
        let estimate = cairn_core::CallEstimate {
            idx: self.cx.step.idx.get(),
            turn: request.meta.turn,
            input,
            output,
            cost_nanos: cost,
        };
        self.port.sent(&estimate).await.map_err(journal_failure)
    }

    /// After a refused call that said how long to stay away: pause the key
    /// for everyone at once, and wait for the pause's end.
    pub(crate) async fn paused(&self, e: &LlmError, wait: Duration) -> Stop {
        let key = self.key();
        let asked = cairn_core::KeyPause {
            key: key.to_owned(),
            wait,
            reason: e.to_string(),
            by: cairn_core::KeyPause::PROVIDER.into(),
        };
        let paused = match self.port.pause(key, wait, &asked.reason).await {
            Ok(stands) => stands,
            // The deferral's commit records the pause anyway, held to the
            // key's cap; the default cap holds it here.
            Err(_) => {
                let held = asked.capped(cairn_core::DEFAULT_MAX_PAUSE);
                cairn_core::Paused {
                    after: held.wait,
                    reason: held.reason,
                }
            }
        };
        let (reason, after) = (paused.reason, paused.after);
        Stop::deferred(
            format!("{reason} (the key is paused for {} ms)", after.as_millis()),
            Deferral {
                key: key.to_owned(),
                after,
                observed: true,
            },
        )
    }

    /// What a finished call of `model` cost, with the price table's
    /// version; `None` when the process prices nothing or not this model.
    pub(crate) fn cost(&self, model: &str, usage: TokenUsage) -> Option<(Usd, String)> {
        let price = self.meter.price(self.provider, model)?;
        let t = tokens(
            self.provider,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        );
        Some((price.cost(t), self.meter.prices.as_deref()?.version.clone()))
    }

    /// What a response cut mid-stream cost, from its estimated tokens.
    pub(crate) fn cut_cost(&self, model: &str, input: u64, output: u64) -> Option<Usd> {
        let price = self.meter.price(self.provider, model)?;
        Some(price.cost(tokens(self.provider, input, output, 0, 0)))
    }
}

/// The run's budget in force now: an operator's raise since the step
/// began (`runs continue --budget` on a running run) is read here, before
/// each model call and tool. Nothing is read for a run that began with no
/// budget.
async fn budget_now(port: &dyn Meter, meter: &StepMeter) -> Result<Option<Budget>, ErrorInfo> {
    let Some(began) = meter.budget else {
        return Ok(None);
    };
    let now = port.budget().await.map_err(journal_failure)?;
    Ok(Some(now.unwrap_or(began)))
}

/// A call of a run in a thread with a budget: refused (`budget_exceeded`)
/// if what the thread's runs spent leaves no room for its input. A
/// thread's runs run one at a time, so nothing is held.
async fn thread_admits(
    port: &dyn Meter,
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
    let spent = port.thread_spent(thread).await.map_err(journal_failure)?;
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
/// estimate until the guard releases it, or nothing when no ancestor has
/// a budget: then `false`), deferred until a sibling's call ends (no
/// attempt spent), or refused (`budget_exceeded`).
async fn tree_admits(port: &dyn Meter, ask: &BudgetAsk) -> Result<bool, Stop> {
    match port.reserve(ask).await.map_err(journal_failure)? {
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
const TREE_WAIT: Duration = Duration::from_secs(5);

/// After spending moved from `before` to `after`: a `budget_warning` for
/// each limit that crossed its soft threshold (best effort).
async fn warn_crossed(
    journal: &JournalHandle,
    cx: &StepContext,
    budget: Option<Budget>,
    (before, after): (Spent, Spent),
) {
    let Some(budget) = budget else {
        return;
    };
    for c in budget.crossed(before, after) {
        let warning = EventData::BudgetWarning(BudgetWarning {
            idx: Some(cx.step.idx),
            child: None,
            limit: c.limit,
            budget: c.budget,
            spent: c.spent,
        });
        let _ = journal.event(NewEvent::typed(warning)).await;
    }
}

/// Before a tool executes: why not, if the run's tool calls are spent (the
/// caller journals the refusal as the call's result, so the model reads it
/// on a continue, and fails `budget_exceeded`, which interrupts the run).
pub(crate) async fn tool_refuses(
    journal: &JournalHandle,
    cx: &StepContext,
) -> Result<Option<String>, ErrorInfo> {
    let meter = &cx.services.meter;
    let port = meter.port();
    if let Some((thread, budget)) = meter
        .thread_budget
        .as_ref()
        .filter(|(_, b)| b.tool_calls.is_some())
    {
        let spent = port.thread_spent(thread).await.map_err(journal_failure)?;
        if let Some(why) = budget.refuses_tool(spent) {
            let why = why.replacen("the run's budget", "its budget", 1);
            return Ok(Some(format!("thread `{thread}`: {why}")));
        }
    }
    let Some(budget) = budget_now(port, meter)
        .await?
        .filter(|b| b.tool_calls.is_some())
    else {
        return Ok(None);
    };
    let spent = port.spent().await.map_err(journal_failure)?;
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
