//! Printing: the text tables people read and the JSON documents scripts
//! parse. The JSON shapes are contracts: extend them, never rename.

use std::io::Write;

use cairn::{
    Compacted, EventRecord, RunRecord, RunView, StepRecord, StepStatus, ThreadSummary, ThreadView,
};

/// An extra column of the step table: its header and a value per step.
pub type ExtraColumn<'a> = (&'a str, &'a dyn Fn(&StepRecord) -> String);

fn dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".into())
}

fn tokens(s: &StepRecord) -> String {
    match (s.input_tokens, s.output_tokens) {
        (None, None) => "-".into(),
        (i, o) => format!(
            "{}/{}",
            dash(i.map(|t| t.to_string())),
            dash(o.map(|t| t.to_string()))
        ),
    }
}

fn duration(s: &StepRecord) -> String {
    dash(s.duration_ms().map(|ms| format!("{ms} ms")))
}

/// A step table; `extra` adds a column (header, value per step).
pub fn step_table(steps: &[StepRecord], extra: Option<ExtraColumn<'_>>) -> String {
    let mut out = String::new();
    let extra_head = extra.map(|(h, _)| format!("  {h:>10}")).unwrap_or_default();
    out.push_str(&format!(
        "{:>4}  {:<14} {:<11} {:>7}  {:>13}  {:>9}{extra_head}\n",
        "idx", "role", "status", "attempt", "tokens in/out", "duration"
    ));
    for s in steps {
        let extra_val = extra
            .map(|(_, f)| format!("  {:>10}", f(s)))
            .unwrap_or_default();
        out.push_str(&format!(
            "{:>4}  {:<14} {:<11} {:>7}  {:>13}  {:>9}{extra_val}\n",
            s.idx,
            s.role.as_str(),
            s.status.as_str(),
            s.attempt,
            tokens(s),
            duration(s)
        ));
        if let Some(e) = &s.error {
            let label = if s.status == StepStatus::Succeeded {
                "an earlier attempt failed"
            } else {
                "error"
            };
            out.push_str(&format!("      {label}: {}\n", e.message));
        }
    }
    out
}

pub fn print_run(view: &RunView, json: bool, extra: Option<ExtraColumn<'_>>) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, view)?;
        writeln!(stdout)?;
        return Ok(());
    }
    let r = &view.run;
    writeln!(
        stdout,
        "run {}  crew {} v{} ({})  status {}  cursor {}/{}",
        r.id, r.crew, r.crew_version, r.crew_fingerprint, r.status, r.cursor, r.step_count
    )?;
    if let Some(e) = &r.error {
        writeln!(stdout, "error: {}", e.message)?;
    }
    write!(stdout, "{}", step_table(&view.steps, extra))?;
    Ok(())
}

pub fn print_list(runs: &[RunRecord], json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, runs)?;
        writeln!(stdout)?;
        return Ok(());
    }
    run_table(&mut stdout, runs)
}

fn run_table(stdout: &mut impl Write, runs: &[RunRecord]) -> anyhow::Result<()> {
    writeln!(
        stdout,
        "{:<36}  {:<16} {:<11} {:>7}  created",
        "id", "crew", "status", "steps"
    )?;
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
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, c)?;
        writeln!(stdout)?;
        return Ok(());
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    writeln!(
        stdout,
        "{verb} {} runs, {} steps, {} events, {} journal items, {} waits",
        c.runs, c.steps, c.events, c.journal_items, c.waits
    )?;
    Ok(())
}

/// `cairn threads list`: one line per thread (the id last, as it may be
/// long), or a JSON array of `{thread_id, runs, input_tokens,
/// output_tokens, last_run_at}`.
pub fn print_threads(threads: &[ThreadSummary], json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, threads)?;
        writeln!(stdout)?;
        return Ok(());
    }
    writeln!(
        stdout,
        "{:>6}  {:>15}  {:<24}  thread",
        "runs", "tokens in/out", "last run"
    )?;
    for t in threads {
        writeln!(
            stdout,
            "{:>6}  {:>15}  {:<24}  {}",
            t.runs,
            format!("{}/{}", t.input_tokens, t.output_tokens),
            t.last_run_at.to_rfc3339_opts(chrono_secs(), true),
            t.thread_id
        )?;
    }
    Ok(())
}

/// `cairn threads show`: the totals, then the run table of `runs list`; or
/// `{thread_id, runs, totals: {runs, input_tokens, output_tokens}}`.
pub fn print_thread(view: &ThreadView, json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, view)?;
        writeln!(stdout)?;
        return Ok(());
    }
    let t = &view.totals;
    writeln!(
        stdout,
        "thread {}  runs {}  tokens in/out {}/{}",
        view.thread_id, t.runs, t.input_tokens, t.output_tokens
    )?;
    run_table(&mut stdout, &view.runs)
}

fn chrono_secs() -> chrono::SecondsFormat {
    chrono::SecondsFormat::Millis
}

pub fn print_events(events: &[EventRecord], json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, events)?;
        writeln!(stdout)?;
        return Ok(());
    }
    for e in events {
        writeln!(
            stdout,
            "{:>4}  {}  {:<15} {}",
            e.seq,
            e.at.to_rfc3339_opts(chrono_secs(), true),
            serde_json::to_value(e.kind)?.as_str().unwrap_or_default(),
            e.data
        )?;
    }
    Ok(())
}

/// `cairn runs journal`: one line per item, or a JSON array of
/// `{idx, seq, attempt, generation, kind, payload, created_at}`.
pub fn print_journal(items: &[cairn::StepJournalEntry], json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, items)?;
        writeln!(stdout)?;
        return Ok(());
    }
    for i in items {
        let e = &i.entry;
        writeln!(
            stdout,
            "{:>4} {:>4}  a{} g{}  {:<17} {}",
            i.idx,
            e.seq,
            e.attempt,
            e.generation,
            e.kind.as_str(),
            e.payload
        )?;
    }
    Ok(())
}

pub fn print_waits(waits: &[cairn::WaitRecord], json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, waits)?;
        writeln!(stdout)?;
        return Ok(());
    }
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
    }
    Ok(())
}
