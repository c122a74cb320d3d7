//! The storage script: every `Store` operation written once, over the
//! dialect layer (`sql`). A backend ([`ScriptHost`]) supplies how a
//! transaction is opened and, where a measured fast path pays for it, its
//! own version of an operation ([`ScriptHost::commit_step`],
//! [`ScriptHost::append_journal`]); everything else is here, so the two
//! databases cannot drift apart in meaning.
//!
//! One module per concern: `runs` (reads shared by all, events, submit,
//! set-aside), `claim`, `waits`, `operator` (actions, context, forks),
//! `journal`, `threads`, `retention` (compaction, periodic tasks, the
//! integrity check), `storable` (the NUL rule), and `boundary`, the write
//! boundary (crash points, placed errors, retries after a lost
//! acknowledgement and the checks of whether a write landed). What each
//! operation decides is in `plan.rs`, pure.
//!
//! One way to write an operation: an `async fn x_in(c: &mut Conn, …)` in
//! its concern's module that reads what its plan needs, asks it, and
//! writes what it says; the `impl Store` below checks the values it would
//! store, hands `x_in` to [`ScriptHost::tx`] as one transaction of a
//! [`TxKind`], and wraps that in `boundary::bounded` / `retried` (a write)
//! or `boundary::placed` (a read). One way to open a transaction:
//! [`ScriptHost::tx`]; nothing else here opens one.
//!
//! **Invariant (the writer-thread rule):** a script awaits nothing but its
//! own connection's statements (`Conn::execute`, `fetch_*`,
//! `notify_runnable`, and other `_in` functions that do the same). SQLite
//! runs the hot path's scripts (`TxKind::HotWrite`, `HotRead`) on its
//! writer thread (`sqlite/writer.rs`), which polls a script once on a
//! connection that never waits: any other pending `.await` (a sleep, a
//! channel, another store call) would compile, work on PostgreSQL and
//! fail there. So the rule is enforced for every script on every backend:
//! a script that pends on anything but its connection's statement ends
//! with `Error::ScriptWaited` (`tx::only_statements`, the writer thread
//! alike), and `tests.rs` holds each transaction kind of both backends to
//! it.

mod boundary;
pub(crate) mod children;
mod claim;
mod crews;
mod ends;
mod journal;
mod operator;
mod pauses;
mod permits;
mod processes;
pub(crate) mod retention;
mod reuse;
mod rollup;
mod rows;
mod runs;
mod storable;
#[cfg(test)]
mod tests;
mod threads;
mod traces;
mod tx;
mod waits;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use cairn_core::{
    Actor, Admission, Answer, Corruption, EventRecord, JournalEntry, KeyAsk, KeyLimits, KeyPause,
    KeyState, LeaseEpoch, NewEvent, Permit, RunId, RunRecord, StepIdx, StepRecord, ThreadTurn,
    WaitId, WaitRecord,
};

use crate::failpoint;
use crate::raw::decode_step;
use crate::sql::{Conn, Dialect, Pool};
use crate::{
    Action, ClaimRequest, Claimed, Error, ForkRequest, JournalAppend, Lease, NewRun, Result,
    RunFilter, Started, StepCommit, Store, StoreStats, Submitted, ThreadPage, ThreadSummary,
    WaitFilter,
};

use boundary::{bounded, placed, retried};
use storable::{actor_ok, claim_ok, commit_ok, events_ok, json_ok, submit_ok, text_ok};

pub(crate) use crews::{refingerprint, refingerprint_in};
pub(crate) use retention::quick_check;
pub(crate) use tx::pool_tx;

/// What a backend brings to the script: how it opens a transaction, and
/// its fast paths. Not nameable outside this crate (a sealed trait): every
/// [`Store`] is one of Cairn's backends.
#[async_trait]
pub trait ScriptHost: Send + Sync + 'static {
    fn db(&self) -> &Pool;

    /// The database in messages: the SQLite file, or the PostgreSQL server
    /// and database (never a password).
    fn target(&self) -> &str;

    /// The live text of the store's `llm` steps (`live.rs`).
    fn live(&self) -> &crate::LiveHub;

    /// The end of a step: on both databases a measured fast path of one
    /// round trip, so each backend writes its own.
    async fn commit_step(&self, c: &StepCommit) -> Result<()>;

    /// One journal item; the script's version is a transaction of three
    /// statements.
    async fn append_journal(&self, a: &JournalAppend) -> Result<JournalEntry> {
        let a = a.clone();
        self.tx(
            TxKind::Write,
            Box::new(move |c| Box::pin(async move { journal::append_in(c, &a).await })),
        )
        .await
    }

    /// A worker's idle wait; without notifications, a sleep.
    async fn wait_for_work(&self, max: Duration) {
        tokio::time::sleep(max).await;
    }

    /// Runs `f` as one transaction of `kind`, committed if it returns `Ok`
    /// and rolled back otherwise: the one way the script opens one. By
    /// default a transaction of the pool ([`pool_tx`]); SQLite runs the
    /// hot kinds on its writer thread.
    async fn tx<T: Send + 'static>(&self, kind: TxKind, f: ScriptFn<T>) -> Result<T> {
        pool_tx(self.db(), kind, f).await
    }

    /// A read of one statement on the hot path (the run a drive ends on):
    /// by default [`TxKind::Single`]; SQLite runs it on its writer's
    /// connection when that is idle, on the caller's thread (no hop).
    async fn read_now<T: Send + 'static>(&self, f: ScriptFn<T>) -> Result<T> {
        self.tx(TxKind::Single, f).await
    }
}

/// The kinds of transaction a script runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// A write: SQLite `BEGIN IMMEDIATE`, PostgreSQL row locks as the
    /// script reads (`{for_update}`).
    Write,
    /// A read from one snapshot.
    Read,
    /// No transaction: a pooled connection, each statement its own (a
    /// single-statement read or write).
    Single,
    /// A write on the executor's hot path (submit, claim), which a backend
    /// may run on a connection of its own: SQLite's writer thread, where it
    /// shares the group commit's flush.
    HotWrite,
    /// A read on the hot path (a resume's load), likewise.
    HotRead,
}

/// A future of the storage script, boxed so a transaction can be handed
/// over as a value ([`ScriptHost::tx`]).
pub(crate) type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A transaction of the storage script: given its connection, its work.
pub(crate) type ScriptFn<T> =
    Box<dyn for<'a, 'b> FnOnce(&'a mut Conn<'b>) -> BoxFuture<'a, Result<T>> + Send>;

/// How many corrupt runs one `claim_next` sets aside before it answers.
const SET_ASIDE_PER_CLAIM: usize = 16;

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> Store for H {
    fn backend(&self) -> crate::Backend {
        self.db().backend()
    }

    fn live(&self) -> &crate::LiveHub {
        ScriptHost::live(self)
    }

    async fn submit(&self, new: NewRun) -> Result<Submitted> {
        bounded("submit", self.target(), None, async {
            let def = submit_ok(&new)?;
            self.tx(
                TxKind::HotWrite,
                Box::new(move |c| Box::pin(runs::submit_in(c, new, def))),
            )
            .await
        })
        .await
    }

    async fn start(&self, new: NewRun, req: &ClaimRequest) -> Result<Started> {
        bounded("start", self.target(), None, async {
            let def = submit_ok(&new)?;
            claim_ok(req)?;
            let req = req.clone();
            self.tx(
                TxKind::HotWrite,
                Box::new(move |c| Box::pin(claim::start_in(c, new, def, req))),
            )
            .await
        })
        .await
    }

    async fn load(&self, id: RunId) -> Result<(RunRecord, Vec<StepRecord>)> {
        placed(self.target(), Some(id), async {
            // One snapshot, so run and steps agree. The rows are decoded
            // after it, off SQLite's writer thread.
            let (run, rows) = self
                .tx(
                    TxKind::HotRead,
                    Box::new(move |c| Box::pin(rows::load_in(c, id))),
                )
                .await?;
            let steps = rows
                .iter()
                .map(|r| decode_step(id, r))
                .collect::<Result<Vec<_>>>()?;
            Ok((run, steps))
        })
        .await
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord> {
        let read = self.read_now(Box::new(move |c| Box::pin(rows::fetch_run(c, id, false))));
        placed(self.target(), Some(id), read).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        placed(self.target(), None, async {
            text_ok("the crew filter", filter.crew.as_deref())?;
            text_ok("the thread filter", filter.thread.as_deref())?;
            text_ok("the tenant filter", filter.tenant.as_deref())?;
            let filter = filter.clone();
            self.tx(
                TxKind::Single,
                Box::new(move |c| Box::pin(async move { runs::list_runs_in(c, &filter).await })),
            )
            .await
        })
        .await
    }

    async fn stats(&self) -> Result<StoreStats> {
        let read = self.tx(TxKind::Single, Box::new(|c| Box::pin(runs::stats_in(c))));
        placed(self.target(), None, read).await
    }

    async fn claim(&self, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
        bounded("claim", self.target(), Some(id), async {
            claim_ok(req)?;
            let req = req.clone();
            self.tx(
                TxKind::HotWrite,
                Box::new(move |c| Box::pin(async move { claim::claim_in(c, id, &req).await })),
            )
            .await
        })
        .await
    }

    async fn claim_next(&self, req: &ClaimRequest) -> Result<Option<Claimed>> {
        // Not `bounded`: only a claim that took a run is a write boundary.
        failpoint::store("before", "claim_next");
        placed(self.target(), None, async {
            claim_ok(req)?;
            let req = claim::as_claimer(req);
            // A run that does not decode or judge is set aside (failed
            // `corruption`) and the next one tried, so one corrupt run never
            // stalls the queue behind it. Bounded, so a database full of them
            // still answers.
            for _ in 0..SET_ASIDE_PER_CLAIM {
                let req = req.clone();
                let claimed = self
                    .tx(
                        TxKind::Write,
                        Box::new(move |c| {
                            Box::pin(async move { claim::claim_next_in(c, &req).await })
                        }),
                    )
                    .await;
                match claimed {
                    Ok(Some(claimed)) => {
                        failpoint::store("after", "claim_next");
                        return Ok(Some(claimed));
                    }
                    Ok(None) => return Ok(None),
                    // Rolled back; the run the corruption names is set aside.
                    Err(Error::Corruption(corrupt)) => {
                        self.set_aside(&corrupt, None).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(None)
        })
        .await
    }

    async fn claim_batch(&self, req: &ClaimRequest, max: usize) -> Result<Vec<Claimed>> {
        claim::claim_batch(self, req, max).await
    }

    async fn wait_for_work(&self, max: Duration) {
        ScriptHost::wait_for_work(self, max).await
    }

    async fn heartbeat(&self, id: RunId, epoch: LeaseEpoch, lease: Duration) -> Result<Lease> {
        let beat = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(runs::heartbeat_in(c, id, epoch, lease))),
        );
        bounded("heartbeat", self.target(), Some(id), beat).await
    }

    async fn heartbeat_many(
        &self,
        held: &[(RunId, LeaseEpoch)],
        lease: Duration,
    ) -> Result<Vec<Lease>> {
        if held.is_empty() {
            return Ok(vec![]);
        }
        let held = held.to_vec();
        let beat = self.tx(
            TxKind::Single,
            Box::new(move |c| {
                Box::pin(async move { runs::heartbeat_many_in(c, &held, lease).await })
            }),
        );
        bounded("heartbeat", self.target(), None, beat).await
    }

    async fn set_aside(&self, corruption: &Corruption, held: Option<LeaseEpoch>) -> Result<bool> {
        let run = corruption.run;
        bounded("set_aside", self.target(), Some(run), async {
            let corrupt = corruption.clone();
            let set = self
                .tx(
                    TxKind::Write,
                    Box::new(move |c| {
                        Box::pin(async move { runs::set_aside_in(c, &corrupt, held).await })
                    }),
                )
                .await?;
            if set {
                tracing::error!(run = %corruption.run, detail = %corruption.detail,
                    "set aside a corrupt run: failed with kind `corruption`");
            }
            Ok(set)
        })
        .await
    }

    async fn commit_step(&self, commit: &StepCommit) -> Result<()> {
        commit_ok(commit).map_err(|e| e.placed(self.target(), Some(commit.run_id)))?;
        // A commit that opens a wait is its own crash point.
        let op = match commit.opens_wait() {
            true => "open_wait",
            false => "commit_step",
        };
        retried(
            op,
            self.target(),
            Some(commit.run_id),
            || ScriptHost::commit_step(self, commit),
            || boundary::commit_landed(self, commit),
        )
        .await
    }

    async fn act(&self, id: RunId, action: Action, actor: &Actor) -> Result<RunRecord> {
        actor_ok(actor)?;
        retried(
            "act",
            self.target(),
            Some(id),
            || {
                let actor = actor.clone();
                self.tx(
                    TxKind::Write,
                    Box::new(move |c| {
                        Box::pin(async move { ends::act_in(c, id, action, &actor).await })
                    }),
                )
            },
            || boundary::action_landed(self, id, action, actor),
        )
        .await
    }

    async fn add_context(
        &self,
        id: RunId,
        context: &serde_json::Value,
        actor: &Actor,
    ) -> Result<RunRecord> {
        bounded("add_context", self.target(), Some(id), async {
            actor_ok(actor)?;
            json_ok("the context", Some(context))?;
            let (context, actor) = (context.clone(), actor.clone());
            self.tx(
                TxKind::Write,
                Box::new(move |c| {
                    Box::pin(async move { operator::add_context_in(c, id, &context, &actor).await })
                }),
            )
            .await
        })
        .await
    }

    async fn fork(&self, id: RunId, req: &ForkRequest, actor: &Actor) -> Result<RunRecord> {
        bounded("fork", self.target(), Some(id), async {
            actor_ok(actor)?;
            json_ok("the fork's input", req.input.as_ref())?;
            text_ok("the thread id", req.thread_id.as_deref())?;
            let (req, actor) = (req.clone(), actor.clone());
            self.tx(
                TxKind::Write,
                Box::new(move |c| {
                    Box::pin(async move { operator::fork_in(c, id, &req, &actor).await })
                }),
            )
            .await
        })
        .await
    }

    async fn list_waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let filter = filter.clone();
        let read = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(async move { waits::list_waits_in(c, &filter).await })),
        );
        placed(self.target(), None, read).await
    }

    async fn answer_wait(&self, id: WaitId, answer: &Answer, by: &Actor) -> Result<WaitRecord> {
        text_ok("`by`", Some(&by.by))?;
        text_ok("the reason", by.reason.as_deref())?;
        json_ok("the answer", serde_json::to_value(answer).ok().as_ref())?;
        // Sending the same answer again is a no-op that returns the wait
        // (`plan_answer`), so a retry needs no separate check.
        retried(
            "answer_wait",
            self.target(),
            None,
            || {
                let (answer, by) = (answer.clone(), by.clone());
                self.tx(
                    TxKind::Write,
                    Box::new(move |c| {
                        Box::pin(async move { waits::answer_in(c, id, &answer, &by).await })
                    }),
                )
            },
            || async { Ok(None) },
        )
        .await
    }

    async fn due_waits(&self) -> Result<Vec<WaitRecord>> {
        let read = self.tx(
            TxKind::Single,
            Box::new(|c| Box::pin(waits::due_waits_in(c))),
        );
        placed(self.target(), None, read).await
    }

    async fn expire_wait(&self, id: WaitId) -> Result<WaitRecord> {
        let write = self.tx(
            TxKind::Write,
            Box::new(move |c| Box::pin(waits::expire_in(c, id))),
        );
        bounded("expire_wait", self.target(), None, write).await
    }

    async fn thread_history(
        &self,
        thread: &str,
        before: RunId,
        max_runs: u32,
    ) -> Result<Vec<ThreadTurn>> {
        placed(self.target(), None, async {
            text_ok("the thread id", Some(thread))?;
            let thread = thread.to_owned();
            self.tx(
                TxKind::Single,
                Box::new(move |c| {
                    Box::pin(async move { threads::history_in(c, &thread, before, max_runs).await })
                }),
            )
            .await
        })
        .await
    }

    async fn events(&self, id: RunId) -> Result<Vec<EventRecord>> {
        self.events_after(id, 0).await
    }

    async fn joined(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
    ) -> Result<Option<cairn_core::Joined>> {
        let read = self.tx(
            TxKind::Read,
            Box::new(move |c| Box::pin(children::joined_in(c, id, idx, attempt))),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn close_join(
        &self,
        id: RunId,
        idx: StepIdx,
        attempt: cairn_core::Attempt,
        actor: &Actor,
    ) -> Result<()> {
        let read = self.tx(
            TxKind::Read,
            Box::new(move |c| Box::pin(children::children_in(c, id, Some((idx, attempt))))),
        );
        let children = placed(self.target(), Some(id), read).await?;
        for child in children {
            if !child.status.is_live() {
                continue;
            }
            match self.act(child.run_id, Action::Cancel, actor).await {
                Ok(_) | Err(Error::WrongState { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn children(&self, id: RunId) -> Result<Vec<cairn_core::ChildOutcome>> {
        let read = self.tx(
            TxKind::Read,
            Box::new(move |c| Box::pin(children::children_in(c, id, None))),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn events_after(&self, id: RunId, after: i64) -> Result<Vec<EventRecord>> {
        // One statement (no transaction) unless there is nothing after
        // `after`, when a second one tells a quiet run from none.
        let read = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(rows::events_in(c, id, after))),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn journal(
        &self,
        id: RunId,
        idx: StepIdx,
        generation: Option<u32>,
    ) -> Result<Vec<JournalEntry>> {
        let read = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(journal::journal_in(c, id, idx, generation))),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn append_journal(&self, item: &JournalAppend) -> Result<JournalEntry> {
        json_ok("a journal item", Some(&item.payload))?;
        events_ok(item.event.as_slice())?;
        retried(
            "append_journal",
            self.target(),
            Some(item.run_id),
            || ScriptHost::append_journal(self, item),
            || boundary::journal_landed(self, item),
        )
        .await
    }

    async fn record_events(&self, id: RunId, epoch: LeaseEpoch, events: &[NewEvent]) -> Result<()> {
        bounded("record_events", self.target(), Some(id), async {
            events_ok(events)?;
            let events = events.to_vec();
            self.tx(
                TxKind::Write,
                Box::new(move |c| {
                    Box::pin(async move { rows::record_events_in(c, id, epoch, &events).await })
                }),
            )
            .await
        })
        .await
    }

    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>> {
        let page = page.clone();
        let read = self.tx(
            TxKind::Read,
            Box::new(move |c| Box::pin(async move { threads::threads_in(c, &page).await })),
        );
        placed(self.target(), None, read).await
    }

    async fn thread(&self, id: &str) -> Result<(ThreadSummary, Vec<RunRecord>)> {
        placed(self.target(), None, async {
            text_ok("the thread id", Some(id))?;
            let id = id.to_owned();
            self.tx(
                TxKind::Read,
                Box::new(move |c| Box::pin(async move { threads::thread_in(c, &id).await })),
            )
            .await
        })
        .await
    }

    async fn compact(&self, policy: &crate::CompactPolicy) -> Result<crate::Compacted> {
        let compaction = retention::compact(self, policy);
        bounded("compact", self.target(), None, compaction).await
    }

    async fn vacuum(&self) -> Result<()> {
        let vacuum = self.tx(
            TxKind::Single,
            Box::new(|c| Box::pin(async move { retention::vacuum_in(c).await })),
        );
        placed(self.target(), None, vacuum).await
    }

    async fn check(&self) -> Result<Vec<String>> {
        // Unplaced, as it always was: `cairn doctor` prints the database's
        // own message.
        self.tx(
            TxKind::Single,
            Box::new(|c| {
                Box::pin(async move {
                    match c.dialect() {
                        Dialect::Postgres => Ok(vec![]),
                        Dialect::Sqlite => quick_check(c).await,
                    }
                })
            }),
        )
        .await
    }

    async fn claim_task(&self, task: &str, every: Duration, owner: &str) -> Result<bool> {
        let (task, owner) = (task.to_owned(), owner.to_owned());
        let write = self.tx(
            TxKind::Write,
            Box::new(move |c| {
                Box::pin(async move { retention::claim_task_in(c, &task, every, &owner).await })
            }),
        );
        bounded("claim_task", self.target(), None, write).await
    }

    async fn paused_for(&self, key: &str) -> Result<Option<Duration>> {
        let key = key.to_owned();
        let read = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(async move { pauses::paused_for_in(c, &key).await })),
        );
        placed(self.target(), None, read).await
    }

    async fn pause_key(&self, pause: &KeyPause) -> Result<cairn_core::Paused> {
        bounded("pause_key", self.target(), None, async {
            text_ok("the provider key", Some(&pause.key))?;
            text_ok("the reason", Some(&pause.reason))?;
            text_ok("the operator", Some(&pause.by))?;
            let pause = pause.clone();
            self.tx(
                TxKind::Single,
                Box::new(move |c| Box::pin(async move { pauses::pause_in(c, &pause).await })),
            )
            .await
        })
        .await
    }

    async fn resume_key(&self, key: &str) -> Result<KeyState> {
        bounded("resume_key", self.target(), None, async {
            text_ok("the provider key", Some(key))?;
            let key = key.to_owned();
            self.tx(
                TxKind::Write,
                Box::new(move |c| Box::pin(async move { pauses::resume_in(c, &key).await })),
            )
            .await
        })
        .await
    }

    async fn spent(&self, id: RunId) -> Result<cairn_core::Spent> {
        let read = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(async move { journal::spent_in(c, id).await })),
        );
        placed(self.target(), Some(id), read).await
    }

    async fn raise_budget(
        &self,
        id: RunId,
        by: &cairn_core::Budget,
        then: crate::AfterRaise,
        actor: &Actor,
    ) -> Result<RunRecord> {
        operator::raise_budget(self, id, by, then, actor).await
    }

    async fn upgrade_crew(&self, id: RunId, req: &crate::CrewUpgrade) -> Result<crate::CrewMove> {
        operator::upgrade_crew(self, id, req).await
    }

    async fn crews(&self) -> Result<Vec<crate::CrewVersion>> {
        let read = self.tx(TxKind::Read, Box::new(|c| Box::pin(crews::crews_in(c))));
        placed(self.target(), None, read).await
    }

    async fn crew_version(
        &self,
        fingerprint: &cairn_core::Fingerprint,
    ) -> Result<Option<cairn_core::CrewDef>> {
        let f = fingerprint.clone();
        let read = self.tx(
            TxKind::Single,
            Box::new(move |c| Box::pin(async move { crews::definition_in(c, &f).await })),
        );
        placed(self.target(), None, read).await
    }

    async fn keys(&self) -> Result<Vec<KeyState>> {
        let read = self.tx(
            TxKind::Read,
            Box::new(|c| Box::pin(async move { pauses::keys_in(c, None).await })),
        );
        placed(self.target(), None, read).await
    }

    async fn admit(&self, ask: &KeyAsk) -> Result<Admission> {
        permits::admit(self, ask).await
    }

    async fn reserve_budget(
        &self,
        id: RunId,
        epoch: LeaseEpoch,
        ask: &cairn_core::BudgetAsk,
    ) -> Result<cairn_core::TreeAnswer> {
        rollup::reserve(self, id, epoch, *ask).await
    }

    async fn release_budget(&self, id: RunId) -> Result<()> {
        rollup::release(self, id).await
    }

    async fn release(&self, permit: &Permit, used: u64) -> Result<()> {
        permits::release(self, permit, used).await
    }

    async fn set_limits(&self, key: &str, limits: &KeyLimits) -> Result<KeyState> {
        permits::set_limits(self, key, limits).await
    }

    async fn reset_limits(&self, key: &str) -> Result<KeyState> {
        permits::reset_limits(self, key).await
    }

    async fn set_thread_budget(
        &self,
        thread: &str,
        budget: &cairn_core::Budget,
        raise: bool,
        actor: &Actor,
    ) -> Result<crate::ThreadBudget> {
        threads::set_budget(self, thread, budget, raise, actor).await
    }

    async fn thread_budget(&self, thread: &str) -> Result<Option<crate::ThreadBudget>> {
        threads::budget(self, thread).await
    }

    async fn trace_pending(&self, limit: usize) -> Result<Vec<crate::TraceWork>> {
        traces::pending(self, limit).await
    }

    async fn trace_advance(&self, advance: &crate::TraceAdvance) -> Result<bool> {
        traces::advance(self, advance).await
    }
}
