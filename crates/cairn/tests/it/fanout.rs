//! Fan-outs at their edges, both backends: a join over no child is decided
//! at once (a `children` step over an empty list, a command's `cairn_spawn`
//! of none), never a wait nobody can answer.

use serde_json::json;

use cairn::{Crew, ErrorKind, RunStatus};
use cairn_testkit::{both, Kind};

use crate::children::crews;

both!(
    a_join_over_no_child_is_decided_at_once,
    a_command_that_spawns_no_child_succeeds_with_none,
    a_spawn_past_max_children_fails_and_starts_nothing,
);

const ECHO: &str = r#"[[agents]]
role = "echo"
kind = "template"
template = "done {{ input.item }}"
"#;

/// `all` and `all_ok` succeed with `[]`; `first_ok` and `quorum` fail with
/// kind `children`; none of them waits or starts a child.
async fn a_join_over_no_child_is_decided_at_once(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let rules = [
        ("", RunStatus::Succeeded),
        ("join = \"all_ok\"", RunStatus::Succeeded),
        ("join = \"first_ok\"", RunStatus::Failed),
        ("join = \"quorum\"\nquorum = 1", RunStatus::Failed),
    ];
    for (extra, want) in rules {
        let (_dir, crew) = crews(extra, ECHO);
        let input = json!({"items": []});
        let run = crate::ran(&engine, &crew, input).await.run;
        assert_eq!(run.status, want, "{extra}: {:?}", run.error);
        let view = engine.show(run.id).await.unwrap();
        assert!(view.children.is_empty(), "{extra}: a child was started");
        if want == RunStatus::Succeeded {
            assert_eq!(view.steps[0].output, Some(json!([])), "{extra}");
            assert_eq!(view.steps[1].output, Some(json!("0 children")), "{extra}");
        } else {
            let error = run.error.unwrap();
            assert_eq!(error.kind, ErrorKind::Children, "{extra}");
            assert!(
                error.message.contains("no child") || error.message.contains("lists 0"),
                "{extra}: {}",
                error.message
            );
        }
    }
}

/// A command step with `delegate` whose `cairn_spawn` lists no child: the
/// step succeeds with `[]`, as a `children` step over an empty list does.
async fn a_command_that_spawns_no_child_succeeds_with_none(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let (_dir, crew) = planner("echo '{\"cairn_spawn\": {\"children\": []}}'", "");
    let run = crate::ran(&engine, &crew, json!({})).await.run;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let view = engine.show(run.id).await.unwrap();
    assert_eq!(view.steps[0].output, Some(json!([])));
    assert!(view.children.is_empty());
}

/// A crew whose command step `plan` (with `delegate = ["child.toml"]` and
/// `extra` settings) runs `script`, in a directory of its own.
fn planner(script: &str, extra: &str) -> (tempfile::TempDir, Crew) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("child.toml"),
        format!("name = \"child\"\nversion = \"1\"\n{ECHO}"),
    )
    .unwrap();
    let script = format!("cat > /dev/null; {script}");
    let parent = format!(
        "name = \"planner\"\nversion = \"1\"\n[[agents]]\nrole = \"plan\"\nkind = \"command\"\n\
         command = [\"sh\", \"-c\", {}]\ndelegate = [\"child.toml\"]\n{extra}\n",
        toml_string(&script)
    );
    std::fs::write(dir.path().join("planner.toml"), parent).unwrap();
    let crew = Crew::from_file(dir.path().join("planner.toml")).unwrap();
    (dir, crew)
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A spawn request of `n` children of crew `child`.
fn request(n: usize) -> String {
    let children: Vec<_> = (0..n)
        .map(|i| json!({"key": format!("k{i}"), "crew": "child", "input": {"item": i}}))
        .collect();
    json!({"cairn_spawn": {"children": children}}).to_string()
}

/// `delegate` spawns obey `max_children` (set on the agent, or the default
/// of 1,000): one over fails the step, kind `children`, starting nothing.
async fn a_spawn_past_max_children_fails_and_starts_nothing(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    for (n, extra) in [(3, "max_children = 2"), (1001, "")] {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), request(n)).unwrap();
        let script = format!("cat {}", file.path().display());
        let (_dir, crew) = planner(&script, extra);
        let run = crate::ran(&engine, &crew, json!({})).await.run;
        assert_eq!(run.status, RunStatus::Failed, "{n}: {:?}", run.error);
        let error = run.error.unwrap();
        assert_eq!(error.kind, ErrorKind::Children);
        assert!(error.message.contains("max_children"), "{}", error.message);
        let view = engine.show(run.id).await.unwrap();
        assert!(view.children.is_empty(), "{n}: children were started");
    }
    // Within the cap, they start.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), request(2)).unwrap();
    let script = format!("cat {}", file.path().display());
    let (_dir, crew) = planner(&script, "max_children = 2");
    let run = crate::ran(&engine, &crew, json!({})).await.run;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
}
