//! `cairn signal …`'s arguments.

use std::path::PathBuf;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum SignalCommand {
    /// Send a signal to a run: a `signal` step waiting for its name
    /// consumes it, now or once it waits (until then it is buffered).
    Send {
        /// A run id, `key:K` (the run submitted with idempotency key K) or
        /// `thread:T` (the one unfinished run of thread T).
        target: String,
        /// The signal's name.
        name: String,
        /// Its payload (JSON, or @FILE): the waiting step's output.
        #[arg(long, default_value = "null")]
        payload: String,
        /// An idempotency id: sending it again is a no-op that answers the
        /// first signal.
        #[arg(long)]
        id: Option<String>,
        /// With no unfinished run at a `key:` or `thread:` target, start a
        /// run of this crew file (with a server: its crew of that name)
        /// and give it the signal.
        #[arg(long, value_name = "CREW_FILE")]
        start: Option<PathBuf>,
        /// The started run's input (JSON, or @FILE; default: the payload).
        #[arg(long, requires = "start")]
        start_input: Option<String>,
    },
    /// A run's signals (buffered and consumed) and what it waits for.
    List {
        /// The run id.
        run: String,
    },
}
