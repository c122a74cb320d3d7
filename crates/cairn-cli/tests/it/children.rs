//! Child runs killed at each new write boundary, real processes and
//! SIGKILL, both databases: before and after the spawn, before and after a
//! child's end is counted, and after the end that woke the parent. A plain
//! `cairn resume PARENT` then finishes the tree: no child is stored twice,
//! no finished child runs again, and the parent's output is its uncrashed
//! twin's.

use serde_json::Value;

use crate::support::{agent_sh, crew_toml, fan_join_crew, Case};

both_backends!(a_killed_tree_resumes_and_runs_each_child_once);

/// The parent: a `children` step over the input's items, one at a time,
/// then a template joining the children's outputs. Each child appends its
/// item to `children.log` and answers it in capitals.
fn crews(case: &Case) -> std::path::PathBuf {
    let log = case.path("children.log").display().to_string();
    let child = agent_sh(
        "shout",
        &format!(
            r#"item=$(grep -o '"item":"[a-z]*"' | cut -d'"' -f4); echo $item >> {log}; echo $item | tr a-z A-Z"#
        ),
    );
    case.write("child.toml", &crew_toml("shout", &[child]));
    fan_join_crew(
        case,
        "concurrency = 1\n",
        "{% for c in outputs.fan %}{{ c.output }} {% endfor %}",
    )
}

const INPUT: &str = r#"{"items": ["ash", "elm", "oak"]}"#;

/// The commits of one run of the tree, in order (one child in flight at a
/// time): 1 the spawn, 2-4 each child's end (4 decides the join), 5 the
/// parent's step after the join, 6 the last step.
const POINTS: [(&str, Option<&str>); 6] = [
    ("before:commit_step#1", None),
    ("after:commit_step#1", None),
    ("before:commit_step#2", Some("ash")),
    ("after:commit_step#2", None),
    ("after:commit_step#4", None),
    ("before:commit_step#5", None),
];

fn a_killed_tree_resumes_and_runs_each_child_once(kind: cairn_testkit::Kind) {
    let twin = Case::new(kind);
    let crew = crews(&twin);
    let out = twin.cairn(&["run", crew.to_str().unwrap(), "--input", INPUT, "--json"]);
    assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
    let expected = result(&twin, &parent_of(&twin));
    assert_eq!(expected, Value::String("ASH ELM OAK ".into()));

    for (point, may_repeat) in POINTS {
        let case = Case::new(kind);
        let crew = crews(&case);
        case.killed_at(&["run", crew.to_str().unwrap(), "--input", INPUT], point);
        let parent = parent_of(&case);
        resume_ok(&case, &parent, point);
        assert_eq!(result(&case, &parent), expected, "{point}");
        let children = case
            .cairn(&["runs", "list", "--parent", &parent, "--json"])
            .json();
        assert_eq!(
            children.as_array().map(Vec::len),
            Some(3),
            "{point}: each child stored once: {children:#}"
        );
        let log = std::fs::read_to_string(case.path("children.log")).unwrap_or_default();
        for item in ["ash", "elm", "oak"] {
            let ran = log.lines().filter(|l| *l == item).count();
            let allowed = if may_repeat == Some(item) { 2 } else { 1 };
            assert!(
                (1..=allowed).contains(&ran),
                "{point}: child {item} ran {ran} times: {log}"
            );
        }
        let doctor = case.cairn(&["doctor", "--json"]);
        assert_eq!(doctor.code(), Some(0), "{point}: {}", doctor.stdout);
    }
}

/// The only run without a parent.
pub(crate) fn parent_of(case: &Case) -> String {
    case.list()
        .iter()
        .find(|r| r.get("child").is_none())
        .and_then(|r| r["id"].as_str())
        .expect("a parent run")
        .to_owned()
}

/// `cairn resume PARENT` after the kill at `point`: it exits 0.
pub(crate) fn resume_ok(case: &Case, parent: &str, point: &str) {
    let resumed = case.cairn(&["resume", parent]);
    assert_eq!(
        resumed.code(),
        Some(0),
        "{point}: {}{}",
        resumed.stdout,
        resumed.stderr
    );
}

/// The parent's final output (after a success).
fn result(case: &Case, parent: &str) -> Value {
    let run = case.show(parent);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    run["steps"][1]["output"].clone()
}

both_backends!(a_cancel_while_the_spawn_commits_spawns_nothing);

/// The race between a spawn and a cancel: `cairn run` is held just before
/// the children step's spawn commit (`pause_before:commit_step`), and the
/// parent is cancelled meanwhile. The spawn commit is fenced like any step
/// commit (a cancel-requested run takes only its cancel), so the run ends
/// `cancelled` and not one child is stored or run.
fn a_cancel_while_the_spawn_commits_spawns_nothing(kind: cairn_testkit::Kind) {
    let case = Case::new(kind);
    let crew = crews(&case);
    let mut run = crate::support::Spawned(case.spawn(
        &["run", crew.to_str().unwrap(), "--input", INPUT],
        &[("CAIRN_FAILPOINTS", "pause_before:commit_step:2500")],
    ));
    crate::support::wait_until(
        "the spawn commit to be held",
        std::time::Duration::from_secs(60),
        || {
            std::fs::read_to_string(case.path("bg.stderr"))
                .is_ok_and(|e| e.contains("failpoint pause_before:commit_step"))
        },
    );
    let parent = parent_of(&case);
    case.cairn(&["runs", "cancel", &parent]).expect_code(0);
    let status = run.wait("cairn run of the cancelled parent");
    assert!(
        !status.success(),
        "a cancelled run is not a success: {status}"
    );
    assert_eq!(case.show(&parent)["status"], "cancelled");
    let children = case
        .cairn(&["runs", "list", "--parent", &parent, "--json"])
        .json();
    assert_eq!(children, serde_json::json!([]), "children were stored");
    assert!(!case.path("children.log").exists(), "a child ran");
    assert_eq!(case.list().len(), 1);
}

both_backends!(children_inherit_what_is_left_of_their_parents_wall_time);

/// A parent with `[budget] wall_time = 600` starts two children: one whose
/// crew sets no wall time gets what is left of the parent's (at most 600 s,
/// less the time the parent ran first) as its own; one whose crew sets its
/// own keeps that.
fn children_inherit_what_is_left_of_their_parents_wall_time(kind: cairn_testkit::Kind) {
    let case = Case::new(kind);
    let child = agent_sh("echo", "cat > /dev/null; echo '{}'");
    case.write(
        "free.toml",
        &crew_toml("free", std::slice::from_ref(&child)),
    );
    case.write(
        "own.toml",
        &format!("{}\n[budget]\nwall_time = 5\n", crew_toml("own", &[child])),
    );
    let request = r#"{"cairn_spawn": {"children": [{"key": "f", "crew": "free"}, {"key": "o", "crew": "own"}]}}"#;
    let plan = agent_sh("plan", &format!("sleep 1; echo '{request}'"))
        + "delegate = [\"free.toml\", \"own.toml\"]\n";
    let parent = case.write(
        "parent.toml",
        &format!(
            "{}\n[budget]\nwall_time = 600\n",
            crew_toml("parent", &[plan])
        ),
    );
    case.cairn(&["run", parent.to_str().unwrap(), "--input", "{}"])
        .expect_code(0);
    let parent = parent_of(&case);
    let children = case
        .cairn(&["runs", "list", "--parent", &parent, "--json"])
        .json();
    let budget_of = |crew: &str| {
        let child = children
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["crew"] == crew)
            .unwrap_or_else(|| panic!("no child of crew {crew}: {children:#}"));
        case.show(child["id"].as_str().unwrap_or_default())["budget"].clone()
    };
    let free = budget_of("free")["wall_time"].as_u64().unwrap_or(0);
    assert!((590..=599).contains(&free), "what is left of 600 s: {free}");
    // No budget of its own: its crew's 5 s stand, as `runs show` says.
    assert!(budget_of("own").is_null(), "{}", budget_of("own"));
    let own = children
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["crew"] == "own")
        .and_then(|c| c["id"].as_str())
        .unwrap_or_default()
        .to_owned();
    let shown = case.cairn(&["runs", "show", &own]).expect_code(0).stdout;
    assert!(shown.contains(" of 5"), "{shown}");
}

both_backends!(a_fixed_child_may_run_a_crew_of_its_own);

/// A fixed list whose second child names a crew file of its own: the first
/// runs the step's `crew`, the second its own, and the step's output has
/// both outcomes in listing order.
fn a_fixed_child_may_run_a_crew_of_its_own(kind: cairn_testkit::Kind) {
    let case = Case::new(kind);
    case.write(
        "lower.toml",
        &crew_toml("lower", &[agent_sh("say", "echo '\"low\"'")]),
    );
    case.write(
        "upper.toml",
        &crew_toml("upper", &[agent_sh("say", "echo '\"HIGH\"'")]),
    );
    let fan = "[[agents]]\nrole = \"fan\"\nkind = \"children\"\ncrew = \"lower.toml\"\n\
               children = [{ key = \"a\", input = 1 }, { key = \"b\", input = 2, crew = \"upper.toml\" }]\n"
        .to_owned();
    let parent = case.write("fixed.toml", &crew_toml("fixed", &[fan]));
    let out = case.cairn(&["run", parent.to_str().unwrap(), "--input", "{}", "--json"]);
    assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
    let parent = parent_of(&case);
    let run = case.show(&parent);
    let outcomes: Vec<(String, String)> = run["steps"][0]["output"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["key"].as_str().unwrap_or_default().to_owned(),
                c["output"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("a".to_owned(), "low".to_owned()),
            ("b".to_owned(), "HIGH".to_owned())
        ],
        "{run:#}"
    );
    let children = case
        .cairn(&["runs", "list", "--parent", &parent, "--json"])
        .json();
    let mut crews: Vec<&str> = children
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["crew"].as_str())
        .collect();
    crews.sort_unstable();
    assert_eq!(crews, ["lower", "upper"]);
}

both_backends!(a_parent_continued_with_a_raise_carries_its_stopped_child_on);

/// `cairn run --budget model_calls=2` on a parent of three model-calling
/// children (one at a time): the third is stopped at the parent's budget,
/// and the parent waits for it: exit 5 (interrupted: an operator must act,
/// as for a run stopped at its own budget), naming the stopped child, why,
/// and the command that carries it on; `runs continue PARENT --budget
/// model_calls=+1` raises it, carries the child on here, and the parent
/// finishes (exit 0).
fn a_parent_continued_with_a_raise_carries_its_stopped_child_on(kind: cairn_testkit::Kind) {
    let case = Case::new(kind);
    let script = case.write("script.toml", "[[responses]]\ntext = \"hi\"\n");
    case.write(
        "ask.toml",
        &format!(
            "name = \"ask\"\nversion = \"1\"\n[[agents]]\nrole = \"ask\"\nkind = \"llm\"\n\
             provider = \"scripted\"\nscript = \"{}\"\n",
            script.display()
        ),
    );
    let parent = case.write(
        "parent.toml",
        "name = \"parent\"\nversion = \"1\"\n[[agents]]\nrole = \"fan\"\nkind = \"children\"\n\
         crew = \"ask.toml\"\nconcurrency = 1\nchildren = [{ key = \"a\", input = {} }, \
         { key = \"b\", input = {} }, { key = \"c\", input = {} }]\n",
    );
    let parent = parent.to_str().unwrap();
    let out = case
        .cairn(&["run", parent, "--budget", "model_calls=2"])
        .expect_code(5);
    let id = parent_of(&case);
    for said in [
        "waiting for 3 children: 1 interrupted",
        "interrupted: run ",
        &format!("carry them on: cairn runs continue {id}"),
    ] {
        assert!(out.stdout.contains(said), "{said}: {}", out.stdout);
    }
    let stopped = case
        .cairn(&[
            "runs",
            "list",
            "--parent",
            &id,
            "--status",
            "interrupted",
            "--json",
        ])
        .json();
    assert_eq!(stopped.as_array().map(Vec::len), Some(1), "{stopped}");
    case.continue_one_more_call(&id, &[]).expect_code(0);
    let shown = case.show(&id);
    assert_eq!(shown["status"], "succeeded", "{shown}");
    assert_eq!(shown["spent"]["model_calls"], 3, "{shown}");
}
