//! What a command asks of Cairn, as one trait ([`Api`]) with two
//! implementations: [`local::Local`] over the database (`--db`, the
//! `cairn` library's `Engine`) and [`remote::Remote`] over a `cairn serve`
//! (`--server`, the HTTP API). Each command is written once against the
//! trait (`commands/`), so the two modes print the same text and JSON and
//! exit with the same codes.
//!
//! The one difference a command sees: where runs execute. Locally this
//! process executes a run to its next stop ([`Api::advance`]); against a
//! server its workers do, and [`Api::advance`] waits until they have.

pub mod local;
pub mod remote;
pub mod schedules;
pub mod signals;

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use cairn::{
    Actor, Answer, CompactPolicy, Compacted, CrewDiff, EventRecord, ForkRequest, KeyState,
    RunFilter, RunId, RunRecord, RunStatus, RunView, StepJournalEntry, SubmitOptions, ThreadBudget,
    ThreadPage, ThreadSummary, ThreadView, UpgradeVerdict, WaitFilter, WaitId, WaitRecord,
};

/// The crew a `run` or `submit` names.
pub enum CrewRef {
    /// A crew file, read (and its path).
    File(Box<cairn::Crew>, std::path::PathBuf),
    /// With a server, the name of a crew it loaded, and the version
    /// (`--crew-version`; `None`: its newest).
    Named(String, Option<String>),
}

/// A submitted run, as `run` goes on with it.
pub struct Submission {
    pub run: RunRecord,
    /// This submission stored the run (not a repeated idempotency key).
    /// Known locally; a server's answer does not say, so `false` there.
    pub created: bool,
    /// The crew as loaded here, for executing the run (local only).
    pub crew: Option<cairn::Crew>,
    /// The claim made with the submit ([`Api::start`], local only).
    pub claimed: Option<cairn::Claimed>,
}

/// A crew version a command names: a stored (or, with a server, loaded)
/// version or fingerprint start, or a crew file (local only).
pub enum VersionArg {
    Named(String),
    File(Box<cairn::Crew>, std::path::PathBuf),
}

/// An operator's action on one run.
pub enum Act<'a> {
    /// `rerun_children`: a `children` step starts every child again.
    Retry {
        rerun_children: bool,
    },
    /// `raise`: the run's budget raised first, in the same transaction
    /// (`runs continue --budget`): a refused continue writes no raise.
    Continue {
        raise: Option<cairn::Budget>,
    },
    Cancel,
    /// A new run from this one; the action returns the new run.
    Fork(&'a ForkRequest),
}

impl Act<'_> {
    /// The action's name in the API's paths (`/v1/runs/{id}/{name}`).
    pub fn name(&self) -> &'static str {
        match self {
            Act::Retry { .. } => "retry",
            Act::Continue { .. } => "continue",
            Act::Cancel => "cancel",
            Act::Fork(_) => "fork",
        }
    }
}

/// `Ok(None)`: Ctrl-C stopped the execution (the run is resumable; the
/// command exits [`crate::report::exit::INTERRUPTED`]).
pub type Interruptible = Result<Option<()>>;

/// What a command asks of Cairn: the same questions locally and over HTTP.
#[allow(async_fn_in_trait)]
pub trait Api {
    /// The engine, when the database is here: what only makes sense next
    /// to it (`resume`, `doctor`, `waits expire`, `--crew` files, progress
    /// lines) asks for it, and is refused with a server.
    fn engine(&self) -> Option<&cairn::Engine>;

    /// Submits a run of `crew`.
    async fn submit(&self, crew: CrewRef, input: Value, opts: SubmitOptions) -> Result<Submission>;

    /// Submits a run of `crew` that `run` takes to its next stop at once:
    /// locally the submit and the first claim are one transaction
    /// ([`cairn::Engine::start`]); a server's workers claim it themselves.
    async fn start(&self, crew: CrewRef, input: Value, opts: SubmitOptions) -> Result<Submission> {
        self.submit(crew, input, opts).await
    }

    /// Takes a submitted run to its next stop: executes it here (following
    /// it if a worker claimed it first; `lines` prints progress), or waits
    /// for a server's workers.
    async fn drive(&self, submitted: Submission, lines: bool) -> Interruptible;

    /// After an action or an answer: takes run `id` to its next stop if it
    /// is queued (here), or waits while a server's workers have it.
    async fn advance(&self, id: RunId) -> Interruptible;

    async fn show(&self, id: RunId) -> Result<RunView>;

    /// One page of runs (`filter.limit`, after `filter.after`, in the
    /// order `filter.newest_first` says).
    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;

    async fn waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>>;

    /// Answers wait `id`.
    async fn answer(&self, id: WaitId, answering: &Answering) -> Result<WaitRecord>;

    /// The run's events, each given to `each` as it is read: the stored
    /// ones (locally, or over HTTP with `follow` false: the event stream
    /// with `follow=false`), or the server's stream until the run ends.
    async fn events(&self, id: RunId, follow: bool, each: EachEvent<'_>) -> Result<()>;

    async fn journal(&self, id: RunId, step: Option<u32>) -> Result<Vec<StepJournalEntry>>;

    /// `runs watch`: follows the run, printing as it goes, to its end.
    async fn watch(&self, id: RunId, json: bool) -> Result<RunStatus>;

    /// Records an operator's action; the run acted on (a fork: the new run).
    async fn act(&self, id: RunId, act: Act<'_>, actor: &Actor) -> Result<RunRecord>;

    /// A page of threads (every one with the default page).
    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>>;

    async fn thread(&self, id: &str) -> Result<ThreadView>;

    /// Sets (or raises) thread `id`'s budget.
    async fn set_thread_budget(&self, id: &str, change: &BudgetChange) -> Result<ThreadBudget>;

    async fn compact(&self, policy: &CompactPolicy) -> Result<Compacted>;
    /// Every provider key a pause ever named.
    async fn keys(&self) -> Result<Vec<KeyState>>;
    /// Pauses `key` for every run for `wait`.
    async fn pause_key(&self, key: &str, wait: Duration, actor: &Actor) -> Result<KeyState>;
    /// Ends `key`'s pause.
    async fn resume_key(&self, key: &str) -> Result<KeyState>;
    /// Drops `key`'s limits (an operator's included).
    async fn reset_limits(&self, key: &str) -> Result<KeyState>;
    /// Replaces `key`'s limits.
    async fn set_limits(&self, key: &str, limits: &cairn::KeyLimits) -> Result<KeyState>;
    /// A schedule action (`cairn schedules`, but `create`).
    async fn schedules(&self, act: schedules::ScheduleAct) -> Result<schedules::ScheduleOut>;
    /// Creates a schedule of `crew`.
    async fn create_schedule(
        &self,
        crew: CrewRef,
        spec: schedules::ScheduleSpec,
    ) -> Result<cairn::Schedule>;
    /// A signal action (`cairn signal`).
    async fn signals(&self, act: signals::SignalAct) -> Result<signals::SignalOut>;
    /// Principals, by name (never a token).
    async fn principals(&self) -> Result<Vec<cairn::Principal>>;
    /// Adds a principal and issues its token.
    async fn add_principal(&self, new: &cairn::NewPrincipal) -> Result<cairn::Issued>;
    /// Disables a principal.
    async fn disable_principal(&self, name: &str) -> Result<cairn::Principal>;
    /// Issues a principal a new token.
    async fn rotate_token(&self, name: &str) -> Result<cairn::Issued>;
    /// Audit entries, oldest first.
    async fn audit(&self, filter: &cairn::AuditFilter) -> Result<Vec<cairn::AuditEntry>>;
    /// The processes in the registry, with what each offers.
    async fn workers(&self) -> Result<Vec<cairn::ProcessRecord>>;
    /// Every crew version a run was stored with.
    async fn crew_versions(&self) -> Result<Vec<cairn::CrewVersion>>;
    /// A stored definition of crew `name` (`None`: its newest).
    async fn crew_definition(&self, name: &str, version: Option<&str>) -> Result<cairn::CrewDef>;
    /// How `to` differs from `from`, and which runs of `from` can move.
    async fn crew_diff(&self, name: &str, from: &VersionArg, to: &VersionArg) -> Result<CrewDiff>;
    /// Moves the unfinished runs of crew `name` (or only `how.run`) that can
    /// move to `how.to`.
    async fn upgrade(&self, name: &str, how: &Upgrade) -> Result<Vec<UpgradeVerdict>>;
}

/// What [`Api::events`] gives each event to.
pub type EachEvent<'a> = &'a mut dyn FnMut(EventRecord) -> Result<()>;

/// An answer as `waits answer` gives it: the decision, who gives it, and
/// (`--digest`) what the wait must ask about for it to count.
pub struct Answering {
    pub answer: Answer,
    pub actor: Actor,
    pub digest: Option<String>,
}

/// A thread budget as `threads budget` gives it: limits to set, or (with
/// `raise`) to raise, and who does it.
pub struct BudgetChange {
    pub budget: cairn::Budget,
    pub raise: bool,
    pub actor: Actor,
}

/// How `runs upgrade` moves runs.
pub struct Upgrade {
    /// The version they move to.
    pub to: VersionArg,
    pub run: Option<RunId>,
    pub dry_run: bool,
    pub force: bool,
    pub actor: Actor,
}

/// Where a command's [`Api`] comes from, reached only once what was typed
/// has been read (a typo must not open, or migrate, a database).
#[allow(async_fn_in_trait)]
pub trait Connect {
    type Api: Api;

    /// The crew a `run` or `submit` argument names, read before connecting.
    fn read_crew(&self, arg: &Path) -> Result<CrewRef>;

    /// `create`: a missing SQLite file may be created (`run`, `submit`).
    async fn connect(&self, create: bool) -> Result<Self::Api>;
}

/// The waits of run `id`, any status (what `runs show` prints with it).
pub async fn run_waits(api: &impl Api, id: RunId) -> Result<Vec<WaitRecord>> {
    api.waits(&WaitFilter {
        run: Some(id),
        ..WaitFilter::default()
    })
    .await
}

/// The events of `view`'s run when one of its steps started children (the
/// step's time runs from their spawn to their join); none otherwise, so a
/// run without children costs no read.
pub async fn children_events(api: &impl Api, view: &RunView) -> Result<Vec<EventRecord>> {
    if view.children.is_empty() {
        return Ok(vec![]);
    }
    let mut events = vec![];
    api.events(view.run.id, false, &mut |e| {
        events.push(e);
        Ok(())
    })
    .await?;
    Ok(events)
}
