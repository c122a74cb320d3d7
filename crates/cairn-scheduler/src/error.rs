//! `scheduler::Error`: why a run could not be driven.

use cairn_core::{Corruption, ErrorInfo, Fingerprint, RunId, RunStatus};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage refused or failed (includes stale epochs and corruption).
    #[error(transparent)]
    Store(#[from] cairn_checkpoint::Error),
    /// The rows do not agree with the run's cursor.
    #[error(transparent)]
    Corruption(#[from] Corruption),
    /// The run is parked as failed; resume does not re-run failed steps.
    #[error("run {run} has failed{}; resume does not re-run a failed step: an operator retries or forks it", .error.as_ref().map(|e| format!(" ({}: {})", serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(), e.message)).unwrap_or_default())]
    RunFailed {
        run: RunId,
        /// Boxed: errors stay small on the happy path.
        error: Option<Box<ErrorInfo>>,
    },
    /// The run waits for something other than a resume.
    #[error("run {run} is `{status}`: it waits for an answer, a signal or its children, or for an explicit continue, not a resume")]
    NotResumable { run: RunId, status: RunStatus },
    /// The run is running under another process's lease.
    #[error("run {run} is running under another lease; take it over explicitly")]
    Leased { run: RunId },
    /// Another process claimed the run while this one executed a step (our
    /// lease expired): the step was stopped and nothing was committed.
    #[error("run {run}: this process lost its lease (another process claimed the run); the step was stopped and nothing was committed")]
    LeaseLost { run: RunId },
    /// The offered crew is not the one the run started with.
    #[error("run {run} was started with crew {stored}, but the crew offered is {offered}; resume with the original crew, or force the new one")]
    CrewMismatch {
        run: RunId,
        stored: Fingerprint,
        offered: Fingerprint,
    },
}

impl Error {
    /// The corruption this error reports, wherever it was raised (the
    /// executor's judge or storage's decoding).
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            Error::Corruption(c) | Error::Store(cairn_checkpoint::Error::Corruption(c)) => Some(c),
            _ => None,
        }
    }
}

/// What an executor error is, for the facade's one classification table
/// (`cairn::Error::class`). Not `#[non_exhaustive]`: a new [`Error`]
/// variant needs a kind in [`Error::kind`] and a new kind a row in that
/// table, or the workspace does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Store(cairn_checkpoint::Kind),
    Corruption,
    RunFailed,
    NotResumable(RunStatus),
    Leased,
    LeaseLost,
    CrewMismatch,
}

impl Error {
    /// This error's [`Kind`].
    pub fn kind(&self) -> Kind {
        match self {
            Error::Store(e) => Kind::Store(e.kind()),
            Error::Corruption(_) => Kind::Corruption,
            Error::RunFailed { .. } => Kind::RunFailed,
            Error::NotResumable { status, .. } => Kind::NotResumable(*status),
            Error::Leased { .. } => Kind::Leased,
            Error::LeaseLost { .. } => Kind::LeaseLost,
            Error::CrewMismatch { .. } => Kind::CrewMismatch,
        }
    }
}
