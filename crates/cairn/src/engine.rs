//! The [`Engine`]: a store plus the executor, with the calls a service makes
//! (submit, run, resume, show, list). The worker loop is in `work.rs`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde_json::Value;

use cairn_checkpoint::{
    Action, ClaimRequest, Claimed, ForkRequest, NewRun, OnBusy, OpenOptions, Started, Store,
    Submitted, Takeover, WaitFilter,
};
use cairn_core::{
    Actor, Answer, Fingerprint, OnDeadline, RunId, RunRecord, StepRecord, WaitId, WaitRecord,
};
use cairn_scheduler::{DriveOptions, Driven, Executor, ExecutorConfig};

use crate::{Crew, Result};

/// Options of a submit.
#[derive(Debug, Clone, Default)]
pub struct SubmitOptions {
    /// Submitting again with the same key returns the same run.
    pub idempotency_key: Option<String>,
    /// Groups runs into one conversation: 1 to 256 bytes, no NUL
    /// character ([`crate::ThreadId`]); anything else is refused
    /// ([`crate::Error::BadThreadId`]) before anything is stored.
    pub thread_id: Option<String>,
    /// What to do when the thread has a run that is not done yet.
    pub on_busy: OnBusy,
    /// Claim order: higher first, with ageing (a point is a minute's head
    /// start over a run submitted at the same moment); children inherit it.
    pub priority: cairn_core::Priority,
    /// Whose run it is ([`cairn_core::Tenant`]: 1 to 128 bytes, no control
    /// character, `,` or `=`; else [`crate::Error::BadTenant`], nothing
    /// stored): claims go round-robin across tenants within a priority;
    /// children and forks inherit it.
    pub tenant: Option<String>,
    /// Limits on the run's model use, over its crew's `[budget]` per limit.
    pub budget: Option<cairn_core::Budget>,
    /// The caller's trace (a W3C `traceparent`): the run's spans join it.
    pub traceparent: Option<cairn_core::TraceContext>,
    /// The run's own upgrade policy, over its crew's (`crate::upgrade`).
    pub upgrade: Option<cairn_core::upgrade::UpgradePolicy>,
    /// Who submits (recorded on `run_submitted`, and in the audit when it
    /// names a channel).
    pub by: Option<cairn_core::Actor>,
}

/// Options of a resume.
#[derive(Debug, Clone, Default)]
pub struct ResumeOptions {
    /// Resume with this crew instead of the one stored with the run. Refused
    /// if its fingerprint differs, unless `force`.
    pub crew: Option<Crew>,
    pub force: bool,
    /// The thread the run must belong to: a run of another thread (or of
    /// none) is refused ([`crate::Error::WrongThread`]) before anything is
    /// written.
    pub thread_id: Option<String>,
    /// Take the run over even if its lease is live (its holder may still be
    /// running the step; fencing stops it at its next write). Without it, a
    /// running run is resumed only once its lease expired: a live one is
    /// refused naming its holder and when the lease expires.
    pub takeover: bool,
    /// Merge this JSON object into the input the remaining steps see
    /// (its keys replace the input's), recorded as a `context_added` event
    /// with who and why; finished steps and their outputs are untouched.
    /// An interrupted run is continued with it (as `continue_run`, by the
    /// same actor); a finished run is refused before anything is written.
    pub context: Option<(Value, Actor)>,
}

impl ResumeOptions {
    /// A resume that runs `crew` (registered for the run's version), and
    /// otherwise as [`ResumeOptions::default`].
    pub fn with_crew(crew: Crew) -> ResumeOptions {
        ResumeOptions {
            crew: Some(crew),
            ..ResumeOptions::default()
        }
    }
}

/// A run with its checkpoint rows: the JSON of `cairn runs show --json`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RunView {
    #[serde(flatten)]
    pub run: RunRecord,
    pub steps: Vec<StepRecord>,
    /// The runs its `children` steps started, in step and listing order,
    /// with their status and output (absent when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<cairn_core::ChildOutcome>,
    /// What the run has spent, counted as its budget counts (absent for a
    /// run without a budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<cairn_core::Spent>,
    /// The schedule that started it and the slot, if one did.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<crate::schedules::Scheduled>,
    /// A run of a crew with a `signal` step: its signals, oldest first
    /// (absent when none), and the wait of the step waiting for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<cairn_core::Signal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listening: Option<cairn_checkpoint::Listening>,
}

/// What [`Engine::doctor`] found: the JSON of `cairn doctor --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Checkup {
    /// The database's integrity problems (SQLite's `quick_check`); empty
    /// when healthy.
    pub integrity: Vec<String>,
    /// Runs checked.
    pub runs: u64,
    /// Runs whose rows do not decode or disagree with them.
    pub corrupt_runs: Vec<CorruptRun>,
    /// PostgreSQL's replication setup, as Cairn's connection sees it
    /// (absent on SQLite). Not part of [`Checkup::is_healthy`]: whether a
    /// failover may lose commits is for the reader to weigh
    /// ([`Replication::synchronous`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<cairn_checkpoint::Replication>,
}

impl Checkup {
    pub fn is_healthy(&self) -> bool {
        self.integrity.is_empty() && self.corrupt_runs.is_empty()
    }
}

/// A run [`Engine::doctor`] found corrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CorruptRun {
    pub run: RunId,
    pub detail: String,
}

/// The library's entry point. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    executor: Executor,
    /// Every crew this engine has run or registered, by fingerprint, so a
    /// resume can find the Rust agents of a run's stored crew.
    crews: Arc<RwLock<HashMap<Fingerprint, Crew>>>,
    /// This process in the registry: the versions it offers (`presence.rs`).
    presence: Arc<presence::Presence>,
    /// Runs submitted here are traced, sampled by this (`crate::otel`).
    pub(crate) sampler: Option<cairn_core::Sampler>,
}

impl Engine {
    /// Opens the store a URL names (`sqlite://PATH`, `postgres://…`).
    /// With the default configuration, whose lease owner names this
    /// process so a later `resume` on this machine can tell it is gone
    /// ([`crate::holder`]).
    pub async fn open(url: &str) -> Result<Engine> {
        let config = ExecutorConfig {
            owner: crate::holder::owner("pid"),
            ..ExecutorConfig::default()
        };
        Self::open_with(url, &OpenOptions::default(), config).await
    }

    /// [`Engine::open`] with the store's options and the executor's
    /// configuration. The store's retry window (`OpenOptions::retry_for`)
    /// is set from the lease, whatever `opts` says: half of it, so a write
    /// retried after a lost connection or during a failover ends before
    /// another process could take the run over.
    pub async fn open_with(
        url: &str,
        opts: &OpenOptions,
        config: ExecutorConfig,
    ) -> Result<Engine> {
        let opts = OpenOptions {
            retry_for: config.lease / 2,
            ..opts.clone()
        };
        let store = cairn_checkpoint::open(url, &opts).await?;
        Ok(Self::with_store(store, config))
    }

    pub fn with_store(store: Arc<dyn Store>, config: ExecutorConfig) -> Engine {
        Engine {
            executor: Executor::new(store, config).with_reaper(Arc::new(crate::holder::Programs)),
            crews: Arc::default(),
            presence: Arc::default(),
            sampler: None,
        }
    }

    /// The size caps in force.
    pub fn limits(&self) -> cairn_core::Limits {
        self.executor.config().limits
    }

    /// The store underneath: for the crate itself and for tests. A service
    /// uses the engine's methods; they are the contract.
    #[doc(hidden)]
    /// The text of `llm` steps as it streams, from this process and (on
    /// PostgreSQL) every other: subscribe and filter by run. Not stored.
    pub async fn live_text(&self) -> tokio::sync::broadcast::Receiver<cairn_core::OutputDelta> {
        self.store().live().subscribe().await
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        self.executor.store()
    }

    /// Makes a crew's Rust agents available to later resumes of its runs,
    /// and offers its version in the process registry: this process's
    /// claims then take runs of it (`presence.rs`).
    pub fn register(&self, crew: &Crew) {
        let mut crews = self.crews.write().unwrap_or_else(|p| p.into_inner());
        if crews
            .insert(crew.fingerprint().clone(), crew.clone())
            .is_none()
        {
            self.presence.offer(crew.def());
        }
    }

    /// Records a queued run; executes nothing.
    pub async fn submit(
        &self,
        crew: &Crew,
        input: Value,
        opts: SubmitOptions,
    ) -> Result<Submitted> {
        let new = self.new_run(crew, input, opts)?;
        Ok(self.store().submit(new).await?)
    }

    /// Submits and drives the run to its next stop. A repeated idempotency
    /// key drives (or just returns) the existing run.
    pub async fn run(&self, crew: &Crew, input: Value, opts: SubmitOptions) -> Result<Driven> {
        let started = self.start(crew, input, opts).await?;
        self.drive_started(crew, started).await
    }

    /// The first half of [`Engine::run`], for a caller that wants the run
    /// id before the first step (to print it): submits the run and, if it
    /// can start now (no thread, no repeated key), claims it for this
    /// process in the same transaction, so no worker takes it between the
    /// two. [`Engine::drive_started`] goes on from there.
    pub async fn start(&self, crew: &Crew, input: Value, opts: SubmitOptions) -> Result<Started> {
        let new = self.new_run(crew, input, opts)?;
        Ok(self.store().start(new, &self.claim_request()).await?)
    }

    /// The second half of [`Engine::run`]: drives what [`Engine::start`]
    /// made to its next stop.
    pub async fn drive_started(&self, crew: &Crew, started: Started) -> Result<Driven> {
        let Some(claimed) = started.claimed else {
            return self.drive_submitted(crew, started.submitted).await;
        };
        let driven = self.executor.drive_claimed(claimed, &crew.0).await?;
        self.drive_tree(driven).await
    }

    /// The run a submit of `crew` stores, its input and options checked.
    fn new_run(&self, crew: &Crew, input: Value, opts: SubmitOptions) -> Result<NewRun> {
        let thread_id = crate::thread::check(opts.thread_id)?;
        let tenant = opts.tenant.map(cairn_core::Tenant::new).transpose()?;
        self.register(crew);
        cairn_core::check_size("the run input", &input, self.limits().max_input_bytes)?;
        Ok(NewRun {
            crew: crew.def().clone(),
            input,
            idempotency_key: opts.idempotency_key,
            thread_id,
            on_busy: opts.on_busy,
            priority: opts.priority,
            tenant,
            budget: opts.budget.filter(|b| !b.is_empty()),
            trace: self.tracing(opts.traceparent),
            upgrade: opts.upgrade,
            by: opts.by,
        })
    }

    /// The second half of [`Engine::run`], for a caller that wants the run
    /// id before the first step (to print it): drives the run `submit`
    /// returned to its next stop. If a worker claimed it first, follows it
    /// there instead and reports that stop, never a refusal; a run parked
    /// under a repeated idempotency key is returned as it is.
    pub async fn drive_submitted(&self, crew: &Crew, submitted: Submitted) -> Result<Driven> {
        let run = submitted.run;
        // A repeated key returns the existing run; one that is parked
        // (waiting, interrupted, failed) is returned as it is, not refused.
        if !submitted.created
            && matches!(
                run.status,
                cairn_core::RunStatus::Waiting
                    | cairn_core::RunStatus::Interrupted
                    | cairn_core::RunStatus::Failed
            )
        {
            return Ok(Driven {
                run,
                executed: vec![],
                took_over: false,
            });
        }
        // A run this call created has no steps yet: it is driven from the
        // submit's own read. Had a worker claimed it meanwhile, the claim
        // here is refused or finds another cursor, and reads it afresh.
        let id = run.id;
        let fresh = submitted.created.then_some(run);
        let driven = self.drive_or_follow(id, crew, fresh).await?;
        self.drive_tree(driven).await
    }

    /// Drives a run this process just submitted; if another process took it
    /// first (a worker's claim won the race), follows it to its next stop
    /// and reports that, so the caller learns the run's real outcome rather
    /// than a refusal. A holder that dies is taken over once its lease
    /// expired, never before.
    async fn drive_or_follow(
        &self,
        id: RunId,
        crew: &Crew,
        mut fresh: Option<RunRecord>,
    ) -> Result<Driven> {
        let mut opts = DriveOptions::default();
        loop {
            let driven = match fresh.take() {
                Some(run) => {
                    self.register(crew);
                    let loaded = (run, vec![]);
                    // Not `?`: a refused claim must reach the match below.
                    self.executor
                        .drive_loaded(loaded, &crew.0, opts.clone())
                        .await
                        .map_err(crate::Error::from)
                }
                None => self.drive(id, crew, opts.clone()).await,
            };
            match driven {
                Err(e) if held_elsewhere(&e) => {}
                Err(e) if parked(&e) || moved_on(&e) => break,
                other => return other,
            }
            tokio::time::sleep(self.executor.config().cancel_poll).await;
            let run = self.get_run(id).await?;
            match run.status {
                cairn_core::RunStatus::Queued => opts.takeover = Takeover::Never,
                // Claimed only once its lease expired.
                cairn_core::RunStatus::Running => opts.takeover = Takeover::IfExpired,
                _ => break,
            }
        }
        Ok(Driven {
            run: self.get_run(id).await?,
            executed: vec![],
            took_over: false,
        })
    }

    /// Resumes a run through the same executor as a fresh run. Takes it over
    /// if it is `running` under another lease that expired, or whose holder
    /// is provably dead (a process of this machine that no longer exists,
    /// [`crate::holder`]); a live lease only with `opts.takeover`.
    pub async fn resume(&self, id: RunId, opts: ResumeOptions) -> Result<Driven> {
        // A run waiting for its children resumes them (after a crash of the
        // process that drove them), then itself once they woke it. One read
        // of the run and its rows serves both ways (a 1,000-step run's is
        // most of a resume's time).
        let loaded = self.store().load(id).await?;
        let run = &loaded.0;
        if run.status == cairn_core::RunStatus::Waiting && self.has_pending_children(run).await? {
            let waiting = Driven {
                run: loaded.0,
                executed: vec![],
                took_over: false,
            };
            return self.drive_tree(waiting).await;
        }
        let takeover = match opts.takeover {
            true => Takeover::Force,
            false => Takeover::IfExpired,
        };
        let driven = match self.resume_with(loaded, opts.clone(), takeover).await {
            Err(e) => match e.store_error() {
                Some(cairn_checkpoint::Error::LeaseHeld { owner, .. })
                    if crate::holder::is_dead_here(owner) =>
                {
                    let dead = Takeover::IfHeldBy(owner.clone());
                    let loaded = self.store().load(id).await?;
                    self.resume_with(loaded, opts, dead).await
                }
                _ => Err(e),
            },
            ok => ok,
        }?;
        self.drive_tree(driven).await
    }

    async fn resume_with(
        &self,
        mut loaded: (RunRecord, Vec<StepRecord>),
        opts: ResumeOptions,
        takeover: Takeover,
    ) -> Result<Driven> {
        let id = loaded.0.id;
        let drive = DriveOptions {
            takeover,
            force_crew: opts.force,
            context: opts.context.clone(),
        };
        let thread = crate::thread::check(opts.thread_id)?;
        if let Some((_, actor)) = &opts.context {
            loaded = self.ready_for_context(loaded, actor).await?;
        }
        if let Some(thread) = thread {
            if loaded.0.thread_id.as_deref() != Some(thread.as_str()) {
                return Err(crate::Error::WrongThread {
                    run: id,
                    thread,
                    actual: loaded.0.thread_id,
                });
            }
        }
        let crew = match opts.crew {
            Some(crew) => crew,
            None => match self.crew_for(&loaded.0) {
                Ok(crew) => crew,
                // A finished run needs no agents to return its stored
                // result, but its rows must agree with it (invariant 10).
                Err(_) if loaded.0.status.is_finished() => {
                    cairn_core::rebuild(&loaded.0, &loaded.1)
                        .map_err(cairn_scheduler::Error::from)?;
                    return Ok(Driven {
                        run: loaded.0,
                        executed: vec![],
                        took_over: false,
                    });
                }
                Err(e) => return Err(e),
            },
        };
        self.register(&crew);
        Ok(self.executor.drive_loaded(loaded, &crew.0, drive).await?)
    }

    /// A run that may take more context: an interrupted one is continued
    /// first (by `actor`); a finished, failed or waiting one is refused,
    /// before anything is written.
    async fn ready_for_context(
        &self,
        loaded: (RunRecord, Vec<StepRecord>),
        actor: &Actor,
    ) -> Result<(RunRecord, Vec<StepRecord>)> {
        use cairn_core::RunStatus as S;
        let run = &loaded.0;
        match run.status {
            S::Queued | S::Running => Ok(loaded),
            S::Interrupted => {
                self.store().act(run.id, Action::Continue, actor).await?;
                Ok(self.store().load(run.id).await?)
            }
            status @ (S::Succeeded | S::Cancelled | S::Failed | S::Waiting) => {
                Err(cairn_checkpoint::Error::WrongState {
                    run: run.id,
                    status,
                    action: "add context to it",
                }
                .into())
            }
        }
    }

    /// Executes a queued run to its next stop with the crew stored on it,
    /// without taking over a run another process holds: if a worker claimed
    /// it first, follows it to its next stop instead (as
    /// [`Engine::drive_submitted`]). A run that is not queued nor running
    /// is returned as it is. Operator actions (`retry`, `continue_run`,
    /// `fork`) and answers are followed by this unless the caller leaves the
    /// run to a worker.
    pub async fn execute(&self, id: RunId) -> Result<Driven> {
        let crew = self.stored_crew(id).await?;
        let driven = self.drive_or_follow(id, &crew, None).await?;
        let driven = self.drive_tree(driven).await?;
        self.climb(driven.run.clone()).await?;
        Ok(driven)
    }

    /// Merges the JSON object `context` into a queued run's input for its
    /// steps (an interrupted run is continued with it), recorded as a
    /// `context_added` event; refused for any other status, nothing
    /// written. Executes nothing: a worker (or [`Engine::execute`]) runs it.
    /// A run that is running takes context through
    /// [`ResumeOptions::context`] instead.
    pub async fn add_context(
        &self,
        id: RunId,
        context: &Value,
        actor: &Actor,
    ) -> Result<RunRecord> {
        Ok(self.store().add_context(id, context, actor).await?)
    }

    /// `failed → queued`: the failed step will run again (attempt + 1). A
    /// `children` step keeps the children that succeeded before and starts
    /// only the others (`children_reused`).
    pub async fn retry(&self, id: RunId, actor: &Actor) -> Result<RunRecord> {
        Ok(self.store().act(id, Action::Retry, actor).await?)
    }

    /// [`Engine::retry`], but a `children` step starts every child again
    /// (`--rerun-children`).
    pub async fn retry_rerunning_children(&self, id: RunId, actor: &Actor) -> Result<RunRecord> {
        Ok(self
            .store()
            .act(id, Action::RetryRerunningChildren, actor)
            .await?)
    }

    /// `interrupted → queued`: the interrupted step will carry on.
    pub async fn continue_run(&self, id: RunId, actor: &Actor) -> Result<RunRecord> {
        Ok(self.store().act(id, Action::Continue, actor).await?)
    }

    /// Cancels a queued, waiting, interrupted or failed run at once; for a
    /// running run, records a request that its executor honours at its next
    /// check (the step is stopped and its late result discarded).
    pub async fn cancel(&self, id: RunId, actor: &Actor) -> Result<RunRecord> {
        Ok(self.store().act(id, Action::Cancel, actor).await?)
    }

    /// A new queued run copying checkpoints `0..from_step` of `id`, in the
    /// source's thread unless `req.thread_id` names another.
    pub async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord> {
        crate::thread::check(req.thread_id.clone())?;
        if let Some(input) = &req.input {
            cairn_core::check_size("the run input", input, self.limits().max_input_bytes)?;
        }
        Ok(self.store().fork(id, req, actor).await?)
    }

    /// Waits, oldest first.
    /// The waits that match, each with its run's parent chain when the run
    /// is a child (`WaitRecord::parents`).
    pub async fn waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let mut waits = self.store().list_waits(filter).await?;
        let mut chains: HashMap<RunId, Vec<cairn_core::ChildOf>> = HashMap::new();
        for w in &mut waits {
            if let Some(chain) = chains.get(&w.run_id) {
                w.parents = chain.clone();
                continue;
            }
            let mut chain = vec![];
            let mut at = self.get_run(w.run_id).await?.child;
            while let Some(child) = at {
                at = self.get_run(child.parent_run_id).await?.child;
                chain.push(child);
            }
            chains.insert(w.run_id, chain.clone());
            w.parents = chain;
        }
        Ok(waits)
    }

    /// Records a person's answer; the run moves on (usually to `queued`:
    /// follow with [`Engine::execute`] unless a worker picks it up). The same
    /// answer twice is a no-op.
    pub async fn answer(&self, wait: WaitId, answer: &Answer, by: &str) -> Result<WaitRecord> {
        self.answer_as(wait, answer, &Actor::new(by)).await
    }

    /// [`Engine::answer`] with the actor's reason, recorded in the
    /// `wait_answered` event.
    pub async fn answer_as(
        &self,
        wait: WaitId,
        answer: &Answer,
        actor: &Actor,
    ) -> Result<WaitRecord> {
        let json = serde_json::to_value(answer).unwrap_or_default();
        cairn_core::check_size("the answer", &json, self.limits().max_answer_bytes)?;
        match self.store().answer_wait(wait, answer, actor).await {
            Err(e @ cairn_checkpoint::Error::Ineligible { .. }) => {
                self.audit_refusal(wait, answer, actor, &e).await;
                Err(e.into())
            }
            answered => Ok(answered?),
        }
    }

    /// A wait's approver policy and the votes cast on it so far.
    pub async fn ballot(&self, wait: WaitId) -> Result<cairn_core::Ballot> {
        Ok(self.store().ballot(wait).await?)
    }

    /// Applies the deadline outcome of every open wait past its deadline:
    /// fail the run, or answer with the default (recorded as by `deadline`).
    /// A wait that cannot be expired does not stop the others; its error is
    /// returned only if no wait could be expired.
    pub async fn expire_due_waits(&self) -> Result<Vec<WaitRecord>> {
        let mut done = vec![];
        let mut failures = vec![];
        for wait in self.store().due_waits().await? {
            let result = match &wait.on_deadline {
                Some(OnDeadline::Default { answer }) => {
                    self.store()
                        .answer_wait(wait.id, answer, &Actor::new("deadline"))
                        .await
                }
                _ => self.store().expire_wait(wait.id).await,
            };
            match result {
                Ok(w) => done.push(w),
                // Answered or expired by someone else meanwhile.
                Err(cairn_checkpoint::Error::WaitClosed { .. }) => {}
                // One broken wait must not hold up every other deadline.
                Err(e) => failures.push((wait.id, e)),
            }
        }
        match failures.into_iter().next() {
            Some((_, e)) if done.is_empty() => Err(e.into()),
            _ => Ok(done),
        }
    }

    /// Claims the oldest runnable run (queued and due, or running under an
    /// expired lease) and drives it to its next stop. `None`: nothing to do.
    pub async fn work_one(&self) -> Result<Option<Driven>> {
        match self.claim_next().await? {
            Some(claimed) => Ok(Some(self.drive_claimed(claimed).await?)),
            None => Ok(None),
        }
    }

    /// Claims the oldest runnable run for this process (a worker's claim:
    /// queued and due, or running under an expired lease). Drive it with
    /// [`Engine::drive_claimed`]; until then its lease runs out unextended.
    pub async fn claim_next(&self) -> Result<Option<Claimed>> {
        // The versions registered here first: the claim takes a run with
        // Rust agents only for a process that offers its version.
        self.announce(false).await?;
        Ok(self.store().claim_next(&self.claim_request()).await?)
    }

    /// Up to `max` claims of [`Engine::claim_next`] in one transaction
    /// (a worker filling its free slots).
    pub(crate) async fn claim_batch(&self, max: usize) -> Result<Vec<Claimed>> {
        self.announce(false).await?;
        Ok(self.store().claim_batch(&self.claim_request(), max).await?)
    }

    fn claim_request(&self) -> ClaimRequest {
        let config = self.executor.config();
        ClaimRequest::new(config.owner.clone(), config.lease, config.crash_loop_cap)
    }

    /// Drives a run [`Engine::claim_next`] claimed, keeping its lease, to
    /// its next stop.
    pub async fn drive_claimed(&self, claimed: Claimed) -> Result<Driven> {
        if claimed.run.status != cairn_core::RunStatus::Running {
            // The claim itself ended it (crash-loop cap).
            return Ok(Driven {
                run: claimed.run,
                executed: vec![],
                took_over: claimed.took_over,
            });
        }
        let (claimed, crew) = self.upgraded(claimed).await?;
        Ok(self.executor.drive_claimed(claimed, &crew.0).await?)
    }

    async fn drive(&self, id: RunId, crew: &Crew, opts: DriveOptions) -> Result<Driven> {
        self.register(crew);
        Ok(self.executor.drive(id, &crew.0, opts).await?)
    }

    /// The crew a run started with, rebuilt from its stored definition.
    pub async fn stored_crew(&self, id: RunId) -> Result<Crew> {
        self.crew_for(&self.store().get_run(id).await?)
    }

    /// The crew of a run: the registered one with its fingerprint, or one
    /// rebuilt from its stored definition (built-in kinds only).
    fn crew_for(&self, run: &RunRecord) -> Result<Crew> {
        let known = self
            .crews
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&run.crew_fingerprint)
            .cloned();
        match known {
            Some(crew) => Ok(crew),
            // Built-in kinds only; a Rust agent is then a `MissingHandler`.
            None => Crew::from_def(run.crew_definition.clone(), |_, _| None),
        }
    }
}

/// Another process holds the run: it claimed it between this process's
/// submit and claim, or holds a lease that has not expired.
fn held_elsewhere(e: &crate::Error) -> bool {
    use cairn_checkpoint::Error as S;
    matches!(
        e,
        crate::Error::Executor(cairn_scheduler::Error::Leased { .. })
    ) || matches!(
        e.store_error(),
        Some(
            S::LeaseHeld { .. }
                | S::WrongState {
                    status: cairn_core::RunStatus::Running,
                    ..
                }
        )
    )
}

/// Another process took the run past its claim between this drive's read
/// and its claim (a worker beside `cairn run` finished a child first): its
/// state now is the outcome to report.
fn moved_on(e: &crate::Error) -> bool {
    matches!(
        e.store_error(),
        Some(cairn_checkpoint::Error::WrongState { status, .. })
            if *status != cairn_core::RunStatus::Running
    )
}

/// Another process already drove the run to a stop a drive refuses
/// (failed, waiting, interrupted): that stop is the outcome to report.
fn parked(e: &crate::Error) -> bool {
    matches!(
        e,
        crate::Error::Executor(
            cairn_scheduler::Error::RunFailed { .. } | cairn_scheduler::Error::NotResumable { .. }
        )
    )
}

#[path = "recrew.rs"]
mod recrew;
#[path = "versions.rs"]
mod versions;
pub use versions::{CrewDiff, UpgradeVerdict, VersionRef};
#[path = "presence.rs"]
mod presence;
#[path = "reads.rs"]
mod reads;
#[path = "tree.rs"]
mod tree;
