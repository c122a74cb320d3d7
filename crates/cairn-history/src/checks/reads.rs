//! Monotone reads: an acknowledged read of a run's events is a prefix of
//! the run's final list, and a read that began after another ended never
//! returns fewer events (real-time order, across all clients).

use std::collections::BTreeMap;

use crate::history::Op;
use crate::ops::{events_of, Operation};
use crate::report::{Violation, ViolationKind};
use crate::state::FinalState;

/// An acknowledged read: the operation, its run, what it returned.
struct Read<'a> {
    operation: &'a Operation,
    seqs: &'a [u64],
    ok_ns: u64,
}

/// The read rules over `ops` and the final event lists of `state`.
pub fn monotone_reads(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut by_run: BTreeMap<&str, Vec<Read>> = BTreeMap::new();
    for operation in ops {
        if let (Op::ReadEvents { run, seqs }, Some(ok_ns)) = (&operation.op, operation.ok_ns()) {
            let read = Read {
                operation,
                seqs,
                ok_ns,
            };
            by_run.entry(run).or_default().push(read);
        }
    }
    let mut out = vec![];
    for (run, reads) in &by_run {
        let last = state.events.get(*run).map_or(&[][..], Vec::as_slice);
        for read in reads.iter().filter(|r| !last.starts_with(r.seqs)) {
            let message = format!(
                "read of run {run} returned {:?}, not a prefix of its final events {last:?}",
                read.seqs
            );
            let shown = read.operation.events();
            out.push(Violation::new(ViolationKind::NonPrefixRead, message, shown));
        }
        out.extend(backwards(run, reads));
    }
    out
}

/// Reads that returned fewer events than the longest read acknowledged
/// before they were invoked.
fn backwards(run: &str, reads: &[Read]) -> Vec<Violation> {
    let mut by_ok: Vec<&Read> = reads.iter().collect();
    by_ok.sort_by_key(|r| r.ok_ns);
    let mut by_invoke: Vec<&Read> = reads.iter().collect();
    by_invoke.sort_by_key(|r| r.operation.invoked_ns());
    let mut out = vec![];
    let mut done = 0;
    let mut longest: Option<&Read> = None;
    for read in by_invoke {
        let began = read.operation.invoked_ns();
        while done < by_ok.len() && by_ok[done].ok_ns < began {
            let ended = by_ok[done];
            if longest.is_none_or(|l| ended.seqs.len() > l.seqs.len()) {
                longest = Some(ended);
            }
            done += 1;
        }
        if let Some(earlier) = longest.filter(|l| l.seqs.len() > read.seqs.len()) {
            let message = format!(
                "read of run {run} returned {} events after an earlier read returned {}",
                read.seqs.len(),
                earlier.seqs.len()
            );
            let shown = events_of([earlier.operation, read.operation]);
            out.push(Violation::new(ViolationKind::ReadBackwards, message, shown));
        }
    }
    out
}
