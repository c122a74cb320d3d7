//! A crew file's format: private `*File` structs that deny unknown keys,
//! read from TOML and turned into a [`CrewDef`] (`CrewDef::from_toml`
//! validates the result). The stored form of a crew is the JSON of
//! `CrewDef`, so this format can grow without touching stored runs.

use serde::Deserialize;

use super::*;

/// Reads a crew file into its definition (not yet validated).
pub(super) fn parse(text: &str) -> Result<CrewDef, CrewError> {
    let file: CrewFile = toml::from_str(text).map_err(|e| CrewError::Syntax(one_line(text, &e)))?;
    file.into_def()
}

fn one_line(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CrewFile {
    name: String,
    version: StringOrNumber,
    #[serde(default)]
    agents: Vec<AgentFile>,
    #[serde(default)]
    budget: Option<crate::Budget>,
    #[serde(default)]
    upgrade: Option<upgrade_policy::UpgradePolicy>,
}

/// `version = "1"` and `version = 1` both mean "1".
#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrNumber {
    S(String),
    I(i64),
    F(f64),
}

impl StringOrNumber {
    fn into_text(self) -> String {
        match self {
            StringOrNumber::S(s) => s,
            StringOrNumber::I(i) => i.to_string(),
            StringOrNumber::F(f) => f.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    role: String,
    kind: String,
    command: Option<Vec<String>>,
    template: Option<String>,
    timeout_ms: Option<u64>,
    retry: Option<RetryPolicy>,
    permanent_exit_codes: Option<Vec<i32>>,
    #[serde(default)]
    review: bool,
    approval: Option<ApprovalPoint>,
    wait_deadline_ms: Option<u64>,
    on_deadline: Option<OnDeadlineFile>,
    approvers: Option<crate::people::approvers::Approvers>,
    env: Option<Vec<String>>,
    inherit_env: Option<bool>,
    // kind = "llm"
    provider: Option<crate::llm::ProviderKind>,
    model: Option<String>,
    instructions: Option<String>,
    max_turns: Option<u32>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
    window_items: Option<u32>,
    window_tokens: Option<u32>,
    stream_timeout_ms: Option<u64>,
    script: Option<String>,
    tools: Option<Vec<ToolFile>>,
    ask_human: Option<bool>,
    thread_history: Option<bool>,
    delegate: Option<Vec<String>>,
    limit_key: Option<Vec<String>>,
    limits: Option<LimitsFile>,
    // kind = "children" (children.rs)
    crew: Option<String>,
    over: Option<String>,
    children: Option<Vec<children::FixedChild>>,
    join: Option<children::JoinRule>,
    quorum: Option<u32>,
    concurrency: Option<u32>,
    max_children: Option<u32>,
    max_depth: Option<u32>,
    on_parent_close: Option<children::OnParentClose>,
    // kind = "signal" (crate::signal)
    signal: Option<String>,
    any_of: Option<Vec<String>>,
    default: Option<serde_json::Value>,
}

/// An agent's `limits = { in_flight = N, rpm = N, tpm = N, max_pause_ms = N }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    in_flight: Option<u32>,
    rpm: Option<u32>,
    tpm: Option<u32>,
    max_pause_ms: Option<u64>,
}

impl LimitsFile {
    fn into_limits(self) -> crate::KeyLimits {
        crate::KeyLimits {
            in_flight: self.in_flight,
            rpm: self.rpm,
            tpm: self.tpm,
            max_pause_ms: self.max_pause_ms,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<serde_json::Value>,
    command: Vec<String>,
    #[serde(default)]
    idempotent: bool,
    timeout_ms: Option<u64>,
}

impl ToolFile {
    fn into_def(self) -> crate::llm::ToolDef {
        crate::llm::ToolDef {
            name: self.name,
            description: self.description,
            parameters: self
                .parameters
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            command: self.command,
            idempotent: self.idempotent,
            timeout_ms: self.timeout_ms,
        }
    }
}

impl AgentFile {
    /// An `llm` or `command` agent with `delegate`: its `max_children`,
    /// which caps what its delegations start (taken, so it is not read as
    /// a `children` step's key).
    fn take_delegated_max(&mut self) -> Option<u32> {
        match self.kind.as_str() {
            "llm" | "command" if self.delegate.is_some() => self.max_children.take(),
            _ => None,
        }
    }

    /// The name of the first `llm`-only key this agent sets, if any.
    fn llm_key(&self) -> Option<&'static str> {
        first_set([
            ("provider", self.provider.is_some()),
            ("model", self.model.is_some()),
            ("instructions", self.instructions.is_some()),
            ("max_turns", self.max_turns.is_some()),
            ("base_url", self.base_url.is_some()),
            ("api_key_env", self.api_key_env.is_some()),
            ("max_tokens", self.max_tokens.is_some()),
            ("temperature", self.temperature.is_some()),
            ("window_items", self.window_items.is_some()),
            ("window_tokens", self.window_tokens.is_some()),
            ("stream_timeout_ms", self.stream_timeout_ms.is_some()),
            ("script", self.script.is_some()),
            ("tools", self.tools.is_some()),
            ("ask_human", self.ask_human.is_some()),
            ("thread_history", self.thread_history.is_some()),
        ])
    }

    /// `kind = "children"`: its keys (none of another kind's).
    fn children_kind(&mut self, llm_key: Option<&'static str>) -> Result<AgentKind, FieldProblem> {
        let other = llm_key.or(self.command.as_ref().map(|_| "command")).or(self
            .permanent_exit_codes
            .as_ref()
            .map(|_| "permanent_exit_codes"));
        if let Some(field) = other {
            return Err(FieldProblem::Unexpected(field));
        }
        Ok(AgentKind::Children(Box::new(children::ChildrenDef {
            crew: self.crew.take().ok_or(FieldProblem::Missing("crew"))?,
            crew_def: None,
            child_crews: Default::default(),
            over: self.over.take(),
            children: self.children.take().unwrap_or_default(),
            join: self.join.unwrap_or_default(),
            quorum: self.quorum,
            concurrency: self.concurrency,
            max_children: self.max_children,
            max_depth: self.max_depth,
            on_parent_close: self.on_parent_close.unwrap_or_default(),
            template: self.template.take(),
        })))
    }

    /// `kind = "llm"`: its keys (none that runs a program).
    fn llm_kind(&mut self, delegated_max: Option<u32>) -> Result<AgentKind, FieldProblem> {
        let other = (self.command.as_ref().map(|_| "command"))
            .or(self.template.as_ref().map(|_| "template"))
            .or(self
                .permanent_exit_codes
                .as_ref()
                .map(|_| "permanent_exit_codes"));
        if let Some(field) = other {
            return Err(FieldProblem::Unexpected(field));
        }
        let provider = self.provider.ok_or(FieldProblem::Missing("provider"))?;
        let model = match (self.model.take(), provider) {
            (Some(m), _) => m,
            (None, crate::llm::ProviderKind::Scripted) => "scripted".to_owned(),
            (None, _) => return Err(FieldProblem::Missing("model")),
        };
        let tools = self.tools.take().unwrap_or_default();
        let tools = tools.into_iter().map(ToolFile::into_def).collect();
        Ok(AgentKind::Llm(Box::new(crate::llm::LlmDef {
            instructions: self.instructions.take(),
            max_turns: self.max_turns,
            base_url: self.base_url.take(),
            api_key_env: self.api_key_env.take(),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            window_items: self.window_items,
            window_tokens: self.window_tokens,
            stream_timeout_ms: self.stream_timeout_ms,
            script: self.script.take(),
            tools,
            ask_human: self.ask_human.unwrap_or(false),
            thread_history: self.thread_history,
            delegate: self.delegate.take().unwrap_or_default(),
            max_children: delegated_max,
            limit_key: self.limit_key.take().unwrap_or_default(),
            limits: self.limits.take().map(LimitsFile::into_limits),
            ..crate::llm::LlmDef::new(provider, model)
        })))
    }

    /// The name of the first `signal`-only key this agent sets, if any.
    fn signal_key(&self) -> Option<&'static str> {
        first_set([
            ("signal", self.signal.is_some()),
            ("any_of", self.any_of.is_some()),
            ("default", self.default.is_some()),
        ])
    }

    /// `kind = "signal"`: its keys, and none that runs something.
    fn signal_kind(&mut self, llm_key: Option<&'static str>) -> Result<AgentKind, FieldProblem> {
        let other = llm_key
            .or(self.children_key())
            .or(self.command.as_ref().map(|_| "command"))
            .or(self.template.as_ref().map(|_| "template"))
            .or(self
                .permanent_exit_codes
                .as_ref()
                .map(|_| "permanent_exit_codes"))
            .or(self.delegate.as_ref().map(|_| "delegate"))
            .or(self.limit_key.as_ref().map(|_| "limit_key"))
            .or(self.limits.as_ref().map(|_| "limits"));
        if let Some(field) = other {
            return Err(FieldProblem::Unexpected(field));
        }
        Ok(AgentKind::Signal(Box::new(crate::signal::SignalDef {
            signal: self.signal.take(),
            any_of: self.any_of.take().unwrap_or_default(),
            default: self.default.take(),
        })))
    }

    /// The name of the first `children`-only key this agent sets, if any.
    fn children_key(&self) -> Option<&'static str> {
        first_set([
            ("crew", self.crew.is_some()),
            ("over", self.over.is_some()),
            ("children", self.children.is_some()),
            ("join", self.join.is_some()),
            ("quorum", self.quorum.is_some()),
            ("concurrency", self.concurrency.is_some()),
            ("max_children", self.max_children.is_some()),
            ("max_depth", self.max_depth.is_some()),
            ("on_parent_close", self.on_parent_close.is_some()),
        ])
    }
}

/// The first of `keys` whose flag says it is set, if any.
fn first_set<const N: usize>(keys: [(&'static str, bool); N]) -> Option<&'static str> {
    keys.into_iter().find(|(_, set)| *set).map(|(k, _)| k)
}

/// What is wrong with an agent's keys for its kind.
enum FieldProblem {
    Unexpected(&'static str),
    Missing(&'static str),
}

/// `on_deadline = "fail"`, `"approve"`, or `{ answer = … }` (a question's default).
#[derive(Deserialize)]
#[serde(untagged)]
enum OnDeadlineFile {
    Word(String),
    Answer { answer: serde_json::Value },
}

impl OnDeadlineFile {
    /// What it says, or the word that says nothing.
    fn read(self) -> Result<OnDeadline, String> {
        match self {
            OnDeadlineFile::Word(w) if w == "fail" => Ok(OnDeadline::Fail),
            OnDeadlineFile::Word(w) if w == "approve" => Ok(OnDeadline::Default {
                answer: Answer::Approve,
            }),
            OnDeadlineFile::Answer { answer } => Ok(OnDeadline::Default {
                answer: Answer::Answer { value: answer },
            }),
            OnDeadlineFile::Word(w) => Err(w),
        }
    }
}

impl CrewFile {
    fn into_def(self) -> Result<CrewDef, CrewError> {
        let version = self.version.into_text();
        let name = self.name;
        let invalid = |detail: String| CrewError::Invalid {
            crew: name.clone(),
            detail,
        };
        let mut agents = Vec::with_capacity(self.agents.len());
        for mut a in self.agents {
            let delegated_max = a.take_delegated_max();
            let llm_key = a.llm_key();
            let children_key = a.children_key();
            let children = (a.kind == "children").then(|| a.children_kind(llm_key));
            let signal = (a.kind == "signal").then(|| a.signal_kind(llm_key));
            let llm = (a.kind == "llm").then(|| a.llm_kind(delegated_max));
            let signal_key = a.signal_key();
            let role = a.role;
            let unexpected = |field: &str| {
                invalid(format!(
                    "agent `{role}` of kind `{}` does not take `{field}`",
                    a.kind
                ))
            };
            let missing = |field: &str| {
                invalid(format!(
                    "agent `{role}` of kind `{}` needs `{field}`",
                    a.kind
                ))
            };
            let kind = match a.kind.as_str() {
                "template" | "children" if a.delegate.is_some() => {
                    return Err(unexpected("delegate"));
                }
                "template" | "children" if a.limit_key.is_some() || a.limits.is_some() => {
                    let field = ["limit_key", "limits"][usize::from(a.limit_key.is_none())];
                    return Err(unexpected(field));
                }
                "command" | "template" if llm_key.is_some() => {
                    return Err(unexpected(llm_key.unwrap_or_default()));
                }
                "command" | "template" | "llm" if children_key.is_some() => {
                    return Err(unexpected(children_key.unwrap_or_default()));
                }
                "command" | "template" | "llm" | "children" if signal_key.is_some() => {
                    return Err(unexpected(signal_key.unwrap_or_default()));
                }
                "children" | "signal" | "llm" => match children.or(signal).or(llm) {
                    Some(Ok(kind)) => kind,
                    None => return Err(missing("crew")),
                    Some(Err(FieldProblem::Unexpected(field))) => return Err(unexpected(field)),
                    Some(Err(FieldProblem::Missing(field))) => return Err(missing(field)),
                },
                "command" => {
                    if a.template.is_some() {
                        return Err(unexpected("template"));
                    }
                    AgentKind::Command {
                        command: a.command.ok_or_else(|| missing("command"))?,
                        permanent_exit_codes: a.permanent_exit_codes.unwrap_or_default(),
                        delegate: a.delegate.unwrap_or_default(),
                        delegate_defs: vec![],
                        max_children: delegated_max,
                        limit_key: a.limit_key.unwrap_or_default(),
                        limits: a.limits.map(LimitsFile::into_limits),
                    }
                }
                "template" => {
                    if a.command.is_some() {
                        return Err(unexpected("command"));
                    }
                    if a.permanent_exit_codes.is_some() {
                        return Err(unexpected("permanent_exit_codes"));
                    }
                    AgentKind::Template {
                        template: a.template.ok_or_else(|| missing("template"))?,
                    }
                }
                other => {
                    return Err(invalid(format!(
                        "agent `{role}` has unknown kind `{other}` (known: command, template, llm, children, signal)"
                    )))
                }
            };
            let on_deadline = match a.on_deadline.map(OnDeadlineFile::read).transpose() {
                Ok(on_deadline) => on_deadline,
                Err(w) => {
                    return Err(invalid(format!(
                        "agent `{role}` has `on_deadline = \"{w}\"`; use \"fail\", \"approve\" or {{ answer = … }}"
                    )))
                }
            };
            agents.push(AgentDef {
                timeout_ms: a.timeout_ms,
                retry: a.retry,
                review: a.review,
                approval: a.approval,
                wait_deadline_ms: a.wait_deadline_ms,
                on_deadline,
                approvers: a.approvers,
                env: a.env.unwrap_or_default(),
                inherit_env: a.inherit_env.unwrap_or(false),
                ..AgentDef::new(role, kind)
            });
        }
        Ok(CrewDef {
            name,
            version,
            agents,
            dir: None,
            budget: self.budget.filter(|b| !b.is_empty()),
            upgrade: self.upgrade,
        })
    }
}
