//! Cairn's `llm` agent kind: a turn of model calls and tool calls, made
//! durable by journaling every item the moment it exists.
//!
//! - [`transcript`]: the transcript rules as pure functions (tail
//!   classification, repair, projection, history window).
//! - [`LlmAgent`]: the turn loop, which journals through
//!   `cairn_core::Journal` and so knows no SQL.
//! - [`Tool`], [`CommandTool`], [`Toolbox`]: what the model may call, and the
//!   checks a call passes before anything runs.
//! - [`build`]: an `llm` agent from its crew definition.

mod tools;
pub mod transcript;
mod turn;

use std::sync::Arc;

use cairn_core::{Agent, AgentDef, AgentKind, CrewError, LlmDef, ProviderKind};
use cairn_llm::Provider;

pub use tools::{BadSchema, Checked, CommandTool, Tool, ToolResult, Toolbox};
pub use turn::{context_message, idempotency_key, LlmAgent};

/// The agent for an `llm` definition, or `None` for other kinds.
pub fn build(crew: &str, def: &AgentDef) -> Result<Option<Arc<dyn Agent>>, CrewError> {
    let AgentKind::Llm(llm) = &def.kind else {
        return Ok(None);
    };
    let invalid = |detail: String| CrewError::Invalid {
        crew: crew.to_owned(),
        detail: format!("agent `{}` {detail}", def.role),
    };
    let provider = provider(llm).map_err(&invalid)?;
    let tools = llm
        .tools
        .iter()
        .map(|t| Arc::new(CommandTool::from_def(t)) as Arc<dyn Tool>)
        .collect();
    let tools = Toolbox::new(tools).map_err(|e| {
        invalid(format!(
            "has tool `{}` whose `parameters` is not a valid JSON schema: {}",
            e.tool, e.reason
        ))
    })?;
    Ok(Some(Arc::new(LlmAgent::new(
        (**llm).clone(),
        provider,
        tools,
    ))))
}

/// The provider an `llm` definition names.
pub fn provider(def: &LlmDef) -> Result<Arc<dyn Provider>, String> {
    match def.provider {
        ProviderKind::Scripted => {
            let path = def.script.as_deref().unwrap_or_default();
            let p = cairn_llm::scripted::ScriptedProvider::from_file(std::path::Path::new(path))
                .map_err(|e| format!("has a script that cannot be used: {e}"))?;
            Ok(Arc::new(p))
        }
        ProviderKind::Openai | ProviderKind::Anthropic => {
            Err("uses a provider that is not wired yet".into())
        }
    }
}
