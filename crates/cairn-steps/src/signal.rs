//! The `signal` step's agent: it asks for its signal ([`Stop::Listen`])
//! every time it runs. The executor answers from storage: the oldest
//! buffered signal of its names becomes the step's output, or the step
//! waits (`cairn_core::signal`).

use cairn_core::{Agent, Listen, SignalDef, StepContext, StepOutput, Stop};

/// Waits for a signal by name.
#[derive(Debug, Clone)]
pub struct SignalAgent {
    listen: Listen,
}

impl SignalAgent {
    /// The agent of `def`, its wait bounded by the step's `timeout_ms`.
    pub fn new(def: &SignalDef, timeout_ms: Option<u64>) -> SignalAgent {
        SignalAgent {
            listen: def.listen(timeout_ms),
        }
    }
}

#[async_trait::async_trait]
impl Agent for SignalAgent {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        Err(Stop::Listen(self.listen.clone()))
    }
}
