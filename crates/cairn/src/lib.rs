//! Cairn: durable, resumable multi-step runs.
//!
//! A [`Crew`] is an ordered list of agents; a run executes them one step at a
//! time, and every finished step is one atomic checkpoint row. A run that
//! dies resumes at its first pending step through the same executor.
//!
//! ```no_run
//! use cairn::{async_trait, Agent, Crew, Engine, StepContext, StepOutput, Stop};
//!
//! struct Shout;
//!
//! #[async_trait]
//! impl Agent for Shout {
//!     async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
//!         let topic = cx.input["topic"].as_str().unwrap_or("nothing");
//!         Ok(StepOutput::new(topic.to_uppercase()))
//!     }
//! }
//!
//! # async fn example() -> Result<(), cairn::Error> {
//! let engine = Engine::open("sqlite://cairn.db").await?;
//! let crew = Crew::builder("shouting", "1")
//!     .agent("shouter", Shout)
//!     .template("writer", "{{ outputs.shouter }}!")
//!     .build()?;
//! let done = engine.run(&crew, serde_json::json!({"topic": "rust"}), Default::default()).await?;
//! println!("{} {}", done.run.id, done.run.status);
//! # Ok(()) }
//! ```

pub mod crew_keys;
mod engine;
mod error;
pub mod holder;
pub mod hooks;
mod limits;
mod load;
mod notify;
pub mod otel;
pub mod people;
mod published;
mod retention;
pub mod schedules;
pub mod signals;
mod standing;
pub mod step_time;
mod thread;
mod work;

use std::sync::Arc;

pub use async_trait::async_trait;
/// LLM agents: the turn loop, tools and transcript rules (`cairn-agent`).
pub use cairn_agent as agent;
/// Statements this process sent to its databases so far (`/metrics`).
pub use cairn_checkpoint::counters::statements as store_statements;
/// The storage contract's traits, for callers of [`Store`]'s methods:
/// `use cairn::store_prelude::*;`.
pub use cairn_checkpoint::prelude as store_prelude;
pub use cairn_checkpoint::DbFault;
/// What storage refuses or fails with (inside [`Error::Store`]).
pub use cairn_checkpoint::Error as StoreError;
pub use cairn_checkpoint::{
    Backend, BlockedRun, Claimed, CompactPolicy, Compacted, CrewMove, CrewUpgrade, CrewVersion,
    ForkRequest, LiveHub, Offered, OnBusy, OpenOptions, Pooler, ProcessRecord, RunFilter, Started,
    Store, StoreStats, Submitted, Takeover, ThreadBudget, ThreadPage, ThreadSummary, WaitFilter,
    DEFAULT_MAX_CONNECTIONS as DEFAULT_DB_CONNECTIONS,
};
pub use cairn_checkpoint::{LinkRecord, NewLink, NoticeAttempt};
pub use cairn_checkpoint::{Listening, NewSchedule, Sent, Slot};
/// The database's replication setup (`cairn doctor`, `/readyz`).
pub use cairn_checkpoint::{Replication, Standby};
/// The per-run event log's kinds and their typed payloads
/// ([`event::payload`], one type per kind: [`EventData`]).
pub use cairn_core::event;
/// Schedules: cadences in time zones, overlap and catch-up policies.
pub use cairn_core::schedule;
/// Server-Sent Events: an incremental decoder and a stream of events over a
/// stream of byte chunks.
pub use cairn_core::sse;
/// Text that reaches people: URLs without passwords, terminal-safe text.
pub use cairn_core::text;
/// Crew versions: the compatibility rule, the upgrade policies, diffs.
pub use cairn_core::upgrade;
/// Provider keys' rules: the names operators give, the longest pauses.
pub use cairn_core::{
    check_key, check_pause, format_age, BadKey, PauseTooLong, DEFAULT_MAX_PAUSE, LONGEST_PAUSE,
    MAX_KEY_BYTES,
};
/// People: principals, the channels actions come through, the audit.
pub use cairn_core::{
    Access, Approvers, AuditEntry, AuditFilter, BadPrincipal, Ballot, NewPrincipal, Origin,
    Principal, Via, Voter,
};
pub use cairn_core::{
    Actor, Agent, AgentDef, AgentKind, Answer, ApprovalPoint, Attempt, Budget, ChildOf,
    ChildOutcome, ChildrenDef, Corruption, CrewDef, ErrorInfo, ErrorKind, EventData, EventKind,
    EventRecord, Fingerprint, JoinRule, JournalEntry, JournalKind, KeyLimits, KeyPause, KeyState,
    LimitTable, LimitsFrom, LlmDef, OnDeadline, OutputDelta, Price, PriceTable, Priority,
    ProviderKind, RetryPolicy, Role, RunId, RunRecord, RunStatus, Spent, StepContext, StepIdx,
    StepOutput, StepRecord, StepStatus, Stop, Tenant, ToolDef, TraceContext, Usage, Usd, WaitId,
    WaitKind, WaitRecord, WaitStatus,
};
pub use cairn_core::{BadHook, Hook, Scheme};
pub use cairn_core::{Cadence, CatchUp, Overlap, Schedule, SlotOutcome};
pub use cairn_core::{PublishError, Published, Signal, Target};
/// Model providers (`cairn-llm`).
pub use cairn_llm as llm;
/// What the executor refuses or fails with (inside [`Error::Executor`]).
pub use cairn_scheduler::Error as ExecutorError;
pub use cairn_scheduler::{Crew as ExecCrew, DriveOptions, Driven, ExecutorConfig};
pub use engine::{
    Checkup, CorruptRun, CrewDiff, Engine, ResumeOptions, RunView, SubmitOptions, UpgradeVerdict,
    VersionRef,
};
pub use error::{Error, ErrorChain, ErrorClass};
pub use hooks::{Delivery, HookIssued, HookSpec};
pub use notify::LinkUse;
pub use people::{local_actor, Issued, OpenedSession, Session};
pub use retention::{parse_age, BadAge};
pub use schedules::{Listed, Scheduled};
pub use signals::{RunSignals, SignalRequest, StartRequest};
pub use standing::ChildrenWait;
pub use step_time::StepTime;
pub use thread::{BadThreadId, ThreadId, ThreadTotals, ThreadView, MAX_THREAD_ID_BYTES};
pub use work::{WakeUp, WorkHooks, WorkOptions};

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A crew ready to run: built in Rust with [`Crew::builder`] or loaded from
/// a TOML crew file with [`Crew::from_toml`].
#[derive(Clone, Debug)]
pub struct Crew(pub(crate) cairn_scheduler::Crew);

impl Crew {
    /// Starts a crew in Rust code.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> CrewBuilder {
        CrewBuilder {
            name: name.into(),
            version: version.into(),
            agents: vec![],
        }
    }

    /// Parses a crew file's text (built-in kinds only). Relative paths in
    /// it (an `llm` agent's `script`) are taken from the working directory.
    pub fn from_toml(text: &str) -> Result<Crew> {
        Self::from_def(CrewDef::from_toml(text)?, |_, _| None)
    }

    /// Reads and parses a crew file.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Crew> {
        Self::from_file_offering(path, &|_| None)
    }

    /// Reads and parses a crew file whose steps may start children of a
    /// crew by name (`crew = "review"`, not a file) as well as by file:
    /// `offered` gives the definition a name stands for (a server's newest
    /// version of an offered crew), `None` if it offers none.
    pub fn from_file_offering(
        path: impl AsRef<std::path::Path>,
        offered: &dyn Fn(&str) -> Option<CrewDef>,
    ) -> Result<Crew> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(std::path::Path::new("."));
        // Relative paths of the crew resolve against its file's directory,
        // whatever the working directory of the process that runs it.
        let base = std::fs::canonicalize(if base.as_os_str().is_empty() {
            std::path::Path::new(".")
        } else {
            base
        })
        .unwrap_or_else(|_| base.to_owned());
        let base = base.as_path();
        load::Loader { offered }
            .def_from_file(&text, base, 0)
            .and_then(|def| Self::from_def(def, |_, _| None))
            .map_err(|e| match e {
                Error::Crew(source) => Error::CrewFile {
                    path: path.to_owned(),
                    source,
                },
                e => e,
            })
    }

    /// Builds executors for a definition: built-ins, plus Rust agents that
    /// `rust(index, def)` supplies.
    pub(crate) fn from_def(
        def: CrewDef,
        mut rust: impl FnMut(usize, &AgentDef) -> Option<Arc<dyn Agent>>,
    ) -> Result<Crew> {
        let mut agents = Vec::with_capacity(def.agents.len());
        for (i, a) in def.agents.iter().enumerate() {
            if let Some((files, defs)) = a.delegates() {
                if defs.len() != files.len() {
                    return Err(Error::Crew(cairn_core::CrewError::Invalid {
                        crew: def.name.clone(),
                        detail: format!(
                            "agent `{}` delegates to crew files that were not loaded; load the \
                             crew with `Crew::from_file`, which reads them relative to the crew file",
                            a.role
                        ),
                    }));
                }
            }
            if let AgentKind::Children(c) = &a.kind {
                if c.crew_def.is_none()
                    || c.children
                        .iter()
                        .filter_map(|f| f.crew.as_ref())
                        .any(|f| !c.child_crews.contains_key(f))
                {
                    return Err(Error::Crew(cairn_core::CrewError::Invalid {
                        crew: def.name.clone(),
                        detail: format!(
                            "agent `{}` names crew `{}`, which was not loaded; load the crew \
                             with `Crew::from_file`, which reads it relative to the crew file",
                            a.role, c.crew
                        ),
                    }));
                }
            }
            let dir = def.dir.as_deref();
            let builtin = match cairn_steps::builtin(&def.name, dir, a)? {
                Some(agent) => Some(agent),
                None => cairn_agent::build(&def.name, dir, a)?,
            };
            let agent = match builtin {
                Some(agent) => agent,
                None => rust(i, a).ok_or_else(|| Error::MissingHandler {
                    role: a.role.to_string(),
                    handler: match &a.kind {
                        AgentKind::Rust { handler } => handler.clone(),
                        other => other.name().to_owned(),
                    },
                })?,
            };
            agents.push(agent);
        }
        Ok(Crew(cairn_scheduler::Crew::new(def, agents)?))
    }

    pub fn def(&self) -> &CrewDef {
        self.0.def()
    }

    pub fn fingerprint(&self) -> &Fingerprint {
        self.0.fingerprint()
    }
}

/// A journal item with the step it belongs to (`cairn runs journal`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepJournalEntry {
    pub idx: cairn_core::StepIdx,
    #[serde(flatten)]
    pub entry: cairn_core::JournalEntry,
}

/// Builds a [`Crew`] in Rust.
pub struct CrewBuilder {
    name: String,
    version: String,
    agents: Vec<(AgentDef, Option<Arc<dyn Agent>>)>,
}

impl CrewBuilder {
    /// Adds a Rust agent. Its handler name (stored with the run, part of the
    /// fingerprint) is the agent's type name; use [`CrewBuilder::agent_named`]
    /// to pick a stable one, and change it (e.g. `"writer-v2"`) when the
    /// agent's behaviour changes, so resumes of older runs are refused.
    pub fn agent<A: Agent + 'static>(self, role: impl Into<String>, agent: A) -> Self {
        let handler = std::any::type_name::<A>().to_owned();
        self.agent_named(role, handler, agent)
    }

    /// Adds a Rust agent under an explicit handler name.
    pub fn agent_named<A: Agent + 'static>(
        mut self,
        role: impl Into<String>,
        handler: impl Into<String>,
        agent: A,
    ) -> Self {
        let def = AgentDef::new(
            role,
            AgentKind::Rust {
                handler: handler.into(),
            },
        );
        self.agents.push((def, Some(Arc::new(agent))));
        self
    }

    /// Adds a `command` agent.
    pub fn command<S: Into<String>>(
        mut self,
        role: impl Into<String>,
        argv: impl IntoIterator<Item = S>,
    ) -> Self {
        let argv = argv.into_iter().map(Into::into).collect();
        let def = AgentDef::new(role, AgentKind::command(argv));
        self.agents.push((def, None));
        self
    }

    /// Adds a `template` agent.
    pub fn template(mut self, role: impl Into<String>, template: impl Into<String>) -> Self {
        let def = AgentDef::new(
            role,
            AgentKind::Template {
                template: template.into(),
            },
        );
        self.agents.push((def, None));
        self
    }

    /// Sets the retry policy of the agent added last.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        if let Some((def, _)) = self.agents.last_mut() {
            def.retry = Some(policy);
        }
        self
    }

    /// A person reviews the output of the agent added last before it is
    /// committed (approve, edit, or reject with feedback).
    pub fn review(mut self) -> Self {
        if let Some((def, _)) = self.agents.last_mut() {
            def.review = true;
        }
        self
    }

    /// A person approves the agent added last before it runs.
    pub fn approval_before(mut self) -> Self {
        if let Some((def, _)) = self.agents.last_mut() {
            def.approval = Some(ApprovalPoint::Before);
        }
        self
    }

    /// The waits of the agent added last close after `deadline`, with `outcome`.
    pub fn wait_deadline(mut self, deadline: std::time::Duration, outcome: OnDeadline) -> Self {
        if let Some((def, _)) = self.agents.last_mut() {
            def.wait_deadline_ms = Some(deadline.as_millis() as u64);
            def.on_deadline = Some(outcome);
        }
        self
    }

    /// Sets the timeout of the agent added last.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        if let Some((def, _)) = self.agents.last_mut() {
            def.timeout_ms = Some(timeout.as_millis() as u64);
        }
        self
    }

    pub fn build(self) -> Result<Crew> {
        let def = CrewDef {
            name: self.name,
            version: self.version,
            agents: self.agents.iter().map(|(d, _)| d.clone()).collect(),
            dir: None,
            budget: None,
            upgrade: None,
        };
        let rust: Vec<Option<Arc<dyn Agent>>> = self.agents.into_iter().map(|(_, a)| a).collect();
        Crew::from_def(def, |i, _| rust.get(i).cloned().flatten())
    }
}
