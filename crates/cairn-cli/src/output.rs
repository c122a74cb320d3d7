//! Printing: the text tables people read and the JSON documents scripts
//! parse. The JSON shapes are contracts: extend them, never rename.

use std::io::Write;
use std::sync::OnceLock;

use chrono::Utc;
use serde::Serialize;
use serde_json::Value;

use cairn::{
    Compacted, EventRecord, RunRecord, RunStatus, RunView, StepRecord, StepStatus, WaitId,
    WaitKind, WaitRecord, WaitStatus,
};

pub mod hooks;
pub mod limits;
pub mod people;
pub mod schedules;
pub mod signals;
mod threads;
pub use threads::{print_thread, print_thread_budget, thread_header, thread_rows};

/// An extra column of the step table: its header and a value per step.
pub type ExtraColumn<'a> = (&'a str, &'a dyn Fn(&StepRecord) -> String);

/// How the commands this process suggests begin (`cairn --db URL`), so a
/// printed command answers a wait or resumes a run in the same database.
static COMMAND: OnceLock<String> = OnceLock::new();

/// Sets the prefix of suggested commands (once, at start).
pub fn set_command_prefix(prefix: String) {
    let _ = COMMAND.set(prefix);
}

/// `cairn`, with the options that pick the same database or server.
pub fn cairn_command() -> &'static str {
    COMMAND.get().map(String::as_str).unwrap_or("cairn")
}

/// Writes `value` as pretty JSON and a newline. Serialized first, so a
/// closed stdout is an `io::Error` (`BrokenPipe`), which `main` ends
/// quietly, not a `serde_json` error it would print.
pub fn write_json<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    writeln!(out, "{text}")?;
    Ok(())
}

fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    write_json(&mut std::io::stdout().lock(), value)
}

/// With `--json`, `value` as JSON; else the text `write` writes to
/// [`text_out`].
fn json_or_text<T: Serialize + ?Sized>(
    value: &T,
    json: bool,
    write: impl FnOnce(&mut Safe<std::io::StdoutLock<'static>>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if json {
        return print_json(value);
    }
    write(&mut text_out())
}

/// A deletion: `{"deleted": NAME}` with `--json`, else `line`.
fn print_deleted_as(name: &str, json: bool, line: &str) -> anyhow::Result<()> {
    let deleted = serde_json::json!({ "deleted": name });
    json_or_text(&deleted, json, |out| Ok(writeln!(out, "{line}")?))
}

/// Standard output for text people read on a terminal: text that came
/// from steps, models or API clients passes through
/// [`cairn::text::printable`], so it cannot move the cursor, clear the
/// screen, set the window title or forge a line of its own. JSON goes to
/// stdout as it is (its strings are escaped by JSON itself).
pub fn text_out() -> Safe<std::io::StdoutLock<'static>> {
    Safe(std::io::stdout().lock())
}

/// A writer that escapes control characters other than `\n` and `\t`.
pub struct Safe<W: Write>(W);

impl<W: Write> Write for Safe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(cairn::text::printable(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Lines and characters of an output shown in a run's text before it is
/// cut (the JSON document and `runs show RUN --step N` show it whole).
const OUTPUT_LINES: usize = 40;
const OUTPUT_CHARS: usize = 4000;

/// An output as people read it: a string as its text, anything else as
/// pretty-printed JSON.
pub fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// `text` cut to `OUTPUT_LINES` lines and `OUTPUT_CHARS` characters, and
/// how many lines were left out (0: none).
pub fn cut(text: &str) -> (String, usize) {
    let total = text.lines().count();
    let mut out = String::new();
    let mut kept = 0;
    for line in text.lines().take(OUTPUT_LINES) {
        if out.len() + line.len() > OUTPUT_CHARS {
            let mut end = OUTPUT_CHARS.saturating_sub(out.len()).min(line.len());
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&line[..end]);
            out.push('…');
            kept += 1;
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += 1;
    }
    (out.trim_end().to_owned(), total.saturating_sub(kept))
}

/// Writes an output indented under a heading, cut if long, saying how to
/// see it whole.
fn write_output(
    out: &mut impl Write,
    heading: &str,
    value: &Value,
    run: &RunRecord,
    idx: u32,
) -> anyhow::Result<()> {
    let (text, more) = cut(&render_value(value));
    writeln!(out, "{heading}")?;
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    if more > 0 || text.ends_with('…') {
        writeln!(
            out,
            "  … cut ({more} more lines): `{} runs show {} --step {idx}` prints it whole",
            cairn_command(),
            run.id
        )?;
    }
    Ok(())
}

fn dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".into())
}

pub fn tokens(input: Option<u64>, output: Option<u64>) -> String {
    match (input, output) {
        (None, None) => "-".into(),
        (i, o) => format!(
            "{}/{}",
            dash(i.map(|t| t.to_string())),
            dash(o.map(|t| t.to_string()))
        ),
    }
}

/// A duration, as the console prints it (`cairn::text::duration_ms`).
fn ms(ms: i64) -> String {
    cairn::text::duration_ms(ms)
}

/// A step table; `extra` adds a column (header, value per step). A step's
/// duration is [`cairn::StepTime`]'s, as the console's: it leaves out the
/// time it waited for people (shown on its own) and, for a `children`
/// step, counts its children's time as its own (`events`: the run's; empty
/// when no step started children).
pub fn step_table(
    steps: &[StepRecord],
    waits: &[WaitRecord],
    events: &[cairn::EventRecord],
    extra: Option<ExtraColumn<'_>>,
) -> String {
    let mut out = String::new();
    let extra_head = extra.map(|(h, _)| format!("  {h:>10}")).unwrap_or_default();
    let now = Utc::now();
    let times: Vec<cairn::StepTime> = steps
        .iter()
        .map(|s| cairn::StepTime::of(s, events, waits, now))
        .collect();
    let any_wait = times.iter().any(|t| t.waited_ms > 0);
    let wait_head = if any_wait {
        format!("  {:>9}", "waited")
    } else {
        String::new()
    };
    out.push_str(&format!(
        "{:>4}  {:<14} {:<11} {:>7}  {:>13}  {:>9}{wait_head}{extra_head}\n",
        "idx", "role", "status", "attempt", "tokens in/out", "duration"
    ));
    for (s, time) in steps.iter().zip(&times) {
        let extra_val = extra
            .map(|(_, f)| format!("  {:>10}", f(s)))
            .unwrap_or_default();
        let waited = time.waited_ms;
        // A step still running has no duration yet; one waiting for its
        // children has theirs so far.
        let duration = match s.finished_at.is_some() || time.children_ms > 0 {
            true => ms(time.ran_ms()),
            false => "-".into(),
        };
        let wait_val = match (any_wait, waited) {
            (false, _) => String::new(),
            (true, 0) => format!("  {:>9}", "-"),
            (true, w) => format!("  {:>9}", ms(w)),
        };
        let cost = s
            .cost_usd
            .map(|c| format!("  cost {c}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:>4}  {:<14} {:<11} {:>7}  {:>13}  {:>9}{wait_val}{extra_val}{cost}\n",
            s.idx,
            s.role.as_str(),
            s.status.as_str(),
            s.attempt,
            tokens(s.input_tokens, s.output_tokens),
            duration
        ));
        if time.children_ms > 0 {
            out.push_str(&format!(
                "      {} of it waiting for children\n",
                ms(time.children_ms)
            ));
        }
        if let Some(e) = &s.error {
            // A deferral (a provider's 429, a permit or a budget's room
            // not free) spent no attempt: it is no failure.
            let label = match (s.status, e.kind) {
                (StepStatus::Succeeded, cairn::ErrorKind::RateLimited) => "it waited once",
                (StepStatus::Succeeded, _) => "an earlier attempt failed",
                (_, cairn::ErrorKind::RateLimited) => "waiting",
                _ => "error",
            };
            out.push_str(&format!("      {label}: {}\n", e.message));
        }
    }
    out
}

/// The exact command that answers an open wait, and its alternatives.
pub fn answer_hint(id: WaitId, kind: WaitKind) -> String {
    let cmd = format!("{} waits answer {id}", cairn_command());
    match kind {
        WaitKind::Review => {
            format!("{cmd} --approve   (or --edit JSON|@FILE, or --reject FEEDBACK)")
        }
        WaitKind::Approval => format!("{cmd} --approve   (or --reject REASON)"),
        WaitKind::Question => format!("{cmd} --answer JSON|@FILE"),
    }
}

/// What a waiting run needs, one wait at a time: its id, kind, step and
/// the command that answers it.
pub fn write_open_waits(
    out: &mut impl Write,
    steps: &[StepRecord],
    waits: &[WaitRecord],
) -> anyhow::Result<()> {
    for w in waits.iter().filter(|w| w.status == WaitStatus::Open) {
        let role = steps
            .iter()
            .find(|s| s.idx == w.step_idx)
            .map(|s| s.role.as_str().to_owned())
            .unwrap_or_default();
        let what = match w.kind {
            WaitKind::Review => "a review of its output",
            WaitKind::Approval => "an approval before it runs",
            WaitKind::Question => "an answer to its question",
        };
        writeln!(
            out,
            "waiting: step {} ({role}) needs {what}; wait {} ({})",
            w.step_idx,
            w.id,
            w.kind.as_str()
        )?;
        if w.kind == WaitKind::Question {
            writeln!(out, "  question: {}", render_value(&w.prompt))?;
        }
        writeln!(out, "  answer:   {}", answer_hint(w.id, w.kind))?;
    }
    Ok(())
}

/// What a run's text shows besides its step table.
#[derive(Default)]
pub struct RunText<'a> {
    /// The run's waits (any status): the time steps waited, and the open
    /// ones with the command that answers them.
    pub waits: &'a [WaitRecord],
    /// The run's events when a step started children (their time is the
    /// step's); empty otherwise.
    pub events: &'a [cairn::EventRecord],
    /// Every step's output, not only the final one.
    pub outputs: bool,
    pub extra: Option<ExtraColumn<'a>>,
    /// Leave the step table out (progress lines printed it already).
    pub no_table: bool,
}

/// The step whose output is the run's result so far: the last one that
/// has an output.
fn last_output(steps: &[StepRecord]) -> Option<(&StepRecord, &Value)> {
    steps
        .iter()
        .rev()
        .find_map(|s| s.output.as_ref().map(|o| (s, o)))
}

pub fn print_run(view: &RunView, json: bool, text: &RunText<'_>) -> anyhow::Result<()> {
    if json {
        let open: Vec<&WaitRecord> = text
            .waits
            .iter()
            .filter(|w| w.status == WaitStatus::Open)
            .collect();
        if open.is_empty() {
            return print_json(view);
        }
        let mut doc = serde_json::to_value(view)?;
        doc["waits"] = serde_json::to_value(open)?;
        return print_json(&doc);
    }
    let mut stdout = text_out();
    let r = &view.run;
    writeln!(
        stdout,
        "run {}  crew {} v{} ({})  status {}  cursor {}/{}",
        r.id, r.crew, r.crew_version, r.crew_fingerprint, r.status, r.cursor, r.step_count
    )?;
    if let Some(e) = &r.error {
        writeln!(stdout, "error: {}", e.message)?;
    }
    if let Some(wait) = view.children_wait() {
        writeln!(stdout, "{}", wait.describe())?;
        if let cairn::ChildrenWait::Stopped { .. } = wait {
            writeln!(
                stdout,
                "carry them on: cairn runs continue {} (--budget LIMIT=+N to raise its budget first)",
                r.id
            )?;
        }
    }
    if let Some(b) = &r.blocked {
        writeln!(stdout, "blocked: {b}\n{BLOCKED_HINT}")?;
    }
    signals::write_signal_wait(&mut stdout, view)?;
    write_budget(&mut stdout, view)?;
    write_family(&mut stdout, view)?;
    if !text.no_table {
        write!(
            stdout,
            "{}",
            step_table(&view.steps, text.waits, text.events, text.extra)
        )?;
    }
    if text.outputs {
        for s in &view.steps {
            if let Some(o) = &s.output {
                let heading = format!("output of step {} ({}):", s.idx, s.role.as_str());
                write_output(&mut stdout, &heading, o, r, s.idx.get())?;
            }
        }
    } else if let Some((s, o)) = last_output(&view.steps) {
        let what = if r.status == cairn::RunStatus::Succeeded {
            "result"
        } else {
            "latest output"
        };
        let heading = format!("{what} (step {}, {}):", s.idx, s.role.as_str());
        write_output(&mut stdout, &heading, o, r, s.idx.get())?;
    }
    write_open_waits(&mut stdout, &view.steps, text.waits)?;
    Ok(())
}

/// A run with a budget: what it spent of each limit, on one line
/// (`budget: tokens 360 of 500, model calls 3 of 3`).
fn write_budget(out: &mut impl Write, view: &RunView) -> anyhow::Result<()> {
    let r = &view.run;
    let (Some(spent), Some(budget)) = (
        view.spent,
        cairn::Budget::in_force(r.budget, r.crew_definition.budget),
    ) else {
        return Ok(());
    };
    writeln!(out, "budget: {}", budget.against(&spent))?;
    Ok(())
}

/// A child that ended or stopped, as `cairn run` reports it while it
/// follows the parent: `child a (RUN) succeeded`, or with why it did not.
pub fn child_line(c: &cairn::ChildOutcome) -> String {
    match (&c.error, c.status) {
        (Some(e), RunStatus::Interrupted | RunStatus::Failed | RunStatus::Cancelled) => format!(
            "child {} ({}) {}: {}",
            cairn::text::printable_line(&c.key),
            c.run_id,
            c.status,
            cairn::text::printable_line(&e.message)
        ),
        _ => format!(
            "child {} ({}) {}",
            cairn::text::printable_line(&c.key),
            c.run_id,
            c.status
        ),
    }
}

/// A child's parent, and a parent's children, one line each.
fn write_family(out: &mut impl Write, view: &RunView) -> anyhow::Result<()> {
    if let Some(c) = &view.run.child {
        writeln!(
            out,
            "child `{}` of run {} (step {}, attempt {}, depth {})",
            c.key, c.parent_run_id, c.step_idx, c.attempt, c.depth
        )?;
    }
    if !view.children.is_empty() {
        writeln!(out, "children ({}):", view.children.len())?;
        for c in &view.children {
            match (&c.error, c.status) {
                (Some(e), RunStatus::Interrupted | RunStatus::Failed | RunStatus::Cancelled) => {
                    let why = cairn::text::printable_line(&e.message);
                    writeln!(out, "  {:<12} {}  {}: {why}", c.key, c.run_id, c.status)?
                }
                _ => writeln!(out, "  {:<12} {}  {}", c.key, c.run_id, c.status)?,
            }
        }
    }
    Ok(())
}

/// `runs show RUN --step N`: the step's row and its whole output (`--json`:
/// the step object of `runs show --json`).
pub fn print_step(
    view: &RunView,
    idx: u32,
    json: bool,
    waits: &[WaitRecord],
    events: &[cairn::EventRecord],
) -> anyhow::Result<()> {
    let step = view
        .steps
        .iter()
        .find(|s| s.idx.get() == idx)
        .ok_or_else(|| {
            crate::input::usage(format!(
                "run {} has no step {idx} yet (its steps so far: {})",
                view.run.id,
                view.steps.len()
            ))
        })?;
    json_or_text(step, json, |stdout| {
        write!(
            stdout,
            "{}",
            step_table(std::slice::from_ref(step), waits, events, None)
        )?;
        match &step.output {
            Some(o) => {
                writeln!(stdout, "output:")?;
                for line in render_value(o).lines() {
                    writeln!(stdout, "  {line}")?;
                }
            }
            None => writeln!(stdout, "no output")?,
        }
        let own: Vec<WaitRecord> = waits
            .iter()
            .filter(|w| w.step_idx == step.idx)
            .cloned()
            .collect();
        write_open_waits(stdout, std::slice::from_ref(step), &own)?;
        Ok(())
    })
}

pub fn print_list(runs: &[RunRecord], json: bool) -> anyhow::Result<()> {
    if json {
        let listed: Vec<cairn::Listed> = runs.iter().map(cairn::Listed::of).collect();
        return print_json(&listed);
    }
    let mut stdout = text_out();
    run_table(&mut stdout, runs)?;
    for r in runs {
        if let Some(b) = &r.blocked {
            writeln!(stdout, "run {} is blocked: {b}", r.id)?;
        }
    }
    if runs.iter().any(|r| r.blocked.is_some()) {
        writeln!(stdout, "{BLOCKED_HINT}")?;
    }
    Ok(())
}

/// What unblocks a blocked run.
const BLOCKED_HINT: &str = "hint: start a process that registers that crew version (`cairn \
    workers` lists what each live process offers), or move the run to a version one offers \
    with `cairn runs upgrade`";

fn run_table(stdout: &mut impl Write, runs: &[RunRecord]) -> anyhow::Result<()> {
    run_header(stdout)?;
    run_rows(stdout, runs)
}

/// The run table's header line.
pub fn run_header(stdout: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        stdout,
        "{:<36}  {:<16} {:<11} {:>7}  created",
        "id", "crew", "status", "steps"
    )?;
    Ok(())
}

/// Lines of the run table.
pub fn run_rows(stdout: &mut impl Write, runs: &[RunRecord]) -> anyhow::Result<()> {
    for r in runs {
        writeln!(
            stdout,
            "{:<36}  {:<16} {:<11} {:>7}  {}",
            r.id.to_string(),
            r.crew,
            r.status.as_str(),
            format!("{}/{}", r.cursor, r.step_count),
            r.created_at.to_rfc3339_opts(chrono_secs(), true)
        )?;
    }
    Ok(())
}

/// `cairn compact`: what was removed (or, dry, would be), or the JSON
/// object `{runs, steps, events, journal_items, waits}`.
pub fn print_compacted(c: &Compacted, dry_run: bool, json: bool) -> anyhow::Result<()> {
    json_or_text(c, json, |stdout| {
        let verb = if dry_run { "would remove" } else { "removed" };
        let r = &c.rules;
        let mut why = vec![];
        for (n, rule) in [
            (r.finished, "finished, past --finished-older-than"),
            (r.failed, "failed, past --failed-older-than"),
            (r.beyond_keep, "beyond --keep-per-thread"),
        ] {
            if n > 0 {
                why.push(format!("{n} {rule}"));
            }
        }
        let why = match why.is_empty() {
            true => String::new(),
            false => format!(" ({})", why.join("; ")),
        };
        writeln!(
            stdout,
            "{verb} {} runs{why}, {} steps, {} events, {} journal items, {} waits",
            c.runs, c.steps, c.events, c.journal_items, c.waits
        )?;
        // A dry run names the runs (the first ones; `--json` lists them all).
        if dry_run && !c.run_ids.is_empty() {
            const SHOWN: usize = 20;
            for id in c.run_ids.iter().take(SHOWN) {
                writeln!(stdout, "  {id}")?;
            }
            if c.run_ids.len() > SHOWN {
                let more = c.run_ids.len() - SHOWN;
                writeln!(stdout, "  … and {more} more (--json lists every one)")?;
            }
        }
        Ok(())
    })
}

/// A JSON array written element by element, as pages of it are read, so
/// a list of any length is never held whole: `[`, the elements (pretty,
/// separated by `,` and a newline), `]`.
pub struct JsonArray {
    first: bool,
}

impl JsonArray {
    pub fn start() -> anyhow::Result<JsonArray> {
        write!(std::io::stdout(), "[")?;
        Ok(JsonArray { first: true })
    }

    pub fn push_all<T: Serialize>(&mut self, items: &[T]) -> anyhow::Result<()> {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for item in items {
            let sep = if self.first { "\n" } else { ",\n" };
            write!(out, "{sep}{}", serde_json::to_string_pretty(item)?)?;
            self.first = false;
        }
        Ok(out.flush()?)
    }

    pub fn end(self) -> anyhow::Result<()> {
        writeln!(std::io::stdout(), "{}]", if self.first { "" } else { "\n" })?;
        Ok(())
    }
}

/// A run's final output so far: its last step's output that exists.
pub fn final_output(view: &RunView) -> Option<Value> {
    last_output(&view.steps).map(|(_, v)| v.clone())
}

pub(crate) fn chrono_secs() -> chrono::SecondsFormat {
    chrono::SecondsFormat::Millis
}

pub fn print_events(events: &[EventRecord], json: bool) -> anyhow::Result<()> {
    json_or_text(events, json, |stdout| {
        for e in events {
            write_event(stdout, e)?;
        }
        Ok(())
    })
}

/// One event as a line of `runs events` (also as a stream arrives).
pub fn write_event(out: &mut impl Write, e: &EventRecord) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:>4}  {}  {:<15} {}",
        e.seq,
        e.at.to_rfc3339_opts(chrono_secs(), true),
        e.kind.as_str(),
        e.data
    )?;
    Ok(())
}

/// `cairn runs journal`: a header, then one line per item (step, seq,
/// attempt and generation, kind, payload), or a JSON array of
/// `{idx, seq, attempt, generation, kind, payload, created_at}`.
pub fn print_journal(items: &[cairn::StepJournalEntry], json: bool) -> anyhow::Result<()> {
    json_or_text(items, json, |stdout| {
        writeln!(
            stdout,
            "{:>4} {:>4}  {:<6}  {:<17} payload",
            "step", "seq", "a/g", "kind"
        )?;
        for i in items {
            let e = &i.entry;
            writeln!(
                stdout,
                "{:>4} {:>4}  {:<6}  {:<17} {}",
                i.idx,
                e.seq,
                format!("a{} g{}", e.attempt, e.generation),
                e.kind.as_str(),
                e.payload
            )?;
        }
        Ok(())
    })
}

pub fn print_waits(waits: &[cairn::WaitRecord], json: bool) -> anyhow::Result<()> {
    json_or_text(waits, json, |stdout| {
        writeln!(
            stdout,
            "{:<36}  {:<36} {:>4}  {:<9} {:<9} prompt",
            "id", "run", "step", "kind", "status"
        )?;
        for w in waits {
            let mut prompt = w.prompt.to_string();
            if prompt.len() > 60 {
                let mut cut = 57;
                while !prompt.is_char_boundary(cut) {
                    cut -= 1;
                }
                prompt.truncate(cut);
                prompt.push_str("...");
            }
            writeln!(
                stdout,
                "{:<36}  {:<36} {:>4}  {:<9} {:<9} {prompt}",
                w.id.to_string(),
                w.run_id.to_string(),
                w.step_idx,
                w.kind.as_str(),
                w.status.as_str(),
            )?;
            for p in &w.parents {
                writeln!(
                    stdout,
                    "  child `{}` of run {} (step {})",
                    p.key, p.parent_run_id, p.step_idx
                )?;
            }
        }
        Ok(())
    })
}
