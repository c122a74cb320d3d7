//! Submits: lost, duplicated, unexpected, disagreeing and refused-but-present
//! runs are caught; unknown submits resolving either way pass.

use cairn_history::{Property, Run, RunStatus, ViolationKind as K};

use crate::build::*;

#[test]
fn a_lost_acknowledged_submit_is_caught_with_its_events() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
    ];
    let report = verdict(&history, &runs(vec![]));
    assert_only(&report, Property::Submits, &[K::LostSubmit]);
    assert_eq!(report.violations[0].events, history);
    assert!(report.violations[0].message.contains("r1"), "{report}");
}

#[test]
fn an_acknowledged_run_replaced_by_another_under_its_key_is_lost() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
    ];
    let report = verdict(&history, &runs(vec![finished("r9", "k1")]));
    assert_only(&report, Property::Submits, &[K::LostSubmit]);
    assert!(report.violations[0].message.contains("r9"), "{report}");
}

#[test]
fn two_runs_for_one_key_are_a_duplicate() {
    // The first submit timed out and the client retried: the retry was
    // acknowledged, but the first had landed too and made its own run.
    let history = [
        invoke(1, 10, submit("k1", None)),
        info(1, 50, submit("k1", None)),
        invoke(2, 60, submit("k1", None)),
        ok(2, 70, submit("k1", Some("r2"))),
    ];
    let state = runs(vec![finished("r1", "k1"), finished("r2", "k1")]);
    let report = verdict(&history, &state);
    assert_only(&report, Property::Submits, &[K::DuplicatedRun]);
    assert_eq!(report.violations[0].events, history);
}

#[test]
fn unknown_submits_never_make_two_runs() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        info(1, 50, submit("k1", None)),
        invoke(2, 60, submit("k1", None)),
    ];
    let state = runs(vec![finished("r1", "k1"), finished("r2", "k1")]);
    let report = verdict(&history, &state);
    assert_only(&report, Property::Submits, &[K::DuplicatedRun]);
}

#[test]
fn a_run_no_client_asked_for_is_unexpected() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
    ];
    let mut orphan = finished("r3", "k1");
    orphan.key = None;
    let state = runs(vec![finished("r1", "k1"), finished("r2", "k2"), orphan]);
    let report = verdict(&history, &state);
    assert_only(
        &report,
        Property::Submits,
        &[K::UnexpectedRun, K::UnexpectedRun],
    );
    assert!(report.violations[0].message.contains("r2"), "{report}");
    assert!(report.violations[1].message.contains("r3"), "{report}");
}

#[test]
fn acknowledgements_of_one_key_naming_different_runs_are_caught() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
        invoke(2, 30, submit("k1", None)),
        ok(2, 40, submit("k1", Some("r2"))),
    ];
    let report = verdict(&history, &runs(vec![finished("r1", "k1")]));
    assert_only(&report, Property::Submits, &[K::AcksDisagree]);
    assert_eq!(report.violations[0].events, history);
}

#[test]
fn a_run_whose_every_submit_was_refused_is_caught() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        fail(1, 20, submit("k1", None)),
    ];
    let report = verdict(&history, &runs(vec![finished("r1", "k1")]));
    assert_only(&report, Property::Submits, &[K::RefusedButPresent]);
}

#[test]
fn unknown_submits_may_resolve_either_way() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        info(1, 20, submit("k1", None)),
        invoke(2, 10, submit("k2", None)),
        info(2, 20, submit("k2", None)),
        // Never completed: the client was killed.
        invoke(3, 30, submit("k3", None)),
    ];
    let state = runs(vec![finished("r1", "k1"), finished("r3", "k3")]);
    assert_valid(&verdict(&history, &state));
}

#[test]
fn a_retried_key_acknowledged_twice_with_one_run_passes() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
        invoke(1, 30, submit("k1", None)),
        ok(1, 40, submit("k1", Some("r1"))),
        invoke(2, 50, submit("k2", None)),
        fail(2, 60, submit("k2", None)),
    ];
    assert_valid(&verdict(&history, &runs(vec![finished("r1", "k1")])));
}

#[test]
fn a_child_run_is_asked_for_by_its_parent() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
    ];
    let child = Run {
        id: "c1".into(),
        key: None,
        parent: Some("r1".into()),
        status: RunStatus::Queued,
    };
    let state = runs(vec![finished("r1", "k1"), child]);
    assert_valid(&verdict(&history, &state));
}
