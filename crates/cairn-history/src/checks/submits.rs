//! Submits: each acknowledged key is exactly one run, every acknowledgement
//! of a key names that run, unknown submits make at most one, and no run
//! appears that no client (or parent run) asked for.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{EventKind, Op};
use crate::ops::{events_of, Operation};
use crate::report::{Violation, ViolationKind};
use crate::state::{FinalState, Run};

/// The submit rules over `ops` and the runs of `state`.
pub fn submits(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut asked: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for operation in ops {
        if let Op::Submit { key, .. } = &operation.op {
            asked.entry(key).or_default().push(operation);
        }
    }
    let mut stored: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for run in &state.runs {
        if let Some(key) = &run.key {
            stored.entry(key).or_default().push(run);
        }
    }
    let present: BTreeSet<&str> = state.runs.iter().map(|r| r.id.as_str()).collect();
    let mut out = vec![];
    for (key, runs) in &stored {
        out.extend(stored_key(key, runs, asked.get(key), &present));
    }
    for (key, submits) in &asked {
        let runs = stored.get(key).map_or(&[][..], Vec::as_slice);
        out.extend(acknowledged_key(key, submits, runs));
    }
    let keyless = state.runs.iter().filter(|r| r.key.is_none());
    for run in keyless.filter(|r| !has_parent(r, &present)) {
        let message = format!(
            "run {} has no key and no parent in the final state: nobody asked for it",
            run.id
        );
        out.push(Violation::new(
            ViolationKind::UnexpectedRun,
            message,
            vec![],
        ));
    }
    out
}

/// Whether a run's parent (which asked for it) is in the final state.
fn has_parent(run: &Run, present: &BTreeSet<&str>) -> bool {
    run.parent.as_deref().is_some_and(|p| present.contains(p))
}

fn ids(runs: &[&Run]) -> String {
    runs.iter()
        .map(|r| r.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The runs stored under one key against the submits of that key.
fn stored_key(
    key: &str,
    runs: &[&Run],
    asked: Option<&Vec<&Operation>>,
    present: &BTreeSet<&str>,
) -> Vec<Violation> {
    let Some(asked) = asked else {
        let unasked: Vec<&Run> = runs
            .iter()
            .copied()
            .filter(|r| !has_parent(r, present))
            .collect();
        if unasked.is_empty() {
            return vec![];
        }
        let message = format!(
            "run(s) {} under key {key:?}, which no client submitted",
            ids(&unasked)
        );
        return vec![Violation::new(
            ViolationKind::UnexpectedRun,
            message,
            vec![],
        )];
    };
    if runs.len() > 1 {
        let message = format!("key {key:?} has {} runs: {}", runs.len(), ids(runs));
        let shown = asked
            .iter()
            .copied()
            .filter(|o| o.outcome != EventKind::Fail);
        return vec![Violation::new(
            ViolationKind::DuplicatedRun,
            message,
            events_of(shown),
        )];
    }
    if asked.iter().all(|o| o.outcome == EventKind::Fail) {
        let message = format!(
            "run {} exists under key {key:?}, yet every submit of it was refused",
            ids(runs)
        );
        let shown = events_of(asked.iter().copied());
        return vec![Violation::new(
            ViolationKind::RefusedButPresent,
            message,
            shown,
        )];
    }
    vec![]
}

/// The acknowledgements of one key against the runs stored under it.
fn acknowledged_key(key: &str, submits: &[&Operation], runs: &[&Run]) -> Vec<Violation> {
    let acked: Vec<&Operation> = submits.iter().copied().filter(|o| o.is_ok()).collect();
    let Some(&first) = acked.first() else {
        return vec![];
    };
    let mut named: BTreeMap<&str, &Operation> = BTreeMap::new();
    for operation in &acked {
        if let Op::Submit { run: Some(run), .. } = &operation.op {
            named.entry(run).or_insert(operation);
        }
    }
    if named.len() > 1 {
        let names: BTreeSet<&str> = named.keys().copied().collect();
        let message = format!("acknowledgements of key {key:?} name different runs: {names:?}");
        let shown = events_of(named.values().copied());
        return vec![Violation::new(ViolationKind::AcksDisagree, message, shown)];
    }
    let acked_run = named.keys().next().copied();
    match (runs, acked_run) {
        ([], _) => {
            let message = format!(
                "acknowledged submit of key {key:?} (run {}) is not in the final state",
                acked_run.unwrap_or("unnamed")
            );
            let shown = named.values().next().copied().unwrap_or(first);
            vec![Violation::new(
                ViolationKind::LostSubmit,
                message,
                shown.events(),
            )]
        }
        ([run], Some(acked_id)) if run.id != acked_id => {
            let message = format!(
                "acknowledged submit of key {key:?} named run {acked_id}, \
                 but the final state holds {} under that key",
                run.id
            );
            let shown = named.values().next().copied().unwrap_or(first);
            vec![Violation::new(
                ViolationKind::LostSubmit,
                message,
                shown.events(),
            )]
        }
        _ => vec![],
    }
}
