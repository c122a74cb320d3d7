//! Effects per attempt: too many effects for a non-idempotent tool, for an
//! idempotent one beyond its faults, and for an unlisted attempt are caught.

use cairn_history::{Attempt, Effect, FinalState, Property, ViolationKind as K};

use crate::build::*;

fn effect(attempt: u32, epoch: u64, owner: &str) -> Effect {
    Effect {
        run: "r1".into(),
        step: 2,
        attempt,
        epoch,
        owner: owner.into(),
    }
}

fn state(effects: Vec<Effect>, faults: u32, idempotent: bool) -> FinalState {
    FinalState {
        effects,
        attempts: vec![Attempt {
            run: "r1".into(),
            step: 2,
            attempt: 1,
            faults,
            idempotent,
        }],
        ..runs(vec![finished("r1", "k1")])
    }
}

#[test]
fn a_non_idempotent_tool_run_twice_is_caught_despite_a_fault() {
    let twice = vec![effect(1, 1, "w1"), effect(1, 2, "w2")];
    let report = verdict(&submitted(), &state(twice, 1, false));
    assert_only(&report, Property::EffectsPerAttempt, &[K::TooManyEffects]);
    assert!(
        report.violations[0].message.contains("at most 1"),
        "{report}"
    );
}

#[test]
fn an_idempotent_tool_may_repeat_once_per_fault() {
    let twice = vec![effect(1, 1, "w1"), effect(1, 2, "w2")];
    assert_valid(&verdict(&submitted(), &state(twice, 1, true)));
    let thrice = vec![effect(1, 1, "w1"), effect(1, 2, "w2"), effect(1, 3, "w3")];
    let report = verdict(&submitted(), &state(thrice, 1, true));
    assert_only(&report, Property::EffectsPerAttempt, &[K::TooManyEffects]);
    assert!(
        report.violations[0].message.contains("3 effects"),
        "{report}"
    );
}

#[test]
fn an_unlisted_attempt_may_have_one_effect() {
    let one = vec![effect(2, 1, "w1")];
    assert_valid(&verdict(&submitted(), &state(one, 0, true)));
    let two = vec![effect(2, 1, "w1"), effect(2, 1, "w1")];
    let report = verdict(&submitted(), &state(two, 0, true));
    assert_only(&report, Property::EffectsPerAttempt, &[K::TooManyEffects]);
    assert!(
        report.violations[0].message.contains("attempt 2"),
        "{report}"
    );
}
