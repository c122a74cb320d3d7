//! Events: the append-only per-run log (state transitions, steps, operator
//! actions). Written by the store in the same transaction as the change they
//! describe. Each kind's `data` is typed in [`payload`] ([`EventData`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::RunId;

pub mod payload;

pub use payload::{EventData, EventDecodeError};

/// What an event records. The fields named below are those of its
/// payload type in [`payload`], which says which writer writes which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    RunSubmitted,
    /// A process claimed the run (data: owner, epoch, from_status,
    /// took_over_step, cursor, and shared_death when true).
    RunClaimed,
    StepSucceeded,
    StepFailed,
    /// A failed attempt will be retried after a durable back-off.
    StepRetryScheduled,
    RunSucceeded,
    RunFailed,
    /// A resume with a different crew fingerprint was forced by an operator.
    CrewForced,
    /// A run moved to another version of its crew at a step boundary
    /// (data: `from` and `to`, each `{version, fingerprint}`, `by`, `reason`,
    /// `forced`).
    CrewUpgraded,
    /// The run is runnable but no live process can execute its crew version
    /// (its Rust agents): written once per stall by a worker's sweep (data:
    /// crew, version, fingerprint, handlers).
    RunBlocked,
    /// An operator retried a failed run (data: by, reason, from_status,
    /// step, and rerun_children when true).
    RunRetried,
    /// An operator continued an interrupted run.
    RunContinued,
    /// A cancel was requested for a running run.
    RunCancelRequested,
    StepCancelled,
    RunCancelled,
    /// This run was forked from another (data: parent, from_step,
    /// input_changed, rerun_children, thread_id, by, reason).
    RunForked,
    /// A step waits for a person (data: wait, kind, idx, attempt).
    WaitOpened,
    /// A person answered (data: wait, kind, idx, answer, by; `reason` when
    /// given, `original` for an edit).
    WaitAnswered,
    /// A wait passed its deadline unanswered.
    WaitExpired,
    /// A principal voted on a wait whose approver policy needs more votes
    /// (data: wait, kind, idx, decision, by, approvals, rejects, required).
    WaitVoted,
    /// An agent step called its model (data: idx, turn, provider, model,
    /// ms, input_tokens, output_tokens, stop_reason or error; when known,
    /// cache_read_tokens, cache_write_tokens and first_chunk_ms).
    ModelCalled,
    /// An agent step ran a tool (data: idx, call_id, tool, ms, is_error,
    /// idempotency_key).
    ToolExecuted,
    /// A step stopped at a limit and waits for `continue` (data: idx, role,
    /// attempt, duration_ms, error: the limit).
    StepInterrupted,
    /// Resume repaired an agent step's transcript (data: idx, action, and
    /// seqs or call_id and tool).
    TranscriptRepaired,
    /// A resume merged more context into the run's input for the steps
    /// still to run (data: by, reason, context, replaced: the earlier
    /// values of the keys it overwrote).
    ContextAdded,
    /// A `children` step started its children (data: idx, attempt, join,
    /// quorum, children: their count, crew, crews, concurrency).
    ChildrenSpawned,
    /// A `children` step's join was decided (data: idx, attempt, met, rule,
    /// settled, ok, total, by: the child whose end decided it).
    ChildrenJoined,
    /// An operator's retry of a `children` step kept the children that
    /// succeeded at its earlier attempts, or a fork running it again kept
    /// copies of its source's (data: idx, attempt, reused: each `{key,
    /// run_id}`, with `copied_from` for a copy); only the others start.
    ChildrenReused,
    /// A step waits for its provider key's pause: the run is queued again
    /// at its end, the same attempt (data: idx, role, attempt,
    /// duration_ms, key, delay_ms,
    /// observed: whether its own call was refused, message: why, as
    /// people read it: a paused key, a capped `Retry-After`, no permit).
    StepDeferred,
    /// A provider answered "too many requests", and the key is paused for
    /// every run on the database (data: key, for_ms, reason). Recorded in
    /// the run whose call was refused.
    KeyPaused,
    /// An operator resumed a paused provider key, and the run, deferred on
    /// it, is claimable again at once (data: key). Recorded in each run the
    /// resume woke; a pause that simply ends shows as the run's next claim.
    KeyResumed,
    /// An operator raised the run's budget (data: by, reason, raise, budget:
    /// the limits that stand).
    BudgetRaised,
    /// A run's spending crossed 80 % of one of its budget's limits (data:
    /// idx for the run's own call or child for its tree's, limit:
    /// `tokens`, `input_tokens`, `output_tokens`, `model_calls`,
    /// `tool_calls` or `cost_usd`, budget, spent). Emitted once per
    /// crossing; a raise that puts it below again lets it cross again.
    BudgetWarning,
    /// A `command` step's program reported the tokens it spent
    /// (`cairn-usage:` on its stderr; data: idx, attempt, input_tokens,
    /// output_tokens), whether it succeeded or not: they count in the
    /// run's token budget.
    UsageReported,
    /// A child of the run stopped `interrupted` (its budget or its tree's
    /// spent, a turn limit), recorded on the parent that waits for it
    /// (data: child, key, idx: the parent's step, kind, message): an
    /// operator continues it (`runs continue PARENT`, with `--budget` to
    /// raise the parent's first).
    ChildInterrupted,
    /// A model call of a run with a budget is about to be sent (data: idx,
    /// turn, epoch, estimate_input, estimate_output, estimate_cost_nanos),
    /// written before its request leaves: a call whose `model_called`
    /// never follows (its process died mid-call) counts at its estimate.
    ModelCallSent,
    /// A child of the run ended (succeeded, failed or cancelled) while its
    /// join was open, recorded on the parent in the transaction that
    /// counted it (data: child, key, idx: the parent's step, status, and
    /// kind and message when it did not succeed).
    ChildEnded,
    /// A `command` step's program started, in a process group of its own
    /// (data: idx, attempt, pgid, start: the program's start time in clock
    /// ticks since boot, host, boot, pidns, engine_pid and engine_start:
    /// the process that started it). Recorded before the program reads its
    /// context, so a takeover on the same machine can end the group once
    /// that process is gone (`cairn_steps::reap`). Linux only.
    ProgramStarted,
    /// A signal for the run was stored (data: id, name, by…, woke).
    SignalReceived,
    /// A `signal` step waits (data: idx, attempt, names, timeout_ms).
    SignalWaitOpened,
    /// A step's commit consumed a signal (data: idx, attempt, id, name).
    SignalConsumed,
    /// A `signal` step's wait timed out (data: idx, attempt, names).
    SignalTimedOut,
    /// A step published a value for the run's callers (data: key, value,
    /// idx, attempt); the newest of a key is its value.
    ValuePublished,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 43] = [
        EventKind::RunSubmitted,
        EventKind::RunClaimed,
        EventKind::StepSucceeded,
        EventKind::StepFailed,
        EventKind::StepRetryScheduled,
        EventKind::RunSucceeded,
        EventKind::RunFailed,
        EventKind::CrewForced,
        EventKind::CrewUpgraded,
        EventKind::RunBlocked,
        EventKind::RunRetried,
        EventKind::RunContinued,
        EventKind::RunCancelRequested,
        EventKind::StepCancelled,
        EventKind::RunCancelled,
        EventKind::RunForked,
        EventKind::WaitOpened,
        EventKind::WaitAnswered,
        EventKind::WaitExpired,
        EventKind::WaitVoted,
        EventKind::ModelCalled,
        EventKind::ToolExecuted,
        EventKind::StepInterrupted,
        EventKind::TranscriptRepaired,
        EventKind::ContextAdded,
        EventKind::ChildrenSpawned,
        EventKind::ChildrenJoined,
        EventKind::ChildrenReused,
        EventKind::StepDeferred,
        EventKind::KeyPaused,
        EventKind::KeyResumed,
        EventKind::BudgetRaised,
        EventKind::BudgetWarning,
        EventKind::UsageReported,
        EventKind::ChildInterrupted,
        EventKind::ModelCallSent,
        EventKind::ChildEnded,
        EventKind::ProgramStarted,
        EventKind::SignalReceived,
        EventKind::SignalWaitOpened,
        EventKind::SignalConsumed,
        EventKind::SignalTimedOut,
        EventKind::ValuePublished,
    ];

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
            EventKind::CrewUpgraded => "crew_upgraded",
            EventKind::RunBlocked => "run_blocked",
            EventKind::RunRetried => "run_retried",
            EventKind::RunContinued => "run_continued",
            EventKind::RunCancelRequested => "run_cancel_requested",
            EventKind::StepCancelled => "step_cancelled",
            EventKind::RunCancelled => "run_cancelled",
            EventKind::RunForked => "run_forked",
            EventKind::WaitOpened => "wait_opened",
            EventKind::WaitAnswered => "wait_answered",
            EventKind::WaitExpired => "wait_expired",
            EventKind::WaitVoted => "wait_voted",
            EventKind::ModelCalled => "model_called",
            EventKind::ToolExecuted => "tool_executed",
            EventKind::StepInterrupted => "step_interrupted",
            EventKind::TranscriptRepaired => "transcript_repaired",
            EventKind::ContextAdded => "context_added",
            EventKind::ChildrenSpawned => "children_spawned",
            EventKind::ChildrenJoined => "children_joined",
            EventKind::ChildrenReused => "children_reused",
            EventKind::StepDeferred => "step_deferred",
            EventKind::KeyPaused => "key_paused",
            EventKind::KeyResumed => "key_resumed",
            EventKind::BudgetRaised => "budget_raised",
            EventKind::BudgetWarning => "budget_warning",
            EventKind::UsageReported => "usage_reported",
            EventKind::ChildInterrupted => "child_interrupted",
            EventKind::ModelCallSent => "model_call_sent",
            EventKind::ChildEnded => "child_ended",
            EventKind::ProgramStarted => "program_started",
            EventKind::SignalReceived => "signal_received",
            EventKind::SignalWaitOpened => "signal_wait_opened",
            EventKind::SignalConsumed => "signal_consumed",
            EventKind::SignalTimedOut => "signal_timed_out",
            EventKind::ValuePublished => "value_published",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }
}

impl NewEvent {
    /// A `context_added` event: who, why, the context, and the values of
    /// the `input`'s keys it replaced.
    pub fn context_added(input: &Value, context: &Value, actor: &Actor) -> NewEvent {
        let replaced: serde_json::Map<String, Value> = context
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, _)| Some((k.clone(), input.as_object()?.get(k)?.clone())))
            .collect();
        NewEvent::typed(EventData::ContextAdded(payload::ContextAdded {
            actor: actor.clone(),
            context: context.clone(),
            replaced,
        }))
    }
}

/// Who did an operator action, and why: recorded in its event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub by: String,
    pub reason: Option<String>,
    /// Where the action came from (each part written only when known).
    #[serde(flatten)]
    pub origin: crate::people::Origin,
}

impl Actor {
    pub fn new(by: impl Into<String>) -> Self {
        Actor {
            by: by.into(),
            reason: None,
            origin: crate::people::Origin::default(),
        }
    }

    /// The same actor, recorded as having come through `origin`.
    pub fn from(mut self, origin: crate::people::Origin) -> Self {
        self.origin = origin;
        self
    }

    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
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
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::parse("nope"), None);
    }
}
