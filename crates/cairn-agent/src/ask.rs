//! The `ask_human` tool of an `llm` agent with `ask_human = true`: its
//! call never executes; the loop turns it into a question wait, and the
//! person's answer, once given, into its result.

use async_trait::async_trait;
use serde_json::json;

use cairn_core::Stop;
use cairn_core::{JournalHandle, JournalKind, NewJournalItem, StepContext};

use crate::failure::journal_failure;
use crate::transcript::Call;

/// The tool `ask_human = true` gives the model.
pub const ASK_TOOL: &str = "ask_human";

/// The `ask_human` tool's spec. It never executes: the loop turns its call
/// into a question wait, and the answer into its result.
pub(crate) struct AskHuman(cairn_llm::ToolSpec);

impl AskHuman {
    pub(crate) fn new() -> Self {
        AskHuman(cairn_llm::ToolSpec {
            name: ASK_TOOL.into(),
            description: "Ask a person a question and wait for the answer.".into(),
            parameters: json!({"type": "object", "properties": {"question": {"type": "string"}},
                               "required": ["question"]}),
        })
    }
}

#[async_trait]
impl crate::Tool for AskHuman {
    fn spec(&self) -> &cairn_llm::ToolSpec {
        &self.0
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn execute(&self, _: serde_json::Value, _: &str) -> crate::ToolResult {
        Err("ask_human is answered by a person, not executed".into())
    }
}

/// The stop that makes the executor open a question wait for `call`.
pub(crate) fn question(call: &Call) -> Stop {
    let prompt = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .ok()
        .and_then(|a| a["question"].as_str().map(str::to_owned))
        .unwrap_or_else(|| call.arguments.clone());
    Stop::ask(call.call_id.clone(), prompt)
}

impl crate::LlmAgent {
    /// An `ask_human` call without a result: the person's answer becomes
    /// its result, or the step waits for one.
    pub(crate) async fn answer(
        &self,
        journal: &JournalHandle,
        cx: &StepContext,
        call: &Call,
    ) -> Result<(), Stop> {
        let Some(answer) = cx.answers.get(&call.call_id) else {
            return Err(question(call));
        };
        journal
            .append(NewJournalItem::new(
                JournalKind::HumanAnswer,
                json!({"call_id": call.call_id, "answer": answer}),
            ))
            .await
            .map_err(journal_failure)?;
        let content = match answer {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        journal
            .append(NewJournalItem::new(
                JournalKind::ToolResult,
                json!({"call_id": call.call_id, "content": content, "is_error": false}),
            ))
            .await
            .map(drop)
            .map_err(|e| Stop::from(journal_failure(e)))
    }
}
