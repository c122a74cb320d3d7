//! The compatibility rule, table-tested.

#![allow(clippy::unwrap_used)]
use chrono::DateTime;
use serde_json::json;

use super::*;
use crate::crew::{AgentDef, AgentKind};
use crate::ids::{LeaseEpoch, RunId, StepIdx};

fn template(role: &str) -> AgentDef {
    AgentDef::new(
        role,
        AgentKind::Template {
            template: format!("{role} v1"),
        },
    )
}

fn command(role: &str) -> AgentDef {
    AgentDef::new(role, AgentKind::command(vec!["true".into()]))
}

fn crew(version: &str, agents: Vec<AgentDef>) -> CrewDef {
    CrewDef {
        name: "essay".into(),
        version: version.into(),
        agents,
        dir: None,
        budget: None,
        upgrade: None,
    }
}

fn v1() -> CrewDef {
    crew(
        "1",
        vec![template("plan"), template("write"), template("check")],
    )
}

fn run(status: RunStatus, cursor: u32) -> RunRecord {
    RunRecord {
        status,
        cursor: StepIdx(cursor),
        lease_epoch: LeaseEpoch(1),
        ..RunRecord::submitted(RunId::new(), v1(), json!({}), DateTime::default())
    }
}

#[test]
fn later_steps_prompts_and_added_steps_may_change() {
    let mut v2 = v1();
    v2.version = "2".into();
    v2.agents[2] = AgentDef::new(
        "check",
        AgentKind::Template {
            template: "a new prompt".into(),
        },
    );
    v2.agents.push(template("publish"));
    // Waiting inside `write`: plan and write must stay; check may change.
    assert_eq!(check(&run(RunStatus::Waiting, 1), &v2), Ok(()));
    // Even the cursor step's settings may change, only not its role or kind.
    v2.agents[1] = AgentDef::new(
        "write",
        AgentKind::Template {
            template: "better".into(),
        },
    );
    assert_eq!(check(&run(RunStatus::Waiting, 1), &v2), Ok(()));
}

#[test]
fn a_started_step_keeps_its_role_and_kind() {
    let mut renamed = v1();
    renamed.agents[0] = template("outline");
    assert_eq!(
        check(&run(RunStatus::Waiting, 1), &renamed),
        Err(Incompatible::RoleDiffers {
            idx: 0,
            run: "plan".into(),
            offered: "outline".into()
        })
    );
    let mut rekinded = v1();
    rekinded.agents[1] = command("write");
    let err = check(&run(RunStatus::Interrupted, 1), &rekinded).unwrap_err();
    assert_eq!(err.idx(), Some(1));
    assert!(err
        .to_string()
        .contains("template step in the run but a command step"));
    // A queued run at a boundary has not started its cursor step: that one
    // may change; the finished one before it may not.
    assert_eq!(check(&run(RunStatus::Queued, 1), &rekinded), Ok(()));
    let shorter = crew("2", vec![template("plan")]);
    assert_eq!(
        check(&run(RunStatus::Waiting, 1), &shorter),
        Err(Incompatible::StepRemoved {
            idx: 1,
            role: "write".into(),
            steps: 1
        })
    );
}

#[test]
fn only_unfinished_runs_of_the_same_crew_move() {
    let mut other = v1();
    other.name = "poem".into();
    assert!(matches!(
        check(&run(RunStatus::Waiting, 0), &other),
        Err(Incompatible::OtherCrew { .. })
    ));
    assert_eq!(
        check(&run(RunStatus::Succeeded, 3), &v1()),
        Err(Incompatible::Ended {
            status: RunStatus::Succeeded
        })
    );
    // A failed run can still be retried, so it can move.
    assert_eq!(check(&run(RunStatus::Failed, 2), &v1()), Ok(()));
    assert_eq!(started(&run(RunStatus::Queued, 2)), 2);
    assert_eq!(started(&run(RunStatus::Failed, 2)), 3);
}

#[test]
fn versions_order_numbers_as_numbers() {
    use std::cmp::Ordering::*;
    assert_eq!(version_order("2", "10"), Less);
    assert_eq!(version_order("1.9", "1.10"), Less);
    assert_eq!(version_order("v2", "v1"), Greater);
    assert_eq!(version_order("1.0", "1.0"), Equal);
    assert_eq!(version_order("1.0", "1.0.1"), Less);
    assert_eq!(version_order("", "1"), Less);
    assert_eq!(
        UpgradePolicy::parse("compatible"),
        Some(UpgradePolicy::Compatible)
    );
    assert_eq!(UpgradePolicy::default().as_str(), "pinned");
}

#[test]
fn a_diff_names_each_step_that_differs() {
    let mut v2 = v1();
    v2.agents[0] = template("outline");
    v2.agents[1] = command("write");
    v2.agents[2] = AgentDef::new(
        "check",
        AgentKind::Template {
            template: "stricter".into(),
        },
    );
    v2.agents.push(template("publish"));
    let changes: Vec<StepChange> = diff(&v1(), &v2).iter().map(|d| d.change).collect();
    assert_eq!(
        changes,
        [
            StepChange::Renamed,
            StepChange::Rekinded,
            StepChange::Changed,
            StepChange::Added
        ]
    );
    let back = diff(&v2, &v1());
    assert_eq!(back[3].change, StepChange::Removed);
    assert_eq!(back[3].from.as_deref(), Some("publish (template)"));
    assert!(diff(&v1(), &v1())
        .iter()
        .all(|d| d.change == StepChange::Same));
}

#[test]
fn a_changed_step_names_what_changed_and_a_directory_is_no_change() {
    let mut v2 = v1();
    v2.agents[0].timeout_ms = Some(5);
    v2.agents[2] = AgentDef::new(
        "check",
        AgentKind::Template {
            template: "stricter".into(),
        },
    );
    let steps = diff(&v1(), &v2);
    assert_eq!(steps[0].fields, ["timeout_ms"]);
    assert!(steps[1].fields.is_empty());
    assert_eq!(steps[2].fields, ["template"]);

    // A command step that delegates to a crew: the child crew's directory
    // is no change, its steps are, named by their path.
    let delegating = |dir: &str, prompt: &str| {
        let mut child = crew("1", vec![template("inner")]);
        child.dir = Some(dir.into());
        child.agents[0].kind = AgentKind::Template {
            template: prompt.into(),
        };
        let mut step = command("write");
        if let AgentKind::Command {
            delegate,
            delegate_defs,
            ..
        } = &mut step.kind
        {
            *delegate = vec!["inner.toml".into()];
            *delegate_defs = vec![child];
        }
        crew("1", vec![template("plan"), step])
    };
    let (here, there) = (delegating("/a", "p"), delegating("/b", "p"));
    assert!(diff(&here, &there)
        .iter()
        .all(|d| d.change == StepChange::Same));
    assert_eq!(here.fingerprint(), there.fingerprint());
    let steps = diff(&here, &delegating("/b", "q"));
    assert_eq!(steps[1].change, StepChange::Changed);
    assert_eq!(steps[1].fields, ["delegate_defs.0.agents.0.template"]);
    let json = serde_json::to_value(&steps[1]).unwrap();
    assert_eq!(json["fields"][0], "delegate_defs.0.agents.0.template");
    assert!(serde_json::to_value(&steps[0])
        .unwrap()
        .get("fields")
        .is_none());
}

#[test]
fn a_cursor_past_the_new_last_step_cannot_move() {
    let two = crew("2", vec![template("plan"), template("write")]);
    // Queued at step 2 of 3, which the new version does not have.
    assert_eq!(
        check(&run(RunStatus::Queued, 2), &two),
        Err(Incompatible::CursorPast {
            cursor: 2,
            steps: 2
        })
    );
    assert_eq!(check(&run(RunStatus::Queued, 1), &two), Ok(()));
    assert_eq!(
        check(&run(RunStatus::Waiting, 2), &two),
        Err(Incompatible::StepRemoved {
            idx: 2,
            role: "check".into(),
            steps: 2
        })
    );
}

#[test]
fn force_overrides_only_a_finished_steps_kind() {
    // Waiting inside `write` (cursor 1): `plan` is finished.
    let waiting = run(RunStatus::Waiting, 1);
    let mut plan_rekinded = v1();
    plan_rekinded.agents[0] = command("plan");
    let overridden = check_forced(&waiting, &plan_rekinded).unwrap();
    assert!(
        matches!(overridden, Some(Incompatible::KindDiffers { idx: 0, .. })),
        "{overridden:?}"
    );
    assert!(
        check(&waiting, &plan_rekinded).is_err(),
        "unforced, refused"
    );
    assert_eq!(check_forced(&waiting, &v1()), Ok(None));

    // Never: the kind of the step it is inside, a renamed started step, a
    // removed one, a cursor past the end; nor with a forcible one before.
    let mut write_rekinded = plan_rekinded.clone();
    write_rekinded.agents[1] = command("write");
    let mut renamed = v1();
    renamed.agents[0] = template("outline");
    let one = crew("2", vec![template("plan")]);
    let two = crew("2", vec![template("plan"), template("write")]);
    for (run, to, idx) in [
        (&waiting, &write_rekinded, 1),
        (&waiting, &renamed, 0),
        (&waiting, &one, 1),
        (&run(RunStatus::Queued, 2), &two, 2),
    ] {
        let refused = check_forced(run, to).unwrap_err();
        assert_eq!(refused.idx(), Some(idx), "{refused}");
        assert!(!refused.forcible(run), "{refused}");
    }
}
