//! Crew definitions: the ordered agents of a run, their TOML file format, and
//! the fingerprint stored with every run so a resume can refuse a changed crew.
//!
//! The file format is parsed through private `*File` structs that deny unknown
//! keys, then validated into [`CrewDef`]; the stored form of a crew is the JSON
//! of `CrewDef`, so the file format can grow without touching stored runs.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::ids::Role;
use crate::retry::RetryPolicy;
use crate::wait::{Answer, OnDeadline};

pub mod children;
mod fingerprint;
pub mod upgrade_policy;
pub use fingerprint::Fingerprint;

/// A named, versioned, ordered list of agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrewDef {
    pub name: String,
    pub version: String,
    pub agents: Vec<AgentDef>,
    /// The directory `command` steps and command tools run in, and against
    /// which their relative program paths resolve: the crew file's own
    /// directory (absolute) when the crew was loaded from a file. `None`
    /// (a crew built in Rust, or stored before this field existed): the
    /// process's working directory. Not part of the fingerprint (nor are
    /// the directories of the crews its steps start), so a crew file that
    /// moves still resumes its runs, and one loaded from two places is one
    /// version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// The `[budget]` table: its runs' default limits on model use
    /// (`crate::meter::budget`); a submit may override each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::Budget>,
    /// The top-level `upgrade`: whether its runs move to a newer version
    /// (`crate::upgrade`); `None` is [`upgrade_policy::UpgradePolicy`]'s
    /// default, `pinned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<upgrade_policy::UpgradePolicy>,
}

/// One agent of a crew. Optional fields are skipped when absent so that
/// adding a new optional field never changes existing crews' fingerprints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentDef {
    pub role: Role,
    #[serde(flatten)]
    pub kind: AgentKind,
    /// Cut the step off after this long (a retryable failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How failed attempts are retried; `None` is [`RetryPolicy::default`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// A person reviews the step's output before it is committed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
    /// A person approves the step before it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPoint>,
    /// How long this agent's waits stay open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_deadline_ms: Option<u64>,
    /// What an unanswered wait does at its deadline (default: fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_deadline: Option<OnDeadline>,
    /// Variables of Cairn's own environment passed to this agent's programs
    /// (a `command` step, an `llm` agent's command tools) beyond the clean
    /// base ([`BASE_ENV`]): a step never sees the server's tokens or keys
    /// unless its crew names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Pass Cairn's whole environment (except `CAIRN_API_TOKENS`), as before
    /// clean environments existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inherit_env: bool,
}

/// The variables every program a step runs gets from Cairn's environment
/// when they are set; the `CAIRN_*` step variables are added to them.
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// When a person approves a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPoint {
    Before,
}

impl AgentDef {
    /// Whether its step may start child runs: a `children` step, or an
    /// `llm` agent that may `delegate`.
    pub fn starts_children(&self) -> bool {
        matches!(self.kind, AgentKind::Children(_)) || self.delegates().is_some()
    }

    /// The crew files this step may start children of by its own choice
    /// (an `llm` agent's `delegate` tool, a command's spawn request) and,
    /// once loaded, their crews; `None` if it may not.
    pub fn delegates(&self) -> Option<(&[String], &[CrewDef])> {
        let (files, defs) = match &self.kind {
            AgentKind::Llm(llm) => (&llm.delegate, &llm.delegate_defs),
            AgentKind::Command {
                delegate,
                delegate_defs,
                ..
            } => (delegate, delegate_defs),
            _ => return None,
        };
        (!files.is_empty()).then_some((files.as_slice(), defs.as_slice()))
    }

    /// For a step that may `delegate`: the most children it may start over
    /// all its attempts (its `max_children`, default 1,000).
    pub fn delegate_max_children(&self) -> Option<u32> {
        self.delegates()?;
        let set = match &self.kind {
            AgentKind::Llm(llm) => llm.max_children,
            AgentKind::Command { max_children, .. } => *max_children,
            _ => None,
        };
        Some(set.unwrap_or(children::DEFAULT_MAX_CHILDREN))
    }

    /// What is wrong with its `delegate`, if anything: an empty file name,
    /// or (once loaded) two crews of one name, which a step picks by.
    pub fn delegate_problem(&self) -> Option<String> {
        let (files, defs) = self.delegates()?;
        if files.iter().any(|d| d.trim().is_empty()) {
            return Some("has an empty crew file in `delegate`".into());
        }
        if self.delegate_max_children() == Some(0) {
            return Some("has `max_children` of 0".into());
        }
        let mut names = HashSet::new();
        let twice = defs.iter().find(|c| !names.insert(&c.name))?;
        Some(format!(
            "delegates to two crews named `{}`; a child's crew is picked by name",
            twice.name
        ))
    }

    /// What is wrong with its `limits`, if anything: a limit out of
    /// range, none set, or (a command) no `limit_key` to apply them to.
    pub fn limits_problem(&self) -> Option<String> {
        let (limits, keyed) = match &self.kind {
            AgentKind::Llm(llm) => (llm.limits.as_ref()?, true),
            AgentKind::Command {
                limits, limit_key, ..
            } => (limits.as_ref()?, !limit_key.is_empty()),
            _ => return None,
        };
        if let Err(e) = limits.check() {
            return Some(format!("has a bad `limits`: {e}"));
        }
        if !limits.any() {
            return Some(
                "has `limits` that set none: give in_flight, rpm, tpm or max_pause_ms".into(),
            );
        }
        (!keyed).then(|| {
            "has `limits` but no `limit_key`: a command's limits apply to the key it names".into()
        })
    }

    /// An agent with every optional setting at its default.
    pub fn new(role: impl Into<String>, kind: AgentKind) -> Self {
        AgentDef {
            role: Role::new(role),
            kind,
            timeout_ms: None,
            retry: None,
            review: false,
            approval: None,
            wait_deadline_ms: None,
            on_deadline: None,
            env: Vec::new(),
            inherit_env: false,
        }
    }

    /// The retry policy in force.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry.unwrap_or_default()
    }
}

/// What executes an agent's step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentKind {
    /// A program: context JSON on stdin, output on stdout. A non-zero exit
    /// is retryable unless its code is in `permanent_exit_codes`.
    /// With `delegate`, its output may ask for child runs of those crews
    /// (`{"cairn_spawn": …}`, docs/crews.md), and once they settled the
    /// step's output is their outcomes (the program does not run again).
    Command {
        command: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        permanent_exit_codes: Vec<i32>,
        /// Crew files the program may start children of.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        delegate: Vec<String>,
        /// Their crews, loaded with this one (as `LlmDef::delegate_defs`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        delegate_defs: Vec<CrewDef>,
        /// The most children it may start (as `LlmDef::max_children`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_children: Option<u32>,
        /// Labels (`"NAME=VALUE"`) naming a key whose limits the program
        /// runs under (`cairn limits set`): a permit is taken before it
        /// starts (the step waits, no attempt spent, while none is free)
        /// and given back when it ends. Empty: none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        limit_key: Vec<String>,
        /// The limits this crew declares for that key (`crate::meter::declared`),
        /// unless an operator set the key's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limits: Option<crate::KeyLimits>,
    },
    /// A minijinja template rendered from the context.
    Template { template: String },
    /// Rust code registered with the engine under `handler`.
    Rust { handler: String },
    /// An LLM agent: a turn loop of model calls and tool calls, journaled.
    Llm(Box<crate::llm::LlmDef>),
    /// Starts runs of another crew and waits for them (`children.rs`).
    Children(Box<children::ChildrenDef>),
}

impl AgentKind {
    pub fn name(&self) -> &'static str {
        match self {
            AgentKind::Command { .. } => "command",
            AgentKind::Template { .. } => "template",
            AgentKind::Rust { .. } => "rust",
            AgentKind::Llm(_) => "llm",
            AgentKind::Children(_) => "children",
        }
    }
}

/// Why a crew definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CrewError {
    /// The TOML does not parse or has the wrong shape.
    #[error("crew file is not valid: {0}")]
    Syntax(String),
    /// The crew parses but breaks a rule (duplicate role, empty command, …).
    #[error("crew `{crew}` is not valid: {detail}")]
    Invalid { crew: String, detail: String },
}

impl CrewDef {
    /// Parses and validates a crew file (see docs/crews.md for the format).
    pub fn from_toml(text: &str) -> Result<CrewDef, CrewError> {
        let file: CrewFile =
            toml::from_str(text).map_err(|e| CrewError::Syntax(one_line(text, &e)))?;
        let crew = file.into_def()?;
        crew.validate()?;
        Ok(crew)
    }

    /// Checks the rules every crew obeys, however it was built.
    pub fn validate(&self) -> Result<(), CrewError> {
        let invalid = |detail: String| CrewError::Invalid {
            crew: self.name.clone(),
            detail,
        };
        if self.name.trim().is_empty() {
            return Err(invalid("`name` is empty".into()));
        }
        if self.agents.is_empty() {
            return Err(invalid(
                "it has no agents; add at least one [[agents]]".into(),
            ));
        }
        let mut seen = HashSet::new();
        for (i, agent) in self.agents.iter().enumerate() {
            if agent.role.as_str().trim().is_empty() {
                return Err(invalid(format!("agent {i} has an empty `role`")));
            }
            if !seen.insert(agent.role.as_str()) {
                return Err(invalid(format!(
                    "role `{}` appears more than once (agent {i}); roles must be unique",
                    agent.role
                )));
            }
            if let Some(problem) = agent.delegate_problem() {
                return Err(invalid(format!("agent `{}` {problem}", agent.role)));
            }
            if let Some(problem) = agent.retry.and_then(|r| r.problem()) {
                return Err(invalid(format!(
                    "agent `{}` has a bad `retry`: {problem}",
                    agent.role
                )));
            }
            if let Some(problem) = agent.limits_problem() {
                return Err(invalid(format!("agent `{}` {problem}", agent.role)));
            }
            if let AgentKind::Command {
                command, limit_key, ..
            } = &agent.kind
            {
                if let Some(part) = limit_key.iter().find(|p| !crate::llm::is_key_label(p)) {
                    return Err(invalid(format!(
                        "agent `{}` has `limit_key` part `{part}`; a command's key is made of \
                         labels \"NAME=VALUE\" (no commas)",
                        agent.role
                    )));
                }
                if command.first().is_none_or(|p| p.is_empty()) {
                    return Err(invalid(format!(
                        "agent `{}` has an empty `command`; give an argv such as [\"sh\", \"-c\", \"…\"]",
                        agent.role
                    )));
                }
            }
            if let Some(problem) = match &agent.kind {
                AgentKind::Llm(llm) => llm.problem(),
                AgentKind::Children(c) => c.problem(),
                _ => None,
            } {
                return Err(invalid(format!("agent `{}` {problem}", agent.role)));
            }
            if let Some(name) = agent.env.iter().find(|n| !is_env_name(n)) {
                return Err(invalid(format!(
                    "agent `{}` has `env` entry {name:?}, which is not a variable name (letters, digits and `_`, not starting with a digit)",
                    agent.role
                )));
            }
            if (!agent.env.is_empty() || agent.inherit_env)
                && matches!(
                    agent.kind,
                    AgentKind::Template { .. } | AgentKind::Children(_)
                )
            {
                return Err(invalid(format!(
                    "agent `{}` of kind `{}` runs no program, so it takes no `env` or `inherit_env`",
                    agent.role,
                    agent.kind.name()
                )));
            }
            if agent.timeout_ms == Some(0) {
                return Err(invalid(format!(
                    "agent `{}` has `timeout_ms = 0`",
                    agent.role
                )));
            }
        }
        Ok(())
    }

    /// The stored JSON form (the input of the fingerprint, without its
    /// directories: `fingerprint.rs`).
    pub fn to_json(&self) -> serde_json::Value {
        // A struct of strings, vectors and enums always serializes.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    pub fn step_count(&self) -> u32 {
        self.agents.len() as u32
    }

    /// Whether a step of this crew starts children: only its runs can have
    /// any, so only theirs are worth looking up.
    pub fn starts_children(&self) -> bool {
        self.agents.iter().any(AgentDef::starts_children)
    }
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A TOML error as one line: `line L, column C: message`.
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
        [
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
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map(|(k, _)| k)
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

    /// The name of the first `children`-only key this agent sets, if any.
    fn children_key(&self) -> Option<&'static str> {
        [
            ("crew", self.crew.is_some()),
            ("over", self.over.is_some()),
            ("children", self.children.is_some()),
            ("join", self.join.is_some()),
            ("quorum", self.quorum.is_some()),
            ("concurrency", self.concurrency.is_some()),
            ("max_children", self.max_children.is_some()),
            ("max_depth", self.max_depth.is_some()),
            ("on_parent_close", self.on_parent_close.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map(|(k, _)| k)
    }
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
                "children" => match children {
                    Some(Ok(kind)) => kind,
                    None => return Err(missing("crew")),
                    Some(Err(FieldProblem::Unexpected(field))) => return Err(unexpected(field)),
                    Some(Err(FieldProblem::Missing(field))) => return Err(missing(field)),
                },
                "llm" => {
                    if a.command.is_some() {
                        return Err(unexpected("command"));
                    }
                    if a.template.is_some() {
                        return Err(unexpected("template"));
                    }
                    if a.permanent_exit_codes.is_some() {
                        return Err(unexpected("permanent_exit_codes"));
                    }
                    let provider = a.provider.ok_or_else(|| missing("provider"))?;
                    let model = match (a.model, provider) {
                        (Some(m), _) => m,
                        (None, crate::llm::ProviderKind::Scripted) => "scripted".to_owned(),
                        (None, _) => return Err(missing("model")),
                    };
                    let tools = a.tools.unwrap_or_default();
                    let tools = tools.into_iter().map(ToolFile::into_def).collect();
                    AgentKind::Llm(Box::new(crate::llm::LlmDef {
                        instructions: a.instructions,
                        max_turns: a.max_turns,
                        base_url: a.base_url,
                        api_key_env: a.api_key_env,
                        max_tokens: a.max_tokens,
                        temperature: a.temperature,
                        window_items: a.window_items,
                        window_tokens: a.window_tokens,
                        stream_timeout_ms: a.stream_timeout_ms,
                        script: a.script,
                        tools,
                        ask_human: a.ask_human.unwrap_or(false),
                        thread_history: a.thread_history,
                        delegate: a.delegate.unwrap_or_default(),
                        max_children: delegated_max,
                        limit_key: a.limit_key.unwrap_or_default(),
                        limits: a.limits.map(LimitsFile::into_limits),
                        ..crate::llm::LlmDef::new(provider, model)
                    }))
                }
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
                        "agent `{role}` has unknown kind `{other}` (known: command, template, llm, children)"
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

#[cfg(test)]
mod tests;
