//! Child runs through the engine, both backends: a map over the input with
//! each join rule, the held children of `concurrency`, fail-fast with the
//! rest cancelled, a parent's cancel reaching children that wait for a
//! person, a spawn that is never written twice, and a retried parent that
//! keeps its succeeded children (or, asked to, starts them all again).

use serde_json::json;

use cairn::{Actor, Crew, Engine, EventKind, RunFilter, RunStatus, SubmitOptions};
use cairn_testkit::{both, Kind};

/// Writes `parent.toml` (its `[[agents]]` after a `fan` children step over
/// `input.items` with `extra` settings, then a template that counts the
/// outcomes) and `child.toml` (`child` agents) into a directory of its own.
pub(crate) fn crews(extra: &str, child: &str) -> (tempfile::TempDir, Crew) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("child.toml"),
        format!("name = \"child\"\nversion = \"1\"\n{child}"),
    )
    .unwrap();
    let parent = include_str!("testdata/fan_parent.toml").replace("$EXTRA", extra);
    std::fs::write(dir.path().join("parent.toml"), parent).unwrap();
    let crew = Crew::from_file(dir.path().join("parent.toml")).unwrap();
    (dir, crew)
}

const ECHO: &str = r#"[[agents]]
role = "echo"
kind = "template"
template = "done {{ input.item }}"
"#;

/// A child that fails (for good) when its item is "bad".
const PICKY: &str = r#"[[agents]]
role = "picky"
kind = "command"
command = ["sh", "-c", "grep -q '\"item\":\"bad\"' && exit 3; echo ok"]
permanent_exit_codes = [3]
"#;

async fn children_of(engine: &Engine, parent: cairn::RunId) -> Vec<cairn::RunRecord> {
    let filter = RunFilter {
        parent: Some(parent),
        ..RunFilter::default()
    };
    engine.list(&filter).await.unwrap()
}

/// The children's statuses in listing order.
async fn statuses(engine: &Engine, run: cairn::RunId) -> Vec<RunStatus> {
    let view = engine.show(run).await.unwrap();
    view.children.iter().map(|c| c.status).collect()
}

async fn joins(engine: &Engine, run: cairn::RunId) -> usize {
    let events = engine.events(run).await.unwrap();
    events
        .iter()
        .filter(|e| e.kind == EventKind::ChildrenJoined)
        .count()
}

both!(a_template_reduces_the_outcomes_to_the_steps_output);
async fn a_template_reduces_the_outcomes_to_the_steps_output(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let input = json!({"items": ["a", "b", "c"]});
    for (template, want) in [
        (
            r#"template = "{{ children | map(attribute='output') | join(', ') }}""#,
            json!("done a, done b, done c"),
        ),
        (
            r#"template = '{"children": {{ children | length }}, "first": "{{ children[0].key }}"}'"#,
            json!({"children": 3, "first": "0"}),
        ),
    ] {
        let (_dir, crew) = crews(template, ECHO);
        let driven = crate::ran(&engine, &crew, input.clone()).await;
        assert_eq!(
            driven.run.status,
            RunStatus::Succeeded,
            "{:?}",
            driven.run.error
        );
        let view = engine.show(driven.run.id).await.unwrap();
        assert_eq!(view.steps[0].output, Some(want), "{template}");
        assert_eq!(
            view.children.len(),
            3,
            "the outcomes are still the run's children"
        );
    }
    // A template that does not compile is refused when the crew loads.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("child.toml"),
        format!("name = \"child\"\nversion = \"1\"\n{ECHO}"),
    )
    .unwrap();
    let bad = "name = \"p\"\nversion = \"1\"\n[[agents]]\nrole = \"fan\"\nkind = \"children\"\n\
               crew = \"child.toml\"\nover = \"input.items\"\ntemplate = \"{{ children | nosuchfilter }}\"\n";
    std::fs::write(dir.path().join("parent.toml"), bad).unwrap();
    let err = Crew::from_file(dir.path().join("parent.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nosuchfilter"), "{err}");
}

both!(a_map_runs_one_child_per_item_and_joins_once);
async fn a_map_runs_one_child_per_item_and_joins_once(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let (_dir, crew) = crews("concurrency = 2", ECHO);
    let input = json!({"items": ["a", "b", "c", "d", "e"]});
    let driven = crate::ran(&engine, &crew, input).await;
    let run = driven.run;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let view = engine.show(run.id).await.unwrap();
    assert_eq!(view.children.len(), 5);
    let steps = view.steps;
    let fan = steps[0].output.clone().unwrap();
    let outcomes = fan.as_array().unwrap();
    assert_eq!(outcomes.len(), 5);
    for (i, (o, item)) in outcomes.iter().zip(["a", "b", "c", "d", "e"]).enumerate() {
        assert_eq!(o["key"], json!(i.to_string()));
        assert_eq!(o["status"], json!("succeeded"));
        assert_eq!(o["output"], json!(format!("done {item}")));
    }
    assert_eq!(steps[1].output, Some(json!("5 children")));
    let children = children_of(&engine, run.id).await;
    assert_eq!(children.len(), 5, "each child stored once");
    for c in &children {
        let child = c.child.as_ref().unwrap();
        assert_eq!(child.parent_run_id, run.id);
        assert_eq!(child.depth, 1);
        assert_eq!(c.status, RunStatus::Succeeded);
    }
    assert_eq!(joins(&engine, run.id).await, 1, "one wake-up for one join");
}

both!(all_ok_fails_fast_and_cancels_the_rest);
async fn all_ok_fails_fast_and_cancels_the_rest(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let (_dir, crew) = crews("join = \"all_ok\"\nconcurrency = 1", PICKY);
    let input = json!({"items": ["good", "bad", "late", "later"]});
    let run = crate::ran(&engine, &crew, input).await.run;
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.unwrap();
    assert_eq!(error.kind, cairn::ErrorKind::Children);
    assert!(error.message.contains("all_ok"), "{}", error.message);
    let statuses = statuses(&engine, run.id).await;
    assert_eq!(
        statuses,
        [
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Cancelled,
            RunStatus::Cancelled
        ],
        "the held children never ran"
    );
    assert_eq!(joins(&engine, run.id).await, 1);
}

both!(first_ok_and_quorum_decide_early);
async fn first_ok_and_quorum_decide_early(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let (_d1, first) = crews("join = \"first_ok\"\nconcurrency = 1", PICKY);
    let input = json!({"items": ["bad", "good", "never"]});
    let run = crate::ran(&engine, &first, input).await.run;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let statuses = statuses(&engine, run.id).await;
    assert_eq!(
        statuses,
        [
            RunStatus::Failed,
            RunStatus::Succeeded,
            RunStatus::Cancelled
        ]
    );

    let (_d2, quorum) = crews("join = \"quorum\"\nquorum = 2", PICKY);
    let input = json!({"items": ["bad", "bad", "good"]});
    let run = crate::ran(&engine, &quorum, input).await.run;
    assert_eq!(run.status, RunStatus::Failed, "2 of 3 cannot succeed");
    assert_eq!(run.error.unwrap().kind, cairn::ErrorKind::Children);
}

both!(a_cancel_reaches_children_that_wait_for_a_person);
async fn a_cancel_reaches_children_that_wait_for_a_person(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let reviewed = format!("{ECHO}review = true\n");
    let (_dir, crew) = crews("", &reviewed);
    let input = json!({"items": ["a", "b", "c"]});
    let run = crate::ran(&engine, &crew, input).await.run;
    assert_eq!(run.status, RunStatus::Waiting);
    let children = children_of(&engine, run.id).await;
    assert!(children.iter().all(|c| c.status == RunStatus::Waiting));
    let waits = engine.waits(&Default::default()).await.unwrap();
    assert_eq!(waits.len(), 3, "each child's review is a wait people see");
    for w in &waits {
        let chain: Vec<_> = w.parents.iter().map(|p| p.parent_run_id).collect();
        assert_eq!(chain, [run.id], "each wait names its parent chain");
    }
    engine
        .cancel(run.id, &Actor::new("test").because("no longer needed"))
        .await
        .unwrap();
    for c in children_of(&engine, run.id).await {
        assert_eq!(c.status, RunStatus::Cancelled, "child {}", c.id);
    }
    assert_eq!(
        engine.get_run(run.id).await.unwrap().status,
        RunStatus::Cancelled
    );
}

both!(answering_the_last_child_continues_the_parent);
async fn answering_the_last_child_continues_the_parent(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let reviewed = format!("{ECHO}review = true\n");
    let (_dir, crew) = crews("", &reviewed);
    let input = json!({"items": ["a", "b"]});
    let run = crate::ran(&engine, &crew, input).await.run;
    let waits = engine.waits(&Default::default()).await.unwrap();
    for w in &waits {
        engine
            .answer(w.id, &cairn::Answer::Approve, "test")
            .await
            .unwrap();
        engine.execute(w.run_id).await.unwrap();
    }
    let run = engine.get_run(run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let children = children_of(&engine, run.id).await;
    assert_eq!(children.len(), 2, "no child started twice");
    assert_eq!(joins(&engine, run.id).await, 1);
}

both!(a_cancel_stops_fifty_running_children);
/// A parent whose 50 children are all running under a worker (each a
/// program that sleeps): cancelling the parent cancels the children in
/// the same transaction (a cancel request each), their holder stops them,
/// and none is left running.
async fn a_cancel_stops_fifty_running_children(kind: Kind) {
    const CHILDREN: usize = 50;
    let (_db, engine) = super::opened(kind).await;
    let sleeper = "[[agents]]\nrole = \"nap\"\nkind = \"command\"\n\
                   command = [\"sh\", \"-c\", \"cat > /dev/null; sleep 60\"]\n";
    let (_dir, crew) = crews("", sleeper);
    let items: Vec<usize> = (0..CHILDREN).collect();
    let parent = crate::submitted(&engine, &crew, json!({ "items": items })).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let engine = engine.clone();
        let opts = cairn::WorkOptions {
            concurrency: CHILDREN + 1,
            poll: std::time::Duration::from_millis(20),
            shutdown_grace: std::time::Duration::from_secs(5),
            ..Default::default()
        };
        tokio::spawn(async move {
            engine
                .work(opts, async {
                    stopped.await.ok();
                })
                .await
        })
    };
    let running = || async {
        children_of(&engine, parent)
            .await
            .iter()
            .filter(|c| c.status == RunStatus::Running)
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while running().await < CHILDREN {
        assert!(
            std::time::Instant::now() < deadline,
            "the children never all ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let cancelled = engine
        .cancel(parent, &Actor::new("test").because("stop the tree"))
        .await
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let requested = children_of(&engine, parent)
        .await
        .iter()
        .filter(|c| c.cancel_requested_at.is_some())
        .count();
    assert_eq!(
        requested, CHILDREN,
        "each running child was asked to stop at once"
    );
    while running().await > 0 {
        assert!(std::time::Instant::now() < deadline, "a child kept running");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for c in children_of(&engine, parent).await {
        assert_eq!(c.status, RunStatus::Cancelled, "child {}", c.id);
    }
    stop.send(()).unwrap();
    worker.await.unwrap().unwrap();
}

both!(children_and_forks_inherit_their_runs_priority_and_tenant);
async fn children_and_forks_inherit_their_runs_priority_and_tenant(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let (_dir, crew) = crews("", ECHO);
    let opts = SubmitOptions {
        priority: cairn::Priority::new(7).unwrap(),
        tenant: Some("acme".into()),
        ..SubmitOptions::default()
    };
    let acme = cairn::Tenant::new("acme").ok();
    let run = engine
        .run(&crew, json!({"items": ["a", "b"]}), opts)
        .await
        .unwrap()
        .run;
    assert_eq!((run.status, run.priority.get()), (RunStatus::Succeeded, 7));
    let children = children_of(&engine, run.id).await;
    assert_eq!(children.len(), 2);
    assert!(
        children
            .iter()
            .all(|c| c.priority.get() == 7 && c.tenant == acme),
        "{children:?}"
    );
    assert_eq!(run.tenant, acme);
    let request = cairn::ForkRequest {
        from_step: cairn::StepIdx(1),
        input: None,
        thread_id: None,
        crew: None,
        rerun_children: false,
    };
    let fork = engine
        .fork(run.id, &request, &Actor::new("test"))
        .await
        .unwrap();
    assert_eq!((fork.priority.get(), fork.tenant), (7, acme));
}

/// A child that logs its item to `log`, then fails (for good) on item "b"
/// while the file `fixed` does not exist.
fn flaky(log: &std::path::Path, fixed: &std::path::Path) -> String {
    format!(
        r#"[[agents]]
role = "flaky"
kind = "command"
command = ["sh", "-c", '''in=$(cat); item=$(printf '%s' "$in" | grep -o '"item":"[a-z]*"' | head -n 1 | cut -d'"' -f4); echo "$item" >> {log}; if [ "$item" = b ] && [ ! -f {fixed} ]; then exit 3; fi; echo ok''']
permanent_exit_codes = [3]
"#,
        log = log.display(),
        fixed = fixed.display()
    )
}

/// How many times each item ran, from the log.
fn ran(log: &std::path::Path, item: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter(|l| *l == item).count()
}

both!(a_retried_parent_keeps_its_succeeded_children_unless_told_to_rerun_them);
async fn a_retried_parent_keeps_its_succeeded_children_unless_told_to_rerun_them(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let scratch = tempfile::tempdir().unwrap();
    let (log, fixed) = (scratch.path().join("log"), scratch.path().join("fixed"));
    let (_dir, crew) = crews("join = \"all_ok\"\nconcurrency = 1", &flaky(&log, &fixed));
    let ops = Actor::new("ops").because("b is fixed");

    // a and c succeed, b fails: the parent fails.
    let input = json!({"items": ["a", "c", "b"]});
    let run = crate::ran(&engine, &crew, input).await.run;
    assert_eq!(run.status, RunStatus::Failed);
    let before = engine.show(run.id).await.unwrap().children;
    std::fs::write(&fixed, "").unwrap();
    // A retry keeps a and c and starts only b again.
    engine.retry(run.id, &ops).await.unwrap();
    let done = engine.execute(run.id).await.unwrap().run;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!((ran(&log, "a"), ran(&log, "c"), ran(&log, "b")), (1, 1, 2));
    let outcomes = succeeded_outcomes(&engine, run.id).await;
    for i in [0, 1] {
        assert_eq!(outcomes[i]["run_id"], json!(before[i].run_id), "kept {i}");
    }
    assert_ne!(outcomes[2]["run_id"], json!(before[2].run_id), "b anew");
    let events = engine.events(run.id).await.unwrap();
    let reused = crate::of_kind(&events, EventKind::ChildrenReused);
    assert_eq!(reused.len(), 1, "{events:?}");
    assert_eq!(reused[0].data["reused"].as_array().unwrap().len(), 2);
    assert_eq!(joins(&engine, run.id).await, 2, "one join per attempt");

    // With `--rerun-children`, every child starts again.
    std::fs::remove_file(&fixed).unwrap();
    let input = json!({"items": ["p", "q", "b"]});
    let run = crate::ran(&engine, &crew, input).await.run;
    assert_eq!(run.status, RunStatus::Failed);
    std::fs::write(&fixed, "").unwrap();
    engine.retry_rerunning_children(run.id, &ops).await.unwrap();
    let done = engine.execute(run.id).await.unwrap().run;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!((ran(&log, "p"), ran(&log, "q"), ran(&log, "b")), (2, 2, 4));
    assert_children_rerun(&engine, run.id, EventKind::RunRetried).await;
}

/// `run` reused no child, and its `kind` event (a retry or a fork) says
/// its children ran again.
async fn assert_children_rerun(engine: &Engine, run: cairn::RunId, kind: EventKind) {
    let events = engine.events(run).await.unwrap();
    assert!(!events.iter().any(|e| e.kind == EventKind::ChildrenReused));
    let event = events.iter().find(|e| e.kind == kind).unwrap();
    assert_eq!(event.data["rerun_children"], true);
}

/// The outcomes of `run`'s fan-out (step 0), each of which succeeded.
async fn succeeded_outcomes(engine: &Engine, run: cairn::RunId) -> Vec<serde_json::Value> {
    let view = engine.show(run).await.unwrap();
    let fan = view.steps[0].output.clone().unwrap();
    let outcomes = fan.as_array().unwrap();
    assert!(outcomes.iter().all(|o| o["status"] == "succeeded"), "{fan}");
    outcomes.clone()
}

/// A fork of `run` from step 0 (a new input if given), run to its end.
async fn forked(
    engine: &Engine,
    run: cairn::RunId,
    input: Option<serde_json::Value>,
    rerun_children: bool,
) -> cairn::RunRecord {
    let request = cairn::ForkRequest {
        from_step: cairn::StepIdx(0),
        input,
        thread_id: None,
        crew: None,
        rerun_children,
    };
    let ops = Actor::new("ops").because("b is fixed");
    let fork = engine.fork(run, &request, &ops).await.unwrap();
    engine.execute(fork.id).await.unwrap().run
}

both!(a_fork_keeps_its_sources_succeeded_children_of_the_same_input_unless_told_to_rerun_them);
async fn a_fork_keeps_its_sources_succeeded_children_of_the_same_input_unless_told_to_rerun_them(
    kind: Kind,
) {
    let (_db, engine) = super::opened(kind).await;
    let scratch = tempfile::tempdir().unwrap();
    let (log, fixed) = (scratch.path().join("log"), scratch.path().join("fixed"));
    let (_dir, crew) = crews("join = \"all_ok\"\nconcurrency = 1", &flaky(&log, &fixed));

    // a and c succeed, b fails: the source fails.
    let input = json!({"items": ["a", "c", "b"]});
    let source = crate::ran(&engine, &crew, input).await.run;
    assert_eq!(source.status, RunStatus::Failed);
    let before = engine.show(source.id).await.unwrap().children;
    std::fs::write(&fixed, "").unwrap();

    // A fork keeps a and c (copies in the fork) and starts only b again.
    let fork = forked(&engine, source.id, None, false).await;
    assert_eq!(fork.status, RunStatus::Succeeded, "{:?}", fork.error);
    assert_eq!((ran(&log, "a"), ran(&log, "c"), ran(&log, "b")), (1, 1, 2));
    let outcomes = succeeded_outcomes(&engine, fork.id).await;
    let mine = children_of(&engine, fork.id).await;
    assert_eq!(mine.len(), 3, "every child of the fork is its own");
    for i in [0, 1] {
        assert_ne!(outcomes[i]["run_id"], json!(before[i].run_id), "a copy");
        assert_eq!(outcomes[i]["output"], json!(before[i].output), "kept {i}");
        let copy = engine.show(outcome_run(&outcomes[i])).await.unwrap();
        assert_eq!(copy.run.status, RunStatus::Succeeded);
        assert_eq!(copy.steps.len(), 1, "its checkpoint copied");
    }
    let events = engine.events(fork.id).await.unwrap();
    let reused = crate::of_kind(&events, EventKind::ChildrenReused);
    assert_eq!(reused.len(), 1, "{events:?}");
    let listed = reused[0].data["reused"].as_array().unwrap();
    let from: Vec<_> = listed.iter().map(|r| r["copied_from"].clone()).collect();
    assert_eq!(from, [json!(before[0].run_id), json!(before[1].run_id)]);
    assert_eq!(children_of(&engine, source.id).await.len(), 3, "untouched");
    assert_eq!(statuses(&engine, source.id).await[2], RunStatus::Failed);

    // A fork of that fork keeps all three: the join is decided at the
    // spawn, and the fork finishes with no child run.
    let all_kept = forked(&engine, fork.id, None, false).await;
    assert_eq!(
        all_kept.status,
        RunStatus::Succeeded,
        "{:?}",
        all_kept.error
    );
    assert_eq!((ran(&log, "a"), ran(&log, "c"), ran(&log, "b")), (1, 1, 2));
    assert_eq!(children_of(&engine, all_kept.id).await.len(), 3);

    // Another input: only the child whose input is the same is kept.
    let other = json!({"items": ["a", "d", "b"]});
    let fork = forked(&engine, source.id, Some(other), false).await;
    assert_eq!(fork.status, RunStatus::Succeeded, "{:?}", fork.error);
    assert_eq!((ran(&log, "a"), ran(&log, "d"), ran(&log, "b")), (1, 1, 3));

    // `--rerun-children`: every child starts again, nothing is reused.
    let fork = forked(&engine, source.id, None, true).await;
    assert_eq!(fork.status, RunStatus::Succeeded, "{:?}", fork.error);
    assert_eq!((ran(&log, "a"), ran(&log, "c"), ran(&log, "b")), (2, 2, 4));
    assert_children_rerun(&engine, fork.id, EventKind::RunForked).await;
}

/// The run id of an outcome.
fn outcome_run(outcome: &serde_json::Value) -> cairn::RunId {
    outcome["run_id"].as_str().unwrap().parse().unwrap()
}
