//! Events: the append-only per-run log (state transitions, steps, operator
//! actions). Written by the store in the same transaction as the change they
//! describe.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::RunId;

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    RunSubmitted,
    /// A process claimed the run (data: owner, epoch, takeover).
    RunClaimed,
    StepSucceeded,
    StepFailed,
    /// A failed attempt will be retried after a durable back-off.
    StepRetryScheduled,
    RunSucceeded,
    RunFailed,
    /// A resume with a different crew fingerprint was forced by an operator.
    CrewForced,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunSubmitted => "run_submitted",
            EventKind::RunClaimed => "run_claimed",
            EventKind::StepSucceeded => "step_succeeded",
            EventKind::StepFailed => "step_failed",
            EventKind::StepRetryScheduled => "step_retry_scheduled",
            EventKind::RunSucceeded => "run_succeeded",
            EventKind::RunFailed => "run_failed",
            EventKind::CrewForced => "crew_forced",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    pub kind: EventKind,
    pub data: Value,
}

impl NewEvent {
    pub fn new(kind: EventKind, data: Value) -> Self {
        NewEvent { kind, data }
    }
}

/// A stored event; `seq` counts from 1 per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub run_id: RunId,
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub kind: EventKind,
    pub data: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_text() {
        for k in [
            EventKind::RunSubmitted,
            EventKind::RunClaimed,
            EventKind::StepSucceeded,
            EventKind::StepFailed,
            EventKind::StepRetryScheduled,
            EventKind::RunSucceeded,
            EventKind::RunFailed,
            EventKind::CrewForced,
        ] {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::parse("nope"), None);
    }
}
