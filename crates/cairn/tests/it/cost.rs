//! What model calls cost, both backends: priced from the process's price
//! table as each response finishes (cache reads at their own rate), summed
//! exactly into what the run spent, a `cost_usd` budget that stops the
//! call that would pass it and is raised by a continue, and a run with a
//! dollar budget that the process cannot price makes no call. Tokens a
//! `command` step's program reports count in the token budget too. A
//! thread's budget limits its runs together.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::json;

use cairn::{Engine, ErrorKind, EventKind, ExecutorConfig, RunStatus, SubmitOptions, Usd};
use cairn_testkit::{both, Kind, TestDb};

use super::agents::{clerk, counted_clerk, interrupted_by_budget, stopped_at_budget, Count};

both!(
    a_cost_budget_stops_a_looping_agent_at_the_hand_computed_cost_and_a_raise_carries_it_on,
    a_dollar_budget_without_a_price_makes_no_call,
    tokens_a_program_reports_count_and_a_spent_budget_starts_no_program,
    input_and_output_token_limits_stop_a_looping_agent_on_their_own_counts,
    a_threads_budget_stops_its_runs_together_and_a_raise_carries_them_on,
);

/// Each response: one tool call, 100 prompt tokens of which 40 were read
/// from the cache, 20 out.
fn looping(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[[responses]]\ntool_calls = [{{ id = \"c{i}\", name = \"count\", \
                 arguments = {{ n = {i} }} }}]\n\
                 usage = {{ input_tokens = 100, output_tokens = 20, cache_read_tokens = 40 }}\n"
            )
        })
        .collect()
}

const PRICES: &str = include_str!("testdata/prices.toml");

async fn engine(db: &TestDb, prices: Option<&str>) -> Engine {
    let config = ExecutorConfig {
        prices: prices.map(|p| Arc::new(cairn::PriceTable::parse(p).unwrap())),
        ..ExecutorConfig::default()
    };
    Engine::open_with(&db.url, &cairn::OpenOptions::default(), config)
        .await
        .unwrap()
}

/// Runs a clerk that would call its tool `calls` times under the budget
/// `flag`, which interrupts it: the run, its error and the tool's count.
async fn stopped_by_budget(
    engine: &Engine,
    calls: usize,
    flag: &str,
) -> (cairn::RunRecord, cairn::ErrorInfo, Arc<AtomicU32>) {
    let (crew, runs) = counted_clerk(&looping(calls));
    let (run, error) = interrupted_by_budget(engine, &crew, flag).await;
    (run, error, runs)
}

async fn a_cost_budget_stops_a_looping_agent_at_the_hand_computed_cost_and_a_raise_carries_it_on(
    kind: Kind,
) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db, Some(PRICES)).await;
    // A call: 60 fresh × $2 + 40 cached × $0.50 + 20 out × $10 per
    // million = $0.000340. With $0.001, the fourth call's input would pass
    // what is left after three ($0.00102 spent): three calls are made.
    let (run, error, runs) = stopped_by_budget(&engine, 20, "cost_usd=0.001").await;
    assert!(error.message.contains("$0.001000"), "{}", error.message);
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!((spent.model_calls, spent.cost_usd), (3, Usd(3 * 340_000)));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let events = engine.events(run.id).await.unwrap();
    let called = crate::of_kind(&events, EventKind::ModelCalled);
    assert_eq!(called.len(), 3);
    for e in &called {
        assert_eq!(
            (&e.data["cost_usd"], &e.data["prices"]),
            (&json!(0.00034), &json!("test-1"))
        );
    }
    let warned = events.iter().find(|e| e.kind == EventKind::BudgetWarning);
    let warned = warned.expect("a warning at 80 % of the dollars");
    assert_eq!(
        (&warned.data["limit"], &warned.data["budget"]),
        (&json!("cost_usd"), &json!(0.001))
    );

    // Raised by a dollar-tenth of a cent, it carries on: three more calls.
    let ops = cairn::Actor::new("ops").because("worth it");
    let raise = cairn::Budget::parse(["cost_usd=+0.001"], true).unwrap();
    let raised = engine.raise_budget(run.id, &raise, &ops).await.unwrap();
    assert_eq!(raised.budget.and_then(|b| b.cost_usd), Some(Usd(2_000_000)));
    engine.continue_run(run.id, &ops).await.unwrap();
    let again = engine.execute(run.id).await.unwrap().run;
    assert_eq!(again.status, RunStatus::Interrupted);
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!(spent.cost_usd, Usd(5 * 340_000), "{spent:?}");
    let shown = serde_json::to_value(engine.show(run.id).await.unwrap().spent).unwrap();
    assert_eq!(shown["cost_usd"], json!(0.0017));
}

async fn a_dollar_budget_without_a_price_makes_no_call(kind: Kind) {
    let db = TestDb::of(kind).await;
    // Priced, but not this model; and not priced at all.
    let other = PRICES.replace("model = \"scripted\"", "model = \"other\"");
    for prices in [Some(other.as_str()), None] {
        let engine = engine(&db, prices).await;
        let (run, error, runs) = stopped_by_budget(&engine, 2, "cost_usd=5").await;
        assert!(
            error
                .message
                .contains("no price for scripted model `scripted`"),
            "{}",
            error.message
        );
        assert_eq!(engine.store().spent(run.id).await.unwrap().model_calls, 0);
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }
}

/// A command step whose program reports 30 + 20 tokens; with `code` other
/// than 0 it fails once (after reporting) and succeeds when retried.
fn program(role: &str, code: u8, scratch: &std::path::Path) -> String {
    let flag = scratch.join(format!("{role}-failed"));
    let script = format!(
        "cat > /dev/null; echo {role} >> {ran}; \
         echo 'cairn-usage: {{\"input_tokens\": 30, \"output_tokens\": 20}}' >&2; \
         [ {code} = 0 ] || [ -e {flag} ] || {{ touch {flag}; exit {code}; }}; echo ok",
        ran = scratch.join("ran").display(),
        flag = flag.display(),
    );
    format!(
        "[[agents]]\nrole = \"{role}\"\nkind = \"command\"\n\
         retry = {{ max_attempts = 2, initial_delay_ms = 1 }}\n\
         command = [\"sh\", \"-c\", '''{script}''']\n"
    )
}

async fn tokens_a_program_reports_count_and_a_spent_budget_starts_no_program(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db, None).await;
    let scratch = tempfile::tempdir().unwrap();
    let crew = cairn::Crew::from_toml(&format!(
        "name = \"programs\"\nversion = \"1\"\n[budget]\ntokens = 120\n{}{}{}",
        program("first", 0, scratch.path()),
        program("second", 7, scratch.path()),
        program("third", 0, scratch.path())
    ))
    .unwrap();
    let run = crate::ran(&engine, &crew, json!({})).await.run;
    // first 50, second 50 + 50 (it ran twice): 150 of 120, so the third
    // program does not start.
    assert_eq!(run.status, RunStatus::Interrupted, "{:?}", run.error);
    let error = run.error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::BudgetExceeded);
    assert!(error.message.contains("120 tokens"), "{}", error.message);
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!((spent.tokens, spent.model_calls), (150, 0));
    let log = std::fs::read_to_string(scratch.path().join("ran")).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["first", "second", "second"]
    );
    let events = engine.events(run.id).await.unwrap();
    let reported = events
        .iter()
        .filter(|e| e.kind == EventKind::UsageReported)
        .count();
    assert_eq!(reported, 3);
}

async fn input_and_output_token_limits_stop_a_looping_agent_on_their_own_counts(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db, None).await;
    // Each call: 100 in, 20 out. Output 50: a fourth call is not made
    // once 60 are out.
    let crew = clerk(&looping(20), Count::new());
    let run = stopped_at_budget(&engine, &crew, "output_tokens=50", "50 output tokens").await;
    let spent = engine.store().spent(run.id).await.unwrap();
    let counts = (spent.model_calls, spent.input_tokens, spent.output_tokens);
    assert_eq!(counts, (3, 300, 60));
    // Input 250: a call whose input (estimated from the request, which
    // grows with the conversation) would pass what is left is not made;
    // the scripted model reports more than the estimate, so the run ends
    // past it by at most one call's input.
    let crew = clerk(&looping(20), Count::new());
    let run = stopped_at_budget(&engine, &crew, "input_tokens=250", "250 input tokens").await;
    let spent = engine.store().spent(run.id).await.unwrap();
    assert!((1..20).contains(&spent.model_calls), "{spent:?}");
    assert!(spent.input_tokens <= 250 + 100, "{spent:?}");
    assert_eq!(spent.output_tokens, 20 * spent.model_calls);
}

async fn a_threads_budget_stops_its_runs_together_and_a_raise_carries_them_on(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = engine(&db, None).await;
    let ops = cairn::Actor::new("ops").because("a cap per conversation");
    // Set before the thread's first run: three model calls in all.
    let calls = cairn::Budget::parse(["model_calls=3"], false).unwrap();
    let set = engine
        .set_thread_budget("chat-1", &calls, false, &ops)
        .await
        .unwrap();
    assert_eq!(
        (set.budget.model_calls, set.spent.model_calls),
        (Some(3), 0)
    );
    // Each run: a tool call, then the answer (two calls).
    let script = "[[responses]]\ntool_calls = [{ id = \"c\", name = \"count\", \
                  arguments = { n = 1 } }]\n[[responses]]\ntext = \"done\"\n";
    let in_thread = || SubmitOptions {
        thread_id: Some("chat-1".into()),
        ..SubmitOptions::default()
    };
    let crew = clerk(script, Count::new());
    let first = engine.run(&crew, json!({}), in_thread()).await.unwrap().run;
    assert_eq!(first.status, RunStatus::Succeeded, "{:?}", first.error);
    let second = engine.run(&crew, json!({}), in_thread()).await.unwrap().run;
    assert_eq!(second.status, RunStatus::Interrupted);
    let error = second.error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::BudgetExceeded);
    crate::assert_contains(&error.message, "thread `chat-1`");
    crate::assert_contains(&error.message, "cairn threads budget chat-1");
    // A run outside the thread is not limited by it.
    let free = crate::ran(&engine, &crew, json!({})).await.run;
    assert_eq!(free.status, RunStatus::Succeeded);

    // Raising a limit the thread lacks is refused, nothing written.
    let tokens = cairn::Budget::parse(["tokens=+5"], true).unwrap();
    let refused = engine
        .set_thread_budget("chat-1", &tokens, true, &ops)
        .await;
    assert_eq!(refused.unwrap_err().class(), cairn::ErrorClass::Invalid);
    let clock = cairn::Budget::parse(["wall_time=60"], false).unwrap();
    let refused = engine
        .set_thread_budget("chat-1", &clock, false, &ops)
        .await;
    assert_eq!(refused.unwrap_err().class(), cairn::ErrorClass::Invalid);
    let one_more = cairn::Budget::parse(["model_calls=+1"], true).unwrap();
    let raised = engine
        .set_thread_budget("chat-1", &one_more, true, &ops)
        .await
        .unwrap();
    assert_eq!(raised.budget.model_calls, Some(4));
    assert_eq!(raised.budget.tokens, None);
    engine.continue_run(second.id, &ops).await.unwrap();
    let done = engine.execute(second.id).await.unwrap().run;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    let view = engine.thread("chat-1").await.unwrap();
    let budget = view.budget.unwrap();
    assert_eq!(
        (budget.spent.model_calls, budget.set_by.as_str()),
        (4, "ops")
    );
}
