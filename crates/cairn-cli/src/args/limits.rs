//! `cairn limits …`'s arguments: provider keys' pauses and limits.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum LimitsCommand {
    /// List every provider key a pause or a limit ever named: paused until
    /// when, its limits and permits in use, the runs deferred on it, how
    /// many pauses began, the last reason.
    List,
    /// The provider key each agent of a stored crew calls under (an `llm`
    /// agent's model calls, a `command` agent's `limit_key`), with the
    /// limits set on it: the key to give `limits set`.
    Keys {
        /// The crew's name.
        crew: String,
        /// Its stored version (default: the newest).
        #[arg(long)]
        version: Option<String>,
    },
    /// Pause a key for every run: steps calling it wait for the pause's
    /// end without calling, and spend no retry.
    Pause {
        /// The key, as `limits list` prints it.
        key: String,
        /// How long from now: 10m, 30s, 250ms; at most 36500d. A longer
        /// pause already standing wins.
        #[arg(long = "for", value_name = "AGE")]
        wait: String,
        /// A note kept on the event: the actor recorded is you (the operating system's user locally, the token's principal through --server).
        #[arg(long)]
        by: Option<String>,
        /// Why (recorded).
        #[arg(long)]
        reason: Option<String>,
    },
    /// End a key's pause; the runs deferred on it are claimable at once.
    Resume {
        /// The key, as `limits list` prints it.
        key: String,
    },
    /// Set a key's limits, shared by every process on the database,
    /// replacing those it had (a limit left out is removed; none leaves
    /// the key unlimited). A step that finds no permit free waits without
    /// calling, holding nothing, and spends no retry.
    Set {
        /// The key, as `limits list` prints it (or as a step will build
        /// it: provider=openai,url=…,key=OPENAI_API_KEY).
        key: String,
        /// Model calls executing at once on the key.
        #[arg(long, value_name = "N")]
        in_flight: Option<u32>,
        /// Requests per minute: at most N calls start in any 60 seconds.
        #[arg(long, value_name = "N")]
        rpm: Option<u32>,
        /// Tokens per minute (a call reserves its estimate and settles its
        /// real usage).
        #[arg(long, value_name = "N")]
        tpm: Option<u32>,
        /// The longest a provider's answer (`Retry-After`) may pause the
        /// key: 30m, 2h, 90s (default 15m; at least 1s, at most 36500d).
        #[arg(long, value_name = "AGE")]
        max_pause: Option<String>,
    },
    /// Drop a key's limits, an operator's included: its next call applies
    /// what its crew (an agent's `limits`) or its process (`CAIRN_LIMITS`)
    /// declares, if anything.
    Reset {
        /// The key, as `limits list` prints it.
        key: String,
    },
}
