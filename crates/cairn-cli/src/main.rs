//! The `cairn` binary: argument parsing, printing and exit codes. All
//! behaviour lives in the `cairn` library; this file only translates.

mod client;
mod demo;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::Value;

use cairn::{
    parse_age, Actor, Answer, CompactPolicy, Crew, Engine, ErrorClass, ExecutorConfig, ForkRequest,
    OnBusy, OpenOptions, ResumeOptions, RunFilter, RunId, RunStatus, StepIdx, SubmitOptions,
    WaitFilter, WaitId, WaitStatus,
};

/// Exit codes (a contract; see the README), from the one table in
/// `cairn::ErrorClass`.
pub mod exit {
    use cairn::ErrorClass;

    pub const OK: u8 = 0;
    pub const ERROR: u8 = ErrorClass::Internal.exit_code();
    pub const BAD_INPUT: u8 = ErrorClass::BadInput.exit_code();
}

#[derive(Parser)]
#[command(name = "cairn", version, about = "Durable, resumable multi-step runs")]
struct Cli {
    /// Database URL: sqlite://PATH (default) or postgres://USER@HOST:PORT/DB.
    #[arg(
        long,
        global = true,
        env = "CAIRN_DATABASE_URL",
        default_value = "sqlite://cairn.db"
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
        /// The run input: JSON text, or @FILE to read it from a file.
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
    },
    /// Submit a run without executing it: a worker or `cairn serve` picks it
    /// up (or `cairn resume RUN_ID`). Prints its id (`--json`: the run).
    Submit {
        crew: PathBuf,
        #[arg(long, default_value = "{}")]
        input: String,
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
    },
    /// Remove old rows: whole finished runs, journals of finished runs, old
    /// events. Never anything a queued, running, waiting, interrupted or
    /// (unless --failed-older-than) failed run needs. Ages: 30d, 12h, 0s.
    Compact {
        #[command(flatten)]
        policy: CompactArgs,
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
        #[arg(long, default_value_t = 30)]
        steps: u32,
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
    /// List waits, oldest first.
    List {
        #[arg(long)]
        run: Option<String>,
        /// open, answered, expired or cancelled.
        #[arg(long)]
        status: Option<String>,
    },
    /// Answer a wait, then (unless --enqueue) execute its run to its next stop.
    Answer {
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
    /// List runs, oldest first.
    List {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Show one run as a step table.
    Show { run_id: String },
    /// Show a run's event log.
    Events { run_id: String },
    /// Show the journal of a run's agent steps (every generation).
    Journal {
        run_id: String,
        /// Only this step.
        #[arg(long)]
        step: Option<u32>,
    },
    /// Run a failed run's failed step again (attempt + 1) and carry on.
    Retry {
        run_id: String,
        #[command(flatten)]
        action: ActionArgs,
    },
    /// Carry on with an interrupted run.
    Continue {
        run_id: String,
        #[command(flatten)]
        action: ActionArgs,
    },
    /// Cancel a run: at once if it is not running; a running step is asked
    /// to stop and its late result is discarded.
    Cancel {
        run_id: String,
        #[command(flatten)]
        action: ActionArgs,
    },
    /// A new run that copies checkpoints 0..N-1 of RUN_ID and executes from step N.
    Fork {
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

fn parse_input(arg: &str) -> anyhow::Result<Value> {
    let (text, origin) = match arg.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read --input file {path}: {e}")))?,
            format!("--input file {path}"),
        ),
        None => (arg.to_owned(), "--input".to_owned()),
    };
    serde_json::from_str(&text).map_err(|e| usage(format!("{origin} is not valid JSON: {e}")))
}

fn load_crew(path: &PathBuf) -> anyhow::Result<Crew> {
    Crew::from_file(path).map_err(|e| usage(e.to_string()))
}

async fn open(db: &str, create: bool) -> anyhow::Result<Engine> {
    let opts = OpenOptions {
        create,
        connect_timeout: Duration::from_secs(3),
        max_connections: 4,
    };
    let config = ExecutorConfig {
        owner: format!("cairn-cli:{}", std::process::id()),
        ..ExecutorConfig::default()
    };
    Ok(Engine::open_with(db, &opts, config).await?)
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

async fn main_inner(cli: Cli) -> anyhow::Result<u8> {
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
        } => {
            // Validate everything the user typed before touching the database.
            let crew = load_crew(&crew)?;
            let input = parse_input(&input)?;
            let thread_id = parse_thread(thread)?;
            let engine = open(&cli.db, true).await?;
            let opts = SubmitOptions {
                idempotency_key,
                thread_id,
                on_busy,
            };
            let driven = engine.run(&crew, input, opts).await?;
            let view = engine.show(driven.run.id).await?;
            output::print_run(&view, json, None)?;
            Ok(status_exit(view.run.status))
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
                output::print_run(&engine.show(submitted.run.id).await?, true, None)?;
            } else {
                println!("{}", submitted.run.id);
            }
            Ok(exit::OK)
        }
        Command::Resume {
            run_id,
            crew,
            force,
            thread,
            takeover,
        } => {
            let id = parse_run_id(&run_id)?;
            let crew = crew.as_ref().map(load_crew).transpose()?;
            let thread_id = parse_thread(thread)?;
            let engine = open(&cli.db, false).await?;
            let opts = ResumeOptions {
                crew,
                force,
                thread_id,
                takeover,
            };
            let driven = engine.resume(id, opts).await?;
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
            let view = engine.show(id).await?;
            output::print_run(&view, json, None)?;
            Ok(status_exit(view.run.status))
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
                RunsCommand::List { status, limit } => {
                    let status = status
                        .map(|s| s.parse::<RunStatus>().map_err(usage))
                        .transpose()?;
                    let engine = open(&cli.db, false).await?;
                    let runs = engine
                        .list(&RunFilter {
                            status,
                            limit,
                            ..RunFilter::default()
                        })
                        .await?;
                    output::print_list(&runs, json)?;
                }
                RunsCommand::Show { run_id } => {
                    let id = parse_run_id(&run_id)?;
                    let view = open(&cli.db, false).await?.show(id).await?;
                    output::print_run(&view, json, None)?;
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
                RunsCommand::Retry { run_id, action } => {
                    let id = parse_run_id(&run_id)?;
                    let engine = open(&cli.db, false).await?;
                    engine.retry(id, &action.actor()).await?;
                    return finish_action(&engine, id, action.enqueue, json).await;
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
                    output::print_run(&engine.show(id).await?, json, None)?;
                }
                RunsCommand::Fork {
                    run_id,
                    from_step,
                    input,
                    thread,
                    action,
                } => {
                    let id = parse_run_id(&run_id)?;
                    let input = input.as_deref().map(parse_input).transpose()?;
                    let thread_id = parse_thread(thread)?;
                    let engine = open(&cli.db, false).await?;
                    let req = ForkRequest {
                        from_step: StepIdx(from_step),
                        input,
                        thread_id,
                    };
                    let child = engine.fork(id, &req, &action.actor()).await?;
                    if !json {
                        eprintln!("forked run {id} at step {from_step} into run {}", child.id);
                    }
                    return finish_action(&engine, child.id, action.enqueue, json).await;
                }
            }
            Ok(exit::OK)
        }
        Command::Waits { command } => waits(&cli.db, command, json).await,
        Command::Compact { policy } => {
            let policy = policy.policy()?;
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
                    let view = open(&cli.db, false).await?.thread(&id).await?;
                    output::print_thread(&view, json)?;
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
            };
            let config = ExecutorConfig {
                owner: format!("cairn-worker:{}", std::process::id()),
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
                ..Default::default()
            })
            .await?;
            Ok(exit::OK)
        }
        Command::Demo {
            agent: true, dir, ..
        } => demo::agent(dir).await.context("demo"),
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
        WaitsCommand::List { run, status } => {
            let run = run.as_deref().map(parse_run_id).transpose()?;
            let status = status
                .map(|s| s.parse::<WaitStatus>().map_err(usage))
                .transpose()?;
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
            enqueue,
        } => {
            let id = wait_id.parse::<WaitId>().map_err(usage)?;
            let answer = parse_answer(approve, edit, reject, answer)?;
            let by = answered_by(by);
            let engine = open(db, false).await?;
            let wait = engine.answer(id, &answer, &by).await?;
            let run = engine.show(wait.run_id).await?.run;
            if run.status == RunStatus::Queued {
                return finish_action(&engine, run.id, enqueue, json).await;
            }
            output::print_run(&engine.show(run.id).await?, json, None)?;
            Ok(status_exit(run.status))
        }
        WaitsCommand::Expire => {
            let engine = open(db, false).await?;
            let expired = engine.expire_due_waits().await?;
            output::print_waits(&expired, json)?;
            Ok(exit::OK)
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
            value: parse_input(&value)?,
        },
        _ => return Err(usage("say --approve, --edit, --reject or --answer")),
    })
}

/// Who answers: `--by`, else `$USER`, else `cli`.
fn answered_by(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cli".to_owned())
}

/// An edited output: JSON if it parses, else the text itself (@FILE reads a file).
fn parse_output_arg(arg: &str) -> anyhow::Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read --edit file {path}: {e}")))?,
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

/// After an operator action: execute the run to its next stop (unless
/// `enqueue`), print it, and pick the exit code from its status.
async fn finish_action(
    engine: &Engine,
    id: RunId,
    enqueue: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let status = if enqueue {
        engine.show(id).await?.run.status
    } else {
        engine.execute(id).await?.run.status
    };
    output::print_run(&engine.show(id).await?, json, None)?;
    Ok(if enqueue && status == RunStatus::Queued {
        exit::OK
    } else {
        status_exit(status)
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::OK
            });
        }
    };
    // A server logs what it does; one-shot commands only warnings.
    let default_level = match cli.command {
        Command::Serve { .. } => "info,sqlx=warn",
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
    match runtime.block_on(main_inner(cli)) {
        Ok(code) => ExitCode::from(code),
        // A reader that stopped reading (`cairn runs list | head`) is not an error.
        Err(err)
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::from(exit::OK)
        }
        Err(err) => {
            eprintln!("cairn: error: {err:#}");
            ExitCode::from(error_exit(&err))
        }
    }
}
