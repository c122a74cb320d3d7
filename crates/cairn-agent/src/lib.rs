//! Cairn's `llm` agent kind: a turn of model calls and tool calls, made
//! durable by journaling every item the moment it exists.
//!
//! - [`transcript`]: the transcript rules as pure functions (tail
//!   classification, repair, projection, history window).
//! - [`LlmAgent`]: the turn loop, which journals through
//!   `cairn_core::Journal` and meters each model call through
//!   `cairn_core::Meter` (its guard, `meter::CallGuard`), and so knows no
//!   SQL.
//! - [`Tool`], [`CommandTool`], [`Toolbox`]: what the model may call, and the
//!   checks a call passes before anything runs.
//! - [`build`]: an `llm` agent from its crew definition.

mod ask;
mod delegate;
mod failure;
mod meter;
mod tools;
pub mod transcript;
mod turn;

use std::sync::Arc;

use cairn_core::{Agent, AgentDef, AgentKind, CrewError, LlmDef, ProviderKind};
use cairn_llm::Provider;

pub use ask::ASK_TOOL;
pub use tools::{BadSchema, Checked, CommandTool, Tool, ToolResult, Toolbox};
pub use turn::{context_message, idempotency_key, LlmAgent};

/// The agent for an `llm` definition, or `None` for other kinds.
pub fn build(
    crew: &str,
    dir: Option<&str>,
    def: &AgentDef,
) -> Result<Option<Arc<dyn Agent>>, CrewError> {
    let AgentKind::Llm(llm) = &def.kind else {
        return Ok(None);
    };
    let invalid = |detail: String| CrewError::Invalid {
        crew: crew.to_owned(),
        detail: format!("agent `{}` {detail}", def.role),
    };
    let provider = provider(llm).map_err(&invalid)?;
    let mut tools: Vec<Arc<dyn Tool>> = llm
        .tools
        .iter()
        .map(|t| {
            let env = cairn_steps::ProgramEnv::of(def).in_dir(dir);
            Arc::new(CommandTool::from_def(t, env)) as Arc<dyn Tool>
        })
        .collect();
    if llm.ask_human {
        tools.push(Arc::new(ask::AskHuman::new()));
    }
    if !llm.delegate.is_empty() {
        tools.push(Arc::new(delegate::Delegate::new(&llm.delegate_defs)));
    }
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

/// The provider an `llm` definition names. The API key is read from the
/// environment variable `api_key_env` names (an error if it is named but
/// not set), else from `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` if set. A
/// local server (any `base_url` but the provider's own) may need none; the
/// provider's own service always does, so a missing key is refused here,
/// when the crew is loaded, naming the variable, not after failed sends.
/// The provider key of an `llm` agent: what every step calling the same
/// provider with the same API key shares, so a provider's "too many
/// requests" pauses exactly them, in every process on the database:
/// `provider=openai,url=https://api.openai.com/v1,key=OPENAI_API_KEY`
/// (the variable's name, never its value). A scripted provider's key is its
/// script. The agent's `limit_key` narrows it (`,model=gpt-4o`, a label),
/// for providers whose limits are per model.
pub fn limit_key(def: &LlmDef) -> String {
    limit_key_for(def, cairn_core::KeyVars::default())
}

/// [`limit_key`] of a step of a run with `vars`: a `"tenant"` part of the
/// agent's `limit_key` adds `,tenant=T` (nothing for a run without one),
/// `"thread"` and `"crew"` likewise.
pub fn limit_key_for(def: &LlmDef, vars: cairn_core::KeyVars<'_>) -> String {
    let (url, env) = match def.provider {
        ProviderKind::Scripted => {
            let script = def.script.as_deref().unwrap_or_default();
            return format!("provider=scripted,script={script}{}", def.key_scope(vars));
        }
        ProviderKind::Openai => (
            cairn_llm::OpenAiProvider::DEFAULT_BASE_URL,
            "OPENAI_API_KEY",
        ),
        ProviderKind::Anthropic => (
            cairn_llm::AnthropicProvider::DEFAULT_BASE_URL,
            "ANTHROPIC_API_KEY",
        ),
    };
    let url = def.base_url.as_deref().unwrap_or(url).trim_end_matches('/');
    let env = def.api_key_env.as_deref().unwrap_or(env);
    format!(
        "provider={},url={url},key={env}{}",
        def.provider.as_str(),
        def.key_scope(vars)
    )
}

pub fn provider(def: &LlmDef) -> Result<Arc<dyn Provider>, String> {
    let key = |default: &str, official: &str| -> Result<Option<String>, String> {
        match &def.api_key_env {
            Some(var) => std::env::var(var).map(Some).map_err(|_| {
                format!("needs its API key in the environment variable `{var}`, which is not set")
            }),
            None => match std::env::var(default) {
                Ok(key) => Ok(Some(key)),
                Err(_) if def.base_url.as_deref().is_none_or(|u| u.trim_end_matches('/') == official) => {
                    Err(format!(
                        "calls {official}, which needs an API key: set the environment variable `{default}` (or name another with `api_key_env`)"
                    ))
                }
                Err(_) => Ok(None),
            },
        }
    };
    let failed = |e: cairn_llm::LlmError| e.to_string();
    Ok(match def.provider {
        ProviderKind::Scripted => {
            let path = def.script.as_deref().unwrap_or_default();
            let p = cairn_llm::ScriptedProvider::from_file(std::path::Path::new(path))
                .map_err(|e| format!("has a script that cannot be used: {e}"))?;
            Arc::new(p)
        }
        ProviderKind::Openai => {
            let base_url = def
                .base_url
                .clone()
                .unwrap_or_else(|| cairn_llm::OpenAiProvider::DEFAULT_BASE_URL.into());
            Arc::new(
                cairn_llm::OpenAiProvider::new(cairn_llm::OpenAiConfig {
                    completion_tokens_field: cairn_llm::OpenAiConfig::completion_tokens_field_for(
                        &base_url,
                    ),
                    base_url,
                    api_key: key(
                        "OPENAI_API_KEY",
                        cairn_llm::OpenAiProvider::DEFAULT_BASE_URL,
                    )?,
                    timeouts: Default::default(),
                })
                .map_err(failed)?,
            )
        }
        ProviderKind::Anthropic => Arc::new(
            cairn_llm::AnthropicProvider::new(cairn_llm::AnthropicConfig {
                base_url: def
                    .base_url
                    .clone()
                    .unwrap_or_else(|| cairn_llm::AnthropicProvider::DEFAULT_BASE_URL.into()),
                api_key: key(
                    "ANTHROPIC_API_KEY",
                    cairn_llm::AnthropicProvider::DEFAULT_BASE_URL,
                )?,
                timeouts: Default::default(),
            })
            .map_err(failed)?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::ProviderKind;

    #[test]
    fn the_providers_own_service_without_a_key_is_refused_at_load_naming_the_variable() {
        for (kind, var) in [
            (ProviderKind::Openai, "OPENAI_API_KEY"),
            (ProviderKind::Anthropic, "ANTHROPIC_API_KEY"),
        ] {
            if std::env::var_os(var).is_some() {
                eprintln!("skipped for {var}: it is set in this environment");
                continue;
            }
            let def = LlmDef::new(kind, "m");
            let e = provider(&def).err().unwrap_or_default();
            assert!(e.contains(&format!("`{var}`")), "{kind:?}: {e}");
            // A local server may need no key.
            let local = LlmDef {
                base_url: Some("http://127.0.0.1:9/v1".into()),
                ..LlmDef::new(kind, "m")
            };
            assert!(provider(&local).is_ok(), "{kind:?}");
        }
        let named = LlmDef {
            api_key_env: Some("CAIRN_TEST_SURELY_UNSET_KEY".into()),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..LlmDef::new(ProviderKind::Openai, "m")
        };
        let e = provider(&named).err().unwrap_or_default();
        assert!(e.contains("`CAIRN_TEST_SURELY_UNSET_KEY`"), "{e}");
    }

    #[test]
    fn limit_key_narrows_the_provider_key_in_its_order() {
        let shared = LlmDef::new(ProviderKind::Openai, "gpt-4o");
        let base = "provider=openai,url=https://api.openai.com/v1,key=OPENAI_API_KEY";
        assert_eq!(limit_key(&shared), base);
        let narrowed = LlmDef {
            limit_key: vec!["team=research".into(), "model".into()],
            ..shared
        };
        assert_eq!(
            limit_key(&narrowed),
            format!("{base},team=research,model=gpt-4o")
        );
        let by_tenant = LlmDef {
            limit_key: vec!["tenant".into(), "model".into()],
            ..LlmDef::new(ProviderKind::Openai, "gpt-4o")
        };
        assert_eq!(by_tenant.problem(), None);
        let vars = cairn_core::KeyVars {
            tenant: Some("acme"),
            thread: Some("t-9"),
            crew: Some("research"),
        };
        assert_eq!(
            limit_key_for(&by_tenant, vars),
            format!("{base},tenant=acme,model=gpt-4o")
        );
        assert_eq!(
            limit_key_for(&by_tenant, cairn_core::KeyVars::default()),
            format!("{base},model=gpt-4o"),
            "a run without a tenant: the key without it"
        );
        let by_all = LlmDef {
            limit_key: vec!["crew".into(), "thread".into()],
            ..LlmDef::new(ProviderKind::Openai, "gpt-4o")
        };
        assert_eq!(by_all.problem(), None);
        assert_eq!(
            limit_key_for(&by_all, vars),
            format!("{base},crew=research,thread=t-9")
        );
        for bad in [
            "modle", "team", "=x", "team=", "a=b,c", "key=x", "tenant=x", "crew=y",
        ] {
            let def = LlmDef {
                limit_key: vec![bad.into()],
                ..LlmDef::new(ProviderKind::Openai, "m")
            };
            let problem = def.problem().unwrap_or_default();
            assert!(problem.contains(bad), "{bad}: {problem}");
        }
    }
}
