//! Answers and signals: an acknowledged answer is stored, a wait keeps one
//! decision (two different acknowledged ones cannot both stand), and an
//! acknowledged signal is stored, once.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::Op;
use crate::ops::{events_of, Operation};
use crate::report::{Violation, ViolationKind};
use crate::state::FinalState;

/// The answer and signal rules over `ops` and `state`.
pub fn answers_and_signals(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut out = answers(ops, state);
    out.extend(signals(ops, state));
    out
}

fn answers(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut acked: BTreeMap<&str, Vec<(&str, &Operation)>> = BTreeMap::new();
    let mut asked: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for operation in ops {
        if let Op::Answer { wait, decision } = &operation.op {
            asked.entry(wait).or_default().push(operation);
            if operation.is_ok() {
                acked.entry(wait).or_default().push((decision, operation));
            }
        }
    }
    let no_answers = vec![];
    let mut out = vec![];
    let mut two = BTreeSet::new();
    for wait in &state.waits {
        let stored: BTreeSet<&str> = wait.decisions.iter().map(String::as_str).collect();
        if wait.decisions.len() > 1 {
            let message = format!(
                "wait {} of run {} holds {} decisions: {stored:?}",
                wait.id,
                wait.run,
                wait.decisions.len()
            );
            let shown = asked.get(wait.id.as_str()).unwrap_or(&no_answers);
            let shown = events_of(shown.iter().copied().filter(|o| o.is_ok()));
            out.push(Violation::new(ViolationKind::TwoDecisions, message, shown));
            two.insert(wait.id.as_str());
        }
    }
    for (wait, answers) in &acked {
        let mut by_decision: BTreeMap<&str, &Operation> = BTreeMap::new();
        for (decision, operation) in answers {
            by_decision.entry(decision).or_insert(operation);
        }
        if by_decision.len() > 1 && two.insert(wait) {
            let decisions: Vec<&str> = by_decision.keys().copied().collect();
            let message = format!("two decisions acknowledged for wait {wait}: {decisions:?}");
            let shown = events_of(by_decision.values().copied());
            out.push(Violation::new(ViolationKind::TwoDecisions, message, shown));
        }
        if two.contains(wait) {
            continue;
        }
        let stored = state.waits.iter().find(|w| w.id == *wait);
        for (decision, operation) in by_decision {
            if !stored.is_some_and(|w| w.decisions.iter().any(|d| d == decision)) {
                let message = format!(
                    "acknowledged answer {decision:?} to wait {wait} is not in the final state"
                );
                out.push(Violation::new(
                    ViolationKind::LostAnswer,
                    message,
                    operation.events(),
                ));
            }
        }
    }
    out
}

fn signals(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut count: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for signal in &state.signals {
        *count.entry((&signal.run, &signal.id)).or_default() += 1;
    }
    let mut out = vec![];
    let mut reported = BTreeSet::new();
    for operation in ops.iter().filter(|o| o.is_ok()) {
        let Op::Signal { run, name, id } = &operation.op else {
            continue;
        };
        let stored = state
            .signals
            .iter()
            .any(|s| s.run == *run && s.id == *id && s.name == *name);
        if !stored && reported.insert((run, id)) {
            let message =
                format!("acknowledged signal {name} (id {id}) to run {run} is not stored");
            out.push(Violation::new(
                ViolationKind::LostSignal,
                message,
                operation.events(),
            ));
        }
    }
    for ((run, id), n) in count.into_iter().filter(|&(_, n)| n > 1) {
        let message = format!("signal id {id} is stored {n} times for run {run}");
        let shown = ops
            .iter()
            .filter(|o| matches!(&o.op, Op::Signal { run: r, id: i, .. } if r == run && i == id));
        out.push(Violation::new(
            ViolationKind::DuplicatedSignal,
            message,
            events_of(shown),
        ));
    }
    out
}
