//! What the campaign read after the faults healed: the [`FinalState`] of the
//! database plus the effects log the step programs kept outside it, and the
//! [`FaultWindow`]s the nemeses recorded. Plain data, serde both ways.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything the checker compares a history against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FinalState {
    /// Every run in the database.
    pub runs: Vec<Run>,
    /// Every committed step checkpoint and journal item, with its lease.
    pub rows: Vec<CommittedRow>,
    /// Every wait, with the decisions stored for it.
    pub waits: Vec<Wait>,
    /// Every signal stored.
    pub signals: Vec<StoredSignal>,
    /// Each run's event sequence numbers, in order.
    pub events: BTreeMap<String, Vec<u64>>,
    /// The effects log: one line per effect a step program performed.
    pub effects: Vec<Effect>,
    /// What the campaign knows of each attempt: faults and idempotence.
    pub attempts: Vec<Attempt>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// The run's id.
    pub id: String,
    /// The idempotency key it was submitted under, if any.
    pub key: Option<String>,
    /// The run that spawned it (a child), if any: a child is asked for by
    /// its parent, not by a client.
    #[serde(default)]
    pub parent: Option<String>,
    /// Where it stands.
    pub status: RunStatus,
}

/// A run's status as the checker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Ended, whichever way (succeeded, failed, cancelled).
    Finished,
    /// Waiting for a person or a signal.
    Waiting,
    /// Ready to be claimed.
    Queued,
    /// Held by a worker.
    Running {
        /// Whether its lease had expired (by the database's clock) when the
        /// final state was read.
        lease_expired: bool,
    },
}

/// What a committed row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// A step's checkpoint.
    Step,
    /// One journal item of an `llm` step.
    JournalItem {
        /// The item's index within the step's journal.
        item: u32,
    },
}

/// A step checkpoint or journal item as committed, with the lease it was
/// fenced on. A missing epoch or owner is itself a violation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedRow {
    /// The run.
    pub run: String,
    /// The step's index.
    pub step: u32,
    /// Checkpoint or journal item.
    pub kind: RowKind,
    /// The lease epoch stored with it.
    pub epoch: Option<u64>,
    /// The lease owner stored with it.
    pub owner: Option<String>,
    /// Its position in the run's commit order (a sequence or row id).
    pub order: u64,
}

/// A wait and the decisions stored for it (at most one may stand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    /// The wait's id.
    pub id: String,
    /// The run waiting.
    pub run: String,
    /// Every decision stored for it.
    pub decisions: Vec<String>,
}

/// A signal as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSignal {
    /// The run signalled.
    pub run: String,
    /// The signal's name.
    pub name: String,
    /// The client's id for it.
    pub id: String,
}

/// One line of the effects log: a step program did its outside effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// The run.
    pub run: String,
    /// The step's index.
    pub step: u32,
    /// The step's attempt number.
    pub attempt: u32,
    /// The lease epoch the program ran under.
    pub epoch: u64,
    /// The worker it ran on.
    pub owner: String,
}

/// What the campaign knows about one attempt of a step: how many faults hit
/// a process holding it, and whether its tool is idempotent. An attempt
/// that is not listed had no faults and a non-idempotent tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The run.
    pub run: String,
    /// The step's index.
    pub step: u32,
    /// The attempt number.
    pub attempt: u32,
    /// Faults (kills, pauses, partitions) that hit a holder of it.
    pub faults: u32,
    /// Whether the tool may run twice without harm.
    pub idempotent: bool,
}

/// When a nemesis was active. Both ends inclusive, on the history's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The fault's name (`sigstop-worker`, `failover`, …).
    pub nemesis: String,
    /// When the fault began.
    pub start_ns: u64,
    /// When it healed.
    pub end_ns: u64,
}
