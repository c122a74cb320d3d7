//! How a command's end reads to the shell and to a person: exit codes (a
//! contract, docs/cli.md), an error's one line, and the hint that names the
//! command that gets past it. The library's errors carry no command lines;
//! they are added here.

use cairn::{ErrorClass, RunStatus};

use crate::api::remote::ApiError;
use crate::args::{Cli, DEFAULT_DB};
use crate::input::UsageError;
use crate::output;

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

/// The exit code of a run that stopped in `status`: 0 for succeeded, else
/// its status's class (failed 3, waiting 4, interrupted 5, cancelled 6).
pub fn status_exit(status: RunStatus) -> u8 {
    match status {
        RunStatus::Succeeded => exit::OK,
        status => ErrorClass::of_status(status).exit_code(),
    }
}

/// The status a stopped run stands in for its exit code: its own, but
/// `interrupted` for a run waiting for children that stopped interrupted
/// (an operator must continue them, as an interrupted run's).
pub fn stop_status(view: &cairn::RunView) -> RunStatus {
    match view.children_wait() {
        Some(cairn::ChildrenWait::Stopped { .. }) => RunStatus::Interrupted,
        _ => view.run.status,
    }
}

/// The exit code of a run that stopped as `view` shows it
/// ([`stop_status`]).
pub fn view_exit(view: &cairn::RunView) -> u8 {
    status_exit(stop_status(view))
}

/// The exit code of an error: its class's (the one table in
/// `cairn::ErrorClass`), whether the engine here or a server answered.
pub fn error_exit(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<UsageError>().is_some() {
        return exit::BAD_INPUT;
    }
    if let Some(api) = err.downcast_ref::<ApiError>() {
        return api.class().exit_code();
    }
    match err.downcast_ref::<cairn::Error>() {
        Some(e) => e.class().exit_code(),
        None => exit::ERROR,
    }
}

/// The exit code of an operator action whose run now stands in `status`.
/// Enqueued, the run is the workers': `queued`, or `running` because a
/// worker claimed it before it was printed, is success (as in client mode).
pub fn action_exit(status: RunStatus, enqueue: bool) -> u8 {
    match status {
        RunStatus::Queued | RunStatus::Running if enqueue => exit::OK,
        status => status_exit(status),
    }
}

/// The database a command used, for messages: a relative SQLite path made
/// absolute (the default `sqlite://cairn.db` depends on the working
/// directory), a PostgreSQL URL without its password.
pub fn describe_db(url: &str) -> String {
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
pub fn redact(url: &str) -> String {
    cairn::text::redact_url(url)
}

/// How the commands this process suggests begin: `cairn` with the
/// `--server` or `--db` that reaches the same runs.
pub fn command_prefix(cli: &Cli) -> String {
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
pub fn error_text(err: &anyhow::Error) -> String {
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
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
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
pub fn not_found_hint(err: &anyhow::Error, db: &str) -> Option<String> {
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
pub fn action_hint(err: &anyhow::Error) -> Option<String> {
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

/// The stable code of an error, whichever side said it: the engine here
/// (`cairn::Error::code`) or a server (`{"error": {"code"}}`).
pub fn error_code(err: &anyhow::Error) -> Option<&str> {
    if let Some(api) = err.downcast_ref::<ApiError>() {
        return Some(&api.code);
    }
    err.downcast_ref::<cairn::Error>().map(cairn::Error::code)
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
