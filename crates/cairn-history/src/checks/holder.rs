//! Single holder: every committed row carries its lease, a run's epochs
//! never go backwards in commit order, no commit fenced on an old epoch is
//! acknowledged once a newer claim was, and no epoch has two owners.

use std::collections::BTreeMap;

use crate::history::Op;
use crate::ops::{events_of, Operation};
use crate::report::{Violation, ViolationKind};
use crate::state::{CommittedRow, FinalState};

/// The single-holder rules over `ops` and the rows of `state`.
pub fn single_holder(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut out = missing_leases(ops, state);
    out.extend(epochs_backwards(ops, state));
    out.extend(stale_commits(ops));
    out.extend(two_owners(ops, state));
    out
}

/// The acknowledged commits of `run`'s `step` at `epoch`.
fn commits_of<'a>(ops: &'a [Operation], row: &CommittedRow) -> Vec<&'a Operation> {
    ops.iter()
        .filter(|o| o.is_ok())
        .filter(|o| {
            matches!(&o.op, Op::Commit { run, step, epoch, .. }
            if *run == row.run && *step == row.step && Some(*epoch) == row.epoch)
        })
        .collect()
}

fn missing_leases(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let bare = state
        .rows
        .iter()
        .filter(|r| r.epoch.is_none() || r.owner.is_none());
    bare.map(|row| {
        let message = format!(
            "run {} step {} ({:?}, order {}) was committed without its lease: epoch {:?}, owner {:?}",
            row.run, row.step, row.kind, row.order, row.epoch, row.owner
        );
        Violation::new(ViolationKind::MissingLease, message, events_of(commits_of(ops, row)))
    })
    .collect()
}

/// The first row of each run whose epoch is lower than one committed before it.
fn epochs_backwards(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    let mut by_run: BTreeMap<&str, Vec<&CommittedRow>> = BTreeMap::new();
    for row in state.rows.iter().filter(|r| r.epoch.is_some()) {
        by_run.entry(&row.run).or_default().push(row);
    }
    let mut out = vec![];
    for (run, mut rows) in by_run {
        rows.sort_by_key(|r| r.order);
        let mut highest: Option<&CommittedRow> = None;
        for row in rows {
            match highest {
                Some(high) if row.epoch < high.epoch => {
                    let message = format!(
                        "run {run}: step {} (order {}) committed at epoch {:?} after \
                         step {} (order {}) at epoch {:?}",
                        row.step, row.order, row.epoch, high.step, high.order, high.epoch
                    );
                    let mut shown = events_of(commits_of(ops, high));
                    shown.extend(events_of(commits_of(ops, row)));
                    out.push(Violation::new(
                        ViolationKind::EpochsBackwards,
                        message,
                        shown,
                    ));
                    break;
                }
                _ => highest = Some(row),
            }
        }
    }
    out
}

/// Commits at an epoch, invoked after a claim at a newer epoch of the same
/// run was acknowledged, and acknowledged all the same. (Invoked after, not
/// acknowledged after: a commit that overlaps the claim may have landed
/// first and had its answer delayed.)
fn stale_commits(ops: &[Operation]) -> Vec<Violation> {
    let mut claims: BTreeMap<&str, Vec<(u64, u64, &Operation)>> = BTreeMap::new();
    for operation in ops {
        if let (Op::Claim { run, epoch, .. }, Some(ok)) = (&operation.op, operation.ok_ns()) {
            claims.entry(run).or_default().push((*epoch, ok, operation));
        }
    }
    let mut out = vec![];
    for commit in ops.iter().filter(|o| o.is_ok()) {
        let Op::Commit {
            run,
            step,
            epoch,
            owner,
        } = &commit.op
        else {
            continue;
        };
        let began = commit.invoked_ns();
        let newer = claims
            .get(run.as_str())
            .into_iter()
            .flatten()
            .filter(|&&(e, ok, _)| e > *epoch && ok < began)
            .min_by_key(|&&(_, ok, _)| ok);
        if let Some(&(newer_epoch, _, claim)) = newer {
            let message = format!(
                "run {run} step {step}: commit at epoch {epoch} by {owner} was acknowledged, \
                 though a claim at epoch {newer_epoch} was acknowledged before it began"
            );
            let shown = events_of([claim, commit]);
            out.push(Violation::new(
                ViolationKind::StaleEpochCommit,
                message,
                shown,
            ));
        }
    }
    out
}

/// Epochs of one run with more than one owner, from acknowledged claims and
/// commits and from the committed rows.
fn two_owners(ops: &[Operation], state: &FinalState) -> Vec<Violation> {
    type Owners<'a> = BTreeMap<&'a str, Option<&'a Operation>>;
    let mut seen: BTreeMap<(&str, u64), Owners> = BTreeMap::new();
    for operation in ops.iter().filter(|o| o.is_ok()) {
        let (run, epoch, owner) = match &operation.op {
            Op::Claim { run, epoch, owner }
            | Op::Commit {
                run, epoch, owner, ..
            } => (run, epoch, owner),
            _ => continue,
        };
        let slot = seen.entry((run, *epoch)).or_default();
        slot.entry(owner).or_default().get_or_insert(operation);
    }
    for row in &state.rows {
        if let (Some(epoch), Some(owner)) = (row.epoch, &row.owner) {
            seen.entry((&row.run, epoch))
                .or_default()
                .entry(owner)
                .or_default();
        }
    }
    let split = seen.into_iter().filter(|(_, owners)| owners.len() > 1);
    split
        .map(|((run, epoch), owners)| {
            let names: Vec<&str> = owners.keys().copied().collect();
            let message = format!("run {run}: epoch {epoch} held by {names:?}");
            let shown = events_of(owners.values().flatten().copied());
            Violation::new(ViolationKind::TwoOwners, message, shown)
        })
        .collect()
}
