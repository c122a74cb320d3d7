//! Single holder: a stale-epoch commit, an epoch with two owners, epochs
//! going backwards and a row without its lease are caught; a takeover and a
//! commit overlapping a newer claim pass.

use cairn_history::{CommittedRow, FinalState, Property, RowKind, ViolationKind as K};

use crate::build::*;

fn with_rows(rows: Vec<CommittedRow>) -> FinalState {
    FinalState {
        rows,
        ..runs(vec![finished("r1", "k1")])
    }
}

#[test]
fn a_paused_holder_whose_stale_commit_is_acknowledged_is_caught() {
    // w1 claims at epoch 1 and is paused past its lease; w2 claims at epoch
    // 2; w1 wakes and commits at epoch 1, and the commit is acknowledged.
    let mut history = submitted();
    let newer = ok(2, 100, claim("r1", 2, "w2"));
    let stale = [
        invoke(1, 150, commit("r1", 0, 1, "w1")),
        ok(1, 160, commit("r1", 0, 1, "w1")),
    ];
    history.extend([ok(1, 10, claim("r1", 1, "w1")), newer.clone()]);
    history.extend(stale.clone());
    let report = verdict(&history, &with_rows(vec![]));
    assert_only(&report, Property::SingleHolder, &[K::StaleEpochCommit]);
    let mut shown = vec![newer];
    shown.extend(stale);
    assert_eq!(report.violations[0].events, shown);
}

#[test]
fn a_stale_commit_recorded_as_an_ok_alone_is_caught_by_its_time() {
    let mut history = submitted();
    history.extend([
        ok(2, 100, claim("r1", 2, "w2")),
        ok(1, 150, commit("r1", 0, 1, "w1")),
    ]);
    let report = verdict(&history, &with_rows(vec![]));
    assert_only(&report, Property::SingleHolder, &[K::StaleEpochCommit]);
    assert_eq!(report.violations[0].events, history[2..]);
}

#[test]
fn a_commit_overlapping_a_newer_claim_is_not_stale() {
    // The commit was sent before the claim was acknowledged: it may have
    // landed first and had its answer delayed.
    let mut history = submitted();
    history.extend([
        ok(1, 10, claim("r1", 1, "w1")),
        invoke(1, 90, commit("r1", 0, 1, "w1")),
        ok(2, 100, claim("r1", 2, "w2")),
        ok(1, 160, commit("r1", 0, 1, "w1")),
        invoke(2, 170, commit("r1", 1, 2, "w2")),
        ok(2, 180, commit("r1", 1, 2, "w2")),
    ]);
    let state = with_rows(vec![
        row(0, RowKind::Step, 1, "w1", 1),
        row(1, RowKind::Step, 2, "w2", 2),
    ]);
    assert_valid(&verdict(&history, &state));
}

#[test]
fn an_epoch_with_two_owners_is_caught() {
    // An asynchronous failover rolled back w1's claim and granted the same
    // epoch to w2.
    let mut history = submitted();
    let claims = [
        ok(1, 10, claim("r1", 3, "w1")),
        ok(2, 50, claim("r1", 3, "w2")),
    ];
    history.extend(claims.clone());
    let report = verdict(&history, &with_rows(vec![]));
    assert_only(&report, Property::SingleHolder, &[K::TwoOwners]);
    assert_eq!(report.violations[0].events, claims);
}

#[test]
fn two_owners_in_the_committed_rows_alone_are_caught() {
    let state = with_rows(vec![
        row(0, RowKind::Step, 1, "w1", 1),
        row(1, RowKind::JournalItem { item: 0 }, 1, "w2", 2),
    ]);
    let report = verdict(&submitted(), &state);
    assert_only(&report, Property::SingleHolder, &[K::TwoOwners]);
    assert!(report.violations[0].events.is_empty(), "{report}");
}

#[test]
fn epochs_going_backwards_in_commit_order_are_caught() {
    let state = with_rows(vec![
        row(0, RowKind::Step, 1, "w1", 1),
        row(1, RowKind::JournalItem { item: 0 }, 2, "w2", 2),
        row(1, RowKind::JournalItem { item: 1 }, 1, "w1", 3),
    ]);
    let report = verdict(&submitted(), &state);
    assert_only(&report, Property::SingleHolder, &[K::EpochsBackwards]);
    assert!(report.violations[0].message.contains("order 3"), "{report}");
}

#[test]
fn a_row_without_its_lease_is_caught() {
    let mut bare = row(0, RowKind::Step, 1, "w1", 1);
    bare.owner = None;
    let report = verdict(&submitted(), &with_rows(vec![bare]));
    assert_only(&report, Property::SingleHolder, &[K::MissingLease]);
}

#[test]
fn a_takeover_after_a_kill_passes() {
    let mut history = submitted();
    history.extend([
        ok(1, 10, claim("r1", 1, "w1")),
        invoke(1, 20, commit("r1", 0, 1, "w1")),
        ok(1, 30, commit("r1", 0, 1, "w1")),
        // w1 is killed; its lease expires; w2 takes over.
        ok(2, 100, claim("r1", 2, "w2")),
        invoke(2, 110, commit("r1", 1, 2, "w2")),
        ok(2, 120, commit("r1", 1, 2, "w2")),
        // w1's next process tries an old commit: refused, as it must be.
        invoke(3, 130, commit("r1", 1, 1, "w1")),
        fail(3, 140, commit("r1", 1, 1, "w1")),
    ]);
    let state = with_rows(vec![
        row(0, RowKind::Step, 1, "w1", 1),
        row(1, RowKind::JournalItem { item: 0 }, 2, "w2", 2),
        row(1, RowKind::Step, 2, "w2", 3),
    ]);
    assert_valid(&verdict(&history, &state));
}
