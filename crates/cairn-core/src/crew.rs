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
mod file;
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
    /// Who may answer this agent's waits and how many must agree
    /// (`[agents.approvers]`; none: any operator, one answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<crate::people::approvers::Approvers>,
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
            approvers: None,
            env: Vec::new(),
            inherit_env: false,
        }
    }

    /// The retry policy in force.
    /// Whether its steps can wait for a person: a review, an approval, or
    /// an `llm` agent's `ask_human` questions.
    pub fn opens_waits(&self) -> bool {
        self.review
            || self.approval.is_some()
            || matches!(&self.kind, AgentKind::Llm(llm) if llm.ask_human)
    }

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
    /// Waits for a signal by name (`crate::signal`).
    Signal(Box<crate::signal::SignalDef>),
}

impl AgentKind {
    /// A program run as `argv`, and nothing more: no permanent exit codes,
    /// no delegation, no key.
    pub fn command(argv: Vec<String>) -> AgentKind {
        AgentKind::Command {
            command: argv,
            permanent_exit_codes: vec![],
            delegate: vec![],
            delegate_defs: vec![],
            max_children: None,
            limit_key: vec![],
            limits: None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            AgentKind::Command { .. } => "command",
            AgentKind::Template { .. } => "template",
            AgentKind::Rust { .. } => "rust",
            AgentKind::Llm(_) => "llm",
            AgentKind::Children(_) => "children",
            AgentKind::Signal(_) => "signal",
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
        let crew = file::parse(text)?;
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
                AgentKind::Signal(s) if agent.review => {
                    Some("waits for a signal, so it takes no `review`".into())
                }
                AgentKind::Signal(s) => s.problem(),
                _ => None,
            } {
                return Err(invalid(format!("agent `{}` {problem}", agent.role)));
            }
            if let Some(problem) = agent.approvers.as_ref().and_then(|p| p.check().err()) {
                return Err(invalid(format!(
                    "agent `{}` approvers: {problem}",
                    agent.role
                )));
            }
            if agent.approvers.is_some() && !agent.opens_waits() {
                return Err(invalid(format!(
                    "agent `{}` has [agents.approvers] but never waits for a person: add `review = true`, `approval = \"before\"` or (an llm agent) `ask_human = true`",
                    agent.role
                )));
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
                    AgentKind::Template { .. } | AgentKind::Children(_) | AgentKind::Signal(_)
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

    /// Whether a step of this crew waits for signals: only its runs are
    /// worth looking up for them.
    pub fn listens(&self) -> bool {
        self.agents
            .iter()
            .any(|a| matches!(a.kind, AgentKind::Signal(_)))
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
#[cfg(test)]
mod tests;
