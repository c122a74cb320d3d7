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

mod audit;
mod audited;
mod boundary;
pub(crate) mod children;
mod claim;
mod crews;
mod ends;
pub(crate) mod fresh;
mod hooks;
mod journal;
mod leases;
mod notices;
mod operator;
mod pauses;
mod people;
mod permits;
mod processes;
pub(crate) mod replication;
pub(crate) mod retention;
mod reuse;
mod rollup;
mod rows;
mod runs;
mod schedules;
mod signals;
mod storable;
#[cfg(test)]
mod tests;
mod threads;
mod traces;
mod tx;
mod votes;
mod waits;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use cairn_core::JournalEntry;

use crate::sql::{Conn, Pool};
use crate::{ClaimRequest, JournalAppend, NewRun, Result, Started, StepCommit};

pub use claim::ExpiryMemo;
pub(crate) use crews::{refingerprint, refingerprint_in};
pub(crate) use retention::quick_check;
pub(crate) use tx::pool_tx;

/// What every backend holds for the script, whatever its database: the
/// pool, its name in messages, its live text, its claims' memo and its
/// write boundary's retry window.
#[derive(Clone)]
pub struct HostParts {
    pub(crate) db: Pool,
    /// The database in messages: the SQLite file, or the PostgreSQL server
    /// and database (never a password).
    pub(crate) target: String,
    /// The live text of the store's `llm` steps (`live.rs`).
    pub(crate) live: crate::LiveHub,
    /// When this store's claims last found no lease expired (`claim.rs`).
    pub(crate) expiry: std::sync::Arc<ExpiryMemo>,
    /// How long a write boundary tries a write again after a fault that may
    /// pass (`boundary::retried`): `OpenOptions::retry_for`.
    pub(crate) retry_for: Duration,
}

/// What a backend brings to the script: how it opens a transaction, and
/// its fast paths. Not nameable outside this crate (a sealed trait): every
/// [`Store`] is one of Cairn's backends.
#[async_trait]
pub trait ScriptHost: Send + Sync + 'static {
    /// What it holds for the script ([`HostParts`]).
    fn parts(&self) -> &HostParts;

    fn db(&self) -> &Pool {
        &self.parts().db
    }

    /// [`HostParts::target`].
    fn target(&self) -> &str {
        &self.parts().target
    }

    /// [`HostParts::live`].
    fn live(&self) -> &crate::LiveHub {
        &self.parts().live
    }

    /// [`HostParts::expiry`].
    fn expiry(&self) -> &ExpiryMemo {
        &self.parts().expiry
    }

    /// [`HostParts::retry_for`].
    fn retry_for(&self) -> Duration {
        self.parts().retry_for
    }

    /// The end of a step: on both databases a measured fast path of one
    /// round trip, so each backend writes its own.
    async fn commit_step(&self, c: &StepCommit) -> Result<()>;

    /// One journal item; the script's version is a transaction of three
    /// statements.
    async fn append_journal(&self, a: &JournalAppend) -> Result<JournalEntry> {
        let a = a.clone();
        self.tx(TxKind::Write, script!(|c| journal::append_in(c, &a).await))
            .await
    }

    /// `RunStore::submit` (`req`: none) or `LeaseStore::start` of a
    /// [`fresh::FreshStart`] in one round trip, where the backend has such
    /// a path: `None` where it has not, or when the run's idempotency key is
    /// taken (the script's transaction, which reads the run holding it,
    /// then runs).
    async fn start_fresh(
        &self,
        _new: &NewRun,
        _def: &serde_json::Value,
        _req: Option<&ClaimRequest>,
    ) -> Result<Option<Started>> {
        Ok(None)
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

/// The run and its lease owner now (`None`: not running), read from one
/// snapshot: what a refused fenced write is explained by.
pub(crate) async fn run_and_owner<H: ScriptHost + ?Sized>(
    host: &H,
    id: cairn_core::RunId,
) -> Result<(cairn_core::RunRecord, Option<String>)> {
    host.tx(
        TxKind::Read,
        script!(|c| Ok((
            rows::fetch_run(c, id, false).await?,
            rows::lease_owner_in(c, id).await?,
        ))),
    )
    .await
}

/// How many corrupt runs one `claim_next` sets aside before it answers.
pub(super) const SET_ASIDE_PER_CLAIM: usize = 16;

// ------------------------------------------------------------- the contract
