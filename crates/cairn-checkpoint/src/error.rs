//! `checkpoint::Error`: everything storage can refuse or fail with.

use std::path::PathBuf;

use cairn_core::{Corruption, LeaseEpoch, RunId, RunStatus};

/// A storage error. Variants a person can act on carry what they need to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No run has this id.
    #[error("run {0} not found")]
    RunNotFound(RunId),
    /// Stored state does not make sense (missing or undecodable checkpoint,
    /// cursor disagreeing with rows).
    #[error(transparent)]
    Corruption(#[from] Corruption),
    /// A commit or claim carried an epoch older than the run's: another
    /// process claimed the run since. Nothing was written.
    #[error("run {run}: lease epoch {held} is stale (the run is now at epoch {current}); another process claimed it, so this write was rejected")]
    StaleEpoch {
        run: RunId,
        held: LeaseEpoch,
        current: LeaseEpoch,
    },
    /// A write carried the run's current epoch but not its owner: the epoch
    /// was granted twice (a claim lost with an asynchronous failover of the
    /// database, then the same number granted to another process). The
    /// writer no longer holds the run. Nothing was written.
    #[error("run {run}: lease epoch {epoch} is held by `{owner}`, not by `{held_by}` (the epoch was granted again, as after a database failover lost a claim), so this write was rejected")]
    LeaseReused {
        run: RunId,
        epoch: LeaseEpoch,
        owner: String,
        held_by: String,
    },
    /// A takeover was refused: the run is running under a lease that has
    /// not expired (its holder may be alive and heartbeating). Nothing was
    /// written.
    #[error("run {run} is running under a live lease held by `{owner}` until {} (database clock); wait for it to stop, or take it over explicitly", .expires_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))]
    LeaseHeld {
        run: RunId,
        owner: String,
        expires_at: chrono::DateTime<chrono::Utc>,
    },
    /// The run is queued behind a retry back-off that has not passed yet.
    #[error("run {run} is waiting to retry; it may be claimed in {} ms", .wait.as_millis())]
    NotYet {
        run: RunId,
        wait: std::time::Duration,
    },
    /// The run is not in a state that allows the operation.
    #[error("run {run} is `{status}`: cannot {action}")]
    WrongState {
        run: RunId,
        status: RunStatus,
        action: &'static str,
    },
    /// The run cannot move to the offered crew version
    /// (`cairn_core::upgrade`); nothing was written.
    #[error("run {run} cannot move to the new crew version: {source}")]
    Incompatible {
        run: RunId,
        #[source]
        source: cairn_core::upgrade::Incompatible,
    },
    /// A cancel was requested: the step's result is discarded and the run
    /// must be committed as cancelled.
    #[error("run {run} has a cancel request; its step result was discarded")]
    CancelRequested { run: RunId },
    /// A submit with `on_busy = reject` found its thread busy; nothing was
    /// stored.
    #[error("thread `{thread}` is busy with run {run} (`{status}`); nothing was stored")]
    ThreadBusy {
        thread: String,
        run: RunId,
        status: RunStatus,
    },
    /// The run is queued behind an earlier run of its thread that has not
    /// finished; it may be claimed once that one has.
    #[error("run {run} waits for run {behind} of its thread to finish")]
    QueuedBehind { run: RunId, behind: RunId },
    /// No run belongs to this thread.
    #[error("thread `{0}` not found (no run belongs to it)")]
    ThreadNotFound(String),
    /// No provider key has this name (none was ever paused).
    #[error("provider key `{0}` not found (it was never paused)")]
    KeyNotFound(String),
    /// The principal may not answer this wait (its approver policy), or
    /// voted on it already; nothing was stored.
    #[error("wait {wait}: {why}")]
    Ineligible {
        wait: cairn_core::WaitId,
        why: cairn_core::Ineligible,
    },
    /// No schedule has this name.
    #[error("schedule `{0}` not found")]
    ScheduleNotFound(String),
    /// A schedule of this name exists already; nothing was stored.
    #[error("schedule `{0}` exists already; nothing was stored (delete it first to change it)")]
    ScheduleExists(String),
    /// A schedule's definition that cannot fire; nothing was stored.
    #[error("schedule: {0}")]
    BadSchedule(String),
    /// A signal's target resolves to no unfinished run; nothing stored.
    #[error("no unfinished run for `{target}`: {why}; nothing was stored")]
    NoSignalTarget { target: String, why: String },
    /// A signal's target resolves to several unfinished runs; nothing
    /// stored (a signal never goes to the first match).
    #[error("`{target}` names {} unfinished runs ({}); send to one run id instead; nothing was stored", .runs.len(), .runs.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", "))]
    AmbiguousSignalTarget {
        target: String,
        runs: Vec<cairn_core::RunId>,
    },
    /// The sender may not signal that run (another tenant's); nothing
    /// stored.
    #[error("signal refused: {0}; nothing was stored")]
    SignalForbidden(String),
    /// A signal that cannot be stored as sent (a bad name or id, too many
    /// buffered for its run); nothing stored.
    #[error("signal: {0}; nothing was stored")]
    BadSignal(String),
    /// No hook has this name.
    #[error("hook `{0}` not found")]
    HookNotFound(String),
    /// A hook of this name exists already; nothing was stored.
    #[error("hook `{0}` exists already; nothing was stored (delete it first to change it)")]
    HookExists(String),
    /// A hook's definition that cannot be used; nothing was stored.
    #[error("hook: {0}; nothing was stored")]
    BadHook(String),
    /// No principal has this name.
    #[error("principal `{0}` not found")]
    PrincipalNotFound(String),
    /// A principal of this name exists already; nothing was stored.
    #[error("principal `{0}` exists already; nothing was stored")]
    PrincipalExists(String),
    /// No wait has this id.
    #[error("wait {0} not found")]
    WaitNotFound(cairn_core::WaitId),
    /// The wait is no longer open (and this is not a repeat of its answer).
    #[error("wait {wait} is `{status}`; it can no longer be answered")]
    WaitClosed {
        wait: cairn_core::WaitId,
        status: cairn_core::WaitStatus,
    },
    /// The answer does not fit the wait's kind.
    #[error("wait {wait} is a `{kind}` wait: {hint}")]
    BadAnswer {
        wait: cairn_core::WaitId,
        kind: cairn_core::WaitKind,
        hint: &'static str,
    },
    /// A fork that cannot be made.
    #[error("cannot fork run {run}: {reason}")]
    ForkRefused { run: RunId, reason: String },
    /// A thread budget that cannot be set as asked (a raise of a limit
    /// the thread does not have). Nothing was written.
    #[error("thread `{thread}`: {reason}")]
    BadBudget { thread: String, reason: String },
    /// Context to merge into a run's input was refused: it must be a JSON
    /// object, and so must the run's input. Nothing was written.
    #[error("run {run}: cannot add this context: {reason}")]
    BadContext { run: RunId, reason: String },
    /// An idempotency key was reused for a different crew or input.
    #[error("idempotency key `{key}` already belongs to run {run} with a different {what}; use a new key")]
    IdempotencyConflict {
        key: String,
        run: RunId,
        what: &'static str,
    },
    /// The database URL is not one Cairn understands.
    #[error("`{url}` is not a database URL Cairn understands ({reason}); use sqlite://PATH or postgres://USER@HOST:PORT/DB")]
    BadUrl { url: String, reason: String },
    /// A read-only command was pointed at a SQLite file that does not exist.
    #[error("database file {} does not exist (nothing has run here yet, or this is not the database meant)", .0.display())]
    MissingFile(PathBuf),
    /// A read-only command was pointed at a PostgreSQL database (or schema)
    /// without Cairn's tables; nothing was created.
    #[error("{0} holds no Cairn schema (no `runs` table on its search_path): nothing has run here yet, or this is not the database meant")]
    NoSchema(String),
    /// The database did not answer, or refused the connection.
    #[error("cannot reach {target}: {reason}")]
    Unreachable {
        /// Backend, host, port and database; never the password.
        target: String,
        reason: String,
    },
    /// Applying the embedded migrations failed.
    #[error("migrating {target} failed: {source}")]
    Migrate {
        target: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A value holds a NUL character, which neither backend stores (one
    /// rule for both: PostgreSQL cannot); the field is named and nothing was
    /// written.
    #[error(transparent)]
    Unstorable(#[from] cairn_core::Unstorable),
    /// A statement's text or parameters do not fit together (a bug in
    /// Cairn, never in the caller's input).
    #[error("internal storage error: {0}")]
    Statement(String),
    /// A storage script awaited something other than its connection's
    /// statements, which SQLite's writer thread cannot wait for (the
    /// writer-thread rule, a bug in Cairn); its transaction was rolled back.
    #[error("internal storage error: a storage script waited on something other than its connection; nothing it wrote was kept")]
    ScriptWaited,
    /// The database failed during an operation: what went wrong (typed),
    /// which database (file or server) and run, and the database's own
    /// message, once.
    #[error("{target}: {fault}{}: {message}", .run.map(|r| format!(" (run {r})")).unwrap_or_default())]
    Db {
        fault: DbFault,
        /// The SQLite file or the PostgreSQL server and database.
        target: String,
        /// The run the operation was about, if one.
        run: Option<RunId>,
        message: String,
    },
    /// A database error not yet placed (the storage script names it as a
    /// [`Error::Db`] before it leaves the store). Its text is the database's
    /// message once, not again as a source.
    #[error("database error: {}", db_message(.0))]
    Database(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Database(e)
    }
}

/// What kind of database failure an [`Error::Db`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DbFault {
    /// The file or directory refuses writes.
    ReadOnly,
    /// A PostgreSQL server refuses writes now (SQLSTATE 25006): a standby,
    /// a primary demoted by a failover, or one made read-only for a
    /// while. Like a lost connection it may pass, so a write boundary tries
    /// again within its window and first asks whether the write landed.
    ReadOnlyServer,
    /// No space left for the write.
    DiskFull,
    /// The file's pages do not make sense (`cairn doctor` checks it).
    Corrupt,
    /// Locked by another writer past the busy timeout, or a conflict.
    Busy,
    /// The connection failed or was lost (server down, pool timed out).
    Connection,
    /// Anything else.
    Other,
}

impl std::fmt::Display for DbFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DbFault::ReadOnly => "cannot write: the database is read-only",
            DbFault::ReadOnlyServer => {
                "cannot write: the server is read-only (a standby, or during a failover)"
            }
            DbFault::DiskFull => "cannot write: the disk is full",
            DbFault::Corrupt => "the database is corrupt (check it with `cairn doctor`)",
            DbFault::Busy => "the database is busy",
            DbFault::Connection => "lost the connection to the database",
            DbFault::Other => "the database failed",
        })
    }
}

impl DbFault {
    /// Classifies a database error by SQLite result code (primary code of
    /// an extended one) or PostgreSQL SQLSTATE.
    pub fn of(e: &sqlx::Error) -> DbFault {
        match e {
            sqlx::Error::Database(d) => {
                let code = d.code().map(|c| c.into_owned()).unwrap_or_default();
                // Many SQLSTATEs are all digits too (25006, 40001, 53100,
                // 08006): only SQLite's code is read as a number.
                let postgres = d
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some();
                if let (false, Ok(n)) = (postgres, code.parse::<i32>()) {
                    return match n & 0xff {
                        8 => DbFault::ReadOnly,
                        13 => DbFault::DiskFull,
                        11 | 26 => DbFault::Corrupt,
                        5 | 6 => DbFault::Busy,
                        14 => DbFault::Connection,
                        _ => DbFault::Other,
                    };
                }
                match code.as_str() {
                    "25006" => DbFault::ReadOnlyServer,
                    "53100" => DbFault::DiskFull,
                    "XX001" | "XX002" => DbFault::Corrupt,
                    "40001" | "40P01" | "55P03" | "53300" => DbFault::Busy,
                    c if c.starts_with("08") || c.starts_with("57P") => DbFault::Connection,
                    _ => DbFault::Other,
                }
            }
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_)
            | sqlx::Error::Tls(_) => DbFault::Connection,
            _ => DbFault::Other,
        }
    }
}

/// The database's own message: without sqlx's prefix and code for a
/// database error, whole otherwise.
pub(crate) fn db_message(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(d) => d.message().to_owned(),
        e => e.to_string(),
    }
}

impl Error {
    /// A [`Error::Database`] placed: the database and run named, its fault
    /// typed. Any other error is returned as it is.
    pub(crate) fn placed(self, target: &str, run: Option<RunId>) -> Error {
        match self {
            Error::Database(e) => Error::Db {
                fault: DbFault::of(&e),
                target: target.to_owned(),
                run,
                message: db_message(&e),
            },
            e => e,
        }
    }
}

/// What a storage error is, for the one table that gives each its class,
/// HTTP status, exit code and code string (`cairn::Error::class`). Not
/// `#[non_exhaustive]`, so that table matches it without a wildcard arm:
/// a new [`Error`] variant must be given a kind in [`Error::kind`] (its
/// match is exhaustive, inside this crate) and a new kind a row there, or
/// the workspace does not compile. Nothing falls through to "internal".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RunNotFound,
    WaitNotFound,
    ThreadNotFound,
    KeyNotFound,
    PrincipalNotFound,
    PrincipalExists,
    ScheduleNotFound,
    ScheduleExists,
    BadSchedule,
    NoSignalTarget,
    AmbiguousSignalTarget,
    BadSignal,
    SignalForbidden,
    HookNotFound,
    HookExists,
    BadHook,
    /// Not among a wait's approvers, or the run's own and the policy says no.
    NotAnApprover,
    /// A second, different vote by one principal on one wait.
    AlreadyVoted,
    IdempotencyConflict,
    WrongState,
    /// A run that cannot move to a crew version.
    Incompatible,
    ForkRefused,
    WaitClosed,
    ThreadBusy,
    QueuedBehind,
    LeaseHeld,
    BadAnswer,
    BadContext,
    BadBudget,
    Unstorable,
    BadUrl,
    MissingFile,
    NoSchema,
    /// The database cannot be reached or refuses writes now: try later.
    Unavailable,
    /// Stored state that does not make sense.
    Corruption,
    /// Refusals the executor handles itself (a stale epoch, a back-off
    /// not yet over, a cancel request); one that escapes is a bug.
    Internal,
}

impl Error {
    /// This error's [`Kind`].
    pub fn kind(&self) -> Kind {
        match self {
            Error::RunNotFound(_) => Kind::RunNotFound,
            Error::WaitNotFound(_) => Kind::WaitNotFound,
            Error::ThreadNotFound(_) => Kind::ThreadNotFound,
            Error::KeyNotFound(_) => Kind::KeyNotFound,
            Error::PrincipalNotFound(_) => Kind::PrincipalNotFound,
            Error::ScheduleNotFound(_) => Kind::ScheduleNotFound,
            Error::ScheduleExists(_) => Kind::ScheduleExists,
            Error::BadSchedule(_) => Kind::BadSchedule,
            Error::NoSignalTarget { .. } => Kind::NoSignalTarget,
            Error::AmbiguousSignalTarget { .. } => Kind::AmbiguousSignalTarget,
            Error::BadSignal(_) => Kind::BadSignal,
            Error::SignalForbidden(_) => Kind::SignalForbidden,
            Error::HookNotFound(_) => Kind::HookNotFound,
            Error::HookExists(_) => Kind::HookExists,
            Error::BadHook(_) => Kind::BadHook,
            Error::PrincipalExists(_) => Kind::PrincipalExists,
            Error::Ineligible { why, .. } => match why {
                cairn_core::Ineligible::AlreadyVoted(_) => Kind::AlreadyVoted,
                cairn_core::Ineligible::NotAllowed(_) | cairn_core::Ineligible::OwnRun(_) => {
                    Kind::NotAnApprover
                }
            },
            Error::IdempotencyConflict { .. } => Kind::IdempotencyConflict,
            Error::WrongState { .. } => Kind::WrongState,
            Error::Incompatible { .. } => Kind::Incompatible,
            Error::ForkRefused { .. } => Kind::ForkRefused,
            Error::WaitClosed { .. } => Kind::WaitClosed,
            Error::ThreadBusy { .. } => Kind::ThreadBusy,
            Error::QueuedBehind { .. } => Kind::QueuedBehind,
            Error::LeaseHeld { .. } => Kind::LeaseHeld,
            Error::BadAnswer { .. } => Kind::BadAnswer,
            Error::BadContext { .. } => Kind::BadContext,
            Error::BadBudget { .. } => Kind::BadBudget,
            Error::Unstorable(_) => Kind::Unstorable,
            Error::BadUrl { .. } => Kind::BadUrl,
            Error::MissingFile(_) => Kind::MissingFile,
            Error::NoSchema(_) => Kind::NoSchema,
            Error::Unreachable { .. } => Kind::Unavailable,
            Error::Db { fault, .. } => fault.kind(),
            Error::Corruption(_) => Kind::Corruption,
            Error::StaleEpoch { .. }
            | Error::LeaseReused { .. }
            | Error::NotYet { .. }
            | Error::CancelRequested { .. }
            | Error::Migrate { .. }
            | Error::Statement(_)
            | Error::ScriptWaited
            | Error::Database(_) => Kind::Internal,
        }
    }
}

impl DbFault {
    /// A database that refuses writes or cannot be reached now is
    /// unavailable (try later); a corrupt file and the rest are internal.
    pub fn kind(self) -> Kind {
        match self {
            DbFault::ReadOnly
            | DbFault::ReadOnlyServer
            | DbFault::DiskFull
            | DbFault::Busy
            | DbFault::Connection => Kind::Unavailable,
            DbFault::Corrupt | DbFault::Other => Kind::Internal,
        }
    }

    /// Whether the fault may pass within a write boundary's window (a lost
    /// connection, a server read-only for a failover), so the write is
    /// tried again after asking whether it landed.
    pub fn may_pass(self) -> bool {
        matches!(self, DbFault::Connection | DbFault::ReadOnlyServer)
    }
}
