//! `cairn::Error`: one error for the library facade, wrapping the crates'.

use std::path::PathBuf;

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
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The storage error inside, wherever it was wrapped.
    pub fn store_error(&self) -> Option<&cairn_checkpoint::Error> {
        match self {
            Error::Store(e) | Error::Executor(cairn_scheduler::Error::Store(e)) => Some(e),
            _ => None,
        }
    }
}
