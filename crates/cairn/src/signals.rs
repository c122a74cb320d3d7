//! Signals: named messages to a run (`cairn_core::signal` is the rule,
//! `SignalStore` keeps them). A send names a run, `key:K` or `thread:T`;
//! with `start`, a sender with no unfinished run there starts one of the
//! crew it names (signal-with-submit). Every worker and server times out
//! due signal waits once a second (`work.rs`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use cairn_checkpoint::{Listening, NewSignal, Sent, StartWith};
use cairn_core::{Actor, RunId, Signal, Target};

use crate::{Engine, Result};

/// Due signal waits one pass times out at most (the rest wait a second).
const TIME_OUT_BATCH: u32 = 64;

/// Expired signals one prune deletes at most.
const PRUNE_BATCH: u32 = 1_000;

/// A send as a client asks for it: the crew of a signal-with-submit by
/// name, not yet looked up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// A run id, `key:IDEMPOTENCY_KEY` or `thread:ID`.
    pub target: String,
    pub name: String,
    #[serde(default)]
    pub payload: Value,
    /// The sender's idempotency id: a second send of it is a no-op that
    /// answers the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// With no unfinished run at the target, start one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartRequest>,
    /// The sender's W3C `traceparent` (the server reads the header when
    /// the body has none): the run's trace links the sender's span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// The run a signal-with-submit starts: the newest stored version of
/// `crew` (or `version`), on `input` (default: the signal's payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    pub crew: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// A run's signals, and what it waits for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSignals {
    pub signals: Vec<Signal>,
    pub listening: Option<Listening>,
}

impl Engine {
    /// Sends a signal (see [`SignalRequest`]). A signal-with-submit runs
    /// `crew` when given (a server's loaded crew, a crew file), else the
    /// stored version its `start` names.
    pub async fn send_signal(
        &self,
        req: &SignalRequest,
        crew: Option<&crate::Crew>,
        by: &Actor,
    ) -> Result<Sent> {
        self.send_signal_as(req, crew, by, &[]).await
    }

    /// [`Engine::send_signal`] by a sender bound to `tenants` (none: any):
    /// a run of another tenant is refused (`forbidden`), nothing stored.
    pub async fn send_signal_as(
        &self,
        req: &SignalRequest,
        crew: Option<&crate::Crew>,
        by: &Actor,
        tenants: &[cairn_core::Tenant],
    ) -> Result<Sent> {
        let target =
            Target::parse(&req.target).map_err(|e| cairn_checkpoint::Error::BadSignal(e.0))?;
        let start = match (&req.start, crew) {
            (Some(s), Some(crew)) => Some((s, crew.def().clone())),
            (Some(s), None) => {
                let crew = self.crew_show(&s.crew, s.version.as_deref()).await?;
                Some((s, crew.def().clone()))
            }
            (None, _) => None,
        };
        let start = start.map(|(s, crew)| StartWith {
            crew,
            input: s.input.clone().unwrap_or_else(|| req.payload.clone()),
        });
        let new = NewSignal {
            target,
            name: req.name.clone(),
            payload: req.payload.clone(),
            id: req.id.clone(),
            by: by.clone(),
            start,
            traceparent: req.traceparent.clone(),
            tenants: tenants.iter().map(|t| t.as_str().to_owned()).collect(),
        };
        Ok(self.store().send_signal(&new).await?)
    }

    /// The run's signals, oldest first, and its open signal wait.
    pub async fn run_signals(&self, run: RunId) -> Result<RunSignals> {
        Ok(RunSignals {
            signals: self.store().signals(run).await?,
            listening: self.store().listening(run).await?,
        })
    }

    /// Times out due signal waits; the runs woken.
    pub async fn time_out_signal_waits(&self) -> Result<Vec<RunId>> {
        Ok(self.store().time_out_signal_waits(TIME_OUT_BATCH).await?)
    }

    /// Signals buffered now, on every run.
    pub async fn buffered_signals(&self) -> Result<u64> {
        Ok(self.store().buffered_signals().await?)
    }

    /// Deletes signals nobody consumed within their retention.
    pub async fn prune_signals(&self) -> Result<u64> {
        Ok(self.store().prune_signals(PRUNE_BATCH).await?)
    }
}
