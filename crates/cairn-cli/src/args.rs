//! The command line as clap types: the global flags, each command and its
//! arguments, and the argument groups commands share (a submission, an
//! operator's action, a retention policy). Parsing what the values mean is
//! in `input.rs`; behaviour is in `commands/`.

use std::path::PathBuf;
use std::time::Duration;

use crate::api::CrewRef;
use clap::{Parser, Subcommand};

use cairn::{parse_age, Actor, CompactPolicy, OnBusy, SubmitOptions};

use crate::input::{parse_thread, usage};
use crate::progress;

mod hooks;
mod limits;
mod people;
mod schedules;
mod signals;
pub use hooks::HooksCommand;
pub use limits::LimitsCommand;
pub use people::{AuditArgs, PrincipalsCommand};
pub use schedules::SchedulesCommand;
pub use signals::SignalCommand;

/// The database when none is named: relative to the working directory.
pub const DEFAULT_DB: &str = "sqlite://cairn.db";

#[derive(Parser)]
#[command(name = "cairn", version, about = "Durable, resumable multi-step runs")]
pub struct Cli {
    /// Database URL: sqlite://PATH (default) or postgres://USER@HOST:PORT/DB;
    /// add ?durability=process for commits that survive the process but not a
    /// power cut (faster; docs/benchmarks.md).
    #[arg(
        long,
        global = true,
        env = "CAIRN_DATABASE_URL",
        default_value = DEFAULT_DB
    )]
    pub db: String,
    /// Print a stable JSON document instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Client mode: send the command to a `cairn serve` at this URL
    /// (http://HOST:PORT) instead of opening the database.
    #[arg(long, global = true, env = "CAIRN_SERVER")]
    pub server: Option<String>,
    /// The API token for --server (`Authorization: Bearer`).
    #[arg(long, global = true, env = "CAIRN_TOKEN")]
    pub token: Option<String>,
    /// Log only warnings and errors (`worker` and `serve` otherwise log
    /// each claim, step and finish; CAIRN_LOG overrides both).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// A retention policy as flags (`cairn compact`).
#[derive(clap::Args, Debug, Clone)]
pub struct CompactArgs {
    /// Events of any run older than this.
    #[arg(long, value_name = "AGE")]
    events_older_than: Option<String>,
    /// Journals of finished (succeeded or cancelled) runs.
    #[arg(long)]
    journals: bool,
    /// Whole succeeded or cancelled runs finished longer ago than this.
    #[arg(long, value_name = "AGE")]
    finished_older_than: Option<String>,
    /// Whole failed runs finished longer ago than this (never by default).
    #[arg(long, value_name = "AGE")]
    failed_older_than: Option<String>,
    /// Finished runs of a thread beyond its newest N.
    #[arg(long, value_name = "N")]
    keep_per_thread: Option<u32>,
    /// Count what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
}

impl CompactArgs {
    /// The policy the flags name (perhaps nothing), or a usage error
    /// (exit 2) naming a flag whose age does not read.
    fn parsed(&self) -> anyhow::Result<CompactPolicy> {
        let age = |flag: &str, v: &Option<String>| {
            v.as_deref()
                .map(|t| parse_age(t).map_err(|e| usage(format!("--{flag}: {e}"))))
                .transpose()
        };
        Ok(CompactPolicy {
            events_older_than: age("events-older-than", &self.events_older_than)?,
            journals: self.journals,
            finished_older_than: age("finished-older-than", &self.finished_older_than)?,
            failed_older_than: age("failed-older-than", &self.failed_older_than)?,
            keep_per_thread: self.keep_per_thread,
            thread: None,
            dry_run: self.dry_run,
        })
    }

    /// The policy, or a usage error (exit 2): an age that does not read,
    /// or nothing to remove.
    pub fn policy(&self) -> anyhow::Result<CompactPolicy> {
        let policy = self.parsed()?;
        if policy.is_empty() {
            return Err(usage(
                "say what to remove: --events-older-than, --journals, --finished-older-than, \
                 --failed-older-than or --keep-per-thread"
                    .to_owned(),
            ));
        }
        Ok(policy)
    }
}

/// Periodic retention for `worker` and `serve`: a `compact` policy and how
/// often to run it (one process at a time across the database).
#[derive(clap::Args, Debug, Clone)]
pub struct RetentionArgs {
    /// Run a retention pass this often (AGE: 1h, 30m, …), with the policy
    /// of the compact flags given here.
    #[arg(long, value_name = "AGE")]
    compact_every: Option<String>,
    #[command(flatten)]
    policy: CompactArgs,
}

impl RetentionArgs {
    /// The periodic policy, if asked for; a usage error (exit 2) for an
    /// interval without a policy, a policy without an interval, or an age
    /// that does not read.
    pub fn periodic(&self) -> anyhow::Result<Option<(CompactPolicy, Duration)>> {
        let Some(every) = &self.compact_every else {
            if !self.policy.parsed()?.is_empty() {
                return Err(usage(
                    "a retention policy needs --compact-every AGE".to_owned(),
                ));
            }
            return Ok(None);
        };
        let every = parse_age(every).map_err(|e| usage(format!("--compact-every: {e}")))?;
        if every.is_zero() {
            return Err(usage("--compact-every must be above 0s".to_owned()));
        }
        Ok(Some((self.policy.policy()?, every)))
    }
}

/// `serve`'s flags.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// A directory of crew files (*.toml) the API can run. Default: ./crews if it exists.
    #[arg(long)]
    pub crews: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: std::net::SocketAddr,
    /// Runs executed at the same time (0: the API only queues runs).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How long a client gets to send a request's headers (or, kept
    /// alive, its next request) before the connection is closed: 10s, 500ms.
    #[arg(long, default_value = "10s", value_parser = duration_arg)]
    pub header_timeout: Duration,
    /// How long a client gets to send a request's body (408 beyond).
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub body_timeout: Duration,
    /// Connections open at once; one more is answered 503 and closed.
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// Event streams open at once; one more is answered 503.
    #[arg(long, default_value_t = 100)]
    pub max_event_streams: usize,
    /// PostgreSQL connections this process opens at most, whatever
    /// --concurrency: commits and heartbeats queue for them. Size the
    /// total over every process below the server's max_connections
    /// (docs/operations.md).
    #[arg(long, env = "CAIRN_DB_CONNECTIONS", default_value_t = cairn::DEFAULT_DB_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub db_connections: u32,

    /// Let API clients retry, continue and fork runs of crews this server
    /// does not offer (runs from the CLI or another server on a shared database).
    #[arg(long)]
    pub foreign_runs: bool,
    /// The address browsers use to reach this server (behind a TLS proxy,
    /// say): its host is served without tokens too, and with https the
    /// console's session cookie is Secure.
    #[arg(long, env = "CAIRN_PUBLIC_URL", value_name = "URL", value_parser = public_url_arg)]
    pub public_url: Option<reqwest::Url>,
    #[command(flatten)]
    pub retention: RetentionArgs,
}

#[derive(Subcommand)]
pub enum Command {
    /// Submit a run of a crew file and execute it until it finishes or stops.
    Run {
        #[command(flatten)]
        submit: SubmitArgs,
        /// Live lines (the run id at once, then one line per finished step
        /// and opened wait): on a terminal (auto), always (lines) or never
        /// (off). Never with --json.
        #[arg(long, env = "CAIRN_PROGRESS", value_enum, default_value = "auto")]
        progress: progress::Progress,
    },
    /// Submit a run without executing it: a worker or `cairn serve` picks it
    /// up (or `cairn resume RUN_ID`). Prints its id (`--json`: the run).
    Submit {
        #[command(flatten)]
        submit: SubmitArgs,
    },
    /// Resume a run at its first pending step (taking it over if it is running).
    Resume(ResumeArgs),
    /// Remove old rows: whole finished runs, journals of finished runs, old
    /// events. Never anything a queued, running, waiting, interrupted or
    /// (unless --failed-older-than) failed run needs. Ages: 30d, 12h, 0s.
    Compact {
        #[command(flatten)]
        policy: CompactArgs,
        /// Apply the flags to this thread's runs only.
        #[arg(long = "thread", alias = "thread-id", value_name = "ID")]
        thread: Option<String>,
        /// Then give the freed space back: SQLite rewrites its file, which
        /// shrinks (it needs free disk the size of the database, and holds
        /// writers off meanwhile); PostgreSQL vacuums Cairn's tables.
        #[arg(long, conflicts_with = "dry_run")]
        vacuum: bool,
    },
    /// Conversation threads: runs grouped by their thread id.
    Threads {
        #[command(subcommand)]
        command: ThreadsCommand,
    },
    /// Provider keys: the shared pauses a provider's rate limit sets on
    /// every run calling it with the same API key.
    Limits {
        #[command(subcommand)]
        command: LimitsCommand,
    },
    /// Schedules: runs started by the clock (cron in a time zone, or an
    /// interval), each slot exactly once across every worker.
    Schedules {
        #[command(subcommand)]
        command: SchedulesCommand,
    },
    /// Signals: named messages that wake a run's `signal` step (buffered
    /// until one waits), by run id, idempotency key or thread.
    Signal {
        #[command(subcommand)]
        command: SignalCommand,
    },
    /// Inbound webhooks: POST /v1/hooks/NAME, checked by a token or a
    /// signature, mapped to a signal (local only: a hook holds a secret).
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// People and services who use the server: their roles, groups,
    /// tenants and tokens (admins; locally, database access is admin).
    Principals {
        #[command(subcommand)]
        command: PrincipalsCommand,
    },
    /// Every decision, refusal and change a principal made, oldest first,
    /// with the channel it came through (api, console, link, cli, local).
    Audit(AuditArgs),
    /// Crew versions: every version a run was stored with, how two
    /// differ, and which unfinished runs can move (with `--server` too).
    Crews {
        #[command(subcommand)]
        command: CrewsCommand,
    },
    /// The processes working this database (live, or gone within the
    /// hour): host, pid, the crew versions each offers, runs held, last beat.
    Workers,
    /// Inspect runs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Serve the HTTP API with an embedded runner (development mode on
    /// loopback unless CAIRN_API_TOKENS is set).
    Serve {
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// A worker: claims runnable runs (queued and due, or running under an
    /// expired lease), keeps their leases with heartbeats, and executes them.
    /// Any number of workers may share one database. Stops on SIGTERM/Ctrl-C.
    Worker {
        /// Runs executed at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// PostgreSQL connections this process opens at most, whatever
        /// --concurrency: commits and heartbeats queue for them. Size the
        /// total over every process below the server's max_connections
        /// (docs/operations.md).
        #[arg(long, env = "CAIRN_DB_CONNECTIONS", default_value_t = cairn::DEFAULT_DB_CONNECTIONS,
              value_parser = clap::value_parser!(u32).range(1..))]
        db_connections: u32,

        /// Lease length (database clock); a run whose holder stops
        /// heartbeating is taken over after this long.
        #[arg(long, default_value_t = 30_000)]
        lease_ms: u64,
        /// The longest gap between two extensions of a held lease (must be
        /// below --lease-ms); a running step's lease is beaten every second
        /// anyway, which is also how a cancel request reaches it.
        #[arg(long, default_value_t = 10_000)]
        heartbeat_ms: u64,
        /// How long to wait between looks when nothing is runnable.
        #[arg(long, default_value_t = 500)]
        poll_ms: u64,
        /// On shutdown, how long runs in flight get to reach their next stop.
        #[arg(long, default_value_t = 30_000)]
        grace_ms: u64,
        #[command(flatten)]
        retention: RetentionArgs,
    },
    /// Check the database (SQLite's quick_check) and every run's rows, as
    /// a resume would judge them; reads only. Exit 0 when healthy, 1 if
    /// anything is wrong.
    Doctor,
    /// Human waits: reviews, approvals and questions.
    Waits {
        #[command(subcommand)]
        command: WaitsCommand,
    },
    /// Run a 30-step crew in a child process, SIGKILL it during step 18,
    /// resume, and show that no finished step ran twice. With `--agent`: an
    /// LLM agent (scripted model) killed between a tool's side effect and
    /// its recorded result.
    Demo {
        /// Kill an LLM agent step inside a non-idempotent tool instead.
        #[arg(long)]
        agent: bool,
        /// How many command steps the demo crew has.
        #[arg(long, default_value_t = 30)]
        steps: u32,
        /// The step during which the child is killed (below --steps).
        #[arg(long, default_value_t = 18)]
        kill_at: u32,
        /// Keep the demo's files in this directory (default: a temporary one).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub enum ThreadsCommand {
    /// List threads: runs, tokens and last run of each, the most recently
    /// active last.
    List,
    /// Show a thread's runs, oldest first, and their totals.
    Show {
        /// The thread id.
        thread_id: String,
    },
    /// Set a thread's budget (limits on what its runs and their children
    /// spend together, checked before each model call): tokens=N,
    /// cost_usd=D, … (repeatable) replace those limits; tokens=+N raises
    /// one the thread has. The thread need not have a run yet.
    Budget {
        /// The thread id.
        thread_id: String,
        #[arg(long = "budget", value_name = "LIMIT=N", required = true)]
        budget: Vec<String>,
        /// A note kept on the event: the actor recorded is you (the operating system's user locally, the token's principal through --server).
        #[arg(long)]
        by: Option<String>,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum CrewsCommand {
    /// Every stored crew version: name, version, fingerprint, first seen,
    /// and its unfinished runs.
    List,
    /// One version's definition (the newest stored, without VERSION).
    Show {
        name: String,
        /// A version, or the start of a fingerprint (6+ characters).
        version: Option<String>,
    },
    /// How version TO differs from FROM, step by step, and whether each
    /// unfinished run of FROM can move to TO (and if not, why).
    Diff {
        name: String,
        /// A version, or the start of a fingerprint.
        from: String,
        /// A version, the start of a fingerprint, or a crew file.
        to: String,
    },
}

#[derive(Subcommand)]
pub enum WaitsCommand {
    /// List open waits, oldest first (--all or --status for the others;
    /// --json: every wait unless --status).
    List {
        /// Only the waits of this run.
        #[arg(long)]
        run: Option<String>,
        /// Only waits in this status: open, answered, expired or cancelled.
        #[arg(long, conflicts_with = "all")]
        status: Option<String>,
        /// Every wait, whatever its status.
        #[arg(long)]
        all: bool,
    },
    /// Answer a wait, then (unless --enqueue) execute its run to its next stop.
    Answer {
        /// The wait to answer (`waits list` shows the open ones).
        wait_id: String,
        /// Review or approval: yes.
        #[arg(long, group = "decision")]
        approve: bool,
        /// Review: commit this output instead (JSON or text, or @FILE).
        #[arg(long, group = "decision")]
        edit: Option<String>,
        /// Review: run the step again with this feedback. Approval: refuse.
        #[arg(long, group = "decision")]
        reject: Option<String>,
        /// Question: the answer (JSON, or @FILE).
        #[arg(long, group = "decision")]
        answer: Option<String>,
        /// A note kept on the event: the actor recorded is you (the operating system's user locally, the token's principal through --server).
        #[arg(long)]
        by: Option<String>,
        /// Why (recorded on the `wait_answered` event).
        #[arg(long)]
        reason: Option<String>,
        /// The digest of what you were shown (a notice's `digest`, or
        /// `GET /v1/waits/{id}/ballot`): refused if the wait asks about something else.
        #[arg(long)]
        digest: Option<String>,
        /// Only record the answer; leave the run to a worker or server.
        #[arg(long)]
        enqueue: bool,
    },
    /// Apply the deadline outcome of every wait past its deadline.
    Expire,
}

/// Who acts and why, and whether to execute afterwards.
#[derive(clap::Args)]
pub struct ActionArgs {
    /// A note kept on the event: the actor recorded is you (the operating system's user locally, the token's principal through --server).
    #[arg(long)]
    pub by: Option<String>,
    /// Why (recorded in the event).
    #[arg(long)]
    pub reason: Option<String>,
    /// Only record the action; leave the run to a worker or server.
    #[arg(long)]
    pub enqueue: bool,
}

impl ActionArgs {
    pub fn actor(&self) -> Actor {
        let by = crate::input::answered_by(self.by.clone());
        match &self.reason {
            Some(reason) => Actor::new(by).because(reason.clone()),
            None => Actor::new(by),
        }
    }
}

#[derive(Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first (--oldest to flip; --json: oldest first).
    List {
        /// Only runs in this status: queued, running, waiting, interrupted,
        /// succeeded, failed or cancelled.
        #[arg(long)]
        status: Option<String>,
        /// At most this many runs (the newest, or with --oldest the oldest).
        #[arg(long)]
        limit: Option<u32>,
        /// Oldest first.
        #[arg(long)]
        oldest: bool,
        /// Only the children of this run (the runs its `children` steps
        /// started).
        #[arg(long, value_name = "RUN_ID")]
        parent: Option<String>,
        /// Only the runs of this tenant (`--tenant` on `run`/`submit`).
        #[arg(long, value_name = "NAME")]
        tenant: Option<String>,
    },
    /// Show one run as a step table with its final output.
    Show {
        /// The run to show.
        run_id: String,
        /// Show every step's output, not only the last one.
        #[arg(long)]
        outputs: bool,
        /// Show only this step, with its whole output (--json: the step object).
        #[arg(long, value_name = "N", conflicts_with = "outputs")]
        step: Option<u32>,
    },
    /// Show a run's event log.
    Events {
        /// The run whose events to show.
        run_id: String,
    },
    /// Follow a run as it happens: a line per step and wait, an `llm`
    /// step's text as it streams, and the step table at the end (--json:
    /// one JSON document per line, events and `output_delta` pieces).
    /// Ends when the run has succeeded, failed or been cancelled; its exit
    /// code is the run's, as `runs show`'s.
    Watch {
        /// The run to watch.
        run_id: String,
    },
    /// The values a run's steps published for its callers (the newest of
    /// each key), or the one of KEY.
    Values { run_id: String, key: Option<String> },
    /// Show the journal of a run's agent steps (every generation).
    Journal {
        /// The run whose journal to show.
        run_id: String,
        /// Only this step.
        #[arg(long)]
        step: Option<u32>,
    },
    /// Run a failed run's failed step again (attempt + 1) and carry on.
    Retry {
        /// The failed run.
        run_id: String,
        /// Carry on with this (fixed) crew file instead of the run's crew:
        /// finished steps are kept, the rest run with the new definition
        /// (recorded as a `crew_forced` event).
        #[arg(long, value_name = "FILE", conflicts_with = "enqueue")]
        crew: Option<PathBuf>,
        /// A failed `children` step starts every child again, instead of
        /// keeping those that succeeded and starting only the others.
        #[arg(long, conflicts_with = "crew")]
        rerun_children: bool,
        #[command(flatten)]
        action: ActionArgs,
    },
    /// Carry on with an interrupted run.
    Continue {
        /// The interrupted run.
        run_id: String,
        /// Raise a limit of the run's budget first: tokens=+N or
        /// model_calls=+N or tool_calls=+N (repeatable), recorded with --by
        /// and --reason.
        #[arg(long = "budget", value_name = "LIMIT=+N")]
        budget: Vec<String>,
        #[command(flatten)]
        action: ActionArgs,
    },
    /// Cancel a run: at once if it is not running; a running step is asked
    /// to stop and its late result is discarded.
    Cancel {
        /// The run to cancel.
        run_id: String,
        #[command(flatten)]
        action: ActionArgs,
    },
    /// Move unfinished runs of a crew to another of its versions, at a
    /// step boundary: those whose started steps keep their roles and kinds
    /// in the new version (see `crews diff`), one `crew_upgraded` event
    /// each. Running runs are left (they move once stopped).
    Upgrade {
        /// The crew's name.
        #[arg(long)]
        crew: String,
        /// The version to move to: a stored version, the start of its
        /// fingerprint, or a crew file (stored on the first move).
        #[arg(long)]
        to: String,
        /// Only this run.
        #[arg(long = "run", value_name = "RUN_ID")]
        run: Option<String>,
        /// Say what would move; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Move runs whose started steps differ too (recorded with what was
        /// overridden). Never a running or ended run.
        #[arg(long)]
        force: bool,
        /// A note kept on the event: the actor recorded is you (the operating system's user locally, the token's principal through --server).
        #[arg(long)]
        by: Option<String>,
        /// Why (recorded).
        #[arg(long)]
        reason: Option<String>,
    },
    /// A new run that copies checkpoints 0..N-1 of RUN_ID and executes from step N.
    Fork {
        /// The run to fork.
        run_id: String,
        /// The first step the fork executes (its steps before are copied).
        #[arg(long)]
        from_step: u32,
        /// A new input (JSON or @FILE); only with --from-step 0.
        #[arg(long)]
        input: Option<String>,
        /// Put the fork in this thread (default: the source run's).
        #[arg(long = "thread", value_name = "ID")]
        thread: Option<String>,
        /// Run the fork with this crew file instead of the source's crew
        /// (its copied steps' roles must match; recorded as `crew_forced`).
        #[arg(long, value_name = "FILE", conflicts_with = "enqueue")]
        crew: Option<PathBuf>,
        /// Run the fork on this stored version of the run's crew (a
        /// version, or the start of a fingerprint): refused unless its
        /// copied steps keep their roles and kinds there; recorded as
        /// `crew_upgraded`. Works against a server too.
        #[arg(long, value_name = "VERSION", conflicts_with = "crew")]
        crew_version: Option<String>,
        /// A `children` step the fork runs again starts every child anew,
        /// instead of keeping each child of the source's same step that
        /// succeeded with the same key, crew version and input.
        #[arg(long)]
        rerun_children: bool,
        #[command(flatten)]
        action: ActionArgs,
    },
}

/// What `run` and `submit` take: a crew, its input, and where the run goes.
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// The crew file (TOML); with --server, also a crew name the server loaded.
    pub crew: PathBuf,
    /// The run input: JSON text, or @FILE to read it from a file (1 MiB at most).
    #[arg(long, default_value = "{}")]
    pub input: String,
    /// Submitting again with the same key returns the same run (which
    /// `run` then continues).
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Put the run in this conversation thread (1 to 256 bytes; also --thread-id).
    #[arg(long = "thread", alias = "thread-id", value_name = "ID")]
    pub thread: Option<String>,
    /// When the thread has a run that is not done: queue (run after it),
    /// reject (store nothing, exit 2) or interrupt (cancel it).
    #[arg(long, default_value = "queue")]
    pub on_busy: OnBusy,
    /// Claim order, -1000 to 1000 (default 0): higher runs first; each
    /// point is a minute's head start, so lower ones still run.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
    /// Whose run it is: claims go round-robin across tenants within a
    /// priority, so one tenant's backlog does not hold another's runs back.
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// A limit on the run's model use, over the crew's [budget]:
    /// tokens=N, model_calls=N or tool_calls=N (repeatable). Reached, the run is
    /// interrupted; `runs continue RUN --budget tokens=+N` raises it.
    #[arg(long = "budget", value_name = "LIMIT=N")]
    pub budget: Vec<String>,
    /// Make the run part of the caller's trace: a W3C traceparent,
    /// 00-<trace id>-<span id>-<flags> (without it, TRACEPARENT from the
    /// environment, ignored with a warning if malformed).
    #[arg(long, value_name = "TRACEPARENT")]
    pub traceparent: Option<String>,
    /// The run's upgrade policy, over its crew file's `upgrade`: pinned
    /// (finish on this version), compatible (move to a newer compatible
    /// version at a step boundary) or manual (only `runs upgrade`).
    #[arg(long, value_name = "POLICY", value_parser = ["pinned", "compatible", "manual"])]
    pub upgrade: Option<String>,
    /// With --server and a crew name: the version to run among those the
    /// server loaded (default: the newest). With a crew file: must be the
    /// file's version.
    #[arg(long, value_name = "VERSION")]
    pub crew_version: Option<String>,
}

impl SubmitArgs {
    /// The crew `read` gives for the crew argument, with `--crew-version`.
    pub fn crew(&self, read: CrewRef) -> anyhow::Result<CrewRef> {
        match (read, &self.crew_version) {
            (CrewRef::Named(name, _), version) => Ok(CrewRef::Named(name, version.clone())),
            (CrewRef::File(crew, path), Some(v)) if &crew.def().version != v => {
                Err(usage(format!(
                    "--crew-version {v}: {} is version {} of crew `{}`",
                    path.display(),
                    crew.def().version,
                    crew.def().name
                )))
            }
            (file, _) => Ok(file),
        }
    }

    /// The submission's options, or a usage error naming a bad thread id.
    pub fn options(&self) -> anyhow::Result<SubmitOptions> {
        Ok(SubmitOptions {
            idempotency_key: self.idempotency_key.clone(),
            thread_id: parse_thread(self.thread.clone())?,
            on_busy: self.on_busy,
            priority: cairn::Priority::new(self.priority)
                .map_err(|e| usage(format!("--priority: {e}")))?,
            tenant: self.tenant.clone(),
            budget: match self.budget.is_empty() {
                true => None,
                false => Some(
                    cairn::Budget::parse(self.budget.iter().map(String::as_str), false)
                        .map_err(|e| usage(format!("--budget: {e}")))?,
                ),
            },
            traceparent: self.traceparent()?,
            by: None,
            upgrade: self
                .upgrade
                .as_deref()
                .and_then(cairn::upgrade::UpgradePolicy::parse),
        })
    }

    /// `--traceparent`, refused if malformed; else `TRACEPARENT`, which
    /// another tool may have set for its own purposes, so a malformed one
    /// is only warned about: it never stops a run.
    fn traceparent(&self) -> anyhow::Result<Option<cairn::TraceContext>> {
        if let Some(tp) = &self.traceparent {
            return cairn::TraceContext::parse_traceparent(tp)
                .map(Some)
                .map_err(|e| usage(format!("--traceparent: {e}")));
        }
        let Ok(tp) = std::env::var("TRACEPARENT") else {
            return Ok(None);
        };
        match cairn::TraceContext::parse_traceparent(&tp) {
            Ok(cx) => Ok(Some(cx)),
            Err(e) => {
                tracing::warn!("TRACEPARENT ignored: {e}");
                Ok(None)
            }
        }
    }
}

/// A clap value parser for `10s`, `500ms`, `2m` (see `parse_age`).
fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_age(text).map_err(|e| e.to_string()).and_then(|d| {
        if d.is_zero() {
            Err("must be more than 0".into())
        } else {
            Ok(d)
        }
    })
}

/// `--public-url`: an absolute URL (the server checks its scheme and host).
fn public_url_arg(text: &str) -> Result<reqwest::Url, String> {
    reqwest::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))
}

/// What `resume` takes.
#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    /// The run to resume.
    pub run_id: String,
    /// Offer this crew file instead of the stored crew; refused if it differs.
    #[arg(long)]
    pub crew: Option<PathBuf>,
    /// Accept a crew that differs from the run's (recorded as an event).
    #[arg(long)]
    pub force: bool,
    /// Refuse (exit 2) unless the run belongs to this thread.
    #[arg(long = "thread", value_name = "ID")]
    pub thread: Option<String>,
    /// Take the run over even while its lease is live (its holder may
    /// still be running the step). Without it, a run running under a
    /// live lease is refused (exit 1), naming the holder and when the
    /// lease expires.
    #[arg(long)]
    pub takeover: bool,
    /// Merge this JSON object (or @FILE) into the input the remaining
    /// steps see, recorded with --by and --reason; an interrupted run is
    /// continued with it. Finished steps are untouched.
    #[arg(long, value_name = "JSON")]
    pub context: Option<String>,
    /// A note kept on the event: the actor recorded is you (the operating system's user locally, the token's principal through --server).
    #[arg(long, requires = "context")]
    pub by: Option<String>,
    /// Why (recorded in its event).
    #[arg(long, requires = "context")]
    pub reason: Option<String>,
}
