//! The `cairn` binary: argument parsing, printing and exit codes. All
//! behaviour lives in the `cairn` library; this file only translates.

mod client;
mod demo;
mod output;
mod progress;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::Value;

use cairn::{
    parse_age, Actor, Answer, CompactPolicy, Crew, Engine, ErrorClass, ExecutorConfig, ForkRequest,
    OnBusy, OpenOptions, ResumeOptions, RunFilter, RunId, RunStatus, StepIdx, SubmitOptions,
    WaitFilter, WaitId, WaitStatus,
};

/// Exit codes (a contract; see docs/cli.md), from the one table in
/// `cairn::ErrorClass`.
pub mod exit {
    use cairn::ErrorClass;

    pub const OK: u8 = 0;
    pub const ERROR: u8 = ErrorClass::Internal.exit_code();
    pub const BAD_INPUT: u8 = ErrorClass::BadInput.exit_code();
    /// Ctrl-C stopped a command that was executing a run (128 + SIGINT, the
    /// shell's convention); the run can be resumed.
    pub const INTERRUPTED: u8 = 130;
}

/// The database when none is named: relative to the working directory.
const DEFAULT_DB: &str = "sqlite://cairn.db";

#[derive(Parser)]
#[command(name = "cairn", version, about = "Durable, resumable multi-step runs")]
struct Cli {
    /// Database URL: sqlite://PATH (default) or postgres://USER@HOST:PORT/DB;
    /// add ?durability=process for commits that survive the process but not a
    /// power cut (faster; docs/benchmarks.md).
    #[arg(
        long,
        global = true,
        env = "CAIRN_DATABASE_URL",
        default_value = DEFAULT_DB
    )]
    db: String,
    /// Print a stable JSON document instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Client mode: send the command to a `cairn serve` at this URL
    /// (http://HOST:PORT) instead of opening the database.
    #[arg(long, global = true, env = "CAIRN_SERVER")]
    server: Option<String>,
    /// The API token for --server (`Authorization: Bearer`).
    #[arg(long, global = true, env = "CAIRN_TOKEN")]
    token: Option<String>,
    /// Log only warnings and errors (`worker` and `serve` otherwise log
    /// each claim, step and finish; CAIRN_LOG overrides both).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// A retention policy as flags (`cairn compact`).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CompactArgs {
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
    pub(crate) fn policy(&self) -> anyhow::Result<CompactPolicy> {
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
pub(crate) struct RetentionArgs {
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
    fn periodic(&self) -> anyhow::Result<Option<(CompactPolicy, Duration)>> {
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

#[derive(Subcommand)]
enum Command {
    /// Submit a run of a crew file and execute it until it finishes or stops.
    Run {
        /// The crew file (TOML); with --server, also a crew name the server loaded.
        crew: PathBuf,
        /// The run input: JSON text, or @FILE to read it from a file (1 MiB at most).
        #[arg(long, default_value = "{}")]
        input: String,
        /// Submitting again with the same key returns (and continues) the same run.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Put the run in this conversation thread (1 to 256 bytes; also --thread-id).
        #[arg(long = "thread", alias = "thread-id", value_name = "ID")]
        thread: Option<String>,
        /// When the thread has a run that is not done: queue (run after it),
        /// reject (store nothing, exit 2) or interrupt (cancel it).
        #[arg(long, default_value = "queue")]
        on_busy: OnBusy,
        /// Live lines (the run id at once, then one line per finished step
        /// and opened wait): on a terminal (auto), always (lines) or never
        /// (off). Never with --json.
        #[arg(long, env = "CAIRN_PROGRESS", value_enum, default_value = "auto")]
        progress: progress::Progress,
    },
    /// Submit a run without executing it: a worker or `cairn serve` picks it
    /// up (or `cairn resume RUN_ID`). Prints its id (`--json`: the run).
    Submit {
        /// The crew file (TOML); with --server, also a crew name the server loaded.
        crew: PathBuf,
        /// The run input: JSON text, or @FILE to read it from a file (1 MiB at most).
        #[arg(long, default_value = "{}")]
        input: String,
        /// Submitting again with the same key returns the same run.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Put the run in this conversation thread (1 to 256 bytes; also --thread-id).
        #[arg(long = "thread", alias = "thread-id", value_name = "ID")]
        thread: Option<String>,
        /// When the thread has a run that is not done: queue (run after it),
        /// reject (store nothing, exit 2) or interrupt (cancel it).
        #[arg(long, default_value = "queue")]
        on_busy: OnBusy,
    },
    /// Resume a run at its first pending step (taking it over if it is running).
    Resume {
        /// The run to resume.
        run_id: String,
        /// Offer this crew file instead of the stored crew; refused if it differs.
        #[arg(long)]
        crew: Option<PathBuf>,
        /// Accept a crew that differs from the run's (recorded as an event).
        #[arg(long)]
        force: bool,
        /// Refuse (exit 2) unless the run belongs to this thread.
        #[arg(long = "thread", value_name = "ID")]
        thread: Option<String>,
        /// Take the run over even while its lease is live (its holder may
        /// still be running the step). Without it, a run running under a
        /// live lease is refused (exit 1), naming the holder and when the
        /// lease expires.
        #[arg(long)]
        takeover: bool,
        /// Merge this JSON object (or @FILE) into the input the remaining
        /// steps see, recorded with --by and --reason; an interrupted run is
        /// continued with it. Finished steps are untouched.
        #[arg(long, value_name = "JSON")]
        context: Option<String>,
        /// Who adds the context (recorded in its event). Default: $USER.
        #[arg(long, requires = "context")]
        by: Option<String>,
        /// Why (recorded in its event).
        #[arg(long, requires = "context")]
        reason: Option<String>,
    },
    /// Remove old rows: whole finished runs, journals of finished runs, old
    /// events. Never anything a queued, running, waiting, interrupted or
    /// (unless --failed-older-than) failed run needs. Ages: 30d, 12h, 0s.
    Compact {
        #[command(flatten)]
        policy: CompactArgs,
        /// Apply the flags to this thread's runs only.
        #[arg(long = "thread", alias = "thread-id", value_name = "ID")]
        thread: Option<String>,
    },
    /// Conversation threads: runs grouped by their thread id.
    Threads {
        #[command(subcommand)]
        command: ThreadsCommand,
    },
    /// Inspect runs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Serve the HTTP API with an embedded runner (development mode on
    /// loopback unless CAIRN_API_TOKENS is set).
    Serve {
        /// A directory of crew files (*.toml) the API can run. Default: ./crews if it exists.
        #[arg(long)]
        crews: Option<PathBuf>,
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:7700")]
        listen: std::net::SocketAddr,
        /// Runs executed at the same time (0: the API only queues runs).
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// How long a client gets to send a request's headers (or, kept
        /// alive, its next request) before the connection is closed: 10s, 500ms.
        #[arg(long, default_value = "10s", value_parser = duration_arg)]
        header_timeout: Duration,
        /// How long a client gets to send a request's body (408 beyond).
        #[arg(long, default_value = "30s", value_parser = duration_arg)]
        body_timeout: Duration,
        /// Connections open at once; one more is answered 503 and closed.
        #[arg(long, default_value_t = 512)]
        max_connections: usize,
        /// Event streams open at once; one more is answered 503.
        #[arg(long, default_value_t = 100)]
        max_event_streams: usize,
        /// Let API clients retry, continue and fork runs of crews this server
        /// does not offer (runs from the CLI or another server on a shared database).
        #[arg(long)]
        foreign_runs: bool,
        /// The address browsers use to reach this server (behind a TLS proxy,
        /// say): its host is served without tokens too, and with https the
        /// console's session cookie is Secure.
        #[arg(long, env = "CAIRN_PUBLIC_URL", value_name = "URL", value_parser = public_url_arg)]
        public_url: Option<reqwest::Url>,
        #[command(flatten)]
        retention: RetentionArgs,
    },
    /// A worker: claims runnable runs (queued and due, or running under an
    /// expired lease), keeps their leases with heartbeats, and executes them.
    /// Any number of workers may share one database. Stops on SIGTERM/Ctrl-C.
    Worker {
        /// Runs executed at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
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
enum ThreadsCommand {
    /// List threads: runs, tokens and last run of each, the most recently
    /// active last.
    List,
    /// Show a thread's runs, oldest first, and their totals.
    Show {
        /// The thread id.
        thread_id: String,
    },
}

#[derive(Subcommand)]
enum WaitsCommand {
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
        /// Who answers (recorded). Default: $USER.
        #[arg(long)]
        by: Option<String>,
        /// Why (recorded on the `wait_answered` event).
        #[arg(long)]
        reason: Option<String>,
        /// Only record the answer; leave the run to a worker or server.
        #[arg(long)]
        enqueue: bool,
    },
    /// Apply the deadline outcome of every wait past its deadline.
    Expire,
}

/// Who acts and why, and whether to execute afterwards.
#[derive(clap::Args)]
struct ActionArgs {
    /// Who is acting (recorded in the event). Default: $USER.
    #[arg(long)]
    by: Option<String>,
    /// Why (recorded in the event).
    #[arg(long)]
    reason: Option<String>,
    /// Only record the action; leave the run to a worker or server.
    #[arg(long)]
    enqueue: bool,
}

impl ActionArgs {
    fn actor(&self) -> Actor {
        let by = self
            .by
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "cli".to_owned());
        Actor {
            by,
            reason: self.reason.clone(),
        }
    }
}

#[derive(Subcommand)]
enum RunsCommand {
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
        #[command(flatten)]
        action: ActionArgs,
    },
    /// Carry on with an interrupted run.
    Continue {
        /// The interrupted run.
        run_id: String,
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
        #[command(flatten)]
        action: ActionArgs,
    },
}

/// An error in what the user typed: exit code 2.
#[derive(Debug)]
struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

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

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

fn parse_run_id(s: &str) -> anyhow::Result<RunId> {
    s.parse::<RunId>().map_err(|e| usage(e.to_string()))
}

/// A `--thread` value, checked by the one rule (`cairn::ThreadId`).
fn parse_thread(arg: Option<String>) -> anyhow::Result<Option<String>> {
    arg.map(|t| {
        cairn::ThreadId::for_field(t, "--thread")
            .map(cairn::ThreadId::into_string)
            .map_err(|e| usage(e.to_string()))
    })
    .transpose()
}

/// The caps of a run input and an answer, checked here before anything is
/// opened (the engine checks them again).
fn caps() -> (usize, usize) {
    let limits = ExecutorConfig::default().limits;
    (limits.max_input_bytes, limits.max_answer_bytes)
}

/// Reads `path` (an `@FILE` of `flag`), at most `cap` bytes: a larger file
/// is refused without reading the rest (`@/dev/zero` ends at the cap).
fn read_capped(path: &str, flag: &str, cap: usize) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read {flag} file {path}: {e}")))?;
    let mut bytes = Vec::new();
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| usage(format!("cannot read {flag} file {path}: {e}")))?;
    if bytes.len() > cap {
        return Err(usage(format!(
            "{flag} file {path} is over the cap of {cap} bytes (reading stopped there)"
        )));
    }
    String::from_utf8(bytes).map_err(|_| usage(format!("{flag} file {path} is not UTF-8 text")))
}

/// A JSON value given as text or `@FILE`, within `cap` bytes (compact).
fn parse_json_arg(arg: &str, flag: &str, what: &str, cap: usize) -> anyhow::Result<Value> {
    let (text, origin) = match arg.strip_prefix('@') {
        Some(path) => (read_capped(path, flag, cap)?, format!("{flag} file {path}")),
        None => (arg.to_owned(), flag.to_owned()),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("{origin} is not valid JSON: {e}")))?;
    let size = value.to_string().len();
    if size > cap {
        return Err(usage(format!(
            "{what} is {size} bytes, over the cap of {cap} bytes"
        )));
    }
    Ok(value)
}

fn parse_input(arg: &str) -> anyhow::Result<Value> {
    parse_json_arg(arg, "--input", "the run input", caps().0)
}

fn load_crew(path: &PathBuf) -> anyhow::Result<Crew> {
    Crew::from_file(path).map_err(|e| usage(e.to_string()))
}

async fn open(db: &str, create: bool) -> anyhow::Result<Engine> {
    let opts = OpenOptions {
        create,
        connect_timeout: Duration::from_secs(3),
        max_connections: 4,
        ..OpenOptions::default()
    };
    let config = ExecutorConfig {
        owner: cairn::holder::owner("cairn-cli"),
        ..ExecutorConfig::default()
    };
    Ok(Engine::open_with(db, &opts, config).await?)
}

/// `--public-url`: an absolute URL (the server checks its scheme and host).
fn public_url_arg(text: &str) -> Result<reqwest::Url, String> {
    reqwest::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))
}

/// The exit code of a run that stopped in `status`: 0 for succeeded, else
/// its status's class (failed 3, waiting 4, interrupted 5, cancelled 6).
fn status_exit(status: RunStatus) -> u8 {
    match status {
        RunStatus::Succeeded => exit::OK,
        status => ErrorClass::of_status(status).exit_code(),
    }
}

/// The exit code of an error: its class's (the one table in
/// `cairn::ErrorClass`), whether the engine here or a server answered.
fn error_exit(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<UsageError>().is_some() {
        return exit::BAD_INPUT;
    }
    if let Some(api) = err.downcast_ref::<client::ApiError>() {
        return api.class().exit_code();
    }
    match err.downcast_ref::<cairn::Error>() {
        Some(e) => e.class().exit_code(),
        None => exit::ERROR,
    }
}

/// `db_given`: `--db` was typed on the command line (not the default or
/// CAIRN_DATABASE_URL), which `demo` refuses rather than ignores.
async fn main_inner(cli: Cli, db_given: bool) -> anyhow::Result<u8> {
    if let Some(server) = cli.server.clone() {
        let token = cli.token.clone();
        return client::main(cli, server, token).await;
    }
    let json = cli.json;
    match cli.command {
        Command::Run {
            crew,
            input,
            idempotency_key,
            thread,
            on_busy,
            progress,
        } => {
            // Validate everything the user typed before touching the database.
            let crew = load_crew(&crew)?;
            let input = parse_input(&input)?;
            let thread_id = parse_thread(thread)?;
            let lines = progress.enabled(json);
            let engine = open(&cli.db, true).await?;
            let opts = SubmitOptions {
                idempotency_key,
                thread_id,
                on_busy,
            };
            // Submit, then drive (what `Engine::run` does), so the run id is
            // known, and printed, before the first step runs.
            let submitted = engine.submit(&crew, input, opts).await?;
            let id = submitted.run.id;
            if lines {
                progress::start(&submitted.run)?;
            }
            if submitted.created {
                say_what_it_waits_behind(&engine, &submitted.run).await;
            }
            // Drives the run; if a worker claimed it first, follows it to
            // its next stop (a repeated key returns a parked run as it is).
            let first = submitted.run.clone();
            let drive = engine.drive_submitted(&crew, submitted);
            let driven = if lines {
                until_interrupted(id, progress::follow(&engine, &first, drive)).await
            } else {
                until_interrupted(id, drive).await
            };
            match driven {
                Some(driven) => {
                    driven?;
                }
                None => return Ok(exit::INTERRUPTED),
            }
            Ok(status_exit(
                show_run_after(&engine, id, json, false, lines).await?,
            ))
        }
        Command::Submit {
            crew,
            input,
            idempotency_key,
            thread,
            on_busy,
        } => {
            let crew = load_crew(&crew)?;
            let input = parse_input(&input)?;
            let thread_id = parse_thread(thread)?;
            let engine = open(&cli.db, true).await?;
            let opts = SubmitOptions {
                idempotency_key,
                thread_id,
                on_busy,
            };
            let submitted = engine.submit(&crew, input, opts).await?;
            if json {
                let view = engine.show(submitted.run.id).await?;
                output::print_run(&view, true, &output::RunText::default())?;
            } else {
                use std::io::Write;
                writeln!(std::io::stdout(), "{}", submitted.run.id)?;
            }
            Ok(exit::OK)
        }
        Command::Resume {
            run_id,
            crew,
            force,
            thread,
            takeover,
            context,
            by,
            reason,
        } => {
            let id = parse_run_id(&run_id)?;
            let crew = crew.as_ref().map(load_crew).transpose()?;
            let thread_id = parse_thread(thread)?;
            let context = match context {
                Some(text) => {
                    let value = parse_json_arg(&text, "--context", "the context", caps().0)?;
                    if !value.is_object() {
                        return Err(usage(
                            "--context: give a JSON object, such as '{\"hint\": \"…\"}'".to_owned(),
                        ));
                    }
                    let actor = ActionArgs {
                        by,
                        reason,
                        enqueue: false,
                    }
                    .actor();
                    Some((value, actor))
                }
                None => None,
            };
            let engine = open(&cli.db, false).await?;
            let opts = ResumeOptions {
                crew,
                force,
                thread_id,
                takeover,
                context,
            };
            let Some(driven) = until_interrupted(id, engine.resume(id, opts)).await else {
                return Ok(exit::INTERRUPTED);
            };
            let driven = driven?;
            if !json {
                if driven.executed.is_empty() && driven.run.status.is_finished() {
                    eprintln!(
                        "run {id} is already {}; nothing executed",
                        driven.run.status
                    );
                } else if driven.took_over {
                    eprintln!(
                        "run {id} was running under another lease: taken over (epoch {})",
                        driven.run.lease_epoch
                    );
                }
            }
            Ok(status_exit(show_run(&engine, id, json, false).await?))
        }
        Command::Doctor => {
            let checkup = open(&cli.db, false).await?.doctor().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&checkup)?);
            } else {
                match checkup.integrity.as_slice() {
                    [] => println!("database: ok"),
                    problems => problems.iter().for_each(|p| println!("database: {p}")),
                }
                println!(
                    "runs: {} checked, {} corrupt",
                    checkup.runs,
                    checkup.corrupt_runs.len()
                );
                for c in &checkup.corrupt_runs {
                    println!("  {}: {}", c.run, c.detail);
                }
            }
            Ok(if checkup.is_healthy() {
                exit::OK
            } else {
                exit::ERROR
            })
        }
        Command::Runs { command } => {
            // Parse what was typed first: a typo must not open (or migrate) a database.
            match command {
                RunsCommand::List {
                    status,
                    limit,
                    oldest,
                } => {
                    let status = status
                        .map(|s| s.parse::<RunStatus>().map_err(usage))
                        .transpose()?;
                    let engine = open(&cli.db, false).await?;
                    if limit.is_none() {
                        return list_all(&engine, status, oldest, json).await;
                    }
                    // `--limit` picks the newest N (the oldest N with
                    // --oldest) whatever the form; the JSON array keeps
                    // its documented order (oldest first), people read the
                    // newest first.
                    let mut runs = engine
                        .list(&RunFilter {
                            status,
                            limit,
                            newest_first: !oldest,
                            ..RunFilter::default()
                        })
                        .await?;
                    if json && !oldest {
                        runs.reverse();
                    }
                    output::print_list(&runs, json)?;
                }
                RunsCommand::Show {
                    run_id,
                    outputs,
                    step,
                } => {
                    let id = parse_run_id(&run_id)?;
                    let engine = open(&cli.db, false).await?;
                    match step {
                        Some(n) => {
                            let view = engine.show(id).await?;
                            let waits = engine
                                .waits(&WaitFilter {
                                    run: Some(id),
                                    ..WaitFilter::default()
                                })
                                .await?;
                            output::print_step(&view, n, json, &waits)?;
                        }
                        None => {
                            show_run(&engine, id, json, outputs).await?;
                        }
                    }
                }
                RunsCommand::Watch { run_id } => {
                    let id = parse_run_id(&run_id)?;
                    let engine = open(&cli.db, false).await?;
                    return Ok(status_exit(watch::local(&engine, id, json).await?));
                }
                RunsCommand::Events { run_id } => {
                    let id = parse_run_id(&run_id)?;
                    let events = open(&cli.db, false).await?.events(id).await?;
                    output::print_events(&events, json)?;
                }
                RunsCommand::Journal { run_id, step } => {
                    let id = parse_run_id(&run_id)?;
                    let journal = open(&cli.db, false).await?.journal(id, step).await?;
                    output::print_journal(&journal, json)?;
                }
                RunsCommand::Retry {
                    run_id,
                    crew,
                    action,
                } => {
                    let id = parse_run_id(&run_id)?;
                    let crew = crew.as_ref().map(load_crew).transpose()?;
                    let engine = open(&cli.db, false).await?;
                    let Some(crew) = crew else {
                        engine.retry(id, &action.actor()).await?;
                        return finish_action(&engine, id, action.enqueue, json).await;
                    };
                    let actor = action.actor();
                    let retried = engine.retry_with_crew(id, &crew, &actor);
                    match until_interrupted(id, retried).await {
                        Some(driven) => {
                            driven?;
                        }
                        None => return Ok(exit::INTERRUPTED),
                    }
                    return Ok(status_exit(show_run(&engine, id, json, false).await?));
                }
                RunsCommand::Continue { run_id, action } => {
                    let id = parse_run_id(&run_id)?;
                    let engine = open(&cli.db, false).await?;
                    engine.continue_run(id, &action.actor()).await?;
                    return finish_action(&engine, id, action.enqueue, json).await;
                }
                RunsCommand::Cancel { run_id, action } => {
                    let id = parse_run_id(&run_id)?;
                    let engine = open(&cli.db, false).await?;
                    let run = engine.cancel(id, &action.actor()).await?;
                    if !json && run.status == RunStatus::Running {
                        eprintln!("run {id} is running elsewhere: cancel requested; its executor stops the step at its next check");
                    }
                    show_run(&engine, id, json, false).await?;
                }
                RunsCommand::Fork {
                    run_id,
                    from_step,
                    input,
                    thread,
                    crew,
                    action,
                } => {
                    let id = parse_run_id(&run_id)?;
                    let input = input.as_deref().map(parse_input).transpose()?;
                    let thread_id = parse_thread(thread)?;
                    let crew = crew.as_ref().map(load_crew).transpose()?;
                    let engine = open(&cli.db, false).await?;
                    let req = ForkRequest {
                        from_step: StepIdx(from_step),
                        input,
                        thread_id,
                    };
                    let Some(crew) = crew else {
                        let child = engine.fork(id, &req, &action.actor()).await?;
                        if !json {
                            eprintln!("forked run {id} at step {from_step} into run {}", child.id);
                        }
                        return finish_action(&engine, child.id, action.enqueue, json).await;
                    };
                    let actor = action.actor();
                    let child = engine.fork_with_crew(id, &req, &crew, &actor).await?;
                    if !json {
                        eprintln!(
                            "forked run {id} at step {from_step} into run {} with crew {}",
                            child.id,
                            crew.fingerprint()
                        );
                    }
                    let drive = engine.execute_with_crew(child.id, &crew, &actor);
                    match until_interrupted(child.id, drive).await {
                        Some(driven) => {
                            driven?;
                        }
                        None => return Ok(exit::INTERRUPTED),
                    }
                    return Ok(status_exit(show_run(&engine, child.id, json, false).await?));
                }
            }
            Ok(exit::OK)
        }
        Command::Waits { command } => waits(&cli.db, command, json).await,
        Command::Compact { policy, thread } => {
            let mut policy = policy.policy()?;
            policy.thread = parse_thread(thread)?;
            let removed = open(&cli.db, false).await?.compact(&policy).await?;
            output::print_compacted(&removed, policy.dry_run, json)?;
            Ok(exit::OK)
        }
        Command::Threads { command } => {
            match command {
                ThreadsCommand::List => {
                    let threads = open(&cli.db, false).await?.threads().await?;
                    output::print_threads(&threads, json)?;
                }
                ThreadsCommand::Show { thread_id } => {
                    let id = parse_thread(Some(thread_id))?.unwrap_or_default();
                    let engine = open(&cli.db, false).await?;
                    let view = engine.thread(&id).await?;
                    let mut finals = vec![];
                    for r in view.runs.iter().filter(|_| !json) {
                        finals.push(output::final_output(&engine.show(r.id).await?));
                    }
                    output::print_thread(&view, json, &finals)?;
                }
            }
            Ok(exit::OK)
        }
        Command::Worker {
            concurrency,
            lease_ms,
            heartbeat_ms,
            poll_ms,
            grace_ms,
            retention,
        } => {
            let compact = retention.periodic()?;
            if heartbeat_ms == 0 || heartbeat_ms >= lease_ms {
                return Err(usage(format!(
                    "--heartbeat-ms ({heartbeat_ms}) must be above 0 and below --lease-ms ({lease_ms})"
                )));
            }
            let opts = OpenOptions {
                create: true,
                connect_timeout: Duration::from_secs(3),
                max_connections: (concurrency as u32 * 2 + 2).max(4),
                ..OpenOptions::default()
            };
            let config = ExecutorConfig {
                owner: cairn::holder::owner("cairn-worker"),
                lease: Duration::from_millis(lease_ms),
                heartbeat: Duration::from_millis(heartbeat_ms),
                ..ExecutorConfig::default()
            };
            let engine = Engine::open_with(&cli.db, &opts, config).await?;
            eprintln!(
                "cairn worker {}: {concurrency} at once, lease {lease_ms} ms",
                std::process::id()
            );
            let work = cairn::WorkOptions {
                concurrency,
                poll: Duration::from_millis(poll_ms),
                shutdown_grace: Duration::from_millis(grace_ms),
                compact,
                ..cairn::WorkOptions::default()
            };
            engine.work(work, shutdown_signal()).await?;
            Ok(exit::OK)
        }
        Command::Serve {
            crews,
            listen,
            concurrency,
            header_timeout,
            body_timeout,
            max_connections,
            max_event_streams,
            foreign_runs,
            public_url,
            retention,
        } => {
            let compact = retention.periodic()?;
            let empty;
            let crews_dir = match crews {
                Some(dir) => dir,
                None if std::path::Path::new("crews").is_dir() => PathBuf::from("crews"),
                None => {
                    empty = tempfile::tempdir()?;
                    eprintln!("cairn: no --crews and no ./crews directory: serving no crews");
                    empty.path().to_owned()
                }
            };
            let tokens = std::env::var("CAIRN_API_TOKENS")
                .unwrap_or_default()
                .split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect();
            cairn_server::serve(cairn_server::ServeOptions {
                db_url: cli.db.clone(),
                crews_dir,
                listen,
                tokens,
                concurrency,
                compact,
                header_timeout,
                body_timeout,
                max_connections,
                max_event_streams,
                foreign_runs,
                public_url,
                ..Default::default()
            })
            .await?;
            Ok(exit::OK)
        }
        Command::Demo { .. } if db_given => Err(usage(
            "`demo` keeps its own SQLite file (in --dir, or a temporary directory); \
             --db is not used: drop it",
        )),
        Command::Demo {
            agent: true, dir, ..
        } => demo::agent(dir).await.context("demo"),
        Command::Demo { steps, kill_at, .. } if kill_at >= steps => Err(usage(format!(
            "--kill-at ({kill_at}) must be below --steps ({steps})"
        ))),
        Command::Demo {
            steps,
            kill_at,
            dir,
            ..
        } => demo::run(steps, kill_at, dir).await.context("demo"),
    }
}

async fn waits(db: &str, command: WaitsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        WaitsCommand::List { run, status, all } => {
            let run = run.as_deref().map(parse_run_id).transpose()?;
            let status = wait_status(status, all)?;
            let engine = open(db, false).await?;
            let waits = engine
                .waits(&WaitFilter {
                    run,
                    step: None,
                    status,
                })
                .await?;
            output::print_waits(&waits, json)?;
            Ok(exit::OK)
        }
        WaitsCommand::Answer {
            wait_id,
            approve,
            edit,
            reject,
            answer,
            by,
            reason,
            enqueue,
        } => {
            let id = wait_id.parse::<WaitId>().map_err(usage)?;
            let answer = parse_answer(approve, edit, reject, answer)?;
            let actor = ActionArgs {
                by: Some(answered_by(by)),
                reason,
                enqueue,
            }
            .actor();
            let engine = open(db, false).await?;
            let wait = match engine.answer_as(id, &answer, &actor).await {
                Ok(wait) => wait,
                Err(e) => return Err(point_to_open_wait(&engine, id, e).await),
            };
            let run = engine.get_run(wait.run_id).await?;
            if run.status == RunStatus::Queued {
                return finish_action(&engine, run.id, enqueue, json).await;
            }
            Ok(status_exit(show_run(&engine, run.id, json, false).await?))
        }
        WaitsCommand::Expire => {
            let engine = open(db, false).await?;
            let expired = engine.expire_due_waits().await?;
            output::print_waits(&expired, json)?;
            Ok(exit::OK)
        }
    }
}

/// The status `waits list` filters by: `--status`, else (in text) open
/// unless `--all`. The JSON array keeps its documented contents, every
/// wait, unless `--status` narrows it.
fn wait_status(status: Option<String>, all: bool) -> anyhow::Result<Option<WaitStatus>> {
    match status {
        Some(s) => Ok(Some(s.parse::<WaitStatus>().map_err(usage)?)),
        // `--json` changes the form, never the records: open ones too.
        None if all => Ok(None),
        None => Ok(Some(WaitStatus::Open)),
    }
}

/// An answer to a closed wait, with the open wait of the same run (if
/// any) and the command that answers it: the wait a person most likely
/// meant (a rejected review's re-run opens a new one).
async fn point_to_open_wait(engine: &Engine, id: WaitId, err: cairn::Error) -> anyhow::Error {
    if !matches!(
        err.store_error(),
        Some(cairn::StoreError::WaitClosed { .. })
    ) {
        return err.into();
    }
    let Ok(waits) = engine.waits(&WaitFilter::default()).await else {
        return err.into();
    };
    let Some(run) = waits.iter().find(|w| w.id == id).map(|w| w.run_id) else {
        return err.into();
    };
    match waits
        .iter()
        .find(|w| w.run_id == run && w.status == WaitStatus::Open)
    {
        Some(open) => {
            let hint = format!(
                "{err}; run {run} waits on wait {} ({} of step {}): {}",
                open.id,
                open.kind.as_str(),
                open.step_idx,
                output::answer_hint(open.id, open.kind)
            );
            anyhow::Error::from(err).context(hint)
        }
        None => {
            let hint = format!("{err}; run {run} has no open wait");
            anyhow::Error::from(err).context(hint)
        }
    }
}

/// The answer `waits answer` was given (clap lets only one through).
fn parse_answer(
    approve: bool,
    edit: Option<String>,
    reject: Option<String>,
    answer: Option<String>,
) -> anyhow::Result<Answer> {
    Ok(match (approve, edit, reject, answer) {
        (true, ..) => Answer::Approve,
        (_, Some(edit), ..) => Answer::Edit {
            output: parse_output_arg(&edit)?,
        },
        (_, _, Some(feedback), _) => Answer::Reject { feedback },
        (_, _, _, Some(value)) => Answer::Answer {
            value: parse_json_arg(&value, "--answer", "the answer", caps().1)?,
        },
        _ => return Err(usage("say --approve, --edit, --reject or --answer")),
    })
}

/// Who answers: `--by`, else `$USER`, else `cli`.
fn answered_by(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cli".to_owned())
}

/// An edited output: JSON if it parses, else the text itself (@FILE reads
/// a file, up to the answer cap).
fn parse_output_arg(arg: &str) -> anyhow::Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some(path) => read_capped(path, "--edit", caps().1)?,
        None => arg.to_owned(),
    };
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.trim().to_owned())))
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Runs `work` (executing run `id`) until it ends or Ctrl-C: then says
/// where the run stands and the command that resumes it, and gives `None`
/// (exit [`exit::INTERRUPTED`]). Dropping `work` stops its step (a
/// `command` step's process group is killed); the run stays `running`
/// under this process's lease until it expires, so the printed command takes
/// it over (this process is gone by then, which `resume` sees: no
/// `--takeover` needed, see `cairn::holder`).
async fn until_interrupted<T>(id: RunId, work: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        result = work => Some(result),
        _ = tokio::signal::ctrl_c() => {
            eprintln!(
                "\ninterrupted: run {id} stopped where it was and keeps its finished steps; resume it with:\n  {} resume {id}",
                output::cairn_command()
            );
            None
        }
    }
}

/// A run queued behind an unfinished run of its thread starts only after
/// it: says so on stderr (the run, its status, and its open wait with the
/// command that answers it), so a silent `run` is not mistaken for a hang.
async fn say_what_it_waits_behind(engine: &Engine, run: &cairn::RunRecord) {
    let Some(thread) = &run.thread_id else { return };
    // The oldest two of each busy status (one may be this run): a few rows,
    // however long the thread.
    let mut earlier = vec![];
    for status in [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Waiting,
        RunStatus::Interrupted,
    ] {
        let filter = RunFilter {
            thread: Some(thread.clone()),
            status: Some(status),
            limit: Some(2),
            ..RunFilter::default()
        };
        let Ok(runs) = engine.list(&filter).await else {
            return;
        };
        earlier.extend(
            runs.into_iter()
                .filter(|r| (r.created_at, r.id) < (run.created_at, run.id)),
        );
    }
    let Some(busy) = earlier.iter().min_by_key(|r| (r.created_at, r.id)) else {
        return;
    };
    let mut text = format!(
        "run {} is queued behind run {} of thread `{}` ({}); it starts when that run is done",
        run.id,
        busy.id,
        cairn::text::printable_line(thread),
        busy.status
    );
    let open = WaitFilter {
        run: Some(busy.id),
        status: Some(WaitStatus::Open),
        ..WaitFilter::default()
    };
    if let Some(w) = engine
        .waits(&open)
        .await
        .ok()
        .and_then(|w| w.into_iter().next())
    {
        text.push_str(&format!(
            "\n  it waits for an answer: {}",
            output::answer_hint(w.id, w.kind)
        ));
    } else if busy.status == RunStatus::Interrupted {
        text.push_str(&format!(
            "\n  it is interrupted: {} runs continue {}",
            output::cairn_command(),
            busy.id
        ));
    }
    eprintln!("{text}");
}

/// Prints run `id` (its waits with it); its status.
async fn show_run(
    engine: &Engine,
    id: RunId,
    json: bool,
    outputs: bool,
) -> anyhow::Result<RunStatus> {
    show_run_after(engine, id, json, outputs, false).await
}

/// [`show_run`], without the step table when progress lines already
/// printed one (`after_lines`): a table twice, with the durations counted
/// two ways, read as two different runs.
async fn show_run_after(
    engine: &Engine,
    id: RunId,
    json: bool,
    outputs: bool,
    after_lines: bool,
) -> anyhow::Result<RunStatus> {
    let view = engine.show(id).await?;
    let waits = if json {
        vec![]
    } else {
        engine
            .waits(&WaitFilter {
                run: Some(id),
                ..WaitFilter::default()
            })
            .await?
    };
    let text = output::RunText {
        waits: &waits,
        outputs,
        extra: None,
        no_table: after_lines,
    };
    output::print_run(&view, json, &text)?;
    Ok(view.run.status)
}

/// Runs read per page when `runs list` has no `--limit`.
const LIST_PAGE: u32 = 500;

/// `runs list` without `--limit`: every run, a page at a time, each page
/// printed before the next is read, so memory stays bounded whatever the
/// database holds. Text newest first (oldest with --oldest); the JSON
/// array oldest first, as documented, written element by element.
async fn list_all(
    engine: &Engine,
    status: Option<RunStatus>,
    oldest: bool,
    json: bool,
) -> anyhow::Result<u8> {
    use std::io::Write;
    // `CAIRN_LIST_PAGE`: a smaller page, for tests of the paging.
    let size = std::env::var("CAIRN_LIST_PAGE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LIST_PAGE);
    let newest_first = !json && !oldest;
    match json {
        true => write!(std::io::stdout(), "[")?,
        false => output::run_header(&mut output::text_out())?,
    }
    let (mut after, mut first) = (None, true);
    loop {
        let filter = RunFilter {
            status,
            limit: Some(size),
            after,
            newest_first,
            ..RunFilter::default()
        };
        let page = engine.list(&filter).await?;
        if json {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for r in &page {
                let sep = if first { "\n" } else { ",\n" };
                write!(out, "{sep}{}", serde_json::to_string_pretty(r)?)?;
                first = false;
            }
            out.flush()?;
        } else {
            output::run_rows(&mut output::text_out(), &page)?;
        }
        match page.last() {
            Some(last) if page.len() == size as usize => after = Some(last.id),
            _ => break,
        }
    }
    if json {
        writeln!(std::io::stdout(), "{}]", if first { "" } else { "\n" })?;
    }
    Ok(exit::OK)
}

/// After an operator action: execute the run to its next stop (unless
/// `enqueue`), print it, and pick the exit code from its status.
async fn finish_action(
    engine: &Engine,
    id: RunId,
    enqueue: bool,
    json: bool,
) -> anyhow::Result<u8> {
    if !enqueue {
        match until_interrupted(id, engine.execute(id)).await {
            Some(driven) => {
                driven?;
            }
            None => return Ok(exit::INTERRUPTED),
        }
    }
    let status = show_run(engine, id, json, false).await?;
    Ok(action_exit(status, enqueue))
}

/// The exit code of an operator action whose run now stands in `status`.
/// Enqueued, the run is the workers': `queued`, or `running` because a
/// worker claimed it before it was printed, is success (as in client mode).
fn action_exit(status: RunStatus, enqueue: bool) -> u8 {
    match status {
        RunStatus::Queued | RunStatus::Running if enqueue => exit::OK,
        status => status_exit(status),
    }
}

/// The database a command used, for messages: a relative SQLite path made
/// absolute (the default `sqlite://cairn.db` depends on the working
/// directory), a PostgreSQL URL without its password.
fn describe_db(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        let path = std::path::Path::new(path.split('?').next().unwrap_or_default());
        if path.is_relative() {
            if let Ok(cwd) = std::env::current_dir() {
                return format!("sqlite://{}", cwd.join(path).display());
            }
        }
        return url.to_owned();
    }
    redact(url)
}

/// A URL without its password (the one redaction, `cairn::text`).
fn redact(url: &str) -> String {
    cairn::text::redact_url(url)
}

/// How the commands this process suggests begin: `cairn` with the
/// `--server` or `--db` that reaches the same runs.
fn command_prefix(cli: &Cli) -> String {
    if let Some(server) = &cli.server {
        return format!("cairn --server {}", redact(server));
    }
    if cli.db == DEFAULT_DB {
        "cairn".to_owned()
    } else {
        format!("cairn --db {}", redact(&cli.db))
    }
}

/// An error's message and its sources, `a: b: c`, leaving out a source
/// whose text the message already holds (errors that print their source
/// inline would otherwise say it two or three times).
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// Whether `err` is a closed stdout (`cairn … | head`): not an error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || e.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Names the database a run, wait or thread was not found in, with the
/// reason runs seem to vanish (a relative SQLite path after a `cd`).
fn not_found_hint(err: &anyhow::Error, db: &str) -> Option<String> {
    let e = err.downcast_ref::<cairn::Error>()?;
    if e.class() != ErrorClass::NotFound {
        return None;
    }
    let mut hint = format!("looked in {}", describe_db(db));
    if db == DEFAULT_DB {
        hint.push_str(
            " (the default database, relative to the working directory; pass --db or set CAIRN_DATABASE_URL)",
        );
    }
    Some(hint)
}

/// The command that gets past a refusal, whole (run id and `--db` as
/// used): the library's errors carry no command lines.
fn action_hint(err: &anyhow::Error) -> Option<String> {
    let e = err.downcast_ref::<cairn::Error>()?;
    let cairn = output::cairn_command();
    if let cairn::Error::Executor(x) = e {
        match x {
            cairn::ExecutorError::RunFailed { run, .. } => {
                return Some(format!(
                    "to run the failed step again: {cairn} runs retry {run} (or fork it: {cairn} runs fork {run} --from-step N)"
                ))
            }
            cairn::ExecutorError::CrewMismatch { run, .. } => {
                return Some(format!(
                    "resume with the crew the run started with (leave out --crew: {cairn} resume {run}), or add --force to carry on with the new one"
                ))
            }
            cairn::ExecutorError::Leased { run } => {
                return Some(format!("to take it over: {cairn} resume {run}"))
            }
            _ => {}
        }
    }
    Some(match e.store_error()? {
        cairn::StoreError::LeaseHeld { run, .. } => format!(
            "to take it over now (fencing stops the holder at its next write): {cairn} resume {run} --takeover"
        ),
        cairn::StoreError::MissingFile(_) | cairn::StoreError::NoSchema(_) => {
            "pass --db (or set CAIRN_DATABASE_URL) to name the database".to_owned()
        }
        cairn::StoreError::ThreadBusy { .. } => {
            "submit with `--on-busy queue` to run after it, or `--on-busy interrupt` to cancel it"
                .to_owned()
        }
        _ => return None,
    })
}

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::OK
            });
        }
    };
    let db_given = matches.value_source("db") == Some(clap::parser::ValueSource::CommandLine);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    output::set_command_prefix(command_prefix(&cli));
    // A worker or server logs each claim, step and stop (-q: warnings
    // only); one-shot commands only warnings.
    let default_level = match cli.command {
        Command::Serve { .. } | Command::Worker { .. } if !cli.quiet => "info,sqlx=warn",
        Command::Serve { .. } | Command::Worker { .. } => "warn,sqlx=warn",
        // sqlx warns about slow statements; a one-line error must stay one line.
        _ => "warn,sqlx=error",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CAIRN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn: error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    let db = (cli.server.is_none()).then(|| cli.db.clone());
    match runtime.block_on(main_inner(cli, db_given)) {
        Ok(code) => ExitCode::from(code),
        // A reader that stopped reading (`cairn runs list | head`) is not an error.
        Err(err) if is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            let mut text = error_text(&err);
            let hint = match db.as_deref() {
                Some(db) => not_found_hint(&err, db).or_else(|| action_hint(&err)),
                None => action_hint(&err),
            };
            if let Some(hint) = hint {
                text.push_str("; ");
                text.push_str(&hint);
            }
            eprintln!("cairn: error: {}", cairn::text::printable(&text));
            ExitCode::from(error_exit(&err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--enqueue`: the run is the workers' once recorded, so `running`
    /// (a worker already claimed it) is success like `queued`; without it
    /// the run's own stop decides.
    #[test]
    fn an_enqueued_action_succeeds_whether_or_not_a_worker_took_the_run() {
        let check = |status, enqueue, code| assert_eq!(action_exit(status, enqueue), code);
        check(RunStatus::Queued, true, exit::OK);
        check(RunStatus::Running, true, exit::OK);
        check(RunStatus::Succeeded, true, exit::OK);
        check(RunStatus::Waiting, true, ErrorClass::Waiting.exit_code());
        check(
            RunStatus::Running,
            false,
            ErrorClass::of_status(RunStatus::Running).exit_code(),
        );
        check(RunStatus::Failed, false, ErrorClass::Failed.exit_code());
    }
}
