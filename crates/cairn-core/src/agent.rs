//! The contract between the executor and whatever runs a step: built-in
//! `command`/`template` agents and Rust code implement [`Agent`].

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoint::ErrorInfo;
use crate::context::StepContext;

/// Tokens a step spent, summed into its checkpoint row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A step's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    pub output: Value,
    pub usage: Option<Usage>,
}

impl StepOutput {
    pub fn new(output: impl Into<Value>) -> Self {
        StepOutput {
            output: output.into(),
            usage: None,
        }
    }
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Executes one step. A step must be a function of its context alone: the
/// executor may run it again if its process died before the commit.
#[async_trait]
pub trait Agent: Send + Sync {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, ErrorInfo>;
}
