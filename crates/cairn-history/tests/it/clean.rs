//! A whole clean campaign: every operation type, faults, takeovers, and
//! unknown outcomes resolving either way; the checker finds nothing.

use cairn_history::{
    check, Attempt, Effect, Event, FinalState, RowKind, RunStatus, StoredSignal, Wait,
};

use crate::build::*;

fn history() -> Vec<Event> {
    vec![
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
        // A lost acknowledgement that had landed, and one that had not.
        invoke(2, 15, submit("k2", None)),
        info(2, 40, submit("k2", None)),
        invoke(3, 15, submit("k3", None)),
        info(3, 40, submit("k3", None)),
        ok(10, 50, claim("r1", 1, "w1")),
        invoke(10, 60, commit("r1", 0, 1, "w1")),
        ok(10, 70, commit("r1", 0, 1, "w1")),
        // w1 is paused past its lease (window "sigstop"); w2 takes over.
        ok(11, 200, claim("r1", 2, "w2")),
        invoke(1, 210, submit("k4", None)),
        ok(1, 220, submit("k4", Some("r4"))),
        invoke(4, 230, read("r1", &[])),
        ok(4, 240, read("r1", &[1, 2])),
        invoke(5, 250, signal("r1", "go", "s1")),
        ok(5, 260, signal("r1", "go", "s1")),
        invoke(6, 270, answer("w1", "approve")),
        ok(6, 280, answer("w1", "approve")),
        invoke(11, 290, commit("r1", 1, 2, "w2")),
        ok(11, 300, commit("r1", 1, 2, "w2")),
        // w1 wakes and tries to commit: refused.
        invoke(10, 400, commit("r1", 1, 1, "w1")),
        fail(10, 410, commit("r1", 1, 1, "w1")),
        invoke(4, 420, read("r1", &[])),
        ok(4, 430, read("r1", &[1, 2, 3])),
    ]
}

fn final_state() -> FinalState {
    let effect = |epoch, owner: &str| Effect {
        run: "r1".into(),
        step: 1,
        attempt: 1,
        epoch,
        owner: owner.into(),
    };
    FinalState {
        runs: vec![
            finished("r1", "k1"),
            run("r2", "k2", RunStatus::Queued),
            run(
                "r4",
                "k4",
                RunStatus::Running {
                    lease_expired: false,
                },
            ),
        ],
        rows: vec![
            row(0, RowKind::Step, 1, "w1", 1),
            row(1, RowKind::JournalItem { item: 0 }, 1, "w1", 2),
            row(1, RowKind::JournalItem { item: 1 }, 2, "w2", 3),
            row(1, RowKind::Step, 2, "w2", 4),
        ],
        waits: vec![Wait {
            id: "w1".into(),
            run: "r1".into(),
            decisions: vec!["approve".into()],
        }],
        signals: vec![StoredSignal {
            run: "r1".into(),
            name: "go".into(),
            id: "s1".into(),
        }],
        events: [("r1".to_string(), vec![1, 2, 3, 4])].into(),
        effects: vec![effect(1, "w1"), effect(2, "w2")],
        attempts: vec![Attempt {
            run: "r1".into(),
            step: 1,
            attempt: 1,
            faults: 1,
            idempotent: true,
        }],
    }
}

#[test]
fn a_clean_campaign_with_faults_and_unknown_outcomes_passes() {
    let windows = [window("sigstop", 100, 300)];
    let report = check(&history(), &final_state(), &windows, 1);
    assert_valid(&report);
    assert!(report.to_string().contains("seed 1: valid"), "{report}");
}

#[test]
fn the_final_state_survives_a_round_trip_through_json() {
    let state = final_state();
    let text = serde_json::to_string(&state).unwrap();
    let back: FinalState = serde_json::from_str(&text).unwrap();
    assert_eq!(back, state);
}
