//! Test fixtures: the context a step sees as step 1 (`writer`) of a run on
//! `{"topic": "rust"}`, after step 0 (`researcher`) returned `said`.

use cairn_core::{Attempt, PreviousOutput, Role, RunId, StepContext, StepIdx, StepRef};
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
