//! The definition of an `llm` agent: which provider and model, its
//! instructions, tools and limits. Only data: the turn loop lives in
//! `cairn-agent`, the providers in `cairn-llm`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which provider serves an `llm` agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, vLLM, llama.cpp, …).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// A deterministic script of responses in a file (demos and tests).
    Scripted,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Scripted => "scripted",
        }
    }
}

/// An `llm` agent. Optional fields are skipped when absent, so adding one
/// never changes an existing crew's fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmDef {
    pub provider: ProviderKind,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Model calls per dispatch of the step before it stops `interrupted`
    /// (default [`LlmDef::DEFAULT_MAX_TURNS`]); `continue` grants as many again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// OpenAI: with the version (`https://api.openai.com/v1`); Anthropic:
    /// without (`https://api.anthropic.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// History window: at most this many journal items per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_items: Option<u32>,
    /// History window: at most about this many tokens (4 bytes a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_tokens: Option<u32>,
    /// Cap on one streamed response's duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_timeout_ms: Option<u64>,
    /// The scripted provider's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    /// Give the model an `ask_human` tool: its call opens a question wait,
    /// and the person's answer is journaled as the call's result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ask_human: bool,
    /// Send the thread's earlier runs before the context (default: yes).
    /// Absent unless set, so existing crews keep their fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_history: Option<bool>,
    /// Crew files (relative to this crew's file) the model may start as
    /// child runs through a `delegate` tool: each call is one child, and
    /// the step waits, holding nothing, until they have all settled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegate: Vec<String>,
    /// The crews of `delegate`, in its order, loaded with the parent crew
    /// and stored with it (a resume needs no file; the parent's fingerprint
    /// covers them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegate_defs: Vec<crate::CrewDef>,
    /// The most children its `delegate` calls may start, over every
    /// attempt of the step (default
    /// [`crate::children::DEFAULT_MAX_CHILDREN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children: Option<u32>,
    /// Narrows the step's provider key (its pauses and limits): `"model"`
    /// adds the model; `"tenant"`, `"thread"` and `"crew"` the run's
    /// tenant, thread and crew name (if it has one); `"NAME=VALUE"` a
    /// label of the crew's own (a team). Empty (the default): the key the provider and API key
    /// give, shared by every model called with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limit_key: Vec<String>,
    /// The limits this crew declares for its key (`crate::meter::declared`),
    /// unless an operator set the key's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::KeyLimits>,
}

/// The `limit_key` parts a step's run gives the value of.
const RUN_PARTS: [&str; 3] = ["tenant", "thread", "crew"];

/// What a step's run gives a key narrowed by `"tenant"`, `"thread"` or
/// `"crew"` (a part whose value the run lacks adds nothing).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyVars<'a> {
    pub tenant: Option<&'a str>,
    pub thread: Option<&'a str>,
    pub crew: Option<&'a str>,
}

/// Whether `part` is a key label `NAME=VALUE` (no commas, nothing empty,
/// not a name a provider key already has).
pub fn is_key_label(part: &str) -> bool {
    part.split_once('=').is_some_and(|(n, v)| {
        let ok = |s: &str| !s.trim().is_empty() && !s.contains([',', '=']);
        ok(n)
            && ok(v)
            && !matches!(
                n,
                "provider" | "url" | "key" | "script" | "model" | "tenant" | "thread" | "crew"
            )
    })
}

impl LlmDef {
    pub const DEFAULT_MAX_TURNS: u32 = 25;
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;
    pub const DEFAULT_STREAM_TIMEOUT_MS: u64 = 600_000;

    pub fn new(provider: ProviderKind, model: impl Into<String>) -> Self {
        LlmDef {
            provider,
            model: model.into(),
            instructions: None,
            max_turns: None,
            base_url: None,
            api_key_env: None,
            max_tokens: None,
            temperature: None,
            window_items: None,
            window_tokens: None,
            stream_timeout_ms: None,
            script: None,
            tools: Vec::new(),
            ask_human: false,
            thread_history: None,
            delegate: Vec::new(),
            delegate_defs: Vec::new(),
            max_children: None,
            limit_key: Vec::new(),
            limits: None,
        }
    }

    /// What `limit_key` adds to the provider key, in its order
    /// (`,model=gpt-4o,team=research,tenant=acme`), for a step of a run
    /// with `vars`.
    pub fn key_scope(&self, vars: KeyVars<'_>) -> String {
        let var = |name: &str, value: Option<&str>| {
            value.map_or(String::new(), |v| format!(",{name}={v}"))
        };
        self.limit_key
            .iter()
            .map(|part| match part.as_str() {
                "model" => format!(",model={}", self.model),
                "tenant" => var("tenant", vars.tenant),
                "thread" => var("thread", vars.thread),
                "crew" => var("crew", vars.crew),
                label => format!(",{label}"),
            })
            .collect()
    }

    /// Whether its key depends on the run (`limit_key` names the tenant,
    /// the thread or the crew).
    pub fn key_varies(&self) -> bool {
        self.limit_key
            .iter()
            .any(|p| RUN_PARTS.contains(&p.as_str()))
    }

    /// Whether the model sees the thread's earlier runs.
    pub fn thread_history(&self) -> bool {
        self.thread_history.unwrap_or(true)
    }

    pub fn max_turns(&self) -> u32 {
        self.max_turns.unwrap_or(Self::DEFAULT_MAX_TURNS)
    }

    pub fn max_tokens(&self) -> u32 {
        self.max_tokens.unwrap_or(Self::DEFAULT_MAX_TOKENS)
    }

    pub fn stream_timeout_ms(&self) -> u64 {
        self.stream_timeout_ms
            .unwrap_or(Self::DEFAULT_STREAM_TIMEOUT_MS)
    }

    /// The first rule this definition breaks, if any.
    pub fn problem(&self) -> Option<String> {
        if self.model.trim().is_empty() && self.provider != ProviderKind::Scripted {
            return Some("needs `model`".into());
        }
        if self.provider == ProviderKind::Scripted && self.script.is_none() {
            return Some("uses provider \"scripted\" and needs `script = \"path\"`".into());
        }
        if self.provider != ProviderKind::Scripted && self.script.is_some() {
            return Some("has `script`, which only provider \"scripted\" takes".into());
        }
        if self.max_turns == Some(0) {
            return Some("has `max_turns = 0`".into());
        }
        for part in &self.limit_key {
            if part != "model" && !RUN_PARTS.contains(&part.as_str()) && !is_key_label(part) {
                return Some(format!(
                    "has `limit_key` part `{part}`; use \"model\", \"tenant\", \"thread\", \
                     \"crew\" or a label \"NAME=VALUE\" (no commas; not one of those names, \
                     provider, url, key or script)"
                ));
            }
        }
        if self.window_items == Some(0) || self.window_tokens == Some(0) {
            return Some("has a window of 0".into());
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Some(format!("has `temperature = {t}`; use 0.0 to 2.0"));
            }
        }
        let mut names = std::collections::HashSet::new();
        for tool in &self.tools {
            if tool.name.is_empty()
                || !tool
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Some(format!(
                    "has a tool named `{}`; use letters, digits, `_` and `-`",
                    tool.name
                ));
            }
            if !self.delegate.is_empty() && tool.name == DELEGATE_TOOL {
                return Some(format!(
                    "has a tool named `{DELEGATE_TOOL}`, which `delegate` provides"
                ));
            }
            if self.ask_human && tool.name == "ask_human" {
                return Some(
                    "has a tool named `ask_human`, which `ask_human = true` provides".into(),
                );
            }
            if !names.insert(tool.name.as_str()) {
                return Some(format!("has two tools named `{}`", tool.name));
            }
            if tool.command.first().is_none_or(|p| p.is_empty()) {
                return Some(format!("has tool `{}` with an empty `command`", tool.name));
            }
            if !tool.parameters.is_object() {
                return Some(format!(
                    "has tool `{}` whose `parameters` is not a JSON schema object",
                    tool.name
                ));
            }
        }
        None
    }
}

/// The tool `delegate = [...]` gives the model.
pub const DELEGATE_TOOL: &str = "delegate";

impl LlmDef {
    /// The crew `delegate` names `name`, once loaded.
    pub fn delegated(&self, name: &str) -> Option<&crate::CrewDef> {
        self.delegate_defs.iter().find(|c| c.name == name)
    }
}

/// A tool an `llm` agent may call: a program that reads the call's
/// arguments as JSON on stdin (its idempotency key in
/// `CAIRN_IDEMPOTENCY_KEY`) and prints the result on stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    pub command: Vec<String>,
    /// Safe to run again with the same idempotency key after a crash.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}
