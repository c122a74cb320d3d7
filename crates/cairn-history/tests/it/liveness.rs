//! Nothing stranded and not vacuous: a run left running under an expired
//! lease and a fault window in which an operation type never succeeded are
//! caught; a live lease and a window where everything succeeded pass.

use cairn_history::{check, Property, RunStatus, ViolationKind as K};

use crate::build::*;

#[test]
fn a_run_running_under_an_expired_lease_is_stranded() {
    let mut history = submitted_by(1, 10, 20);
    history.extend([
        ok(2, 30, claim("r1", 1, "w1")),
        ok(2, 40, claim("r1", 2, "w2")),
    ]);
    let stuck = run(
        "r1",
        "k1",
        RunStatus::Running {
            lease_expired: true,
        },
    );
    let report = verdict(&history, &runs(vec![stuck]));
    assert_only(&report, Property::NothingStranded, &[K::Stranded]);
    let mut shown = submitted_by(1, 10, 20);
    shown.push(ok(2, 40, claim("r1", 2, "w2")));
    assert_eq!(report.violations[0].events, shown);
}

#[test]
fn waiting_queued_and_live_runs_are_not_stranded() {
    let mut history = submitted_by(1, 10, 20);
    history.extend([
        invoke(1, 30, submit("k2", None)),
        ok(1, 40, submit("k2", Some("r2"))),
        invoke(1, 50, submit("k3", None)),
        ok(1, 60, submit("k3", Some("r3"))),
    ]);
    let state = runs(vec![
        run("r1", "k1", RunStatus::Waiting),
        run("r2", "k2", RunStatus::Queued),
        run(
            "r3",
            "k3",
            RunStatus::Running {
                lease_expired: false,
            },
        ),
    ]);
    assert_valid(&verdict(&history, &state));
}

#[test]
fn a_window_in_which_an_operation_type_never_succeeded_is_vacuous() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
        invoke(2, 25, read("r1", &[])),
        ok(2, 30, read("r1", &[])),
        // During the partition every submit timed out; a read succeeded.
        invoke(1, 100, submit("k2", None)),
        info(1, 150, submit("k2", None)),
        invoke(2, 110, read("r1", &[])),
        ok(2, 120, read("r1", &[])),
    ];
    let windows = [window("partition", 90, 200)];
    let report = check(&history, &runs(vec![finished("r1", "k1")]), &windows, 7);
    assert_only(&report, Property::NotVacuous, &[K::Vacuous]);
    let message = &report.violations[0].message;
    assert!(message.contains("no submit succeeded"), "{report}");
    assert!(message.contains("partition"), "{report}");
    assert!(!message.contains("read_events"), "{report}");
}

#[test]
fn a_window_in_which_every_operation_type_succeeded_passes() {
    let history = [
        invoke(1, 100, submit("k1", None)),
        ok(1, 120, submit("k1", Some("r1"))),
        invoke(2, 130, read("r1", &[])),
        ok(2, 140, read("r1", &[])),
    ];
    let windows = [
        window("sigstop-worker", 90, 200),
        window("failover", 120, 140),
    ];
    let report = check(&history, &runs(vec![finished("r1", "k1")]), &windows, 7);
    assert_valid(&report);
}
