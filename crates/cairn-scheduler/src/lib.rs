//! The one executor. A fresh run and a resumed run take the same path:
//! load the run and its checkpoints → check where it stands → claim it
//! (lease epoch + 1) → rebuild the accumulated context → dispatch the next
//! pending step → commit → repeat until the run finishes or stops.
//!
//! **Invariant:** this crate knows no SQL; it talks to storage only through
//! `cairn_checkpoint::Store`, and decides the step's half of a state change
//! itself (`outcome.rs`); storage's `plan.rs` decides the claim's, the
//! answer's and an operator action's half.

mod crew;
mod drive;
mod error;
mod journal;
mod lease;
mod outcome;
mod reap;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_checkpoint::{failpoint, ClaimRequest, Lease, Store, Takeover, WaitFilter};
use cairn_core::event::payload::CrewForced;
use cairn_core::{
    rebuild, rebuild_owned, Agent, Answer, ErrorInfo, ErrorKind, EventData, NewEvent,
    PreviousOutput, RunId, RunRecord, RunStatus, StepContext, StepIdx, StepRef, Stop, WaitKind,
    WaitStatus,
};

use drive::Drive;
use lease::LeaseGuard;
use outcome::{Dispatch, StepOutcome};

pub use crew::Crew;
pub use error::{Error, Kind};
pub use reap::Reaper;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How the executor identifies itself and holds leases.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Recorded as the lease owner and in events.
    pub owner: String,
    /// Lease length (database clock). Heartbeats arrive with workers.
    pub lease: Duration,
    /// Takeovers of one in-flight attempt before the run fails `crash_loop`.
    pub crash_loop_cap: u32,
    /// How often the lease guard beats while this process holds a run:
    /// one `LeaseStore::heartbeat` that extends the lease and reports a cancel
    /// request, so the longest a running step runs on after a cancel
    /// request or a lost lease. 1 s: a beat is a write (about four reads'
    /// cost, measured by `lease::tests::lease_cost`), so beating every
    /// 250 ms would cost more than the old 250 ms read poll did.
    pub cancel_poll: Duration,
    /// The longest gap between beats (< `lease`); the guard beats every
    /// `min(cancel_poll, heartbeat)`.
    pub heartbeat: Duration,
    /// Size caps; a step output over its cap fails the step (not retryable).
    pub limits: cairn_core::Limits,
    /// What this process's model calls cost (`cairn_core::meter::price`); `None`:
    /// unpriced, so a run with a `cost_usd` budget makes no model call here.
    pub prices: Option<Arc<cairn_core::PriceTable>>,
    /// This process's limits per provider key (`cairn_core::meter::declared`),
    /// declared at each admission on a key whose agent declares none.
    pub key_limits: Option<Arc<cairn_core::LimitTable>>,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            owner: format!("pid:{}", std::process::id()),
            lease: Duration::from_secs(30),
            crash_loop_cap: 3,
            cancel_poll: Duration::from_secs(1),
            heartbeat: Duration::from_secs(10),
            limits: cairn_core::Limits::default(),
            prices: None,
            key_limits: None,
        }
    }
}

/// What a caller allows `drive` to do.
#[derive(Debug, Clone, Default)]
pub struct DriveOptions {
    /// Whether to claim the run if it is `running` under another lease (an
    /// operator's `cairn resume`). Fencing makes the old holder harmless.
    pub takeover: Takeover,
    /// Accept a crew whose fingerprint differs from the run's; recorded as a
    /// `crew_forced` event, and the run carries on with the new crew.
    pub force_crew: bool,
    /// Merge this JSON object into the run's input at the claim, recorded
    /// as a `context_added` event naming who and why: a resume with more
    /// context for the steps still to run.
    pub context: Option<(serde_json::Value, cairn_core::Actor)>,
}

/// The result of driving a run to its next stop.
#[derive(Debug, Clone)]
pub struct Driven {
    /// The run as stored when `drive` returned.
    pub run: RunRecord,
    /// Steps this call executed, in order (empty for a finished run).
    pub executed: Vec<StepIdx>,
    /// This call took over a run that was `running` under another lease.
    pub took_over: bool,
}

/// Executes runs through one code path. Cheap to clone.
#[derive(Clone)]
pub struct Executor {
    store: Arc<dyn Store>,
    config: ExecutorConfig,
    /// The leases this executor holds, one beat for all of them.
    keeper: Arc<lease::Keeper>,
    /// Ends what a dead holder left running, at each takeover (`reap.rs`).
    reaper: Option<Arc<dyn Reaper>>,
}

impl Executor {
    pub fn new(store: Arc<dyn Store>, config: ExecutorConfig) -> Self {
        // Often enough that a running step notices a cancel within
        // `cancel_poll`, and at least every `heartbeat`.
        let every = config.cancel_poll.min(config.heartbeat);
        let keeper = lease::Keeper::new(store.clone(), config.lease, every);
        Executor {
            store,
            config,
            keeper,
            reaper: None,
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn config(&self) -> &ExecutorConfig {
        &self.config
    }

    /// Drives `run_id` with `crew` until it finishes or stops. A finished run
    /// returns its stored state and executes nothing.
    pub async fn drive(&self, run_id: RunId, crew: &Crew, opts: DriveOptions) -> Result<Driven> {
        let loaded = self.store.load(run_id).await?;
        self.drive_loaded(loaded, crew, opts).await
    }

    /// [`Executor::drive`] for a caller that has just loaded the run (the
    /// same path; it saves reading the run twice).
    pub async fn drive_loaded(
        &self,
        (run, steps): (RunRecord, Vec<cairn_core::StepRecord>),
        crew: &Crew,
        opts: DriveOptions,
    ) -> Result<Driven> {
        let run_id = run.id;
        // 1. Judge, before writing anything. A finished run's rows must
        // agree with it too (invariant 10): a run marked succeeded halfway
        // is corruption, not a result.
        if run.status.is_finished() {
            rebuild(&run, &steps)?;
            return Ok(Driven {
                run,
                executed: vec![],
                took_over: false,
            });
        }
        match run.status {
            RunStatus::Queued => {}
            RunStatus::Running if opts.takeover.allowed() => {}
            RunStatus::Running => return Err(Error::Leased { run: run_id }),
            RunStatus::Failed => {
                return Err(Error::RunFailed {
                    run: run_id,
                    error: run.error.clone().map(Box::new),
                })
            }
            status => {
                return Err(Error::NotResumable {
                    run: run_id,
                    status,
                })
            }
        }
        let offered = crew.fingerprint();
        let mut claim_events = vec![];
        let mut replace_crew = None;
        if *offered != run.crew_fingerprint {
            if !opts.force_crew {
                return Err(Error::CrewMismatch {
                    run: run_id,
                    stored: run.crew_fingerprint.clone(),
                    offered: offered.clone(),
                });
            }
            claim_events.push(NewEvent::typed(EventData::CrewForced(CrewForced {
                stored: run.crew_fingerprint.clone(),
                offered: offered.clone(),
                by: self.config.owner.clone(),
            })));
            replace_crew = Some(crew.def().clone());
        }
        if let Some((context, actor)) = &opts.context {
            claim_events.push(NewEvent::context_added(&run.input, context, actor));
        }
        // Judged by the crew it will run with (a clone only when forced:
        // a 1,000-agent definition is worth not copying).
        let rebuilt = match &replace_crew {
            Some(def) => {
                let mut judged = run.clone();
                judged.crew_definition = def.clone();
                judged.step_count = def.step_count();
                rebuild_owned(&judged, steps)?
            }
            None => rebuild_owned(&run, steps)?,
        };
        // The definition just read goes with the claim, which then reads
        // the run without it.
        let read_crew = match replace_crew {
            Some(_) => None,
            None => Some((run.crew_fingerprint.clone(), Arc::new(run.crew_definition))),
        };

        // 2. Claim: epoch + 1, the cursor's step marked running. A retry
        // back-off brings the run back here: sleep, claim again, go on.
        let took_over = run.status == RunStatus::Running;
        let config = &self.config;
        let request = ClaimRequest {
            takeover: opts.takeover.clone(),
            events: claim_events,
            replace_crew,
            context: opts.context.as_ref().map(|(c, _)| c.clone()),
            read_crew,
            ..ClaimRequest::new(config.owner.clone(), config.lease, config.crash_loop_cap)
        };
        let expected_cursor = run.cursor;
        let previous = Arc::new(rebuilt.previous);
        self.run_loop(
            run_id,
            crew,
            request,
            (expected_cursor, previous),
            None,
            took_over,
        )
        .await
    }

    /// Drives a run that `LeaseStore::claim_next` just claimed for this process
    /// (a worker): the same loop as [`Executor::drive`], from after its claim.
    /// A run found corrupt is set aside at once (failed with kind
    /// `corruption`, `LeaseStore::set_aside`) rather than left to expire and be
    /// taken over until the crash-loop cap calls it something else; the
    /// corruption is still returned.
    pub async fn drive_claimed(
        &self,
        claimed: cairn_checkpoint::Claimed,
        crew: &Crew,
    ) -> Result<Driven> {
        let fence = claimed.fence.clone();
        let result = self.drive_claimed_run(claimed, crew).await;
        if let Some(corrupt) = result.as_ref().err().and_then(Error::corruption) {
            self.store.set_aside(corrupt, Some(&fence)).await?;
        }
        result
    }

    async fn drive_claimed_run(
        &self,
        claimed: cairn_checkpoint::Claimed,
        crew: &Crew,
    ) -> Result<Driven> {
        let run_id = claimed.run.id;
        if *crew.fingerprint() != claimed.run.crew_fingerprint {
            return Err(Error::CrewMismatch {
                run: run_id,
                stored: claimed.run.crew_fingerprint.clone(),
                offered: crew.fingerprint().clone(),
            });
        }
        // At the first step there is nothing before the cursor to read: the
        // claim's own rows are the run (a read transaction less per run).
        let (run, steps) = if claimed.run.cursor.get() == 0 {
            (
                claimed.run.clone(),
                claimed.at_cursor.iter().cloned().collect(),
            )
        } else {
            self.store.load(run_id).await?
        };
        let previous = Arc::new(rebuild_owned(&run, steps)?.previous);
        let config = &self.config;
        let request = ClaimRequest::new(config.owner.clone(), config.lease, config.crash_loop_cap);
        let took_over = claimed.took_over;
        self.run_loop(
            run_id,
            crew,
            request,
            (run.cursor, previous),
            Some(claimed),
            took_over,
        )
        .await
    }

    /// Claim (unless `first` is a claim already made) → dispatch steps →
    /// commit, again after each retry back-off, until the run stops
    /// (`drive.rs` has the two halves).
    async fn run_loop(
        &self,
        run_id: RunId,
        crew: &Crew,
        request: ClaimRequest,
        (expected_cursor, previous): (StepIdx, Arc<Vec<PreviousOutput>>),
        first: Option<cairn_checkpoint::Claimed>,
        took_over: bool,
    ) -> Result<Driven> {
        let mut drive = Drive {
            exec: self,
            run_id,
            crew,
            request,
            expected_cursor,
            previous,
            first,
            executed: vec![],
        };
        loop {
            while let Some(claimed) = drive.claim().await? {
                let Some(backoff) = drive.dispatch(claimed).await? else {
                    break;
                };
                failpoint::step("during_backoff", backoff.cursor);
                tokio::time::sleep(backoff.wait).await;
                drive.expected_cursor = backoff.cursor;
            }
            let run = self.store.get_run(run_id).await?;
            // Queued again by the time the dispatch stopped: a spawn whose
            // children were all kept (a retry's or a fork's) decided its
            // join in its own commit. It goes on here (a worker that
            // claims it first takes it, and this drive ends).
            if run.status != RunStatus::Queued || drive.executed.is_empty() {
                return Ok(Driven {
                    run,
                    executed: drive.executed,
                    took_over,
                });
            }
            drive.expected_cursor = run.cursor;
        }
    }

    /// The answers of people to the step at the cursor of a fresh claim.
    async fn extras(
        &self,
        crew: &Crew,
        run: RunId,
        at_cursor: Option<&cairn_core::StepRecord>,
    ) -> Result<StepExtras> {
        let Some(row) = at_cursor else {
            return Ok(StepExtras::default());
        };
        // A `children` step that runs again finds its decided join.
        let children = match crew.agent(row.idx) {
            Some((def, _)) if def.starts_children() => self.joined(run, row).await?,
            _ => None,
        };
        let waits = self
            .store
            .list_waits(&WaitFilter {
                run: Some(run),
                step: Some(row.idx),
                status: Some(WaitStatus::Answered),
            })
            .await?;
        let mut extras = StepExtras {
            children,
            ..StepExtras::default()
        };
        for w in waits {
            match (&w.answer, w.kind) {
                (Some(Answer::Reject { feedback }), WaitKind::Review) => {
                    extras.feedback.push(feedback.clone())
                }
                (Some(Answer::Answer { value }), WaitKind::Question)
                    if w.attempt == row.attempt =>
                {
                    if let Some(q) = w.question_id {
                        extras.answers.insert(q, value.clone());
                    }
                }
                (Some(Answer::Approve), WaitKind::Approval) if w.attempt == row.attempt => {
                    extras.approved = true
                }
                _ => {}
            }
        }
        Ok(extras)
    }

    /// A `children` step's decided join, once the children its rule needs
    /// no more are cancelled (each in its own transaction; read again so
    /// the step's output shows them cancelled).
    async fn joined(
        &self,
        run: RunId,
        row: &cairn_core::StepRecord,
    ) -> Result<Option<cairn_core::Joined>> {
        let Some(joined) = self.store.joined(run, row.idx, row.attempt).await? else {
            return Ok(None);
        };
        if !joined.children.iter().any(|c| c.status.is_live()) {
            return Ok(Some(joined));
        }
        let actor = cairn_core::Actor::new(self.config.owner.clone()).because(format!(
            "the `{}` join of step {} is decided",
            joined.rule.as_str(),
            row.idx
        ));
        self.store
            .close_join(run, row.idx, row.attempt, &actor)
            .await?;
        Ok(self.store.joined(run, row.idx, row.attempt).await?)
    }

    /// Runs one step under its timeout and the lease guard, and decides
    /// its commit. Stops the step on a cancel request or a lost lease.
    async fn execute_step(
        &self,
        step: &Dispatch<'_>,
        agent: &Arc<dyn Agent>,
        run: &RunRecord,
        guard: &LeaseGuard,
        previous: &Arc<Vec<PreviousOutput>>,
        extras: &StepExtras,
    ) -> Result<cairn_checkpoint::StepCommit> {
        if let Some(wait) = outcome::gate(step, extras.approved) {
            return Ok(outcome::commit(step, wait));
        }
        if let Some(stop) = self.out_of_budget(run, step).await? {
            return Ok(outcome::commit(step, stop));
        }
        let (def, idx, attempt) = (step.def, step.idx, step.attempt);
        let cx = self.context(step, run, previous, extras);
        tracing::info!(run = %run.id, step = %idx, role = %def.role, attempt = %attempt, "step started");
        let started = Instant::now();
        let work = async {
            let Some(ms) = def.timeout_ms else {
                return agent.run(&cx).await;
            };
            let limit = Duration::from_millis(ms);
            tokio::time::timeout(limit, agent.run(&cx))
                .await
                .unwrap_or_else(|_| {
                    let role = &def.role;
                    let msg =
                        format!("step `{role}` ran past its timeout of {ms} ms and was cut off");
                    Err(ErrorInfo::new(ErrorKind::Timeout, msg, true).into())
                })
        };
        // Dropping `work` stops the step (a command's process group is killed).
        let result = tokio::select! {
            biased;
            stop = guard.stopped() => return match stop {
                Lease::Lost => Err(Error::LeaseLost { run: run.id }),
                _ => Ok(outcome::commit(step, StepOutcome::Cancelled)),
            },
            result = work => result,
        };
        let result = match result {
            Err(Stop::Listen(listen)) => return self.listened(step, listen).await,
            other => other,
        };
        let result = outcome::size_checked(result, self.config.limits.max_output_bytes);
        let result = outcome::storable_checked(result);
        let decided = outcome::decide(step, result, started.elapsed());
        let decided = self.within_max_children(step, decided).await?;
        Ok(outcome::commit(step, decided))
    }

    /// A `signal` step's end, from what storage holds for it: the oldest
    /// buffered signal of its names (a payload over the output limit
    /// fails the step and stays buffered), its timeout, or a wait.
    async fn listened(
        &self,
        step: &Dispatch<'_>,
        listen: cairn_core::Listen,
    ) -> Result<cairn_checkpoint::StepCommit> {
        let heard = self
            .store
            .heard(step.run, step.idx, step.attempt, &listen.names)
            .await?;
        let decided = match outcome::heard(step, listen, heard) {
            StepOutcome::Consumed { output, .. }
                if cairn_core::check_size(
                    "the signal's payload",
                    &output,
                    self.config.limits.max_output_bytes,
                )
                .is_err() =>
            {
                let message = format!(
                    "the signal for step `{}` is over the output limit of {} bytes",
                    step.def.role, self.config.limits.max_output_bytes
                );
                StepOutcome::Failed {
                    error: ErrorInfo::new(ErrorKind::TooLarge, message, false),
                    duration_ms: 0,
                }
            }
            decided => decided,
        };
        Ok(outcome::commit(step, decided))
    }

    /// A `delegate` spawn (an `llm` agent's calls, a command's request)
    /// past the step's `max_children`, counted over all its attempts, fails
    /// the step (kind `children`) instead of starting them. A `children`
    /// step checks its own list (`cairn_steps`).
    async fn within_max_children(
        &self,
        step: &Dispatch<'_>,
        decided: StepOutcome,
    ) -> Result<StepOutcome> {
        let (StepOutcome::Spawn { spawn }, Some(max)) =
            (&decided, step.def.delegate_max_children())
        else {
            return Ok(decided);
        };
        let mut earlier = 0usize;
        for attempt in 1..step.attempt.get() {
            let attempt = cairn_core::Attempt(attempt);
            if let Some(joined) = self.store.joined(step.run, step.idx, attempt).await? {
                earlier += joined.children.len();
            }
        }
        if earlier + spawn.children.len() <= max as usize {
            return Ok(decided);
        }
        let message = format!(
            "step `{}` asked for {} children ({earlier} started at its earlier attempts), \
             over its `max_children` of {max}; nothing was started",
            step.def.role,
            spawn.children.len()
        );
        Ok(StepOutcome::Failed {
            error: ErrorInfo::new(ErrorKind::Children, message, false),
            duration_ms: 0,
        })
    }

    /// What a step sees: the run's input, earlier outputs, what people said;
    /// and its services: a journal and a meter bound to this attempt and
    /// lease.
    fn context(
        &self,
        step: &Dispatch<'_>,
        run: &RunRecord,
        previous: &Arc<Vec<PreviousOutput>>,
        extras: &StepExtras,
    ) -> StepContext {
        let handle = Arc::new(journal::StoreJournal {
            store: self.store.clone(),
            run: run.id,
            idx: step.idx,
            attempt: step.attempt,
            generation: extras.feedback.len() as u32,
            fence: step.fence.clone(),
            max_item_bytes: self.config.limits.max_journal_item_bytes,
            newest: Default::default(),
        });
        let meter = cairn_core::StepMeter {
            port: Some(cairn_core::MeterHandle(handle.clone())),
            budget: budget_of(run),
            thread_budget: extras.thread_budget.clone(),
            rolls_up: run.child.is_some(),
            prices: self.config.prices.clone(),
            key_limits: self.config.key_limits.clone(),
            tenant: run.tenant.clone(),
            thread_id: run.thread_id.clone(),
            crew: Some(run.crew.clone()),
        };
        StepContext {
            run_id: run.id,
            input: run.input.clone(),
            step: StepRef {
                idx: step.idx,
                role: step.def.role.clone(),
                attempt: step.attempt,
            },
            previous: previous.clone(),
            thread: extras.thread.clone(),
            feedback: extras.feedback.clone(),
            answers: extras.answers.clone(),
            children: extras.children.clone(),
            services: cairn_core::StepServices {
                journal: Some(cairn_core::JournalHandle(handle)),
                meter,
                traceparent: run
                    .trace
                    .map(|t| t.traceparent(cairn_core::SpanId::of_run(run.id))),
            },
        }
    }
}

/// What people said about the step being dispatched.
#[derive(Debug, Clone, Default)]
struct StepExtras {
    thread: Vec<cairn_core::ThreadTurn>,
    thread_budget: Option<(String, cairn_core::Budget)>,
    feedback: Vec<String>,
    answers: std::collections::BTreeMap<String, serde_json::Value>,
    approved: bool,
    children: Option<cairn_core::Joined>,
}

impl Executor {
    /// Before a step: the interruption of a run whose wall-time budget is
    /// spent, or before a `command` step whose token or dollar budget is
    /// (`budget_exceeded`; `runs continue --budget LIMIT=+N` raises it). A
    /// read only for a run with such a budget.
    async fn out_of_budget(
        &self,
        run: &RunRecord,
        step: &Dispatch<'_>,
    ) -> Result<Option<outcome::StepOutcome>> {
        // A program may spend tokens (`cairn-usage:`): none starts once
        // they are spent.
        let program = matches!(step.def.kind, cairn_core::AgentKind::Command { .. });
        let Some(budget) = budget_of(run).filter(|b| {
            let spends = [b.tokens, b.input_tokens, b.output_tokens]
                .iter()
                .any(Option::is_some)
                || b.cost_usd.is_some();
            b.wall_time.is_some() || (program && spends)
        }) else {
            return Ok(None);
        };
        let spent = self.store.spent(run.id).await?;
        let why = budget
            .refuses_step(spent)
            .or_else(|| program.then(|| budget.refuses_program(spent)).flatten());
        Ok(why.map(|why| outcome::StepOutcome::Interrupted {
            error: ErrorInfo::new(ErrorKind::BudgetExceeded, why, false),
            duration_ms: 0,
        }))
    }
}

/// A run's limits on model use: its own over its crew's; none if neither
/// limits anything.
pub(crate) fn budget_of(run: &RunRecord) -> Option<cairn_core::Budget> {
    cairn_core::Budget::in_force(run.budget, run.crew_definition.budget)
}
