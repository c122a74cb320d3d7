//! The meter's port: what a step asks storage about its run's spending and
//! its provider keys ([`Meter`], implemented by the executor and bound to
//! the step's run, attempt and lease epoch), and what the executor tells a
//! step about what its calls answer to ([`StepMeter`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::budget::{Budget, BudgetAsk, Spent, TreeAnswer};
use super::declared::{Declared, LimitTable};
use super::keys::{Admission, Held, Paused, Permit};
use super::price::{Price, PriceTable};
use super::tenant::Tenant;
use crate::event::payload::{ModelCallSent, ModelCalled};
use crate::ids::{LeaseEpoch, StepIdx};
use crate::journal::{service_handle, JournalError};

/// What a model call is counted at if its result is lost: its input
/// (estimated), its `max_tokens` and their price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEstimate {
    /// The step's index and the call's turn, for people reading events.
    pub idx: u32,
    pub turn: u32,
    pub input: u64,
    pub output: u64,
    pub cost_nanos: u64,
}

/// A call recorded as sent: the lease epoch it was sent under and its
/// estimate, which its `model_called` event repeats (`sent_*` keys) so
/// storage can tell calls that never got one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentCall {
    pub epoch: i64,
    pub estimate: CallEstimate,
}

impl SentCall {
    /// The keys a `model_called` event of this call carries.
    pub fn tag(&self, called: &mut ModelCalled) {
        called.sent_epoch = Some(self.epoch);
        called.sent_input = Some(self.estimate.input);
        called.sent_output = Some(self.estimate.output);
        called.sent_cost_nanos = Some(self.estimate.cost_nanos);
    }

    /// Its `model_call_sent` event.
    pub fn event(&self) -> ModelCallSent {
        ModelCallSent {
            idx: StepIdx(self.estimate.idx),
            turn: self.estimate.turn,
            epoch: LeaseEpoch(self.epoch),
            estimate_input: self.estimate.input,
            estimate_output: self.estimate.output,
            estimate_cost_nanos: self.estimate.cost_nanos,
        }
    }
}

/// The meter of one step, bound by the executor to the run, step, attempt
/// and lease epoch that dispatched it. Each method's default is what a
/// meter without storage answers. Its errors are the journal's: a lost
/// lease, a failed database.
#[async_trait]
pub trait Meter: Send + Sync {
    /// What the run's model calls have spent so far (every finished
    /// response of every step; `crate::meter::budget`). A meter without
    /// storage knows of none.
    async fn spent(&self) -> Result<Spent, JournalError> {
        Ok(Spent::default())
    }

    /// Records that a model call is about to be sent, at `estimate`
    /// (`model_call_sent`), before its request leaves: if no result of it
    /// is ever recorded (its process died mid-call), the run's spending
    /// counts it at that estimate once its holder is gone
    /// (`crate::meter::budget`). The tag goes on the call's `model_called`
    /// event ([`SentCall::tag`]), which resolves it. A meter without
    /// storage records nothing.
    async fn sent(&self, _estimate: &CallEstimate) -> Result<Option<SentCall>, JournalError> {
        Ok(None)
    }

    /// The run's budget in force now (its own limits over its crew's),
    /// which an operator may have raised since the step began; `None`:
    /// the meter cannot tell (the step's context stands). A meter without
    /// storage cannot tell.
    async fn budget(&self) -> Result<Option<Budget>, JournalError> {
        Ok(None)
    }

    /// How long calls on provider key `key` must still wait, if a provider
    /// paused it (shared by every process on the database; database
    /// clock). A meter without storage knows of no pause.
    async fn paused_for(&self, _key: &str) -> Result<Option<Duration>, JournalError> {
        Ok(None)
    }

    /// Before a model call on `key` reserving `tokens`: call now (with a
    /// permit when the key has limits), or wait (paused, or no permit
    /// free). `declared`: the key's limits as the step's crew or process
    /// declares them (`crate::meter::declared`). A meter without storage
    /// knows of pauses only.
    async fn admit(
        &self,
        key: &str,
        _tokens: u64,
        _declared: Option<Declared>,
    ) -> Result<Admission, JournalError> {
        Ok(match self.paused_for(key).await? {
            Some(after) => Admission::Wait {
                after,
                why: Held::Paused,
            },
            None => Admission::Go(None),
        })
    }

    /// Before a model call of a child run: what its budgeted ancestors say
    /// ([`TreeAnswer`]); a `Go` holds the call's estimate against them
    /// until [`Meter::unreserve`] or the end of the run's lease. A meter
    /// without storage knows of no ancestors.
    async fn reserve(&self, _ask: &BudgetAsk) -> Result<TreeAnswer, JournalError> {
        Ok(TreeAnswer::Free)
    }

    /// What the runs of thread `thread` (and their children) spent, for
    /// the thread's budget. A meter without storage knows of none.
    async fn thread_spent(&self, _thread: &str) -> Result<Spent, JournalError> {
        Ok(Spent::default())
    }

    /// After that call: drops what it held.
    async fn unreserve(&self) -> Result<(), JournalError> {
        Ok(())
    }

    /// After the call a permit was taken for: releases it and settles the
    /// tokens it `used` against those it reserved.
    async fn release(&self, _permit: &Permit, _used: u64) -> Result<(), JournalError> {
        Ok(())
    }

    /// Pauses `key` for every run for `wait` from now, at once (the step's
    /// deferral commit records it again, atomically with the deferral),
    /// held to the key's `max_pause_ms`. A longer pause already recorded
    /// wins; the answer is the pause that stands and the reason recorded
    /// (which says so when the wait was capped).
    async fn pause(
        &self,
        _key: &str,
        wait: Duration,
        reason: &str,
    ) -> Result<Paused, JournalError> {
        Ok(Paused {
            after: wait,
            reason: reason.to_owned(),
        })
    }
}

/// The meter of a step run without storage (a test's context).
struct NoMeter;

impl Meter for NoMeter {}

service_handle!(
    /// A cheap-to-clone handle on a step's meter, carried in its context.
    MeterHandle,
    Meter
);

/// What a step's model calls answer to, as the executor tells it: the
/// port, the run's budgets, and the process's prices and key limits.
/// Never serialized; the default is a step metered by nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepMeter {
    /// The step's meter (`None` in a context built by hand: then it
    /// answers as a meter without storage).
    pub port: Option<MeterHandle>,
    /// The run's limits on model use (its own over its crew's), which an
    /// `llm` step checks before each call.
    pub budget: Option<Budget>,
    /// The run's thread and its budget, when the thread has one: each
    /// model call answers to it too.
    pub thread_budget: Option<(String, Budget)>,
    /// Whether the run is a child: its model calls also answer to its
    /// ancestors' budgets ([`BudgetAsk`]).
    pub rolls_up: bool,
    /// The price table of the process executing the step (`CAIRN_PRICES`),
    /// which prices each model call as it finishes.
    pub prices: Option<Arc<PriceTable>>,
    /// The limits per provider key of the process executing the step
    /// (`CAIRN_LIMITS`), declared at each admission unless the agent
    /// declares its own (`crate::meter::declared`).
    pub key_limits: Option<Arc<LimitTable>>,
    /// The run's tenant (`crate::meter::tenant`), thread and crew name,
    /// which a `limit_key` of `"tenant"`, `"thread"` or `"crew"` narrows
    /// the provider key by.
    pub tenant: Option<Tenant>,
    pub thread_id: Option<String>,
    pub crew: Option<String>,
}

impl StepMeter {
    /// The port to ask: the executor's, or one that knows nothing.
    pub fn port(&self) -> &dyn Meter {
        match &self.port {
            Some(handle) => &**handle,
            None => &NoMeter,
        }
    }

    /// Whether anything limits the run's spending (its budget, a
    /// thread's, an ancestor's): only then is a call recorded as sent.
    pub fn limited(&self) -> bool {
        self.budget.is_some() || self.thread_budget.is_some() || self.rolls_up
    }

    /// The rates of `provider`'s `model` in the process's price table.
    pub fn price(&self, provider: &str, model: &str) -> Option<&Price> {
        self.prices.as_deref()?.of(provider, model)
    }

    /// The declared limits of `key`: the agent's own, else the process's.
    pub fn declared(&self, own: Option<&super::keys::KeyLimits>, key: &str) -> Option<Declared> {
        Declared::of(own, self.key_limits.as_deref(), key)
    }
}
