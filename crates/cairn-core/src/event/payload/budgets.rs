//! The payloads of a run's spending limits: provider key pauses and
//! resumes, budget raises and warnings.

use serde::{Deserialize, Serialize};

use crate::event::Actor;
use crate::ids::{RunId, StepIdx};
use crate::meter::budget::Budget;
/// A limit a `budget_warning` names, and an amount of it: the meter's.
pub use crate::meter::budget::{Amount, BudgetLimit};

/// `key_paused`: a provider answered "too many requests" and the key is
/// paused for every run on the database; recorded in the run whose call
/// was refused (`outcome::deferred_events`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPaused {
    /// The provider key.
    pub key: String,
    /// How long it is paused.
    pub for_ms: u64,
    /// Why, as people read it (the refused call's message).
    pub reason: String,
}

/// `key_resumed`: an operator resumed a paused key, and the run, deferred
/// on it, is claimable again at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyResumed {
    pub key: String,
}

/// `budget_raised`: an operator raised the run's budget
/// (`script/operator.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRaised {
    #[serde(flatten)]
    pub actor: Actor,
    /// What was added to each limit.
    pub raise: Budget,
    /// The limits that stand after it.
    pub budget: Budget,
}

/// `budget_warning`: spending crossed 80 % of one of a budget's limits.
/// Two writers:
/// - the run's own call (`cairn_agent::budget::warn_crossed`): with
///   `idx`, the step whose call crossed it;
/// - the tree's spending, on an ancestor whose budget its descendants'
///   calls crossed (`script/rollup.rs`): with `child`, the run whose call
///   found it, and no `idx`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetWarning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idx: Option<StepIdx>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<RunId>,
    /// The limit crossed.
    pub limit: BudgetLimit,
    /// The limit's value, and what is spent of it now.
    pub budget: Amount,
    pub spent: Amount,
}
