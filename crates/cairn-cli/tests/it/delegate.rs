//! An `llm` agent's `delegate` tool, over the real OpenAI wire protocol (a
//! local server that streams two parallel `delegate` calls, then a summary
//! of the results it is sent), with real processes killed by SIGKILL at each
//! write boundary of the delegation, on both databases: after the calls are
//! journaled and before the spawn, around the spawn, after each child's
//! end, and before the parent's last commit. A plain `cairn resume PARENT`
//! finishes the tree: each child is stored once and ran once, and the
//! parent's output is its uncrashed twin's.

use serde_json::{json, Value};

use crate::children::{parent_of, resume_ok};
use crate::support::{agent_sh, agent_template, crew_toml, Case};

both_backends!(
    a_delegating_agent_killed_anywhere_resumes_and_each_child_ran_once,
    a_delegation_to_a_crew_the_agent_may_not_start_is_refused_to_the_model,
);

const TASKS: [&str; 2] = ["moss", "fern"];

/// The child crew `researcher` (each child appends its topic to
/// `children.log` and answers it in capitals), and the parent crew: an
/// `llm` lead that delegates to it, then a template that wraps its answer.
fn crews(case: &Case, model: &cairn_testkit::DelegatingModel) -> String {
    let log = case.path("children.log").display().to_string();
    let script = format!(
        r#"t=$(grep -o '"topic":"[a-z]*"' | cut -d'"' -f4); echo $t >> {log}; echo "{{\"found\": \"$(echo $t | tr a-z A-Z)\"}}""#
    );
    crate::support::delegate_crews(case, &model.base_url, &script)
}

fn model() -> cairn_testkit::DelegatingModel {
    let tasks: Vec<Value> = TASKS.iter().map(|t| json!({"topic": t})).collect();
    cairn_testkit::DelegatingModel::start("researcher", &tasks).expect("model server")
}

/// Where the run is killed: journal items of the lead's response (4: both
/// calls journaled, 5: the response's end; the spawn not yet committed),
/// the step commits (1 the spawn, 2 and 3 the children's ends, the second
/// deciding the join, 4 the lead's answer after it).
const POINTS: [&str; 8] = [
    "after:append_journal#4",
    "after:append_journal#5",
    "before:commit_step#1",
    "after:commit_step#1",
    "after:commit_step#2",
    "after:commit_step#3",
    "before:commit_step#4",
    "after:commit_step#4",
];

fn a_delegating_agent_killed_anywhere_resumes_and_each_child_ran_once(kind: cairn_testkit::Kind) {
    let model = model();
    let twin = Case::new(kind);
    let crew = crews(&twin, &model);
    let out = twin.cairn(&["run", &crew, "--input", "{}", "--json"]);
    assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
    let parent = parent_of(&twin);
    let expected = answer(&twin, &parent);
    let text = expected.clone();
    assert!(
        text.starts_with("done: Summary of 2:") && text.contains("MOSS") && text.contains("FERN"),
        "the lead read both children's results: {expected}"
    );
    assert_ran_once(&twin, &parent, "uncrashed");

    for point in POINTS {
        let case = Case::new(kind);
        let crew = crews(&case, &model);
        case.killed_at(&["run", &crew, "--input", "{}"], point);
        let parent = parent_of(&case);
        if point.contains("append_journal") || point == "before:commit_step#1" {
            assert_eq!(case.list().len(), 1, "{point}: killed before the spawn");
        }
        resume_ok(&case, &parent, point);
        let run = case.show(&parent);
        assert_eq!(run["status"], "succeeded", "{point}: {run:#}");
        assert_eq!(answer(&case, &parent), expected, "{point}");
        assert_ran_once(&case, &parent, point);
    }
}

/// The parent's answer, each child's run id in it replaced by `CHILD` (the
/// results quote them, and they differ from case to case).
fn answer(case: &Case, parent: &str) -> String {
    let run = case.show(parent);
    let mut text = run["steps"][1]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let children = case
        .cairn(&["runs", "list", "--parent", parent, "--json"])
        .json();
    for child in children.as_array().into_iter().flatten() {
        if let Some(id) = child["id"].as_str() {
            text = text.replace(id, "CHILD");
        }
    }
    text
}

/// Two children, stored once each, on the delegated crew. A child that had
/// finished never ran again (no takeover: exactly once); one whose step was
/// in flight at the kill ran again at most once per takeover of that step,
/// as any step does.
fn assert_ran_once(case: &Case, parent: &str, point: &str) {
    let children = case
        .cairn(&["runs", "list", "--parent", parent, "--json"])
        .json();
    let children = children.as_array().cloned().unwrap_or_default();
    assert_eq!(children.len(), 2, "{point}: {children:#?}");
    let log = std::fs::read_to_string(case.path("children.log")).unwrap_or_default();
    for child in &children {
        assert_eq!(child["status"], "succeeded", "{point}: {child:#}");
        assert_eq!(child["crew"], "researcher", "{point}: {child:#}");
        let id = child["id"].as_str().unwrap_or_default();
        let run = case.show(id);
        let task = run["input"]["topic"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let takeovers = run["steps"][0]["takeovers"].as_u64().unwrap_or(0) as usize;
        let ran = log.lines().filter(|l| *l == task).count();
        // Once, or again per takeover of its step (a step killed after its
        // claim but before its program wrote its line ran once in all).
        assert!(
            (1..=1 + takeovers).contains(&ran),
            "{point}: child {task} ran {ran} times with {takeovers} takeovers: {log}"
        );
    }
    let mut ran: Vec<&str> = log.lines().collect();
    ran.sort_unstable();
    ran.dedup();
    assert_eq!(ran, ["fern", "moss"], "{point}: {log}");
}

/// A call naming a crew the agent may not start starts nothing: the model
/// gets an error result naming the crews it may start, and the step goes
/// on from there.
fn a_delegation_to_a_crew_the_agent_may_not_start_is_refused_to_the_model(
    kind: cairn_testkit::Kind,
) {
    let tasks = [json!({"topic": "moss"})];
    let model = cairn_testkit::DelegatingModel::start("payroll", &tasks).expect("model server");
    let case = Case::new(kind);
    let crew = crews(&case, &model);
    let out = case.cairn(&["run", &crew, "--input", "{}", "--json"]);
    assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
    let parent = parent_of(&case);
    let output = case.show(&parent)["steps"][1]["output"].clone();
    let text = output.as_str().unwrap_or_default();
    assert!(
        text.contains("Summary of 1:") && text.contains("payroll") && text.contains("researcher"),
        "the model read the refusal: {output}"
    );
    let children = case
        .cairn(&["runs", "list", "--parent", &parent, "--json"])
        .json();
    assert_eq!(children, json!([]), "nothing was started");
    assert!(!case.path("children.log").exists(), "a child ran");
}

both_backends!(
    a_command_step_asks_for_children_and_is_not_run_again_after_they_return,
    a_command_step_asking_for_a_crew_it_may_not_start_fails_and_starts_nothing,
);

/// The parent: a command `plan` with `delegate` that records each run of
/// itself in `plan.log` and prints `request`, then a template over its
/// output (the children's outcomes).
fn planner(case: &Case, request: &str) -> String {
    let model = model();
    crews(case, &model);
    let log = case.path("plan.log").display().to_string();
    let plan = agent_sh("plan", &format!("echo ran >> {log}; echo '{request}'"))
        + "delegate = [\"child.toml\"]\n";
    let sum = agent_template(
        "sum",
        "{% for c in outputs.plan %}{{ c.key }}={{ c.output.found }} {% endfor %}",
    );
    let crew = case.write("planner.toml", &crew_toml("planner", &[plan, sum]));
    crew.display().to_string()
}

const REQUEST: &str = r#"{"cairn_spawn": {"children": [{"key": "a", "crew": "researcher", "input": {"topic": "moss"}}, {"key": "b", "crew": "researcher", "input": {"topic": "fern"}}]}}"#;

/// A command's spawn request starts its children (killed around the spawn
/// and after the join, then resumed); once they settled the program is not
/// run again: the step's output is their outcomes in key order.
fn a_command_step_asks_for_children_and_is_not_run_again_after_they_return(
    kind: cairn_testkit::Kind,
) {
    for point in [
        None,
        Some("after:commit_step#1"),
        Some("after:commit_step#3"),
    ] {
        let case = Case::new(kind);
        let crew = planner(&case, REQUEST);
        let args = ["run", crew.as_str(), "--input", "{}"];
        match point {
            None => {
                case.cairn(&args).expect_code(0);
            }
            Some(point) => {
                case.cairn_env(&args, &[("CAIRN_FAILPOINTS", point)])
                    .expect_sigkill();
                case.cairn(&["resume", &parent_of(&case)]).expect_code(0);
            }
        }
        let parent = parent_of(&case);
        let run = case.show(&parent);
        assert_eq!(run["status"], "succeeded", "{point:?}: {run:#}");
        assert_eq!(run["steps"][1]["output"], "a=MOSS b=FERN ", "{point:?}");
        let keys: Vec<&str> = run["steps"][0]["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["key"].as_str())
            .collect();
        assert_eq!(keys, ["a", "b"], "{point:?}");
        let plans = std::fs::read_to_string(case.path("plan.log")).unwrap_or_default();
        assert_eq!(plans.lines().count(), 1, "{point:?}: the program ran again");
        assert_ran_once(&case, &parent, &format!("{point:?}"));
    }
}

/// A request naming a crew outside the step's `delegate` fails the step
/// (kind `children`, not retried), naming the crews it may start, and
/// starts nothing.
fn a_command_step_asking_for_a_crew_it_may_not_start_fails_and_starts_nothing(
    kind: cairn_testkit::Kind,
) {
    let case = Case::new(kind);
    let crew = planner(
        &case,
        &REQUEST.replace("\"crew\": \"researcher\"", "\"crew\": \"payroll\""),
    );
    let out = case.cairn(&["run", &crew, "--input", "{}", "--json"]);
    assert_ne!(out.code(), Some(0), "{}", out.stdout);
    let parent = parent_of(&case);
    let run = case.show(&parent);
    assert_eq!(run["status"], "failed", "{run:#}");
    let error = &run["steps"][0]["error"];
    assert_eq!(error["kind"], "children", "{error:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`payroll`") && message.contains("researcher"),
        "{message}"
    );
    assert_eq!(case.list().len(), 1, "nothing was started");
}

/// The guide's example (`examples/delegate/`, a scripted model) runs as
/// documented: two children, each call's result their outcome.
#[test]
fn the_delegate_example_runs() {
    let case = Case::new(cairn_testkit::Kind::Sqlite);
    let crew =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/delegate/lead.toml");
    let run = case
        .cairn(&["run", crew.to_str().unwrap(), "--input", "{}", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    let id = run["id"].as_str().unwrap_or_default();
    let children = case
        .cairn(&["runs", "list", "--parent", id, "--json"])
        .json();
    assert_eq!(children.as_array().map(Vec::len), Some(2), "{children:#}");
    let journal = case
        .cairn(&["runs", "journal", id, "--json"])
        .expect_code(0)
        .json();
    let results: Vec<String> = journal
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["kind"] == "tool_result")
        .filter_map(|i| i["payload"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(results.len(), 2, "{journal:#}");
    assert!(results[0].contains("leases matters"), "{results:?}");
    assert!(results[1].contains("journals matters"), "{results:?}");
}
