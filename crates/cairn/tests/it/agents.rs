//! LLM agent steps through the engine, both backends: calls that cannot run
//! become error results the model sees (nothing runs), a Rust tool behind
//! the `Tool` trait, a model that answers nothing stops instead of looping,
//! and an OpenAI-wire model on a local server driving a tool through the
//! whole loop, tokens summed into the checkpoint row.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use cairn::agent::{LlmAgent, Tool, ToolResult, Toolbox};
use cairn::llm::{ScriptedProvider, ToolSpec};
use cairn::{
    async_trait, Crew, Engine, ErrorKind, EventKind, JournalKind, LlmDef, ProviderKind, RunStatus,
    StepStatus, SubmitOptions,
};
use cairn_testkit::{both, Kind, TestDb};

both!(
    calls_that_cannot_run_are_error_results_and_run_nothing,
    a_model_that_answers_nothing_stops_with_no_progress,
    an_openai_wire_model_drives_a_tool_to_a_final_answer,
    a_stream_past_its_cap_is_a_retryable_provider_failure,
    a_rate_limit_defers_the_step_at_its_attempt_no_sooner_than_its_retry_after,
    a_rate_limit_without_retry_after_is_retried,
    a_looping_agent_stops_at_its_budget_and_a_raise_carries_it_on,
    a_token_budget_refuses_the_call_that_would_pass_it,
    a_tool_call_budget_stops_the_tool_before_it_runs,
    a_thread_reaches_the_model_as_conversation,
    command_and_template_steps_see_their_thread,
);

/// Adds `n` to a counter; counts its executions.
pub(crate) struct Count {
    spec: ToolSpec,
    pub(crate) runs: Arc<AtomicU32>,
    keys: Arc<Mutex<Vec<String>>>,
}

impl Count {
    pub(crate) fn new() -> Count {
        Count {
            spec: ToolSpec {
                name: "count".into(),
                description: "Adds n.".into(),
                parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}},
                                   "required": ["n"], "additionalProperties": false}),
            },
            runs: Arc::default(),
            keys: Arc::default(),
        }
    }
}

#[async_trait]
impl Tool for Count {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn execute(&self, arguments: Value, key: &str) -> ToolResult {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.keys.lock().unwrap().push(key.to_owned());
        Ok(format!("counted {}", arguments["n"]))
    }
}

pub(crate) fn clerk(script: &str, tool: Count) -> Crew {
    let agent = LlmAgent::new(
        LlmDef::new(ProviderKind::Scripted, "scripted"),
        Arc::new(ScriptedProvider::parse(script).unwrap()),
        Toolbox::new(vec![Arc::new(tool)]).unwrap(),
    );
    Crew::builder("clerks", "1")
        .agent_named("clerk", "clerk-v1", agent)
        .build()
        .unwrap()
}

/// A [`clerk`] over `script` with a new [`Count`] tool: the crew and the
/// count of the tool's runs.
pub(crate) fn counted_clerk(script: &str) -> (Crew, Arc<AtomicU32>) {
    let tool = Count::new();
    let runs = tool.runs.clone();
    (clerk(script, tool), runs)
}

/// A clerk whose model is rate limited ("slow down") as `how` says, then
/// answers "fine now".
fn rate_limited_clerk(how: &str) -> Crew {
    let script = format!(
        "\n[[responses]]\ntext = \"fine now\"\n\
         fail = {{ kind = \"rate_limited\", message = \"slow down\", {how} }}\n"
    );
    clerk(&script, Count::new())
}

/// A new engine runs a [`rate_limited_clerk`] (`how`) to success: the
/// database, the engine, the run's view and its events.
async fn rate_limited_run(
    kind: Kind,
    how: &str,
) -> (TestDb, Engine, cairn::RunView, Vec<cairn::EventRecord>) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let done = crate::ran(&engine, &rate_limited_clerk(how), json!({})).await;
    assert_eq!(done.run.status, RunStatus::Succeeded);
    let view = engine.show(done.run.id).await.unwrap();
    let events = engine.events(done.run.id).await.unwrap();
    (db, engine, view, events)
}

async fn calls_that_cannot_run_are_error_results_and_run_nothing(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let tool = Count::new();
    let (runs, keys) = (tool.runs.clone(), tool.keys.clone());
    let crew = clerk(
        r#"
[[responses]]
tool_calls = [
  { id = "a", name = "nope", arguments = { n = 1 } },
  { id = "b", name = "count", arguments = '{"n": ' },
  { id = "c", name = "count", arguments = { n = "two" } },
  { id = "d", name = "count", arguments = { n = 2 } },
]
[[responses]]
text = "one count ran"
"#,
        tool,
    );
    let done = crate::ran(&engine, &crew, json!({})).await;
    assert_eq!(done.run.status, RunStatus::Succeeded);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the valid call ran");
    assert_eq!(
        *keys.lock().unwrap(),
        vec![format!("{}/0/d", done.run.id)],
        "its key is derived from run, step and call id"
    );
    let journal = engine.journal(done.run.id, Some(0)).await.unwrap();
    let results: Vec<(String, bool, String)> = journal
        .iter()
        .filter(|e| e.entry.kind == JournalKind::ToolResult)
        .map(|e| {
            let p = &e.entry.payload;
            (
                p["call_id"].as_str().unwrap().to_owned(),
                p["is_error"].as_bool().unwrap(),
                p["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(
        results[0].1 && results[0].2.contains("unknown tool `nope`"),
        "{results:?}"
    );
    assert!(
        results[0].2.contains("count"),
        "names the tools: {results:?}"
    );
    assert!(
        results[1].1 && results[1].2.contains("not valid JSON"),
        "{results:?}"
    );
    assert!(
        results[2].1 && results[2].2.contains("do not match its schema"),
        "{results:?}"
    );
    assert_eq!(results[3], ("d".into(), false, "counted 2".into()));
    // Every call was journaled before any result.
    let kinds: Vec<JournalKind> = journal.iter().map(|e| e.entry.kind).collect();
    let last_call = kinds
        .iter()
        .rposition(|k| *k == JournalKind::ToolCall)
        .unwrap();
    let first_result = kinds
        .iter()
        .position(|k| *k == JournalKind::ToolResult)
        .unwrap();
    assert!(last_call < first_result, "{kinds:?}");
}

async fn a_model_that_answers_nothing_stops_with_no_progress(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let crew = clerk("[[responses]]\ntext = \"\"\n", Count::new());
    let view = crate::ran_to_failure(&engine, &crew).await;
    let step = &view.steps[0];
    assert_eq!(step.status, StepStatus::Failed);
    let error = step.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::NoProgress);
    assert!(!error.retryable);
    // Three tries, no more; none of them counts as an answer.
    let calls = engine
        .events(view.run.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventKind::ModelCalled)
        .count();
    assert_eq!(calls, 3);
    assert!(engine
        .journal(view.run.id, Some(0))
        .await
        .unwrap()
        .is_empty());
}

/// A local server speaking OpenAI's streamed Chat Completions: a tool call
/// first, then (once the request carries its result) a final answer.
async fn openai_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let log = log.clone();
            async move {
                let answered = body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["role"] == "tool");
                log.lock().unwrap().push(body);
                let chunks: Vec<Value> = if answered {
                    vec![
                        json!({"choices": [{"index": 0, "delta": {"content": "counted to "}, "finish_reason": null}]}),
                        json!({"choices": [{"index": 0, "delta": {"content": "three"}, "finish_reason": "stop"}]}),
                        json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 4}}),
                    ]
                } else {
                    vec![
                        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "echo", "arguments": "{\"n\""}}]}, "finish_reason": null}]}),
                        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 3}"}}]}, "finish_reason": "tool_calls"}]}),
                        json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 6}}),
                    ]
                };
                let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
                body.push_str("data: [DONE]\n\n");
                ([("content-type", "text/event-stream")], body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

async fn an_openai_wire_model_drives_a_tool_to_a_final_answer(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let (base, seen) = openai_server().await;
    let crew = wire_crew_with(&base, "instructions = \"Count with the tool.\"");
    let done = crate::ran(&engine, &crew, json!({"goal": 3})).await;
    let view = engine.show(done.run.id).await.unwrap();
    assert_eq!(done.run.status, RunStatus::Succeeded, "{:?}", view.steps);
    let step = &view.steps[0];
    assert_eq!(step.output, Some(json!("counted to three")));
    assert_eq!(
        (step.input_tokens, step.output_tokens),
        (Some(80), Some(10))
    );
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(second[0]["role"], "system");
    assert!(second[1]["content"]
        .as_str()
        .unwrap()
        .contains("\"goal\": 3"));
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_9");
    assert_eq!(
        second[2]["tool_calls"][0]["function"]["arguments"],
        "{\"n\": 3}"
    );
    // The tool (`cat`) echoed its arguments back as the result.
    assert_eq!(
        second[3],
        json!({"role": "tool", "tool_call_id": "call_9", "content": "{\"n\":3}"})
    );
}

async fn a_stream_past_its_cap_is_a_retryable_provider_failure(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let def = LlmDef {
        stream_timeout_ms: Some(150),
        ..LlmDef::new(ProviderKind::Scripted, "scripted")
    };
    // Forty pieces 20 ms apart: 800 ms, past the 150 ms cap every time.
    let script = format!(
        "[[responses]]\ntext = \"{}\"\nchunk_bytes = 1\nchunk_delay_ms = 20\n",
        "x".repeat(40)
    );
    let agent = LlmAgent::new(
        def,
        Arc::new(ScriptedProvider::parse(&script).unwrap()),
        Toolbox::new(vec![]).unwrap(),
    );
    let crew = Crew::builder("slow", "1")
        .agent_named("talker", "talker-v1", agent)
        .build()
        .unwrap();
    let view = crate::ran_to_failure(&engine, &crew).await;
    let step = &view.steps[0];
    // Retried by the default policy (3 attempts), then parked.
    assert_eq!(step.attempt.get(), 3);
    let error = step.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Provider);
    assert!(error.retryable);
    crate::assert_contains(&error.message, "stream cap of 150 ms");
}

/// A rate limit that says how long (`retry-after`) pauses the provider key
/// and defers the step: the same attempt runs again no sooner, with no
/// retry spent, and the key is listed
/// as paused with the run deferred on it.
async fn a_rate_limit_defers_the_step_at_its_attempt_no_sooner_than_its_retry_after(kind: Kind) {
    let (_db, engine, view, events) =
        rate_limited_run(kind, "calls = 1, retry_after_ms = 900").await;
    assert_eq!(view.steps[0].attempt.get(), 1, "no retry was spent");
    assert!(!events
        .iter()
        .any(|e| e.kind == EventKind::StepRetryScheduled));
    let deferred = events
        .iter()
        .find(|e| e.kind == EventKind::StepDeferred)
        .expect("the step was deferred");
    assert!(
        deferred.data["delay_ms"].as_u64().unwrap() >= 800,
        "{:?}",
        deferred.data
    );
    assert_eq!(deferred.data["observed"], json!(true));
    let paused = events
        .iter()
        .find(|e| e.kind == EventKind::KeyPaused)
        .unwrap();
    assert_eq!(paused.data["key"], deferred.data["key"]);
    assert!(paused.data["reason"]
        .as_str()
        .unwrap()
        .contains("slow down"));
    // The same attempt was claimed again no sooner (database clock).
    let claimed_again = events
        .iter()
        .filter(|e| e.kind == EventKind::RunClaimed)
        .nth(1)
        .unwrap()
        .at;
    assert!((claimed_again - deferred.at).num_milliseconds() >= 800);
    let keys = engine.keys().await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(json!(keys[0].key), deferred.data["key"]);
    assert_eq!((keys[0].pauses, keys[0].deferred_runs), (1, 0));
    assert_eq!(keys[0].paused_by.as_deref(), Some("provider"));
}

/// A rate limit that does not say how long is an ordinary failure: the
/// policy's back-off, a retry spent, no key paused.
async fn a_rate_limit_without_retry_after_is_retried(kind: Kind) {
    let (_db, engine, view, events) = rate_limited_run(kind, "on_attempts = [1]").await;
    assert_eq!(view.steps[0].attempt.get(), 2);
    assert!(events
        .iter()
        .any(|e| e.kind == EventKind::StepRetryScheduled));
    assert!(!events.iter().any(|e| e.kind == EventKind::StepDeferred));
    assert!(engine.keys().await.unwrap().is_empty());
}

/// The OpenAI-wire crew of the test above, in a thread, with or without
/// the thread's history.
fn wire_crew(base: &str, history: bool) -> Crew {
    let off = if history {
        ""
    } else {
        "thread_history = false\n"
    };
    wire_crew_with(base, off)
}

/// The OpenAI-wire crew: one `llm` agent with an `echo` tool, `extra`
/// added to the agent's keys.
fn wire_crew_with(base: &str, extra: &str) -> Crew {
    Crew::from_toml(&format!(
        r#"
name = "wire"
version = "1"
[[agents]]
role = "counter"
kind = "llm"
provider = "openai"
model = "local-model"
base_url = "{base}"
{extra}
[[agents.tools]]
name = "echo"
parameters = {{ type = "object", properties = {{ n = {{ type = "integer" }} }} }}
command = ["sh", "-c", "cat"]
"#
    ))
    .unwrap()
}

async fn a_thread_reaches_the_model_as_conversation(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let (base, seen) = openai_server().await;
    let in_thread = |goal: u32| {
        (
            json!({"goal": goal}),
            SubmitOptions {
                thread_id: Some("chat-1".into()),
                ..SubmitOptions::default()
            },
        )
    };
    for goal in [1, 2] {
        let (input, opts) = in_thread(goal);
        let done = engine
            .run(&wire_crew(&base, true), input, opts)
            .await
            .unwrap();
        assert_eq!(done.run.status, RunStatus::Succeeded);
    }
    // A run of another thread, and one that turned the history off.
    let other = SubmitOptions {
        thread_id: Some("chat-2".into()),
        ..SubmitOptions::default()
    };
    engine
        .run(&wire_crew(&base, true), json!({"goal": 9}), other)
        .await
        .unwrap();
    let (input, opts) = in_thread(3);
    engine
        .run(&wire_crew(&base, false), input, opts)
        .await
        .unwrap();

    let requests = seen.lock().unwrap().clone();
    // Each run makes two model calls; the first call of each run, by role
    // and content (the user messages of run input are JSON).
    let first_call = |run: usize| -> Vec<(String, String)> {
        requests[2 * run]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let roles = |msgs: &[(String, String)]| msgs.iter().map(|m| m.0.clone()).collect::<Vec<_>>();
    // The first run of the thread has no history.
    assert_eq!(roles(&first_call(0)), ["user"]);
    // The second sees the first: its input as the user's turn, its final
    // output as the assistant's, before its own context.
    let second = first_call(1);
    assert_eq!(roles(&second), ["user", "assistant", "user"]);
    assert!(second[0].1.contains("\"goal\": 1"), "{second:?}");
    assert_eq!(second[1].1, "counted to three");
    assert!(second[2].1.contains("\"goal\": 2"), "{second:?}");
    // Another thread sees nothing of this one.
    assert_eq!(roles(&first_call(2)), ["user"]);
    // `thread_history = false`: the context alone.
    assert_eq!(roles(&first_call(3)), ["user"]);
}

async fn command_and_template_steps_see_their_thread(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let render = "{{ thread | length }} before:{% for t in thread %} {{ t.input.n }}{% endfor %}";
    let crew = Crew::builder("echoes", "1")
        .command("stdin", ["sh", "-c", "cat"])
        .template("render", render)
        .build()
        .unwrap();
    let opts = || SubmitOptions {
        thread_id: Some("t".into()),
        ..SubmitOptions::default()
    };
    let mut last = None;
    for n in 0..3 {
        let done = engine.run(&crew, json!({"n": n}), opts()).await.unwrap();
        assert_eq!(done.run.status, RunStatus::Succeeded);
        last = Some(done.run.id);
    }
    let view = engine.show(last.unwrap()).await.unwrap();
    let stdin = view.steps[0].output.clone().unwrap();
    let thread = stdin["thread"].as_array().unwrap();
    assert_eq!(thread.len(), 2);
    assert_eq!(thread[0]["input"], json!({"n": 0}));
    assert_eq!(thread[1]["output"], json!("1 before: 0"));
    assert_eq!(view.steps[1].output, Some(json!("2 before: 0 1")));
    // A run without a thread gets an empty one.
    let alone = crate::ran(&engine, &crew, json!({"n": 7})).await;
    let view = engine.show(alone.run.id).await.unwrap();
    assert_eq!(view.steps[0].output.as_ref().unwrap()["thread"], json!([]));
}

both!(a_model_text_over_the_item_cap_is_journaled_in_pieces);
/// A model text of 1.5 MiB (with multi-byte characters) before a tool
/// call: journaled in pieces under the 1 MiB item cap, each but the last
/// marked as continued, read back as the one text; the step goes on to its
/// final answer instead of failing.
async fn a_model_text_over_the_item_cap_is_journaled_in_pieces(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let long: String = "thinking é… ".repeat(1_500_000 / 14);
    assert!(long.len() > 1024 * 1024);
    let script = format!(
        "[[responses]]\ntext = \"{}\"\ntool_calls = [{{ id = \"a\", name = \"count\", arguments = {{ n = 1 }} }}]\n\
         [[responses]]\ntext = \"done\"\n",
        long
    );
    let crew = clerk(&script, Count::new());
    let done = crate::ran(&engine, &crew, json!({})).await;
    assert_eq!(
        done.run.status,
        RunStatus::Succeeded,
        "{:?}",
        done.run.error
    );
    let journal = engine.journal(done.run.id, Some(0)).await.unwrap();
    let texts: Vec<&Value> = journal
        .iter()
        .filter(|e| e.entry.kind == cairn::JournalKind::AssistantText)
        .map(|e| &e.entry.payload)
        .collect();
    assert!(
        texts.len() > 2,
        "the long text was cut in pieces: {}",
        texts.len()
    );
    let (pieces, last) = texts.split_at(texts.len() - 2);
    let joined: String = pieces
        .iter()
        .chain(std::iter::once(&last[0]))
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, long, "the pieces read back as the one text");
    assert!(pieces.iter().all(|p| p["continues"] == json!(true)));
    assert_eq!(last[0].get("continues"), None);
    assert_eq!(last[1]["text"], "done");
}

/// A model that always asks for the tool again: `n` responses, each one
/// tool call and 100 + 20 tokens.
fn looping(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[[responses]]\ntool_calls = [{{ id = \"c{i}\", name = \"count\", \
                 arguments = {{ n = {i} }} }}]\nusage = {{ input_tokens = 100, output_tokens = 20 }}\n"
            )
        })
        .collect()
}

/// Runs `crew` with the budget `flag`: it must stop interrupted with
/// `budget_exceeded`, its message naming `names`.
pub(crate) async fn stopped_at_budget(
    engine: &Engine,
    crew: &Crew,
    flag: &str,
    names: &str,
) -> cairn::RunRecord {
    let (run, error) = interrupted_by_budget(engine, crew, flag).await;
    assert!(error.message.contains(names), "{}", error.message);
    run
}

/// Runs `crew` with the budget `flag`: it must stop interrupted with
/// `budget_exceeded`. The run and its error.
pub(crate) async fn interrupted_by_budget(
    engine: &Engine,
    crew: &Crew,
    flag: &str,
) -> (cairn::RunRecord, cairn::ErrorInfo) {
    let opts = SubmitOptions {
        budget: Some(cairn::Budget::parse([flag], false).unwrap()),
        ..SubmitOptions::default()
    };
    let run = engine.run(crew, json!({}), opts).await.unwrap().run;
    assert_eq!(run.status, RunStatus::Interrupted, "{flag}");
    let error = run.error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::BudgetExceeded);
    (run, error)
}

/// A run whose agent loops stops at its budget of model calls, interrupted
/// with `budget_exceeded` having made exactly that many; a raise recorded
/// with who and why, then a continue, carries it on to the new limit.
async fn a_looping_agent_stops_at_its_budget_and_a_raise_carries_it_on(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let (crew, runs) = counted_clerk(&looping(10));
    let run = stopped_at_budget(&engine, &crew, "model_calls=3", "3 model calls").await;
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!((spent.model_calls, spent.tokens), (3, 360));
    assert_eq!(runs.load(Ordering::SeqCst), 3, "each call's tool ran once");

    let ops = cairn::Actor::new("ops").because("one more look");
    let raise = cairn::Budget::parse(["model_calls=+2"], true).unwrap();
    let raised = engine.raise_budget(run.id, &raise, &ops).await.unwrap();
    assert_eq!(raised.budget.and_then(|b| b.model_calls), Some(5));
    engine.continue_run(run.id, &ops).await.unwrap();
    let again = engine.execute(run.id).await.unwrap().run;
    assert_eq!(again.status, RunStatus::Interrupted);
    assert_eq!(engine.store().spent(run.id).await.unwrap().model_calls, 5);
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    let events = engine.events(run.id).await.unwrap();
    let raised = events
        .iter()
        .find(|e| e.kind == EventKind::BudgetRaised)
        .unwrap();
    assert_eq!(raised.data["by"], "ops");
    assert_eq!(raised.data["budget"]["model_calls"], 5);
}

/// A token budget: a call whose input alone would pass what is left is not
/// made, so the run ends below its budget plus one call's output.
async fn a_token_budget_refuses_the_call_that_would_pass_it(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let crew = clerk(&looping(20), Count::new());
    let run = stopped_at_budget(&engine, &crew, "tokens=500", "500 tokens").await;
    let spent = engine.store().spent(run.id).await.unwrap();
    assert!(spent.model_calls >= 1, "{spent:?}");
    assert!(
        spent.tokens <= 500 + 20,
        "passed by at most one call's output: {spent:?}"
    );
}

/// A tool-call budget: the tool is not executed once the run's tool calls
/// are spent; its result tells the model so, and a continue with a raised
/// budget carries on to the new limit.
/// Each crossing of a budget's 80 % is a `budget_warning`.
async fn a_tool_call_budget_stops_the_tool_before_it_runs(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let (crew, runs) = counted_clerk(&looping(10));
    let run = stopped_at_budget(&engine, &crew, "tool_calls=2", "2 tool calls").await;
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the third call never ran");
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!((spent.tool_calls, spent.model_calls), (2, 3), "{spent:?}");

    let ops = cairn::Actor::new("ops");
    let raise = cairn::Budget::parse(["tool_calls=+1"], true).unwrap();
    engine.raise_budget(run.id, &raise, &ops).await.unwrap();
    engine.continue_run(run.id, &ops).await.unwrap();
    let again = engine.execute(run.id).await.unwrap().run;
    assert_eq!(again.status, RunStatus::Interrupted);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "one more tool ran, then no more"
    );
    let journal = engine.journal(run.id, Some(0)).await.unwrap();
    let refused = journal
        .iter()
        .filter(|e| e.entry.payload["refused"] == "budget")
        .count();
    assert_eq!(
        refused, 2,
        "each refused call's result says why, for the model"
    );
    assert_eq!(engine.store().spent(run.id).await.unwrap().tool_calls, 3);
    // A warning as each budget's 80 % was crossed: the 2nd tool call of 2,
    // then the 3rd of 3 after the raise.
    let warnings: Vec<Value> = engine
        .events(run.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EventKind::BudgetWarning)
        .map(|e| e.data)
        .collect();
    let seen: Vec<(&str, u64, u64)> = warnings
        .iter()
        .map(|w| {
            let n = |k: &str| w[k].as_u64().unwrap();
            (w["limit"].as_str().unwrap(), n("budget"), n("spent"))
        })
        .collect();
    assert_eq!(
        seen,
        [("tool_calls", 2, 2), ("tool_calls", 3, 3)],
        "{warnings:?}"
    );
}
