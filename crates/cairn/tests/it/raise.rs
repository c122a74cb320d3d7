//! A budget raise with a continue (`runs continue --budget`), both
//! backends: one transaction, so a refused continue writes no raise; and a
//! raise on a running run reaches its holder before the next model call.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use cairn::agent::{LlmAgent, Tool, ToolResult, Toolbox};
use cairn::llm::{ScriptedProvider, ToolSpec};
use cairn::{
    async_trait, Actor, Agent, Budget, Crew, Engine, EventKind, LlmDef, ProviderKind, RunId,
    RunStatus, StepContext, StepOutput, Stop, SubmitOptions,
};
use cairn_testkit::{both, Kind, TestDb};

both!(
    a_refused_continue_writes_no_raise,
    a_raise_on_a_running_run_reaches_its_holder_before_the_next_call,
);

/// Writes a draft for a person to review.
struct Draft;

#[async_trait]
impl Agent for Draft {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        Ok(StepOutput::new(json!({"draft": "v1"})))
    }
}

fn budget(flag: &str, raise: bool) -> Budget {
    Budget::parse([flag], raise).unwrap()
}

fn raises(events: &[cairn::EventRecord]) -> usize {
    crate::of_kind(events, EventKind::BudgetRaised).len()
}

/// A run waiting for a person takes a raise with a continue as the raise
/// alone (its answer carries it on), once; a finished run's is refused
/// with nothing written, the raise included.
async fn a_refused_continue_writes_no_raise(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let crew = Crew::builder("reviewed", "1")
        .agent_named("writer", "writer", Draft)
        .review()
        .build()
        .unwrap();
    let opts = SubmitOptions {
        budget: Some(budget("tokens=4000", false)),
        ..SubmitOptions::default()
    };
    let run = engine.run(&crew, json!({}), opts).await.unwrap().run;
    assert_eq!(run.status, RunStatus::Waiting);

    let ops = Actor::new("ops").because("more room");
    let raised = engine
        .continue_with_budget(run.id, &budget("tokens=+2000", true), &ops)
        .await
        .unwrap();
    assert_eq!(
        raised.status,
        RunStatus::Waiting,
        "still waits for a person"
    );
    assert_eq!(raised.budget.and_then(|b| b.tokens), Some(6000));
    assert_eq!(raises(&engine.events(run.id).await.unwrap()), 1);

    // Cancelled: refused, and nothing written.
    engine.cancel(run.id, &ops).await.unwrap();
    let refused = engine
        .continue_with_budget(run.id, &budget("tokens=+2000", true), &ops)
        .await;
    match refused {
        Err(cairn::Error::Store(cairn::StoreError::WrongState { status, .. })) => {
            assert_eq!(status, RunStatus::Cancelled)
        }
        other => panic!("expected wrong_state, got {other:?}"),
    }
    let after = engine.get_run(run.id).await.unwrap();
    assert_eq!(after.budget.and_then(|b| b.tokens), Some(6000), "no raise");
    assert_eq!(raises(&engine.events(run.id).await.unwrap()), 1);
}

/// Raises the budget of the run it runs in, once, from inside its first
/// execution (as an operator would while the step is running).
struct RaiseOnce {
    spec: ToolSpec,
    engine: Engine,
    run: Arc<Mutex<Option<RunId>>>,
    runs: Arc<AtomicU32>,
}

#[async_trait]
impl Tool for RaiseOnce {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn execute(&self, _arguments: Value, _key: &str) -> ToolResult {
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            let id = self.run.lock().unwrap().expect("the run's id is set");
            let ops = Actor::new("ops");
            let by = budget("model_calls=+2", true);
            let raised = self.engine.continue_with_budget(id, &by, &ops).await;
            let raised = raised.map_err(|e| e.to_string())?;
            assert_eq!(raised.status, RunStatus::Running, "only the raise");
        }
        Ok("counted".into())
    }
}

/// A run stopped at 2 model calls is raised to 4 while its step runs: the
/// holder reads the raise before its next call and makes 4, not 2.
async fn a_raise_on_a_running_run_reaches_its_holder_before_the_next_call(kind: Kind) {
    let db = TestDb::of(kind).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let script: String = (0..10)
        .map(|i| {
            format!(
                "[[responses]]\ntool_calls = [{{ id = \"c{i}\", name = \"count\", \
                 arguments = {{}} }}]\nusage = {{ input_tokens = 10, output_tokens = 2 }}\n"
            )
        })
        .collect();
    let run_id = Arc::new(Mutex::new(None));
    let tool = RaiseOnce {
        spec: ToolSpec {
            name: "count".into(),
            description: "Counts.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
        engine: engine.clone(),
        run: run_id.clone(),
        runs: Arc::default(),
    };
    let agent = LlmAgent::new(
        LlmDef::new(ProviderKind::Scripted, "scripted"),
        Arc::new(ScriptedProvider::parse(&script).unwrap()),
        Toolbox::new(vec![Arc::new(tool)]).unwrap(),
    );
    let crew = Crew::builder("raised", "1")
        .agent_named("clerk", "clerk-v1", agent)
        .build()
        .unwrap();
    let opts = SubmitOptions {
        budget: Some(budget("model_calls=2", false)),
        ..SubmitOptions::default()
    };
    let submitted = engine.submit(&crew, json!({}), opts).await.unwrap();
    *run_id.lock().unwrap() = Some(submitted.run.id);
    let run = engine.execute(submitted.run.id).await.unwrap().run;
    assert_eq!(run.status, RunStatus::Interrupted, "{:?}", run.error);
    assert!(
        run.error
            .as_ref()
            .unwrap()
            .message
            .contains("4 model calls"),
        "{:?}",
        run.error
    );
    let spent = engine.store().spent(run.id).await.unwrap();
    assert_eq!(spent.model_calls, 4, "the raise was read mid-step");
}
