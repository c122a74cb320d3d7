//! `cairn::Error`: one error for the library facade, wrapping the crates',
//! and [`ErrorClass`], the one classification of errors: every front end
//! (the HTTP API's statuses, the CLI's exit codes, the CLI's client mode)
//! reads it from the table in [`ErrorClass::http_status`] and
//! [`ErrorClass::exit_code`].

use std::path::PathBuf;

use cairn_core::RunStatus;

/// An error from the Cairn library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A crew definition was refused.
    #[error(transparent)]
    Crew(#[from] cairn_core::CrewError),
    /// Storage refused or failed.
    #[error(transparent)]
    Store(#[from] cairn_checkpoint::Error),
    /// The executor refused or failed.
    #[error(transparent)]
    Executor(#[from] cairn_scheduler::Error),
    /// A crew uses a Rust agent this process does not provide.
    #[error("agent `{role}` needs the Rust handler `{handler}`, which this process does not provide; resume the run from the service that defines its crew")]
    MissingHandler { role: String, handler: String },
    /// A value over its size cap; nothing was stored.
    #[error(transparent)]
    TooLarge(#[from] cairn_core::TooLarge),
    /// A crew file was refused.
    #[error("{}: {source}", path.display())]
    CrewFile {
        path: PathBuf,
        #[source]
        source: cairn_core::CrewError,
    },
    /// A thread id that breaks the rule (see [`crate::ThreadId`]); nothing
    /// was stored.
    #[error(transparent)]
    BadThreadId(#[from] crate::BadThreadId),
    /// A tenant name that breaks the rule (see [`cairn_core::Tenant`]);
    /// nothing was stored.
    #[error(transparent)]
    BadTenant(#[from] cairn_core::BadTenant),
    /// A principal's or a group's name, or a role, that breaks the rule;
    /// nothing was stored.
    #[error(transparent)]
    BadPrincipal(#[from] cairn_core::BadPrincipal),
    /// A resume named a thread the run does not belong to; nothing was
    /// written.
    #[error("run {run} does not belong to thread `{thread}` ({}); nothing was resumed", match .actual {
        Some(t) => format!("its thread is `{t}`"),
        None => "it belongs to no thread".to_owned(),
    })]
    WrongThread {
        run: cairn_core::RunId,
        thread: String,
        /// The run's own thread.
        actual: Option<String>,
    },
    /// A crew offered for a run's remaining steps changes the role of a
    /// step the run already has; nothing was written.
    #[error("run {run}: the new crew does not fit: {reason}")]
    CrewDoesNotFit {
        run: cairn_core::RunId,
        reason: String,
    },
    /// No stored version of the crew has this version (or fingerprint
    /// start); nothing was changed.
    #[error("crew `{crew}` has no stored version `{version}` (name a version, or the start of a fingerprint){}", known_versions(.known))]
    UnknownCrewVersion {
        crew: String,
        version: String,
        /// The versions stored, `version (fingerprint)`.
        known: Vec<String>,
    },
    /// Several stored versions of the crew have this version text (one
    /// per fingerprint: the same version number given to different
    /// definitions); nothing was changed. Its code is
    /// `crew_version_not_found`'s, as it was.
    #[error(
        "crew `{crew}` has {} stored versions `{version}`, one per fingerprint; name one by its \
         fingerprint (6 or more of its hex digits) instead of `{version}`: {}",
        .fingerprints.len(),
        .fingerprints.join(", ")
    )]
    AmbiguousCrewVersion {
        crew: String,
        version: String,
        /// Each `fingerprint (first seen TIME)`.
        fingerprints: Vec<String>,
    },
    /// A provider key's limit out of range; nothing was stored.
    #[error(transparent)]
    BadLimit(#[from] cairn_core::BadLimit),
    /// A provider key name an operator gave that is empty, too long or
    /// holds a control character; nothing was stored.
    #[error(transparent)]
    BadKey(#[from] cairn_core::BadKey),
    /// A pause longer than any kept; nothing was stored.
    #[error(transparent)]
    PauseTooLong(#[from] cairn_core::PauseTooLong),
    /// An answer quoted the digest of something other than what the wait
    /// asks about now (see [`cairn_core::wait_digest`]); nothing was
    /// stored.
    #[error("wait {wait} asks about something other than what the answer was given for (it quotes {quoted}, the wait's digest is {current}); look at the wait again and answer that")]
    StaleDigest {
        wait: cairn_core::WaitId,
        quoted: String,
        current: String,
    },
    /// A schedule's definition was refused; nothing was stored.
    #[error(transparent)]
    BadSchedule(#[from] cairn_core::BadSchedule),

    /// A delivery to a hook failed its scheme's check; nothing stored.
    #[error("the delivery is refused: {0}; nothing was stored")]
    HookRefused(cairn_core::hook::Unverified),

    /// A verified delivery that does not map to a signal (its body is not
    /// JSON, a template fails on it); nothing stored.
    #[error("{0}; nothing was stored")]
    BadDelivery(String),
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What kind of failure an error is, for whoever reports it: the HTTP API
/// turns a class into a status, the CLI into an exit code, and the CLI's
/// client mode turns a status back into the class. The table:
///
/// | class | HTTP | exit |
/// | --- | --- | --- |
/// | `BadInput` | 400 | 2 |
/// | `Unauthorized` | 401 | 1 |
/// | `NotFound` | 404 | 2 |
/// | `MethodNotAllowed` | 405 | 1 |
/// | `Conflict` | 409 | 2 |
/// | `Busy` | 409 | 1 |
/// | `Failed` | 409 | 3 |
/// | `Waiting` | 409 | 4 |
/// | `Interrupted` | 409 | 5 |
/// | `Cancelled` | 409 | 6 |
/// | `TooLarge` | 413 | 2 |
/// | `UnsupportedMediaType` | 415 | 1 |
/// | `Invalid` | 422 | 2 |
/// | `Internal` | 500 | 1 |
/// | `Config` | 500 | 2 |
/// | `Unavailable` | 503 | 1 |
///
/// `Unauthorized`, `MethodNotAllowed` and `UnsupportedMediaType` belong to
/// the HTTP API alone; the engine never returns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// What was asked is malformed (a request, an id, a query).
    BadInput,
    /// No valid credentials (HTTP API only).
    Unauthorized,
    /// Valid credentials whose principal may not do this: its role is
    /// below what the route needs, a wait's policy does not name it, or it
    /// is bound to other tenants. Nothing was stored.
    Forbidden,
    /// No run, wait, crew or route by that name.
    NotFound,
    /// The method is not served on that route (HTTP API only).
    MethodNotAllowed,
    /// The run or wait is not in a state that allows it: a wrong state, a
    /// closed wait, a refused fork, a reused idempotency key, another crew.
    Conflict,
    /// The run is executing under another process's lease.
    Busy,
    /// The run is failed (parked for an operator).
    Failed,
    /// The run waits for a person's answer.
    Waiting,
    /// The run is interrupted (waits for an explicit continue).
    Interrupted,
    /// The run is cancelled.
    Cancelled,
    /// A value over its size cap.
    TooLarge,
    /// A body that is not JSON (HTTP API only).
    UnsupportedMediaType,
    /// Well-formed, but it does not fit (a body's shape, an answer for
    /// another kind of wait).
    Invalid,
    /// Anything else: a bug, corruption, a database error.
    Internal,
    /// What this process was set up with is refused: the database URL or
    /// file, a crew file. The user's mistake on the command line; the
    /// operator's on a server.
    Config,
    /// The database does not answer.
    Unavailable,
}

impl ErrorClass {
    /// Every class, in the table's order (a status's first class is the
    /// one [`ErrorClass::from_http_status`] returns).
    pub const ALL: [ErrorClass; 17] = [
        ErrorClass::BadInput,
        ErrorClass::Unauthorized,
        ErrorClass::Forbidden,
        ErrorClass::NotFound,
        ErrorClass::MethodNotAllowed,
        ErrorClass::Conflict,
        ErrorClass::Busy,
        ErrorClass::Failed,
        ErrorClass::Waiting,
        ErrorClass::Interrupted,
        ErrorClass::Cancelled,
        ErrorClass::TooLarge,
        ErrorClass::UnsupportedMediaType,
        ErrorClass::Invalid,
        ErrorClass::Internal,
        ErrorClass::Config,
        ErrorClass::Unavailable,
    ];

    /// The class's HTTP status and CLI exit code: the one table.
    const fn row(self) -> (u16, u8) {
        match self {
            ErrorClass::BadInput => (400, 2),
            ErrorClass::Unauthorized => (401, 1),
            ErrorClass::Forbidden => (403, 1),
            ErrorClass::NotFound => (404, 2),
            ErrorClass::MethodNotAllowed => (405, 1),
            ErrorClass::Conflict => (409, 2),
            ErrorClass::Busy => (409, 1),
            ErrorClass::Failed => (409, 3),
            ErrorClass::Waiting => (409, 4),
            ErrorClass::Interrupted => (409, 5),
            ErrorClass::Cancelled => (409, 6),
            ErrorClass::TooLarge => (413, 2),
            ErrorClass::UnsupportedMediaType => (415, 1),
            ErrorClass::Invalid => (422, 2),
            ErrorClass::Internal => (500, 1),
            ErrorClass::Config => (500, 2),
            ErrorClass::Unavailable => (503, 1),
        }
    }

    /// The HTTP status the API answers with.
    pub const fn http_status(self) -> u16 {
        self.row().0
    }

    /// The `cairn` command's exit code (a contract; see docs/cli.md).
    pub const fn exit_code(self) -> u8 {
        self.row().1
    }

    /// The class of an HTTP error status, for a client: the first class in
    /// the table with that status (`Conflict` for 409, `Internal` for
    /// 500), `Internal` for a status no class has.
    pub fn from_http_status(status: u16) -> ErrorClass {
        Self::ALL
            .into_iter()
            .find(|c| c.http_status() == status)
            .unwrap_or(ErrorClass::Internal)
    }

    /// The class of a run parked in `status`, when something needed it to
    /// be elsewhere (`Busy` for a run that is still queued or running).
    pub fn of_status(status: RunStatus) -> ErrorClass {
        match status {
            RunStatus::Failed => ErrorClass::Failed,
            RunStatus::Waiting => ErrorClass::Waiting,
            RunStatus::Interrupted => ErrorClass::Interrupted,
            RunStatus::Cancelled => ErrorClass::Cancelled,
            RunStatus::Queued | RunStatus::Running => ErrorClass::Busy,
            RunStatus::Succeeded => ErrorClass::Conflict,
        }
    }
}

impl Error {
    /// The corruption this error reports (a run whose stored state does not
    /// make sense), wherever it was raised.
    pub fn corruption(&self) -> Option<&cairn_core::Corruption> {
        match self {
            Error::Store(cairn_checkpoint::Error::Corruption(c)) => Some(c),
            Error::Executor(e) => e.corruption(),
            _ => None,
        }
    }

    /// The storage error inside, wherever it was wrapped.
    pub fn store_error(&self) -> Option<&cairn_checkpoint::Error> {
        match self {
            Error::Store(e) | Error::Executor(cairn_scheduler::Error::Store(e)) => Some(e),
            _ => None,
        }
    }

    /// What kind of failure this is (see [`ErrorClass`] for its HTTP
    /// status and exit code).
    pub fn class(&self) -> ErrorClass {
        self.classified().0
    }

    /// A stable snake_case name for the error: the HTTP API's error `code`
    /// (which answers `internal` for every 500 instead).
    pub fn code(&self) -> &'static str {
        self.classified().1
    }

    /// The one table from an error to its class and code. Every match is
    /// exhaustive, with no wildcard arm: a new error variant here, or a new
    /// storage or executor [`Kind`](cairn_checkpoint::Kind), does not
    /// compile until it has a row, so none ships as an unplanned 500.
    fn classified(&self) -> (ErrorClass, &'static str) {
        use cairn_scheduler::Kind as X;
        match self {
            Error::Store(e) => store_class(e.kind()),
            Error::Executor(e) => match e.kind() {
                X::Store(k) => store_class(k),
                X::Corruption => (ErrorClass::Internal, "internal"),
                X::RunFailed => (ErrorClass::Failed, "wrong_state"),
                X::NotResumable(status) => (ErrorClass::of_status(status), "wrong_state"),
                X::Leased => (ErrorClass::Busy, "wrong_state"),
                X::LeaseLost => (ErrorClass::Internal, "internal"),
                X::CrewMismatch => (ErrorClass::Conflict, "crew_mismatch"),
            },
            Error::Crew(_) | Error::CrewFile { .. } => (ErrorClass::Config, "bad_crew"),
            Error::ReadFile { .. } => (ErrorClass::Config, "unreadable_file"),
            Error::MissingHandler { .. } => (ErrorClass::Internal, "missing_handler"),
            Error::TooLarge(_) => (ErrorClass::TooLarge, "too_large"),
            Error::BadThreadId(_) => (ErrorClass::BadInput, "bad_thread_id"),
            Error::BadTenant(_) => (ErrorClass::BadInput, "bad_tenant"),
            Error::BadPrincipal(_) => (ErrorClass::BadInput, "bad_principal"),
            Error::BadLimit(_) => (ErrorClass::BadInput, "bad_limit"),
            Error::BadKey(_) => (ErrorClass::BadInput, "bad_key"),
            Error::PauseTooLong(_) => (ErrorClass::BadInput, "bad_age"),
            Error::WrongThread { .. } => (ErrorClass::Conflict, "wrong_thread"),
            Error::StaleDigest { .. } => (ErrorClass::Conflict, "stale_digest"),
            Error::BadSchedule(_) => (ErrorClass::BadInput, "bad_schedule"),
            Error::HookRefused(_) => (ErrorClass::Unauthorized, "hook_unauthorized"),
            Error::BadDelivery(_) => (ErrorClass::BadInput, "bad_delivery"),
            Error::CrewDoesNotFit { .. } => (ErrorClass::Conflict, "crew_mismatch"),
            Error::UnknownCrewVersion { .. } | Error::AmbiguousCrewVersion { .. } => {
                (ErrorClass::NotFound, "crew_version_not_found")
            }
        }
    }
}

fn known_versions(known: &[String]) -> String {
    match known {
        [] => String::new(),
        k => format!("; stored: {}", k.join(", ")),
    }
}

/// The storage half of [`Error::classified`]'s table.
fn store_class(kind: cairn_checkpoint::Kind) -> (ErrorClass, &'static str) {
    use cairn_checkpoint::Kind as S;
    match kind {
        S::RunNotFound => (ErrorClass::NotFound, "run_not_found"),
        S::WaitNotFound => (ErrorClass::NotFound, "wait_not_found"),
        S::ThreadNotFound => (ErrorClass::NotFound, "thread_not_found"),
        S::KeyNotFound => (ErrorClass::NotFound, "key_not_found"),
        S::PrincipalNotFound => (ErrorClass::NotFound, "principal_not_found"),
        S::PrincipalExists => (ErrorClass::Conflict, "principal_exists"),
        S::ScheduleNotFound => (ErrorClass::NotFound, "schedule_not_found"),
        S::ScheduleExists => (ErrorClass::Conflict, "schedule_exists"),
        S::BadSchedule => (ErrorClass::BadInput, "bad_schedule"),
        S::NoSignalTarget => (ErrorClass::NotFound, "no_signal_target"),
        S::AmbiguousSignalTarget => (ErrorClass::Conflict, "ambiguous_target"),
        S::BadSignal => (ErrorClass::BadInput, "bad_signal"),
        S::SignalForbidden => (ErrorClass::Forbidden, "forbidden"),
        S::HookNotFound => (ErrorClass::NotFound, "hook_not_found"),
        S::HookExists => (ErrorClass::Conflict, "hook_exists"),
        S::BadHook => (ErrorClass::BadInput, "bad_hook"),
        S::NotAnApprover => (ErrorClass::Forbidden, "not_an_approver"),
        S::AlreadyVoted => (ErrorClass::Conflict, "already_voted"),
        S::IdempotencyConflict => (ErrorClass::Conflict, "idempotency_conflict"),
        S::WrongState => (ErrorClass::Conflict, "wrong_state"),
        S::Incompatible => (ErrorClass::Conflict, "crew_incompatible"),
        S::ForkRefused => (ErrorClass::Conflict, "fork_refused"),
        S::WaitClosed => (ErrorClass::Conflict, "wait_closed"),
        S::ThreadBusy => (ErrorClass::Conflict, "thread_busy"),
        S::QueuedBehind => (ErrorClass::Conflict, "queued_behind"),
        S::LeaseHeld => (ErrorClass::Busy, "wrong_state"),
        S::BadAnswer => (ErrorClass::Invalid, "bad_answer"),
        S::BadContext => (ErrorClass::Invalid, "bad_context"),
        S::BadBudget => (ErrorClass::Invalid, "bad_budget"),
        S::Unstorable => (ErrorClass::BadInput, "unstorable"),
        S::BadUrl => (ErrorClass::Config, "bad_database_url"),
        S::MissingFile => (ErrorClass::Config, "missing_database_file"),
        S::NoSchema => (ErrorClass::Config, "missing_schema"),
        S::Unavailable => (ErrorClass::Unavailable, "unavailable"),
        S::Corruption | S::Internal => (ErrorClass::Internal, "internal"),
    }
}

/// Displays an error with its sources, `a: b: c`, for logs.
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit codes of docs/cli.md and the API's statuses, read from the table.
    #[test]
    fn the_table_keeps_the_contracts() {
        let exit = |c: ErrorClass| c.exit_code();
        assert_eq!(exit(ErrorClass::BadInput), 2);
        assert_eq!(exit(ErrorClass::Failed), 3);
        assert_eq!(exit(ErrorClass::Waiting), 4);
        assert_eq!(exit(ErrorClass::Interrupted), 5);
        assert_eq!(exit(ErrorClass::Cancelled), 6);
        assert_eq!(exit(ErrorClass::Internal), 1);
        for status in [400, 404, 409, 413, 422] {
            assert_eq!(ErrorClass::from_http_status(status).exit_code(), 2);
        }
        for status in [401, 403, 405, 415, 500, 502, 503] {
            assert_eq!(ErrorClass::from_http_status(status).exit_code(), 1);
        }
        for class in ErrorClass::ALL {
            assert_eq!(
                ErrorClass::from_http_status(class.http_status()).http_status(),
                class.http_status()
            );
        }
    }
}
