//! The contract between the executor and whatever runs a step: built-in
//! `command`/`template` agents and Rust code implement [`Agent`]. The top of
//! the crate's module graph: it uses the records and the context, and
//! nothing below uses it.

use async_trait::async_trait;
use serde_json::Value;

use crate::context::StepContext;
use crate::stop::Stop;

/// Tokens live with the checkpoint row they are summed into; named here too
/// because a step's result carries them.
pub use crate::checkpoint::Usage;

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
/// executor may run it again if its process died before the commit. It
/// ends with an output, or with a [`Stop`]: a failure (an `ErrorInfo`
/// converts with `?`), a question, children to start, or a wait for its
/// provider key.
#[async_trait]
pub trait Agent: Send + Sync {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop>;
}
