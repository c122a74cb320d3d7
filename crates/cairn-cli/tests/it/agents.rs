//! LLM agent steps under real kills, on both backends: a crew whose `llm`
//! agent (scripted provider) calls an idempotent tool and a non-idempotent
//! one that each record their side effects in files. `cairn` is SIGKILLed
//! during a streamed tool input, during a tool, and between a tool's side
//! effect and its recorded result; each time `cairn resume` repairs the
//! journal by the transcript rules and carries on, and the files prove no
//! side effect was repeated. Plus: a stream cut by the provider is a
//! retryable failure, and `max_turns` interrupts a step that `continue`
//! finishes.

use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{q, read_pid, step, wait_until, Case, Kind};

both_backends!(
    kills_in_a_stream_a_tool_and_between_call_and_result_repeat_no_side_effect,
    a_non_idempotent_tool_killed_before_its_effect_is_reported_not_run_again,
    failpoints_around_the_first_journal_item_lose_and_repeat_nothing,
    a_stream_cut_by_the_provider_is_retried_from_the_journal,
    max_turns_interrupts_and_continue_finishes,
    ask_human_waits_and_the_answer_becomes_the_call_result,
);

/// A tool: records each start (with its idempotency key) in `NAME.started`
/// and its side effect in `NAME.effects` (an idempotent tool skips a key it
/// already recorded). `TEST_PAUSE=NAME:before|after` makes it write its pid
/// to `paused.pid` and sleep before / after the side effect, so a kill lands
/// there.
const TOOL: &str = r#"#!/bin/sh
d=$(dirname "$0"); name=$1; mode=$2
cat > /dev/null
echo "$CAIRN_IDEMPOTENCY_KEY" >> "$d/$name.started"
if [ "${TEST_PAUSE:-}" = "$name:before" ]; then echo $$ > "$d/paused.pid"; sleep 30; fi
if [ "$mode" = idempotent ] && grep -qx "$CAIRN_IDEMPOTENCY_KEY" "$d/$name.effects" 2>/dev/null; then
  :
else
  echo "$CAIRN_IDEMPOTENCY_KEY" >> "$d/$name.effects"
fi
if [ "${TEST_PAUSE:-}" = "$name:after" ]; then echo $$ > "$d/paused.pid"; sleep 30; fi
echo '{"ok": true}'
"#;

/// The model: look the order up (a long input, streamed slowly), charge
/// it, then answer.
const SCRIPT: &str = r#"
[[responses]]
text = "Looking the order up."
tool_calls = [{ id = "c_lookup", name = "lookup", arguments = { order = "A-1001", why = "to know what to charge for this order" } }]
chunk_bytes = 4
chunk_delay_ms = 60

[[responses]]
tool_calls = [{ id = "c_charge", name = "charge", arguments = { order = "A-1001", cents = 4200 } }]

[[responses]]
text = "Done: the order was looked up and charged once."
"#;

impl Case {
    fn agent_crew(&self, script: &str, extra: &str) -> String {
        std::fs::write(self.path("tool.sh"), TOOL).unwrap();
        let tool = self.path("tool.sh").display().to_string();
        let script_path = self.write("model.toml", script);
        let crew = format!(
            r#"name = "agents"
version = "1"

[[agents]]
role = "clerk"
kind = "llm"
provider = "scripted"
script = {script}
instructions = "Charge the order once."
retry = {{ max_attempts = 3, initial_delay_ms = 10 }}
env = ["TEST_PAUSE"]
{extra}

[[agents.tools]]
name = "lookup"
description = "Look an order up."
parameters = {{ type = "object", properties = {{ order = {{ type = "string" }} }}, required = ["order"] }}
idempotent = true
command = ["sh", {tool}, "lookup", "idempotent"]

[[agents.tools]]
name = "charge"
description = "Charge an order (not idempotent)."
parameters = {{ type = "object", properties = {{ order = {{ type = "string" }}, cents = {{ type = "integer" }} }}, required = ["order", "cents"] }}
command = ["sh", {tool}, "charge", "once"]

[[agents]]
role = "receipt"
kind = "template"
template = "receipt: {{{{ outputs.clerk }}}}"
"#,
            script = q(&script_path.display().to_string()),
            tool = q(&tool),
        );
        self.write("crew.toml", &crew).display().to_string()
    }

    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.path(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn journal(&self, id: &str) -> Vec<Value> {
        match self
            .cairn(&["runs", "journal", id, "--json"])
            .expect_code(0)
            .json()
        {
            Value::Array(items) => items,
            other => panic!("journal is not an array: {other}"),
        }
    }

    /// Kills the background `cairn` once `ready` holds, and the paused
    /// tool's process group if there is one.
    fn kill_when(
        &self,
        child: &mut std::process::Child,
        what: &str,
        mut ready: impl FnMut() -> bool,
    ) {
        wait_until(what, Duration::from_secs(60), || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "cairn exited ({status}) before {what}: {}",
                    std::fs::read_to_string(self.path("bg.stderr")).unwrap_or_default()
                );
            }
            ready()
        });
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        assert!(!child.wait().unwrap().success());
        let paused = self.path("paused.pid");
        if paused.exists() {
            let _ = killpg(Pid::from_raw(read_pid(&paused)), Signal::SIGKILL);
            std::fs::remove_file(paused).unwrap();
        }
    }

    fn paused(&self) -> bool {
        std::fs::read_to_string(self.path("paused.pid")).is_ok_and(|s| s.ends_with('\n'))
    }
}

fn key(id: &str, call: &str) -> String {
    format!("{id}/0/{call}")
}

fn kinds(journal: &[Value]) -> Vec<&str> {
    journal
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

fn repairs(journal: &[Value]) -> Vec<(String, String)> {
    journal
        .iter()
        .filter(|e| e["kind"] == "repair")
        .map(|e| {
            (
                e["payload"]["action"].as_str().unwrap().to_owned(),
                e["payload"]["call_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn kills_in_a_stream_a_tool_and_between_call_and_result_repeat_no_side_effect(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.agent_crew(SCRIPT, "");
    let log = case.path("requests.jsonl").display().to_string();
    let env = |pause: &'static str| {
        [
            ("CAIRN_SCRIPTED_LOG", log.clone()),
            ("TEST_PAUSE", pause.to_owned()),
        ]
    };
    fn as_refs<'a>(v: &'a [(&'static str, String); 2]) -> [(&'static str, &'a str); 2] {
        [(v[0].0, v[0].1.as_str()), (v[1].0, v[1].1.as_str())]
    }

    // 1. Killed while the model streams the lookup call's input.
    let e = env("none");
    let mut child = case.spawn(
        &["run", &crew, "--input", r#"{"order": "A-1001"}"#],
        &as_refs(&e),
    );
    let mut id = String::new();
    case.kill_when(&mut child, "the lookup call to start streaming", || {
        if id.is_empty() {
            // The SQLite file may not exist yet: a reading command refuses it.
            let out = case.cairn(&["runs", "list", "--json"]);
            match out.code().filter(|&c| c == 0).map(|_| out.json()) {
                Some(Value::Array(runs)) if !runs.is_empty() => {
                    id = runs[0]["id"].as_str().unwrap().to_owned()
                }
                _ => return false,
            }
        }
        let j = case.journal(&id);
        kinds(&j).contains(&"tool_call_started") && !kinds(&j).contains(&"tool_call")
    });
    assert!(case.lines("lookup.started").is_empty());

    // 2. Resumed; the unfinished call is dropped and regenerated; killed
    //    inside the idempotent lookup, before its side effect.
    let e = env("lookup:before");
    let mut child = case.spawn(&["resume", &id, "--takeover"], &as_refs(&e));
    case.kill_when(&mut child, "lookup to run", || case.paused());

    // 3. Resumed; lookup runs again with the same key; the model calls
    //    charge, which is killed after its side effect, before its result.
    let e = env("charge:after");
    let mut child = case.spawn(&["resume", &id, "--takeover"], &as_refs(&e));
    case.kill_when(&mut child, "charge to have charged", || case.paused());
    assert_eq!(case.lines("charge.effects"), vec![key(&id, "c_charge")]);

    // 4. Resumed to the end: charge is not run again; the model is told.
    let e = env("none");
    case.cairn_env(&["resume", &id, "--takeover"], &as_refs(&e))
        .expect_code(0);

    let run = case.show(&id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    let clerk = step(&run, 0);
    assert_eq!(clerk["attempt"], 1, "{clerk:#}");
    assert_eq!(clerk["takeovers"], 3, "{clerk:#}");
    assert_eq!(
        clerk["output"], "Done: the order was looked up and charged once.",
        "{clerk:#}"
    );
    assert!(clerk["input_tokens"].as_u64().unwrap() > 0, "{clerk:#}");
    assert_eq!(
        step(&run, 1)["output"],
        "receipt: Done: the order was looked up and charged once."
    );

    // Side effects: the non-idempotent charge happened once (one kill landed
    // inside it); the idempotent lookup ran twice with one key and recorded
    // its effect once.
    assert_eq!(case.lines("charge.effects"), vec![key(&id, "c_charge")]);
    assert_eq!(case.lines("charge.started"), vec![key(&id, "c_charge")]);
    assert_eq!(
        case.lines("lookup.started"),
        vec![key(&id, "c_lookup"), key(&id, "c_lookup")]
    );
    assert_eq!(case.lines("lookup.effects"), vec![key(&id, "c_lookup")]);

    // The journal shows each repair once, durably, in order.
    let journal = case.journal(&id);
    assert_eq!(
        repairs(&journal),
        vec![
            ("drop_unfinished".to_owned(), String::new()),
            ("reexecuted".to_owned(), "c_lookup".to_owned()),
            ("synthesized_result".to_owned(), "c_charge".to_owned()),
        ],
        "{journal:#?}"
    );
    let synthesized = journal
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["payload"]["synthesized"] == true)
        .expect("a synthesized result");
    assert_eq!(synthesized["payload"]["call_id"], "c_charge");
    assert_eq!(synthesized["payload"]["is_error"], true);
    let repaired = case.events_of(&id, "transcript_repaired");
    assert_eq!(repaired.len(), 3, "{repaired:#?}");

    // What the model was sent after the last repair: the interrupted charge
    // answered by the synthesized error, right after its call.
    let requests: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = requests.last().unwrap();
    let items = last["items"].as_array().unwrap();
    let at = items
        .iter()
        .position(|i| i["type"] == "tool_call" && i["id"] == "c_charge")
        .expect("the charge call is sent");
    assert_eq!(items[at + 1]["type"], "tool_result", "{last:#}");
    assert_eq!(items[at + 1]["call_id"], "c_charge");
    assert_eq!(items[at + 1]["is_error"], true);
    assert!(items[at + 1]["content"]
        .as_str()
        .unwrap()
        .contains("interrupted before its result was recorded"));
    // Only one lookup call and result reached the model (the dropped
    // stream's partial call never did).
    let lookups = items
        .iter()
        .filter(|i| i["type"] == "tool_call" && i["name"] == "lookup")
        .count();
    assert_eq!(lookups, 1, "{last:#}");
}

fn a_non_idempotent_tool_killed_before_its_effect_is_reported_not_run_again(kind: Kind) {
    let case = Case::new(kind);
    let fast = SCRIPT.replace("chunk_delay_ms = 60", "chunk_delay_ms = 0");
    let crew = case.agent_crew(&fast, "");
    let mut child = case.spawn(
        &["run", &crew, "--input", "{}"],
        &[("TEST_PAUSE", "charge:before")],
    );
    case.kill_when(&mut child, "charge to start", || case.paused());
    let id = case.only_run_id();
    case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    assert_eq!(case.show(&id)["status"], "succeeded");
    // The kill landed inside charge before its effect: started once, never
    // charged, never started again.
    assert_eq!(case.lines("charge.started"), vec![key(&id, "c_charge")]);
    assert!(case.lines("charge.effects").is_empty());
    assert_eq!(
        repairs(&case.journal(&id)),
        vec![("synthesized_result".to_owned(), "c_charge".to_owned())]
    );
}

/// Killed just before and just after the step's first journal item is
/// written: the resume finishes the turn, and the charge happens once.
fn failpoints_around_the_first_journal_item_lose_and_repeat_nothing(kind: Kind) {
    let fast = SCRIPT.replace("chunk_delay_ms = 60", "chunk_delay_ms = 0");
    for (point, kept) in [("before_journal:0", 0), ("after_journal:0", 1)] {
        let case = Case::new(kind);
        let crew = case.agent_crew(&fast, "");
        case.killed_at(&["run", &crew, "--input", "{}"], point);
        let id = case.only_run_id();
        assert_eq!(case.journal(&id).len(), kept, "{point}");
        assert!(case.lines("charge.effects").is_empty(), "{point}");
        case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
        assert_eq!(case.show(&id)["status"], "succeeded", "{point}");
        assert_eq!(
            case.lines("charge.effects"),
            vec![key(&id, "c_charge")],
            "{point}"
        );
    }
}

fn a_stream_cut_by_the_provider_is_retried_from_the_journal(kind: Kind) {
    let case = Case::new(kind);
    // Turn 1's stream is cut mid-input on attempt 1 only.
    let cut = SCRIPT
        .replace("chunk_delay_ms = 60", "chunk_delay_ms = 0")
        .replace(
            "tool_calls = [{ id = \"c_charge\"",
            "cut_mid_tool_input = true\ncut_on_attempts = [1]\ntool_calls = [{ id = \"c_charge\"",
        );
    // A budget, so `spent` is reported: the cut response counts in it.
    let crew = case.agent_crew(&cut, "[budget]\ntokens = 1000000\n");
    case.cairn(&["run", &crew, "--input", "{}"]).expect_code(0);
    let id = case.only_run_id();
    let run = case.show(&id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 0)["attempt"], 2, "{:#}", step(&run, 0));
    let events = case.cairn(&["runs", "events", &id, "--json"]).json();
    let cut_tokens: Vec<u64> = events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "model_called")
        .filter_map(|e| e["data"]["cut_tokens"].as_u64())
        .collect();
    assert_eq!(cut_tokens.len(), 1, "one cut response: {events:#}");
    assert!(cut_tokens[0] > 0);
    let finished: u64 = case
        .journal(&id)
        .iter()
        .filter(|e| e["kind"] == "turn_end")
        .map(|e| {
            e["payload"]["input_tokens"].as_u64().unwrap_or(0)
                + e["payload"]["output_tokens"].as_u64().unwrap_or(0)
        })
        .sum();
    assert_eq!(
        run["spent"]["tokens"].as_u64(),
        Some(finished + cut_tokens[0]),
        "the cut response's tokens count once, beside the finished ones: {run:#}"
    );
    // The failed attempt's error stays on the row.
    assert_eq!(step(&run, 0)["error"]["kind"], "provider");
    // Attempt 2 kept attempt 1's journal: lookup ran once, charge once.
    assert_eq!(case.lines("lookup.started").len(), 1);
    assert_eq!(case.lines("charge.effects"), vec![key(&id, "c_charge")]);
    let journal = case.journal(&id);
    assert_eq!(
        repairs(&journal),
        vec![("drop_unfinished".to_owned(), String::new())]
    );
    let attempts: Vec<u64> = journal
        .iter()
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert!(
        attempts.contains(&1) && attempts.contains(&2),
        "{attempts:?}"
    );
}

fn max_turns_interrupts_and_continue_finishes(kind: Kind) {
    let case = Case::new(kind);
    let fast = SCRIPT.replace("chunk_delay_ms = 60", "chunk_delay_ms = 0");
    let crew = case.agent_crew(&fast, "max_turns = 2");
    // Two model calls (lookup, charge), then the limit: interrupted (exit 5).
    let out = case.cairn(&["run", &crew, "--input", "{}"]);
    let id = case.only_run_id();
    let run = case.show(&id);
    assert_eq!(run["status"], "interrupted", "{run:#}\n{}", out.stderr);
    assert_eq!(step(&run, 0)["status"], "interrupted");
    assert_eq!(step(&run, 0)["error"]["kind"], "interrupted");
    assert_eq!(case.lines("charge.effects").len(), 1);
    // `resume` refuses an interrupted run; `continue` carries on from the
    // journal without redoing a tool call.
    case.cairn(&["runs", "continue", &id]).expect_code(0);
    let run = case.show(&id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 0)["attempt"], 1);
    assert_eq!(case.lines("lookup.started").len(), 1);
    assert_eq!(case.lines("charge.started").len(), 1);
}

fn ask_human_waits_and_the_answer_becomes_the_call_result(kind: Kind) {
    let case = Case::new(kind);
    let script = r#"
[[responses]]
text = "I need the budget."
tool_calls = [
  { id = "c_lookup", name = "lookup", arguments = { order = "A-1001" } },
  { id = "q1", name = "ask_human", arguments = { question = "What is the budget?" } },
]

[[responses]]
text = "Budget noted."
"#;
    let crew = case.agent_crew(script, "ask_human = true");
    // The step waits on the question (exit 4) after running the other tool.
    case.cairn(&["run", &crew, "--input", "{}"]).expect_code(4);
    let id = case.only_run_id();
    assert_eq!(case.show(&id)["status"], "waiting");
    assert_eq!(case.lines("lookup.started").len(), 1);
    let waits = case
        .cairn(&["waits", "list", "--json"])
        .expect_code(0)
        .json();
    let wait = &waits.as_array().unwrap()[0];
    assert_eq!(wait["kind"], "question");
    assert_eq!(wait["question_id"], "q1");
    assert_eq!(wait["prompt"]["question"], "What is the budget?");
    let wait_id = wait["id"].as_str().unwrap();
    case.cairn(&["waits", "answer", wait_id, "--answer", r#""500 EUR""#])
        .expect_code(0);
    let run = case.show(&id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 0)["output"], "Budget noted.");
    // The answer is journaled, then the call's result; lookup did not run again.
    let journal = case.journal(&id);
    let answer = journal
        .iter()
        .position(|e| e["kind"] == "human_answer")
        .expect("answer");
    assert_eq!(journal[answer]["payload"]["answer"], "500 EUR");
    assert_eq!(journal[answer + 1]["kind"], "tool_result");
    assert_eq!(journal[answer + 1]["payload"]["call_id"], "q1");
    assert_eq!(journal[answer + 1]["payload"]["content"], "500 EUR");
    assert_eq!(case.lines("lookup.started").len(), 1);
}

/// The README's example crew runs as documented, from any directory.
#[test]
fn the_example_agents_crew_runs() {
    let case = Case::new(Kind::Sqlite);
    let crew =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents/crew.toml");
    let notes_log = case.path("notes.log");
    let out = case
        .cairn_env(
            &[
                "run",
                crew.to_str().unwrap(),
                "--input",
                r#"{"topic": "durable agents"}"#,
                "--json",
            ],
            &[("CAIRN_NOTES_LOG", notes_log.to_str().unwrap())],
        )
        .expect_code(0);
    let run = out.json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 2)["output"]["approved"], true, "{run:#}");
    // save_note ran twice (two calls), each with its own key.
    let notes = case.lines("notes.log");
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].ends_with("/0/call_note_1 checkpoint every step"),
        "{notes:?}"
    );
}

/// `cairn demo` (a short crew) and `cairn demo --agent` succeed and say why.
#[test]
fn the_demos_pass() {
    let case = Case::new(Kind::Sqlite);
    let out = case
        .raw(
            &["demo", "--steps", "6", "--kill-at", "3", "--dir", "plain"],
            &[],
        )
        .expect_code(0);
    crate::support::assert_contains(&out.stdout, "OK: steps 0-2 ran exactly once");
    let out = case
        .raw(&["demo", "--agent", "--dir", "agent"], &[])
        .expect_code(0);
    crate::support::assert_contains(&out.stdout, "OK: the card was charged once");
    assert!(out.stdout.contains("synthesized_result"), "{}", out.stdout);
    let charges = std::fs::read_to_string(case.path("agent/charges.log")).unwrap();
    assert_eq!(charges.lines().count(), 1);
}
