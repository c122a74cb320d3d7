//! Cairn's domain model: typed ids, crews and their fingerprints, run and step
//! statuses with their allowed transitions, checkpoint rows, events, and the
//! accumulated-context rebuild; and a Server-Sent Events decoder ([`sse`]),
//! fed the bytes others read. This crate performs no I/O: storage, processes
//! and the network live in other crates.

pub mod agent;
pub mod caps;
pub mod checkpoint;
pub mod children;
pub mod context;
pub mod crew;
pub mod error;
pub mod event;
pub mod hook;
pub mod ids;
pub mod journal;
pub mod llm;
pub mod meter;
pub mod people;
pub mod priority;
pub mod published;
pub mod retry;
pub mod schedule;
pub mod signal;
pub mod sse;
pub mod status;
pub mod stop;
pub mod text;
pub mod trace;
pub mod upgrade;
pub mod wait;

pub use agent::{Agent, StepOutput};
pub use caps::{
    check_size, check_storable, check_text, json_has_nul, Limits, TooLarge, Unstorable,
};
pub use checkpoint::{ErrorInfo, ErrorKind, RunRecord, StepRecord, Usage};
pub use children::{
    child_id, ChildOf, ChildOutcome, ChildrenDef, FixedChild, JoinCounts, JoinRule, JoinState,
    Joined, OnParentClose, Spawn,
};
pub use context::{
    newest_within, rebuild, rebuild_owned, PreviousOutput, Rebuilt, StepContext, StepRef,
    StepServices, ThreadTurn,
};
pub use crew::{AgentDef, AgentKind, ApprovalPoint, CrewDef, CrewError, Fingerprint, BASE_ENV};
pub use error::Corruption;
pub use event::{Actor, EventData, EventDecodeError, EventKind, EventRecord, NewEvent};
pub use hook::{BadHook, Hook, Scheme};
pub use ids::{Attempt, Fence, LeaseEpoch, Role, RunId, StepIdx};
pub use journal::{
    Journal, JournalEntry, JournalError, JournalHandle, JournalKind, NewJournalItem, OutputDelta,
};
pub use llm::{KeyVars, LlmDef, ProviderKind, ToolDef, DELEGATE_TOOL};
pub use meter::budget::{budget_key, BadBudget, Budget, BudgetAsk, Spent, TreeAnswer};
pub use meter::declared::{BadLimitTable, Declared, LimitTable, LimitsFrom};
pub use meter::keys::{
    check_key, check_pause, format_age, Admission, BadKey, BadLimit, Buckets, Decision, Held,
    KeyAsk, KeyLimits, KeyPause, KeyState, PauseTooLong, Paused, Permit, DEFAULT_MAX_PAUSE,
    LONGEST_PAUSE, MAX_KEY_BYTES,
};
pub use meter::price::{BadPrices, CallTokens, Price, PriceTable, Usd};
pub use meter::tenant::{BadTenant, Tenant};
pub use meter::{CallEstimate, Meter, MeterHandle, SentCall, StepMeter};
pub use people::approvers::{
    digest as wait_digest, tally, Approvers, Ballot, Ineligible, Tally, Voter,
};
pub use people::{
    Access, AuditEntry, AuditFilter, BadPrincipal, NewPrincipal, Origin, Principal, Via,
};
pub use priority::{BadPriority, Priority};
pub use published::{BadPublish, PublishError, Published};
pub use retry::RetryPolicy;
pub use schedule::{BadSchedule, Cadence, CatchUp, Overlap, Schedule, SlotOutcome};
pub use signal::{Heard, Listen, Signal, SignalDef, Target};
pub use status::{RunStatus, StepStatus, TransitionError};
pub use stop::{Deferral, Stop};
pub use trace::{BadSampler, BadTraceparent, Sampler, SpanId, TraceContext, TraceId, Tracing};
pub use wait::{Answer, NewWait, OnDeadline, Question, WaitId, WaitKind, WaitRecord, WaitStatus};
