//! The `cairn` binary: reads the command line, runs the command, and
//! turns its end into an exit code and one line for a person. All
//! behaviour lives in the `cairn` library; each command is written once in
//! `commands/` against `api::Api`, which the database (`--db`) and a
//! server (`--server`) both implement.

mod api;
mod args;
mod commands;
mod config;
mod demo;
mod input;
mod log;
mod output;
mod progress;
mod report;
mod traces;
mod watch;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::args::{Cli, Command};
use crate::report::{
    action_hint, command_prefix, error_exit, error_text, exit, is_broken_pipe, not_found_hint,
};

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
        // A client's text in a field (a key, a name) cannot forge a line.
        .fmt_fields(log::fields())
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
    match runtime.block_on(commands::main(cli, db_given)) {
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
