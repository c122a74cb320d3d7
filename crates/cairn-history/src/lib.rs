//! A history checker for Cairn's fault campaigns, in the manner of Jepsen
//! and Elle: clients and workers record every operation they attempt as a
//! *history* of events (`invoke`, then `ok`, `fail` or `info`); after the
//! nemeses (kills, pauses, partitions, failovers) heal, the campaign reads
//! the *final state* of the database and calls [`check`], which proves from
//! the two together what Cairn promises under faults.
//!
//! Vocabulary. An `ok` is an *acknowledgement*: the operation happened. A
//! `fail` is a typed refusal: it certainly did not. An `info` (a timeout, a
//! reset, a 5xx, or an invoke never completed) is *indeterminate*: it may
//! have happened, and the checker accepts either. Real-time order is the
//! one linearizability uses: one operation precedes another only if it
//! completed before the other was invoked; overlapping operations may have
//! taken effect in either order. Checks only ever conclude what every
//! possible order of overlapping operations would show, so a delayed or
//! lost acknowledgement never produces a false alarm.
//!
//! The properties (issue 51), one function each in [`checks`]:
//! - **submits**: an acknowledged key is exactly one run, named by every
//!   acknowledgement; unknown submits make at most one; no run appears unasked;
//! - **answers and signals**: acknowledged answers and signals are stored;
//!   one decision per wait;
//! - **single holder**: committed rows carry epoch and owner; epochs never go
//!   backwards in commit order; no stale-epoch commit is acknowledged after a
//!   newer claim was; no epoch has two owners;
//! - **effects per attempt**: at most one more effect than the faults that hit
//!   the attempt's holder, one for a non-idempotent tool;
//! - **monotone reads**: reads are prefixes of the final events and never
//!   shrink in real-time order;
//! - **nothing stranded**: no run running under an expired lease;
//! - **not vacuous**: every operation type succeeded in every fault window,
//!   or the campaign proved nothing.
//!
//! A history is JSON lines ([`parse_jsonl`], [`to_jsonl`]), the operation
//! named by `"f"`; a worker may record an `ok` alone (a claim's epoch is only
//! known once granted), which counts as an operation invoked at that instant:
//!
//! ```text
//! {"process":3,"type":"invoke","op":{"f":"submit","key":"k1"},"time_ns":100}
//! {"process":3,"type":"ok","op":{"f":"submit","key":"k1","run":"r1"},"time_ns":250}
//! {"process":9,"type":"ok","op":{"f":"claim","run":"r1","epoch":2,"owner":"w1"},"time_ns":300}
//! ```
//!
//! A [`Report`] prints each violation with the few events that show it and
//! the campaign's seed. Pure functions: no I/O, no clock, no database.

#![warn(missing_docs)]

pub mod checks;
pub mod history;
pub mod ops;
pub mod report;
pub mod state;

pub use history::{parse_jsonl, to_jsonl, Error, Event, EventKind, Op, OpType};
pub use ops::{operations, Operation};
pub use report::{Outcomes, Property, Report, Violation, ViolationKind};
pub use state::{
    Attempt, CommittedRow, Effect, FaultWindow, FinalState, RowKind, Run, RunStatus, StoredSignal,
    Wait,
};

use std::collections::BTreeMap;

/// Checks every property of `history` against `final_state` and the fault
/// `windows`, and reports under the campaign's `seed`.
pub fn check(
    history: &[Event],
    final_state: &FinalState,
    windows: &[FaultWindow],
    seed: u64,
) -> Report {
    let (ops, mut violations) = operations(history);
    let mut counts: BTreeMap<OpType, Outcomes> = BTreeMap::new();
    for operation in &ops {
        counts
            .entry(operation.op.op_type())
            .or_default()
            .add(operation.outcome);
    }
    violations.extend(checks::submits(&ops, final_state));
    violations.extend(checks::answers_and_signals(&ops, final_state));
    violations.extend(checks::single_holder(&ops, final_state));
    violations.extend(checks::effects_per_attempt(final_state));
    violations.extend(checks::monotone_reads(&ops, final_state));
    violations.extend(checks::nothing_stranded(&ops, final_state));
    violations.extend(checks::not_vacuous(&ops, windows));
    Report {
        seed,
        operations: counts,
        violations,
    }
}
