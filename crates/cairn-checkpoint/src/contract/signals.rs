//! Signals: named messages to a run, buffered until a `signal` step's
//! commit consumes one, each exactly once (`cairn_core::signal`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use cairn_core::{Actor, Attempt, CrewDef, Heard, RunId, Signal, StepIdx, Target};

use crate::Result;

/// A signal to send.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSignal {
    pub target: Target,
    pub name: String,
    pub payload: Value,
    /// The sender's idempotency id (`None`: Cairn makes one).
    pub id: Option<String>,
    pub by: Actor,
    /// The tenants the sender may signal (a principal bound to tenants);
    /// empty: any. A run of another tenant, or none, is refused
    /// (`SignalForbidden`) with nothing stored; a run it starts is its
    /// one tenant's.
    pub tenants: Vec<String>,
    /// The sender's W3C `traceparent`, recorded on `signal_received` (the
    /// run's trace links the sender's span).
    pub traceparent: Option<String>,
    /// Signal-with-submit: with no unfinished run at a `key:` or
    /// `thread:` target, start a run of this crew (under that key or on
    /// that thread) and give it the signal, in one transaction.
    pub start: Option<StartWith>,
}

/// The run a signal-with-submit starts.
#[derive(Debug, Clone, PartialEq)]
pub struct StartWith {
    pub crew: CrewDef,
    pub input: Value,
}

/// What a send did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sent {
    pub signal: Signal,
    /// Its id was sent before: nothing was stored, this is the first.
    pub duplicate: bool,
    /// It woke its run, which was waiting for it.
    pub woke: bool,
    /// Its run was started by this send (signal-with-submit).
    pub started: bool,
}

/// A `signal` step's open wait.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listening {
    pub run_id: RunId,
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub names: Vec<String>,
    pub opened_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
}

/// Signals and the waits of `signal` steps. A send locks its run's row,
/// so it and a step that starts to wait see each other: a signal sent
/// before the wait opened wakes the run in the wait's own commit.
#[async_trait]
pub trait SignalStore: Send + Sync + 'static {
    /// Stores a signal for the one unfinished run `new.target` names, or
    /// finds the first of its id. No run: `NoSignalTarget` (unless
    /// `start` starts one); several: `AmbiguousSignalTarget`; either way
    /// nothing is stored.
    async fn send_signal(&self, new: &NewSignal) -> Result<Sent>;

    /// What a `signal` step at (`run`, `idx`, `attempt`) finds: the oldest
    /// unexpired buffered signal of `names`, else whether its wait timed out.
    async fn heard(
        &self,
        run: RunId,
        idx: StepIdx,
        attempt: Attempt,
        names: &[String],
    ) -> Result<Heard>;

    /// Times out up to `limit` open waits past their deadline, each waking
    /// its run (which then outputs its default or fails); the runs woken.
    async fn time_out_signal_waits(&self, limit: u32) -> Result<Vec<RunId>>;

    /// The run's signals, buffered and consumed, oldest first.
    async fn signals(&self, run: RunId) -> Result<Vec<Signal>>;

    /// The run's open signal wait, if it waits for one.
    async fn listening(&self, run: RunId) -> Result<Option<Listening>>;

    /// Signals buffered now: not consumed, not past their retention.
    async fn buffered_signals(&self) -> Result<u64>;

    /// Deletes up to `limit` signals nobody consumed whose retention
    /// (`cairn_core::signal::SIGNAL_RETENTION`) passed; how many.
    async fn prune_signals(&self, limit: u32) -> Result<u64>;
}
