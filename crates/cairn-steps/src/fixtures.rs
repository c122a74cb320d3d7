//! Test fixtures: the context a step sees as step 1 (`writer`) of a run on
//! `{"topic": "rust"}`, after step 0 (`researcher`) returned `said`.

use cairn_core::{
    Agent, Attempt, ErrorInfo, PreviousOutput, Role, RunId, StepContext, StepIdx, StepRef, Stop,
};
use serde_json::{json, Value};

pub(crate) fn writer_after_researcher(said: Value) -> StepContext {
    let step = StepRef {
        idx: StepIdx(1),
        role: Role::new("writer"),
        attempt: Attempt(1),
    };
    StepContext {
        previous: vec![PreviousOutput {
            idx: StepIdx(0),
            role: Role::new("researcher"),
            output: said,
        }]
        .into(),
        ..StepContext::new(RunId::new(), json!({"topic": "rust"}), step)
    }
}

/// How `agent` failed on `cx`; a panic when it did not fail.
pub(crate) async fn failure(agent: &impl Agent, cx: &StepContext) -> ErrorInfo {
    agent
        .run(cx)
        .await
        .err()
        .and_then(Stop::into_failure)
        .unwrap_or_else(|| panic!("expected failure"))
}
