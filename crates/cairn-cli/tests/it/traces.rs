//! Traces over OTLP/HTTP, received by a real collector process stand-in
//! (`cairn_testkit::otlp`), both backends: a run is one trace of GenAI
//! spans; a run SIGKILLed mid-step and resumed by another process is
//! still one trace with one span per finished piece of work (the killed
//! process's included) and no orphan; a waiting run's finished steps are
//! exported before the answer; a caller's `traceparent` is honoured; the
//! same over gRPC.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use cairn_testkit::otlp::{Collector, ReceivedSpan};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{
    agent_sh, agent_template, crew_toml, q, step, wait_until, Case, Kind, Spawned,
};

both_backends!(
    a_run_is_one_trace_of_genai_spans,
    a_run_killed_mid_step_and_resumed_elsewhere_is_still_one_trace,
    a_waiting_runs_finished_steps_are_exported_before_the_answer,
    a_callers_traceparent_makes_the_run_part_of_its_trace,
    child_runs_are_traced_under_their_parents_span,
    a_worker_killed_mid_step_and_taken_over_by_another_is_still_one_trace,
    a_traceparent_header_on_the_api_submit_is_honoured,
    content_is_captured_only_when_asked_and_cut,
    over_grpc_a_collector_that_was_down_gets_the_whole_trace_later,
);

/// The model asks for the lookup tool, then answers.
fn script() -> String {
    let call = r#"{ id = "c_lookup", name = "lookup", arguments = { order = "A-1" } }"#;
    crate::support::one_call_script("Looking it up.", call, "Found it.")
}

/// The lookup tool; with `TEST_PAUSE=lookup` it writes its pid to
/// `paused.pid` and sleeps, so a kill lands inside it.
const TOOL: &str = r#"#!/bin/sh
d=$(dirname "$0")
cat > /dev/null
if [ "${TEST_PAUSE:-}" = lookup ]; then echo $$ > "$d/paused.pid"; sleep 30; fi
echo '{"found": true}'
"#;

/// Three steps: an `llm` clerk with a tool, a template, a command.
fn crew(case: &Case) -> String {
    std::fs::write(case.path("tool.sh"), TOOL).unwrap();
    let tool = case.path("tool.sh").display().to_string();
    let script = case.write("model.toml", &script()).display().to_string();
    let clerk = format!(
        "[[agents]]\nrole = \"clerk\"\nkind = \"llm\"\nprovider = \"scripted\"\nmodel = \"script-1\"\n\
         script = {}\ninstructions = \"Look the order up.\"\nenv = [\"TEST_PAUSE\"]\n\n\
         [[agents.tools]]\nname = \"lookup\"\ndescription = \"Look an order up.\"\n\
         parameters = {{ type = \"object\", properties = {{ order = {{ type = \"string\" }} }} }}\n\
         idempotent = true\ncommand = [\"sh\", {}]\n",
        q(&script),
        q(&tool)
    );
    let agents = [
        clerk,
        agent_template("receipt", "receipt: {{ outputs.clerk }}"),
        agent_sh("stamp", "cat > /dev/null; echo \"$TRACEPARENT\""),
    ];
    case.write("crew.toml", &crew_toml("traced", &agents))
        .display()
        .to_string()
}

fn otel(collector: &Collector) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.clone()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".into()),
        ("OTEL_SERVICE_NAME", "cairn-test".into()),
    ]
}

fn refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The spans of one trace, checked whole: one trace id, no span twice,
/// every parent present (or the caller's `parent_of_root`), one root.
fn tree(
    spans: &[ReceivedSpan],
    trace: &str,
    parent_of_root: &str,
) -> BTreeMap<String, ReceivedSpan> {
    assert!(
        spans.iter().all(|s| s.trace_id == trace),
        "one trace: {spans:#?}"
    );
    let ids: HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(
        ids.len(),
        spans.len(),
        "a span was exported twice: {spans:#?}"
    );
    for s in spans {
        assert!(
            ids.contains(s.parent.as_str()) || s.parent == parent_of_root,
            "orphan {s:#?}"
        );
        assert_eq!(s.service, "cairn-test");
    }
    let roots: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "invoke_workflow traced")
        .collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    assert_eq!(roots[0].parent, parent_of_root);
    spans
        .iter()
        .map(|s| (s.span_id.clone(), s.clone()))
        .collect()
}

/// [`tree`] of what a collector got from processes that were SIGKILLed:
/// export is at least once, so a process killed between the collector's
/// answer and its cursor's move leaves a batch that the next exporter sends
/// again. A span received twice must be the same span (same id, same
/// content), so a backend shows it once; anything else fails.
fn tree_after_kill(spans: &[ReceivedSpan], trace: &str) -> BTreeMap<String, ReceivedSpan> {
    let mut unique: BTreeMap<&str, &ReceivedSpan> = BTreeMap::new();
    for s in spans {
        if let Some(first) = unique.insert(&s.span_id, s) {
            assert_eq!(first, s, "two different spans with one id");
        }
    }
    let once: Vec<ReceivedSpan> = unique.into_values().cloned().collect();
    tree(&once, trace, "")
}

fn named<'a>(spans: &'a BTreeMap<String, ReceivedSpan>, name: &str) -> Vec<&'a ReceivedSpan> {
    spans.values().filter(|s| s.name == name).collect()
}

fn trace_of(id: &str) -> String {
    id.replace('-', "")
}

fn count(events: &Value, kind: &str) -> usize {
    crate::support::count_kind(events, kind)
}

fn a_run_is_one_trace_of_genai_spans(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    let crew = crew(&case);
    let env = otel(&collector);
    let out = case
        .cairn_env(&["run", &crew, "--json"], &refs(&env))
        .expect_code(0);
    let run = out.json();
    let id = run["id"].as_str().unwrap().to_owned();
    let spans = tree(&collector.spans(), &trace_of(&id), "");

    let root = &named(&spans, "invoke_workflow traced")[0];
    assert_eq!(root.attributes["gen_ai.operation.name"], "invoke_workflow");
    assert_eq!(root.attributes["cairn.run.id"], id.as_str());
    assert_eq!(root.status, 1, "ok");
    // A command step gets the run's trace, under the run's span.
    assert_eq!(
        step(&run, 2)["output"],
        format!("00-{}-{}-01", trace_of(&id), root.span_id).as_str()
    );
    for role in ["clerk", "receipt", "stamp"] {
        let s = named(&spans, &format!("invoke_agent {role}"));
        assert_eq!(s.len(), 1, "{role}: {spans:#?}");
        assert_eq!(s[0].parent, root.span_id);
        assert_eq!(s[0].attributes["gen_ai.agent.name"], role);
        assert!(s[0].start_ns <= s[0].end_ns && root.start_ns <= s[0].start_ns);
    }
    let clerk = named(&spans, "invoke_agent clerk")[0].clone();
    let chats = named(&spans, "chat script-1");
    assert_eq!(chats.len(), 2);
    assert!(chats
        .iter()
        .all(|c| c.parent == clerk.span_id && c.kind == 3));
    assert!(chats
        .iter()
        .all(|c| c.attributes["gen_ai.provider.name"] == "scripted"));
    assert!(chats
        .iter()
        .all(|c| c.attributes["cairn.model.first_chunk_ms"].is_i64()));
    let tools = named(&spans, "execute_tool lookup");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].parent, clerk.span_id);
    assert_eq!(tools[0].attributes["gen_ai.tool.call.id"], "c_lookup");
    assert_eq!(
        tools[0].attributes["cairn.tool.idempotency_key"],
        format!("{id}/0/c_lookup")
    );
    // Token counts equal what `runs show` reports for the step.
    let tokens = |key: &str| -> i64 {
        chats
            .iter()
            .map(|c| c.attributes[key].as_i64().unwrap())
            .sum()
    };
    let shown = step(&run, 0);
    assert_eq!(
        tokens("gen_ai.usage.input_tokens"),
        shown["input_tokens"].as_i64().unwrap()
    );
    assert_eq!(
        tokens("gen_ai.usage.output_tokens"),
        shown["output_tokens"].as_i64().unwrap()
    );
    assert_eq!(
        clerk.attributes["gen_ai.usage.input_tokens"],
        shown["input_tokens"]
    );

    // No content without the setting.
    assert!(spans
        .values()
        .all(|s| !s.attributes.contains_key("gen_ai.tool.call.arguments")
            && !s.attributes.contains_key("cairn.step.output")));

    // Metrics over OTLP, from the same exported calls: token usage and
    // call durations (GenAI names), step durations, the runs by status.
    let points = collector.points();
    let sum = |metric: &str, kind: &str| -> f64 {
        points
            .iter()
            .filter(|p| p.metric == metric && p.attributes["gen_ai.token.type"] == kind)
            .map(|p| p.sum)
            .sum()
    };
    assert_eq!(
        sum("gen_ai.client.token.usage", "input") as i64,
        tokens("gen_ai.usage.input_tokens")
    );
    assert_eq!(
        sum("gen_ai.client.token.usage", "output") as i64,
        tokens("gen_ai.usage.output_tokens")
    );
    let count = |metric: &str| -> u64 {
        points
            .iter()
            .filter(|p| p.metric == metric)
            .map(|p| p.count)
            .sum()
    };
    assert_eq!(count("gen_ai.client.operation.duration"), 2);
    assert_eq!(count("cairn.step.duration"), 3);
    assert!(
        points.iter().any(|p| p.metric == "cairn.runs"
            && p.attributes["cairn.run.status"] == "succeeded"
            && p.value == 1),
        "{points:#?}"
    );
}

fn a_run_killed_mid_step_and_resumed_elsewhere_is_still_one_trace(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    let crew = crew(&case);
    let mut env = otel(&collector);
    env.push(("TEST_PAUSE", "lookup".into()));
    let mut child = case.spawn(&["run", &crew], &refs(&env));
    wait_until("the tool to run", Duration::from_secs(60), || {
        std::fs::read_to_string(case.path("paused.pid")).is_ok_and(|s| s.ends_with('\n'))
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    assert!(!child.wait().unwrap().success());
    let tool_pid = std::fs::read_to_string(case.path("paused.pid")).unwrap();
    let _ = kill(
        Pid::from_raw(tool_pid.trim().parse().unwrap()),
        Signal::SIGKILL,
    );
    let id = case.only_run_id();

    env.pop();
    case.cairn_env(&["resume", &id], &refs(&env)).expect_code(0);
    let events = case.events(&id);
    let spans = tree_after_kill(&collector.spans(), &trace_of(&id));
    let clerk = named(&spans, "invoke_agent clerk");
    assert_eq!(clerk.len(), 1, "one span for the attempt, across the kill");
    assert_eq!(clerk[0].attributes["cairn.step.resumed"], true);
    assert_eq!(clerk[0].attributes["cairn.step.takeovers"], 1);
    // Every model call and tool run stored has its span, once: the killed
    // process's first call included.
    let chats = named(&spans, "chat script-1");
    assert_eq!(chats.len(), count(&events, "model_called"), "{events:#}");
    assert!(
        chats.len() >= 2,
        "the killed process's call and the resumed ones"
    );
    assert!(chats.iter().all(|c| c.parent == clerk[0].span_id));
    assert_eq!(
        named(&spans, "execute_tool lookup").len(),
        count(&events, "tool_executed")
    );
    for role in ["receipt", "stamp"] {
        assert_eq!(named(&spans, &format!("invoke_agent {role}")).len(), 1);
    }
}

fn a_waiting_runs_finished_steps_are_exported_before_the_answer(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    let agents = [
        agent_sh("draft", "cat > /dev/null; echo draft"),
        agent_sh("writer", "cat > /dev/null; echo text") + "review = true\n",
        agent_template("publish", "{{ outputs.writer }}"),
    ];
    std::fs::create_dir_all(case.path("crews")).unwrap();
    case.write("crews/traced.toml", &crew_toml("traced", &agents));
    let crews = case.path("crews").display().to_string();
    let served = crate::support::serve(&case, &["--crews", &crews], &refs(&otel(&collector)));
    let out = case
        .cairn(&["--server", &served.url, "submit", "traced", "--json"])
        .expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_owned();
    let ended = |name: &'static str| move |c: &Collector| c.spans().iter().any(|s| s.name == name);
    wait_until("the draft's span", Duration::from_secs(30), || {
        ended("invoke_agent draft")(&collector)
    });
    wait_until("the writer's span", Duration::from_secs(30), || {
        ended("invoke_agent writer")(&collector)
    });
    let writer: Vec<_> = collector
        .spans()
        .into_iter()
        .filter(|s| s.name == "invoke_agent writer")
        .collect();
    assert_eq!(writer[0].attributes["cairn.step.outcome"], "waiting");
    assert!(
        !ended("invoke_workflow traced")(&collector),
        "the run has not ended"
    );
    let waits = case
        .cairn(&["waits", "list", "--json"])
        .expect_code(0)
        .json();
    let wait = waits[0]["id"].as_str().unwrap().to_owned();
    case.cairn(&[
        "--server",
        &served.url,
        "waits",
        "answer",
        &wait,
        "--approve",
    ])
    .expect_code(0);
    wait_until("the run's span", Duration::from_secs(30), || {
        ended("invoke_workflow traced")(&collector)
    });
    let spans = tree(&collector.spans(), &trace_of(&id), "");
    assert_eq!(
        named(&spans, "invoke_agent writer").len(),
        2,
        "the wait, then the approved step"
    );
    assert_eq!(named(&spans, "cairn.wait.answered").len(), 1);
}

fn a_callers_traceparent_makes_the_run_part_of_its_trace(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    let crew = case
        .write(
            "crew.toml",
            &crew_toml("traced", &[agent_template("only", "hi")]),
        )
        .display()
        .to_string();
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let env = otel(&collector);
    case.cairn_env(&["run", &crew, "--traceparent", caller], &refs(&env))
        .expect_code(0);
    tree(
        &collector.spans(),
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    );
    // A bad one is refused before anything is stored.
    case.cairn_env(&["run", &crew, "--traceparent", "00-nope"], &refs(&env))
        .expect_one_line_error(&["--traceparent", "bad traceparent"]);
    assert_eq!(case.list().len(), 1);
    // TRACEPARENT from the environment joins the same way; a malformed one,
    // which another tool may have set, is ignored and the run goes on.
    let mut with_env = env.clone();
    with_env.push(("TRACEPARENT", "not-a-traceparent".into()));
    case.cairn_env(&["run", &crew], &refs(&with_env))
        .expect_code(0);
    assert_eq!(case.list().len(), 2);
}

fn child_runs_are_traced_under_their_parents_span(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    case.write(
        "child.toml",
        &crew_toml("child", &[agent_template("echo", "{{ input.item }}")]),
    );
    let parent = format!(
        "{}\n[[agents]]\nrole = \"fan\"\nkind = \"children\"\ncrew = \"child.toml\"\n\
         children = [{{ key = \"a\", input = {{ item = \"x\" }} }}, {{ key = \"b\", input = {{ item = \"y\" }} }}]\n",
        crew_toml("traced", &[agent_template("plan", "go")])
    );
    let crew = case.write("crew.toml", &parent).display().to_string();
    let out = case
        .cairn_env(&["run", &crew, "--json"], &refs(&otel(&collector)))
        .expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_owned();
    let spans = collector.spans();
    let parent_root = spans
        .iter()
        .find(|s| s.name == "invoke_workflow traced")
        .unwrap()
        .span_id
        .clone();
    // One trace: the parent's tree, and each child's under the parent's span.
    let all = tree(&spans, &trace_of(&id), "");
    let children = named(&all, "invoke_workflow child");
    assert_eq!(children.len(), 2, "{spans:#?}");
    assert!(children.iter().all(|c| c.parent == parent_root));
    assert_eq!(named(&all, "invoke_agent echo").len(), 2);

    // A fork of a traced run is a trace of its own, naming its source.
    let fork = case
        .cairn_env(
            &["runs", "fork", &id, "--from-step", "1", "--json"],
            &refs(&otel(&collector)),
        )
        .expect_code(0);
    let fork_id = fork.json()["id"].as_str().unwrap().to_owned();
    let of_fork: Vec<ReceivedSpan> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == trace_of(&fork_id))
        .collect();
    let forked = tree(&of_fork, &trace_of(&fork_id), "");
    let root = &named(&forked, "invoke_workflow traced")[0];
    assert_eq!(root.attributes["cairn.parent_run.id"], id.as_str());
}

/// The kill test with workers: `cairn worker` (short lease) is SIGKILLed
/// inside the tool; a second worker takes the run over once the lease
/// expires. Both export; the trace is still one, whole, without orphans.
fn a_worker_killed_mid_step_and_taken_over_by_another_is_still_one_trace(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    let crew = crew(&case);
    let env = otel(&collector);
    let out = case
        .cairn_env(&["submit", &crew, "--json"], &refs(&env))
        .expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_owned();
    let worker = |name: &str, pause: bool| {
        let mut cmd = case.command();
        cmd.args([
            "worker",
            "--lease-ms",
            "2000",
            "--heartbeat-ms",
            "500",
            "--poll-ms",
            "100",
        ])
        .args(["--db", case.url()])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::fs::File::create(case.path(&format!("{name}.out"))).unwrap())
        .stderr(std::fs::File::create(case.path(&format!("{name}.err"))).unwrap());
        if pause {
            cmd.env("TEST_PAUSE", "lookup");
        }
        Spawned(cmd.spawn().unwrap())
    };
    let mut first = worker("first", true);
    wait_until("the tool to run", Duration::from_secs(60), || {
        std::fs::read_to_string(case.path("paused.pid")).is_ok_and(|s| s.ends_with('\n'))
    });
    kill(first.pid(), Signal::SIGKILL).unwrap();
    first.wait("the killed worker");
    let tool_pid = std::fs::read_to_string(case.path("paused.pid")).unwrap();
    let _ = kill(
        Pid::from_raw(tool_pid.trim().parse().unwrap()),
        Signal::SIGKILL,
    );

    let mut second = worker("second", false);
    wait_until("the run to succeed", Duration::from_secs(60), || {
        case.show(&id)["status"] == "succeeded"
    });
    kill(second.pid(), Signal::SIGTERM).unwrap();
    assert!(second.wait("the second worker").success());
    let events = case.events(&id);
    let spans = tree_after_kill(&collector.spans(), &trace_of(&id));
    let clerk = named(&spans, "invoke_agent clerk");
    assert_eq!(
        clerk.len(),
        1,
        "one span for the attempt, across the takeover"
    );
    assert_eq!(clerk[0].attributes["cairn.step.takeovers"], 1);
    let chats = named(&spans, "chat script-1");
    assert_eq!(chats.len(), count(&events, "model_called"), "{events:#}");
    assert!(chats.iter().all(|c| c.parent == clerk[0].span_id));
}

/// `POST /v1/runs` with a `traceparent` header: the run joins that trace.
fn a_traceparent_header_on_the_api_submit_is_honoured(kind: Kind) {
    use std::io::{Read, Write};
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    std::fs::create_dir_all(case.path("crews")).unwrap();
    case.write(
        "crews/traced.toml",
        &crew_toml("traced", &[agent_template("only", "hi")]),
    );
    let crews = case.path("crews").display().to_string();
    let served = crate::support::serve(&case, &["--crews", &crews], &refs(&otel(&collector)));
    let body = r#"{"crew": "traced", "input": {}}"#;
    let mut s = std::net::TcpStream::connect(&served.listen).unwrap();
    write!(
        s,
        "POST /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    wait_until("the run's span", Duration::from_secs(30), || {
        collector
            .spans()
            .iter()
            .any(|s| s.name == "invoke_workflow traced")
    });
    tree(
        &collector.spans(),
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
    );
}

/// With `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, a tool's
/// arguments and result, a model call's messages and a step's output are
/// on the spans.
fn content_is_captured_only_when_asked_and_cut(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start().unwrap();
    let crew = crew(&case);
    let mut env = otel(&collector);
    env.push((
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "true".into(),
    ));
    let out = case
        .cairn_env(&["run", &crew, "--json"], &refs(&env))
        .expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_owned();
    let spans = tree(&collector.spans(), &trace_of(&id), "");
    let tool = &named(&spans, "execute_tool lookup")[0];
    assert_eq!(
        tool.attributes["gen_ai.tool.call.arguments"],
        r#"{"order":"A-1"}"#
    );
    assert!(tool.attributes["gen_ai.tool.call.result"]
        .as_str()
        .unwrap()
        .contains("found"));
    let receipt = &named(&spans, "invoke_agent receipt")[0];
    assert_eq!(
        receipt.attributes["cairn.step.output"],
        "receipt: Found it."
    );
    // The model's messages, from the journal: what it said and was sent.
    let chat = |turn: i64, key: &str| -> Value {
        let c = named(&spans, "chat script-1")
            .into_iter()
            .find(|c| c.attributes["cairn.model.turn"] == turn)
            .unwrap();
        serde_json::from_str(c.attributes[key].as_str().unwrap()).unwrap()
    };
    let asked = serde_json::json!({"role": "assistant", "parts": [
        {"type": "text", "content": "Looking it up."},
        {"type": "tool_call", "id": "c_lookup", "name": "lookup", "arguments": {"order": "A-1"}}]});
    assert_eq!(
        chat(0, "gen_ai.output.messages")[0]["parts"],
        asked["parts"]
    );
    let sent = chat(1, "gen_ai.input.messages");
    assert_eq!(sent[0], asked);
    assert_eq!(sent[1]["role"], "tool");
    assert_eq!(sent[1]["parts"][0]["id"], "c_lookup");
    assert_eq!(
        chat(1, "gen_ai.output.messages")[0]["parts"][0]["content"],
        "Found it."
    );
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`: a run beside a collector that
/// refuses every export (gRPC `unavailable`) still succeeds, and its spans
/// wait in the store; the next process that exports, once the collector is
/// back, sends that run's whole trace with its own, and metrics travel the
/// same way.
fn over_grpc_a_collector_that_was_down_gets_the_whole_trace_later(kind: Kind) {
    let case = Case::new(kind);
    let collector = Collector::start_grpc().unwrap();
    let crew = crew(&case);
    let mut env = otel(&collector);
    env.push(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".into()));
    collector.set_down(true);
    let first = case
        .cairn_env(&["run", &crew, "--json"], &refs(&env))
        .expect_code(0);
    let first = first.json()["id"].as_str().unwrap().to_owned();
    assert!(collector.requests() > 0, "the exporter tried");
    assert!(collector.spans().is_empty());

    collector.set_down(false);
    let second = case
        .cairn_env(&["run", &crew, "--json"], &refs(&env))
        .expect_code(0);
    let second = second.json()["id"].as_str().unwrap().to_owned();
    let received = collector.spans();
    for id in [&first, &second] {
        let trace = trace_of(id);
        let of: Vec<ReceivedSpan> = received
            .iter()
            .filter(|s| s.trace_id == trace)
            .cloned()
            .collect();
        let spans = tree(&of, &trace, "");
        assert_eq!(named(&spans, "chat script-1").len(), 2, "{id}");
        assert_eq!(named(&spans, "execute_tool lookup").len(), 1, "{id}");
        let all = "run, its submit, 3 steps, 2 chats, 1 tool";
        assert_eq!(spans.len(), 8, "{all}: {spans:#?}");
    }
    assert!(collector
        .points()
        .iter()
        .any(|p| p.metric == "gen_ai.client.token.usage"));
}
