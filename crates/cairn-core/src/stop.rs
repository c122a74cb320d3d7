//! How a step ends without an output: [`Stop`], the error side of
//! [`crate::Agent::run`]. It failed, or it stops on purpose: to ask a
//! person, to start children and wait for their join, or to wait for its
//! provider key. Each is built by a named constructor and travels with
//! `?`; an [`ErrorInfo`] converts into [`Stop::Failed`], so a step's own
//! failures need nothing more. The executor matches it once
//! (`cairn-scheduler`'s `outcome::decide`).

use crate::checkpoint::{ErrorInfo, ErrorKind, Usage};
use crate::children::Spawn;
use crate::wait::Question;

/// Why a step ended without an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// It failed: retried by its policy if the error allows, `interrupted`
    /// by its kind (a budget, a turn limit), else the run fails.
    Failed(ErrorInfo),
    /// It asks a person (`StepContext::ask`, an `llm` agent's
    /// `ask_human`): the step waits, and once answered runs again from its
    /// start with the answer in its context.
    Ask(Question),
    /// It starts children (a `children` step, `delegate` calls): the spawn
    /// is committed and the step runs again once their join is decided.
    Spawn(Spawn),
    /// It waits for a signal by name (a `signal` step): the executor
    /// commits the oldest buffered one as the step's output, or the step
    /// waits until one is sent or its timeout passes
    /// (`crate::signal`).
    Listen(crate::signal::Listen),
    /// It waits for its provider key (a pause, no permit free, a tree's
    /// budget held by siblings): the run is queued again at the end of the
    /// wait, the same attempt, no retry spent. `error` (kind
    /// `rate_limited`) is what the deferral's events say.
    Defer {
        error: ErrorInfo,
        deferral: Box<Deferral>,
    },
}

/// Why and how long a step waits for its provider key ([`Stop::Defer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferral {
    /// The provider key (`cairn_agent::limit_key`): every step calling the
    /// same provider with the same API key shares it.
    pub key: String,
    /// How long from now (database clock) the run waits.
    pub after: std::time::Duration,
    /// This step's own call was answered "too many requests" (so its
    /// commit pauses the key for everyone); `false`: it found the key
    /// already paused and made no call.
    pub observed: bool,
}

impl From<ErrorInfo> for Stop {
    fn from(error: ErrorInfo) -> Stop {
        Stop::Failed(error)
    }
}

impl Stop {
    /// A question `id` for a person, with its prompt.
    pub fn ask(id: impl Into<String>, prompt: impl Into<String>) -> Stop {
        Stop::Ask(Question {
            id: id.into(),
            prompt: prompt.into(),
        })
    }

    /// A wait for the provider key, with what its events say.
    pub fn deferred(message: impl Into<String>, deferral: Deferral) -> Stop {
        Stop::Defer {
            error: ErrorInfo::new(ErrorKind::RateLimited, message, true),
            deferral: Box::new(deferral),
        }
    }

    /// The tokens the step spent, carried by a failure or a deferral (a
    /// question or a spawn commits none).
    pub fn with_usage(self, usage: Usage) -> Stop {
        match self {
            Stop::Failed(e) => Stop::Failed(e.with_usage(usage)),
            Stop::Defer { error, deferral } => Stop::Defer {
                error: error.with_usage(usage),
                deferral,
            },
            other => other,
        }
    }

    /// The failure, if the step failed.
    pub fn into_failure(self) -> Option<ErrorInfo> {
        match self {
            Stop::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// The failure, if the step failed.
    pub fn failure(&self) -> Option<&ErrorInfo> {
        match self {
            Stop::Failed(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Failed(e) | Stop::Defer { error: e, .. } => write!(f, "{}", e.message),
            Stop::Ask(q) => write!(f, "waiting for an answer to `{}`", q.id),
            Stop::Spawn(s) => write!(f, "starting {} children", s.children.len()),
            Stop::Listen(l) => write!(f, "waiting for signal `{}`", l.names.join("` or `")),
        }
    }
}
