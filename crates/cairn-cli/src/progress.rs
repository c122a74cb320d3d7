//! Live progress of `cairn run` on a terminal: the run id at once, then one
//! line per step as it finishes, fails, stops or is deferred (until when,
//! and why: a paused provider key), and one per wait as it opens (with the
//! command that answers it), read from the run's events as
//! they are committed. Off with `--json` or when stdout is not a terminal
//! (the single document of today), unless `--progress lines` (or
//! `CAIRN_PROGRESS=lines`) asks for it, which is how the tests see it.

use std::io::Write;
use std::time::Duration;

use cairn::event::payload::StepDeferred;
use cairn::{
    Attempt, Engine, EventData, EventData as D, EventRecord, Role, RunId, RunRecord, StepIdx,
};

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
    let data = e.payload().ok()?;
    let cells = Cells::of(&data)?;
    let idx = cells.idx.get();
    let role = cells
        .role
        .map(Role::as_str)
        .or_else(|| roles.get(idx as usize).map(String::as_str))
        .unwrap_or("");
    let attempt = cells.attempt.map(|a| a.to_string()).unwrap_or_default();
    let duration = cells
        .duration_ms
        .map(|ms| format!("{ms} ms"))
        .unwrap_or_else(|| "-".to_owned());
    let tokens = output::tokens(cells.tokens.0, cells.tokens.1);
    let row = |status: &str| {
        format!("{idx:>4}  {role:<14} {status:<11} {attempt:>7}  {tokens:>13}  {duration:>9}")
    };
    Some(match &data {
        D::StepSucceeded(_) => row("succeeded"),
        D::StepFailed(f) => {
            let next = match f.will_retry {
                Some(true) => "; it will be retried",
                _ => "",
            };
            format!("{}\n      error: {}{next}", row("failed"), f.error.message)
        }
        D::StepInterrupted(i) => {
            format!("{}\n      stopped: {}", row("interrupted"), i.error.message)
        }
        D::StepCancelled(_) => row("cancelled"),
        D::StepDeferred(d) => deferred(e, d, &row("deferred")),
        D::WaitOpened(w) => {
            let hint = output::answer_hint(w.wait, w.kind);
            format!(
                "{idx:>4}  {role:<14} {:<11} {attempt:>7}  wait {} ({})\n      answer: {hint}",
                "waiting",
                w.wait,
                w.kind.as_str()
            )
        }
        D::ChildEnded(c) => child(&c.key, c.child, c.status.as_str(), c.message.as_deref()),
        D::ChildInterrupted(c) => child(&c.key, c.child, "interrupted", Some(&c.message)),
        _ => return None,
    })
}

/// What a line of the table shows of a step's event (`None`: an event the
/// table has no line for, or one that names no step).
struct Cells<'a> {
    idx: StepIdx,
    role: Option<&'a Role>,
    attempt: Option<Attempt>,
    duration_ms: Option<u64>,
    tokens: (Option<u64>, Option<u64>),
}

impl<'a> Cells<'a> {
    fn of(data: &'a EventData) -> Option<Cells<'a>> {
        let at = |idx, attempt| Cells {
            idx,
            role: None,
            attempt,
            duration_ms: None,
            tokens: (None, None),
        };
        Some(match data {
            D::StepSucceeded(s) => Cells {
                role: s.role.as_ref(),
                duration_ms: s.duration_ms,
                tokens: (s.input_tokens, s.output_tokens),
                ..at(s.idx, Some(s.attempt))
            },
            D::StepFailed(f) => Cells {
                role: f.role.as_ref(),
                duration_ms: f.duration_ms,
                ..at(f.idx, f.attempt)
            },
            D::StepInterrupted(i) => Cells {
                role: Some(&i.role),
                duration_ms: Some(i.duration_ms),
                ..at(i.idx, Some(i.attempt))
            },
            D::StepDeferred(d) => Cells {
                role: Some(&d.role),
                duration_ms: Some(d.duration_ms),
                ..at(d.idx, Some(d.attempt))
            },
            D::StepCancelled(c) => at(c.idx, Some(c.attempt)),
            D::WaitOpened(w) => at(w.idx, Some(w.attempt)),
            D::ChildEnded(c) => at(c.idx, None),
            D::ChildInterrupted(c) => at(c.idx?, None),
            _ => return None,
        })
    }
}

/// A child's end (or stop) under its parent's step: `child a (RUN)
/// succeeded`, or with why it did not.
fn child(key: &str, child: RunId, status: &str, why: Option<&str>) -> String {
    let key = cairn::text::printable_line(key);
    match why {
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
fn deferred(e: &EventRecord, d: &StepDeferred, row: &str) -> String {
    let delay = chrono::Duration::milliseconds(i64::try_from(d.delay_ms).unwrap_or(i64::MAX));
    let until = e.at.checked_add_signed(delay).map_or("-".to_owned(), |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    });
    let why = d.message.as_deref().unwrap_or("");
    let key = cairn::text::printable_line(&d.key);
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
