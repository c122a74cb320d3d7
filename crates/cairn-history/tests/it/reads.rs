//! Monotone reads: a read that is not a prefix of the final events and a
//! read going backwards are caught; growing and overlapping reads pass.

use cairn_history::{FinalState, Property, ViolationKind as K};

use crate::build::*;

fn state() -> FinalState {
    let mut state = runs(vec![finished("r1", "k1")]);
    state.events.insert("r1".into(), vec![1, 2, 3, 4]);
    state
}

#[test]
fn a_read_that_is_not_a_prefix_is_caught() {
    let mut history = submitted();
    let bad = [
        invoke(1, 10, read("r1", &[])),
        ok(1, 20, read("r1", &[1, 3])),
    ];
    history.extend(bad.clone());
    let report = verdict(&history, &state());
    assert_only(&report, Property::MonotoneReads, &[K::NonPrefixRead]);
    assert_eq!(report.violations[0].events, bad);
}

#[test]
fn a_read_longer_than_the_final_events_is_not_a_prefix() {
    let mut history = submitted();
    history.extend([
        invoke(1, 10, read("r1", &[])),
        ok(1, 20, read("r1", &[1, 2, 3, 4, 5])),
    ]);
    let report = verdict(&history, &state());
    assert_only(&report, Property::MonotoneReads, &[K::NonPrefixRead]);
}

#[test]
fn a_read_going_backwards_in_real_time_is_caught() {
    // Client 1's read ended before client 2's began, on another server
    // reading a lagging replica.
    let mut history = submitted();
    let reads = [
        invoke(1, 10, read("r1", &[])),
        ok(1, 20, read("r1", &[1, 2, 3])),
        invoke(2, 30, read("r1", &[])),
        ok(2, 40, read("r1", &[1])),
    ];
    history.extend(reads.clone());
    let report = verdict(&history, &state());
    assert_only(&report, Property::MonotoneReads, &[K::ReadBackwards]);
    assert_eq!(report.violations[0].events, reads);
}

#[test]
fn overlapping_and_growing_reads_pass() {
    let mut history = submitted();
    history.extend([
        invoke(1, 10, read("r1", &[])),
        invoke(2, 11, read("r1", &[])),
        // These two overlap: either order is possible.
        ok(2, 15, read("r1", &[1, 2])),
        ok(1, 20, read("r1", &[1])),
        invoke(1, 30, read("r1", &[])),
        ok(1, 40, read("r1", &[1, 2])),
        invoke(2, 50, read("r1", &[])),
        ok(2, 60, read("r1", &[1, 2, 3, 4])),
        // An unknown read proves nothing.
        invoke(3, 70, read("r1", &[])),
        info(3, 80, read("r1", &[])),
    ]);
    assert_valid(&verdict(&history, &state()));
}
