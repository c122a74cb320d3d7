//! Nothing stranded and not vacuous: after healing no run is left running
//! under an expired lease, and a campaign counts only if every operation
//! type it used succeeded inside every fault window.

use std::collections::BTreeSet;

use crate::history::{EventKind, Op, OpType};
use crate::ops::Operation;
use crate::report::{Violation, ViolationKind};
use crate::state::{FaultWindow, FinalState, RunStatus};

/// Runs of `state` running under an expired lease; the events shown are
/// the submit that named the run and the last claim of it acknowledged.
pub fn nothing_stranded(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let stuck = state.runs.iter().filter(|r| {
        r.status
            == RunStatus::Running {
                lease_expired: true,
            }
    });
    stuck
        .map(|run| {
            let submit = ops
                .iter()
                .filter(|o| o.is_ok())
                .find(|o| matches!(&o.op, Op::Submit { run: Some(r), .. } if *r == run.id));
            let claim = ops
                .iter()
                .filter(|o| o.is_ok())
                .filter(|o| matches!(&o.op, Op::Claim { run: r, .. } if *r == run.id))
                .max_by_key(|o| o.ok_ns());
            let shown = submit.into_iter().chain(claim).flat_map(Operation::events);
            let message = format!(
                "run {} is running under an expired lease after the faults healed",
                run.id
            );
            Violation::new(ViolationKind::Stranded, message, shown.collect())
        })
        .collect()
}

/// For each window, the operation types of the history with no `ok` inside it.
pub fn not_vacuous(ops: &[Operation], windows: &[FaultWindow]) -> Vec<Violation> {
    let used: BTreeSet<OpType> = ops.iter().map(|o| o.op.op_type()).collect();
    let mut out = vec![];
    for window in windows {
        let succeeded: BTreeSet<OpType> = ops
            .iter()
            .filter_map(|o| o.completion.as_ref())
            .filter(|e| e.kind == EventKind::Ok)
            .filter(|e| (window.start_ns..=window.end_ns).contains(&e.time_ns))
            .map(|e| e.op.op_type())
            .collect();
        let missing: Vec<String> = used
            .difference(&succeeded)
            .map(ToString::to_string)
            .collect();
        if !missing.is_empty() {
            let message = format!(
                "vacuous: no {} succeeded inside fault window {} [{}, {}] ns",
                missing.join(", no "),
                window.nemesis,
                window.start_ns,
                window.end_ns
            );
            out.push(Violation::new(ViolationKind::Vacuous, message, vec![]));
        }
    }
    out
}
