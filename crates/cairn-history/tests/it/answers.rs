//! Answers and signals: two decisions, lost answers and lost or doubled
//! signals are caught; repeated and unknown answers pass.

use cairn_history::{FinalState, Property, StoredSignal, ViolationKind as K, Wait};

use crate::build::*;

fn waits(decisions: &[&str]) -> FinalState {
    FinalState {
        runs: vec![finished("r1", "k1")],
        waits: vec![Wait {
            id: "w1".into(),
            run: "r1".into(),
            decisions: decisions.iter().map(|d| d.to_string()).collect(),
        }],
        ..FinalState::default()
    }
}

#[test]
fn two_acknowledged_decisions_for_one_wait_are_caught() {
    let mut history = submitted();
    let answers = [
        invoke(1, 10, answer("w1", "approve")),
        invoke(2, 11, answer("w1", "reject")),
        ok(1, 20, answer("w1", "approve")),
        ok(2, 21, answer("w1", "reject")),
    ];
    history.extend(answers.clone());
    let report = verdict(&history, &waits(&["approve"]));
    assert_only(&report, Property::AnswersAndSignals, &[K::TwoDecisions]);
    assert_eq!(report.violations[0].events, answers);
}

#[test]
fn two_decisions_stored_for_one_wait_are_caught() {
    let mut history = submitted();
    history.extend([
        invoke(1, 10, answer("w1", "approve")),
        info(1, 20, answer("w1", "approve")),
        invoke(2, 30, answer("w1", "reject")),
        info(2, 40, answer("w1", "reject")),
    ]);
    let report = verdict(&history, &waits(&["approve", "reject"]));
    assert_only(&report, Property::AnswersAndSignals, &[K::TwoDecisions]);
}

#[test]
fn a_lost_acknowledged_answer_is_caught() {
    let mut history = submitted();
    let answered = [
        invoke(1, 10, answer("w1", "approve")),
        ok(1, 20, answer("w1", "approve")),
    ];
    history.extend(answered.clone());
    let report = verdict(&history, &waits(&[]));
    assert_only(&report, Property::AnswersAndSignals, &[K::LostAnswer]);
    assert_eq!(report.violations[0].events, answered);
}

#[test]
fn a_repeated_answer_a_refused_rival_and_an_unknown_one_pass() {
    let mut history = submitted();
    history.extend([
        invoke(1, 10, answer("w1", "approve")),
        ok(1, 20, answer("w1", "approve")),
        invoke(1, 30, answer("w1", "approve")),
        ok(1, 40, answer("w1", "approve")),
        invoke(2, 50, answer("w1", "reject")),
        fail(2, 60, answer("w1", "reject")),
        invoke(3, 70, answer("w2", "reject")),
        info(3, 80, answer("w2", "reject")),
    ]);
    assert_valid(&verdict(&history, &waits(&["approve"])));
}

#[test]
fn lost_and_doubled_signals_are_caught() {
    let mut history = submitted();
    history.extend([
        invoke(1, 10, signal("r1", "go", "s1")),
        ok(1, 20, signal("r1", "go", "s1")),
        invoke(1, 30, signal("r1", "go", "s2")),
        info(1, 40, signal("r1", "go", "s2")),
    ]);
    let stored = |id: &str| StoredSignal {
        run: "r1".into(),
        name: "go".into(),
        id: id.into(),
    };
    let mut state = waits(&[]);
    state.signals = vec![stored("s2"), stored("s2")];
    let report = verdict(&history, &state);
    assert_only(
        &report,
        Property::AnswersAndSignals,
        &[K::LostSignal, K::DuplicatedSignal],
    );
    state.signals = vec![stored("s1")];
    assert_valid(&verdict(&history, &state));
}
