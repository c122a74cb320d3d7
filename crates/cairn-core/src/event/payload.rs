//! Typed event payloads: one type per [`EventKind`], whose serde form is
//! exactly the `data` JSON its writers store today (same field names, the
//! same fields left out), so every stored event decodes with no migration.
//!
//! [`EventData::decode`] reads a stored event's `data` given its kind;
//! [`EventData::to_value`] (or [`NewEvent::typed`]) writes it back. Where
//! two writers of one kind store different shapes, its type holds their
//! union, and its doc comment says which writer writes which fields.
//!
//! Conventions, the same in every submodule:
//! - a field some writer leaves out is an `Option` skipped when `None`
//!   (or a `bool` skipped when `false`, a list skipped when empty, when
//!   that is the only value a writer ever omits it for);
//! - a field a writer always writes but may write as `null` is an `Option`
//!   that is never skipped;
//! - a field one writer writes (possibly `null`) and another leaves out is
//!   an `Option<Option<T>>`: `None` absent, `Some(None)` `null`.
//!
//! Decoding ignores fields no type names, so a newer release's events
//! still decode here; the round-trip tests (`payload/tests.rs`) and the
//! upgrade fixtures' test (`crates/cairn-checkpoint/tests/it/
//! event_fixtures.rs`) prove that nothing a writer stores is dropped.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::{EventKind, EventRecord, NewEvent};

mod budgets;
mod children;
mod model;
mod operator;
mod runs;
mod signals;
mod steps;
mod waits;

#[cfg(test)]
mod tests;

pub use crate::people::approvers::CastVote;
pub use budgets::{Amount, BudgetLimit, BudgetRaised, BudgetWarning, KeyPaused, KeyResumed};
pub use children::{
    ChildEnded, ChildInterrupted, ChildrenJoined, ChildrenReused, ChildrenSpawned, ReusedChild,
};
pub use model::{ModelCallSent, ModelCalled, RepairAction, ToolExecuted, TranscriptRepaired};
pub use operator::{
    ContextAdded, CrewAt, CrewForced, CrewUpgraded, OperatorAction, RunCancelled, RunForked,
};
pub use runs::{RunClaimed, RunFailed, RunSubmitted, RunSucceeded, SubmittedChild};
pub use signals::{
    SignalConsumed, SignalReceived, SignalTimedOut, SignalWaitOpened, ValuePublished,
};
pub use steps::{
    ProgramStarted, StepCancelled, StepDeferred, StepFailed, StepInterrupted, StepRetryScheduled,
    StepSucceeded, UsageReported,
};
pub use waits::{WaitAnswered, WaitExpired, WaitOpened, WaitVoted};

/// A stored event's `data` that does not decode as its kind's payload.
#[derive(Debug, thiserror::Error)]
#[error("the data of a `{}` event does not decode: {source}", kind.as_str())]
pub struct EventDecodeError {
    pub kind: EventKind,
    #[source]
    pub source: serde_json::Error,
}

/// Declares [`EventData`] (a variant per kind, named as the kind) and the
/// matches that go between it and `(EventKind, Value)`: a kind added to
/// [`EventKind`] without a payload here does not compile.
macro_rules! event_data {
    ($($(#[$doc:meta])* $kind:ident($ty:ty),)*) => {
        /// An event's payload, typed by its kind.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum EventData {
            $($(#[$doc])* $kind($ty),)*
        }

        impl EventData {
            /// The kind this payload is stored under.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(EventData::$kind(_) => EventKind::$kind,)*
                }
            }

            /// A stored event's `data`, read as its kind's payload.
            pub fn decode(kind: EventKind, data: &Value) -> Result<EventData, EventDecodeError> {
                match kind {
                    $(EventKind::$kind => parse(kind, data).map(EventData::$kind),)*
                }
            }

            /// The `data` JSON to store: what today's writers store.
            pub fn to_value(&self) -> Value {
                match self {
                    $(EventData::$kind(d) => encode(d),)*
                }
            }
        }
    };
}

event_data! {
    /// A run was submitted, or a `children` step started it.
    RunSubmitted(RunSubmitted),
    /// A process claimed the run.
    RunClaimed(RunClaimed),
    StepSucceeded(StepSucceeded),
    StepFailed(StepFailed),
    StepRetryScheduled(StepRetryScheduled),
    RunSucceeded(RunSucceeded),
    RunFailed(RunFailed),
    CrewForced(CrewForced),
    CrewUpgraded(CrewUpgraded),
    /// No live process can execute the run's crew version.
    RunBlocked(crate::checkpoint::Blocked),
    RunRetried(OperatorAction),
    RunContinued(OperatorAction),
    RunCancelRequested(OperatorAction),
    StepCancelled(StepCancelled),
    RunCancelled(RunCancelled),
    RunForked(RunForked),
    WaitOpened(WaitOpened),
    WaitAnswered(WaitAnswered),
    WaitExpired(WaitExpired),
    WaitVoted(WaitVoted),
    ModelCalled(Box<ModelCalled>),
    ToolExecuted(ToolExecuted),
    StepInterrupted(StepInterrupted),
    TranscriptRepaired(TranscriptRepaired),
    ContextAdded(ContextAdded),
    ChildrenSpawned(ChildrenSpawned),
    ChildrenJoined(ChildrenJoined),
    ChildrenReused(ChildrenReused),
    StepDeferred(StepDeferred),
    KeyPaused(KeyPaused),
    KeyResumed(KeyResumed),
    BudgetRaised(BudgetRaised),
    BudgetWarning(BudgetWarning),
    UsageReported(UsageReported),
    ChildInterrupted(ChildInterrupted),
    ModelCallSent(ModelCallSent),
    ChildEnded(ChildEnded),
    ProgramStarted(ProgramStarted),
    SignalReceived(SignalReceived),
    SignalWaitOpened(SignalWaitOpened),
    SignalConsumed(SignalConsumed),
    SignalTimedOut(SignalTimedOut),
    ValuePublished(ValuePublished),
}

fn parse<T: serde::de::DeserializeOwned>(
    kind: EventKind,
    data: &Value,
) -> Result<T, EventDecodeError> {
    T::deserialize(data).map_err(|source| EventDecodeError { kind, source })
}

/// The payloads are structs of strings, numbers, ids and JSON values, with
/// string keys: serde_json cannot fail to encode them, so the `null` of a
/// failure is never stored.
fn encode<T: Serialize>(data: &T) -> Value {
    serde_json::to_value(data).unwrap_or(Value::Null)
}

impl From<EventData> for NewEvent {
    fn from(data: EventData) -> NewEvent {
        NewEvent::typed(data)
    }
}

impl NewEvent {
    /// The event that records `data`, under its kind.
    pub fn typed(data: EventData) -> NewEvent {
        NewEvent::new(data.kind(), data.to_value())
    }

    /// Its `data`, read as its kind's payload.
    pub fn payload(&self) -> Result<EventData, EventDecodeError> {
        EventData::decode(self.kind, &self.data)
    }
}

impl EventRecord {
    /// Its `data`, read as its kind's payload.
    pub fn payload(&self) -> Result<EventData, EventDecodeError> {
        EventData::decode(self.kind, &self.data)
    }
}

/// For a field that is `Some` whenever it is present, `null` included: an
/// `Option<Value>` that keeps a stored `null`, or the inner `Option` of an
/// `Option<Option<T>>` (absent, `null`, a value). With `default`.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// For `skip_serializing_if` on a flag its writers only ever write `true`.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
