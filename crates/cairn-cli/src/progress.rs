//! Live progress of `cairn run` on a terminal: the run id at once, then one
//! line per step as it finishes, fails, stops or is deferred (until when,
//! and why: a paused provider key), and one per wait as it opens (with the
//! command that answers it), read from the run's events as
//! they are committed. Off with `--json` or when stdout is not a terminal
//! (the single document of today), unless `--progress lines` (or
//! `CAIRN_PROGRESS=lines`) asks for it, which is how the tests see it.

use std::io::Write;
use std::time::Duration;

use cairn::{Engine, EventKind, EventRecord, RunRecord, WaitId, WaitKind};
use serde_json::Value;

use crate::output;

/// Whether `run` prints progress lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Progress {
    /// Lines on a terminal, nothing otherwise.
    Auto,
    /// Lines, terminal or not.
    Lines,
    /// No lines.
    Off,
}

impl Progress {
    /// Whether lines are printed, given `--json` and where stdout goes.
    pub fn enabled(self, json: bool) -> bool {
        match self {
            _ if json => false,
            Progress::Lines => true,
            Progress::Off => false,
            Progress::Auto => std::io::IsTerminal::is_terminal(&std::io::stdout()),
        }
    }
}

/// How often the printer looks for new events.
const POLL: Duration = Duration::from_millis(150);

/// The first lines: the run id (at once) and the step table's header.
pub fn start(run: &RunRecord) -> std::io::Result<()> {
    let mut out = crate::output::text_out();
    writeln!(
        out,
        "run {}  crew {} v{}  {} steps",
        run.id, run.crew, run.crew_version, run.step_count
    )?;
    writeln!(
        out,
        "{:>4}  {:<14} {:<11} {:>7}  {:>13}  {:>9}",
        "idx", "role", "status", "attempt", "tokens in/out", "duration"
    )?;
    out.flush()
}

/// The line an event adds to the live table, if it is one a person
/// follows; `roles` names the steps whose events carry only an index.
pub fn line(e: &EventRecord, roles: &[String]) -> Option<String> {
    let d = &e.data;
    let idx = d["idx"].as_u64()?;
    let role = d["role"]
        .as_str()
        .or_else(|| roles.get(idx as usize).map(String::as_str))
        .unwrap_or("");
    let attempt = d["attempt"]
        .as_u64()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let duration = d["duration_ms"]
        .as_u64()
        .map(|ms| format!("{ms} ms"))
        .unwrap_or_else(|| "-".to_owned());
    let tokens = output::tokens(d["input_tokens"].as_u64(), d["output_tokens"].as_u64());
    let row = |status: &str| {
        format!("{idx:>4}  {role:<14} {status:<11} {attempt:>7}  {tokens:>13}  {duration:>9}")
    };
    let message = |v: &Value| v["error"]["message"].as_str().unwrap_or("").to_owned();
    Some(match e.kind {
        EventKind::StepSucceeded => row("succeeded"),
        EventKind::StepFailed => {
            let next = if d["will_retry"] == true {
                "; it will be retried"
            } else {
                ""
            };
            format!("{}\n      error: {}{next}", row("failed"), message(d))
        }
        EventKind::StepInterrupted => {
            format!("{}\n      stopped: {}", row("interrupted"), message(d))
        }
        EventKind::StepCancelled => row("cancelled"),
        EventKind::StepDeferred => deferred(e, &row("deferred")),
        EventKind::WaitOpened => {
            let id: WaitId = serde_json::from_value(d["wait"].clone()).ok()?;
            let kind: WaitKind = serde_json::from_value(d["kind"].clone()).ok()?;
            let hint = output::answer_hint(id, kind);
            format!(
                "{idx:>4}  {role:<14} {:<11} {attempt:>7}  wait {id} ({})\n      answer: {hint}",
                "waiting",
                kind.as_str()
            )
        }
        EventKind::ChildEnded | EventKind::ChildInterrupted => child(e),
        _ => return None,
    })
}

/// A child's end (or stop) under its parent's step: `child a (RUN)
/// succeeded`, or with why it did not.
fn child(e: &EventRecord) -> String {
    let d = &e.data;
    let status = match e.kind {
        EventKind::ChildInterrupted => "interrupted",
        _ => d["status"].as_str().unwrap_or(""),
    };
    let key = cairn::text::printable_line(d["key"].as_str().unwrap_or(""));
    let child = d["child"].as_str().unwrap_or("");
    match d["message"].as_str() {
        Some(why) => format!(
            "      child {key} ({child}) {status}: {}",
            cairn::text::printable_line(why)
        ),
        None => format!("      child {key} ({child}) {status}"),
    }
}

/// A deferred step's lines: until when the run waits (the event's time
/// plus its delay, database clock) and why: a paused provider key (and a
/// `Retry-After` that was capped), or no permit free.
fn deferred(e: &EventRecord, row: &str) -> String {
    let d = &e.data;
    let delay = chrono::Duration::milliseconds(d["delay_ms"].as_i64().unwrap_or(0));
    let until = e.at.checked_add_signed(delay).map_or("-".to_owned(), |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    });
    let why = d["message"].as_str().unwrap_or("");
    let key = cairn::text::printable_line(d["key"].as_str().unwrap_or(""));
    format!(
        "{row}\n      waits until {until} on key {key}: {}",
        cairn::text::printable_line(why)
    )
}

/// Prints the lines of the events after `seq`; the last sequence seen. A
/// closed stdout stops the printing, not the run.
fn print_new(events: &[EventRecord], roles: &[String], seq: &mut i64) -> std::io::Result<()> {
    let mut out = crate::output::text_out();
    for e in events {
        *seq = (*seq).max(e.seq);
        if let Some(l) = line(e, roles) {
            writeln!(out, "{l}")?;
        }
    }
    out.flush()
}

/// Follows run `id`'s events until `done` resolves, printing a line per
/// step and wait; then prints what arrived last. Returns `done`'s output.
pub async fn follow<T>(
    engine: &Engine,
    run: &RunRecord,
    done: impl std::future::Future<Output = T>,
) -> T {
    let id = run.id;
    let roles: Vec<String> = run
        .crew_definition
        .agents
        .iter()
        .map(|a| a.role.as_str().to_owned())
        .collect();
    let mut seq = 0_i64;
    let mut done = std::pin::pin!(done);
    let mut printing = true;
    let result = loop {
        tokio::select! {
            result = &mut done => break result,
            () = tokio::time::sleep(POLL) => {
                if printing {
                    if let Ok(events) = engine.events_after(id, seq).await {
                        printing = print_new(&events, &roles, &mut seq).is_ok();
                    }
                }
            }
        }
    };
    if printing {
        if let Ok(events) = engine.events_after(id, seq).await {
            let _ = print_new(&events, &roles, &mut seq);
        }
    }
    result
}
