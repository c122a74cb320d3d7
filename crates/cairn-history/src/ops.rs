//! Pairs a history's events into [`Operation`]s: each invoke with the
//! completion its process records next. What is left open at the end is
//! unknown (`info`); a completion with no invoke (a worker's claim, known
//! only once granted) is an operation of its own, instantaneous.

use std::collections::HashMap;

use crate::history::{Event, EventKind, Op};
use crate::report::{Violation, ViolationKind};

/// One operation: its invoke, how it ended, and its value.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The value: the completion's for an `ok`, else the invoke's.
    pub op: Op,
    /// `Ok`, `Fail` or `Info` (an operation never completed is `Info`).
    pub outcome: EventKind,
    /// The invoke, absent for a lone completion.
    pub invoke: Option<Event>,
    /// The completion, absent while open.
    pub completion: Option<Event>,
}

impl Operation {
    /// When it began: its invoke, or for a lone completion, that.
    pub fn invoked_ns(&self) -> u64 {
        self.invoke
            .as_ref()
            .or(self.completion.as_ref())
            .map_or(0, |e| e.time_ns)
    }

    /// When it was acknowledged, if it was.
    pub fn ok_ns(&self) -> Option<u64> {
        self.completion
            .as_ref()
            .filter(|e| e.kind == EventKind::Ok)
            .map(|e| e.time_ns)
    }

    /// Whether it was acknowledged.
    pub fn is_ok(&self) -> bool {
        self.outcome == EventKind::Ok
    }

    /// Its events, invoke first.
    pub fn events(&self) -> Vec<Event> {
        self.invoke
            .iter()
            .chain(&self.completion)
            .cloned()
            .collect()
    }
}

/// The events of several operations, for a violation.
pub(crate) fn events_of<'a>(ops: impl IntoIterator<Item = &'a Operation>) -> Vec<Event> {
    ops.into_iter().flat_map(Operation::events).collect()
}

/// Pairs `history` (in any order: it is sorted by time, stably) into
/// operations in invoke order, with the violations of well-formedness.
pub fn operations(history: &[Event]) -> (Vec<Operation>, Vec<Violation>) {
    let mut sorted: Vec<&Event> = history.iter().collect();
    sorted.sort_by_key(|e| e.time_ns);
    let mut ops: Vec<Operation> = vec![];
    let mut open: HashMap<u32, usize> = HashMap::new();
    let mut bad = vec![];
    for event in sorted {
        if event.kind == EventKind::Invoke {
            if let Some(prev) = open.remove(&event.process) {
                let mut shown = ops[prev].events();
                shown.push(event.clone());
                let message = format!(
                    "process {} invoked an operation while its {} was still open",
                    event.process,
                    ops[prev].op.op_type()
                );
                bad.push(Violation::new(ViolationKind::Malformed, message, shown));
            }
            open.insert(event.process, ops.len());
            ops.push(Operation {
                op: event.op.clone(),
                outcome: EventKind::Info,
                invoke: Some(event.clone()),
                completion: None,
            });
            continue;
        }
        let matching = open
            .get(&event.process)
            .copied()
            .filter(|&at| ops[at].op.op_type() == event.op.op_type());
        if let Some(at) = matching {
            open.remove(&event.process);
            let operation = &mut ops[at];
            if event.kind == EventKind::Ok {
                operation.op = event.op.clone();
            }
            operation.outcome = event.kind;
            operation.completion = Some(event.clone());
            continue;
        }
        if let Some(&at) = open.get(&event.process) {
            let message = format!(
                "process {} completed a {} while its {} was open",
                event.process,
                event.op.op_type(),
                ops[at].op.op_type()
            );
            let mut shown = ops[at].events();
            shown.push(event.clone());
            bad.push(Violation::new(ViolationKind::Malformed, message, shown));
        }
        ops.push(Operation {
            op: event.op.clone(),
            outcome: event.kind,
            invoke: None,
            completion: Some(event.clone()),
        });
    }
    (ops, bad)
}
