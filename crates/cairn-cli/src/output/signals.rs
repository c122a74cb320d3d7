//! What `cairn signal` prints.

use std::io::Write;

use cairn::schedule::rfc3339;
use cairn::{Published, RunSignals, Sent};

use super::{json_or_text, print_json, text_out};

pub fn print_sent(sent: &Sent, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(sent);
    }
    let s = &sent.signal;
    let what = match (sent.duplicate, sent.started, sent.woke) {
        (true, _, _) => "already sent (this id): nothing stored",
        (_, true, _) => "sent to a run it started",
        (_, _, true) => "sent; it woke the run",
        _ => "sent; buffered until a step waits for it",
    };
    let mut out = text_out();
    writeln!(
        out,
        "signal `{}` ({}) to run {}: {what}",
        s.name, s.id, s.run_id
    )?;
    Ok(())
}

pub fn print_signals(listed: &RunSignals, json: bool) -> anyhow::Result<()> {
    json_or_text(listed, json, |out| {
        match &listed.listening {
            Some(l) => writeln!(out, "{}", waiting_for(l))?,
            None => writeln!(out, "not waiting for a signal")?,
        }
        writeln!(out, "{:<22}  {:<16}  {:<12}  id", "sent", "name", "state")?;
        for s in &listed.signals {
            let state = match s.consumed_by {
                Some((idx, attempt)) => format!("step {idx}/{attempt}"),
                None => "buffered".to_owned(),
            };
            writeln!(
                out,
                "{:<22}  {:<16}  {state:<12}  {}",
                rfc3339(s.sent_at),
                s.name,
                s.id
            )?;
        }
        Ok(())
    })
}

/// `runs show`: the signal the run waits for, how to send it, and how
/// many wait buffered.
pub fn write_signal_wait(out: &mut impl Write, view: &cairn::RunView) -> anyhow::Result<()> {
    let buffered = view
        .signals
        .iter()
        .filter(|s| s.consumed_at.is_none())
        .count();
    if let Some(l) = &view.listening {
        writeln!(
            out,
            "{}; send it: {} signal send {} {} --payload JSON",
            waiting_for(l),
            super::cairn_command(),
            view.run.id,
            l.names[0]
        )?;
    }
    if buffered > 0 {
        writeln!(
            out,
            "{buffered} signal(s) buffered: cairn signal list {}",
            view.run.id
        )?;
    }
    Ok(())
}

/// `runs values`: each key's newest value, with the step that set it.
pub fn print_values(values: &[Published], json: bool) -> anyhow::Result<()> {
    json_or_text(values, json, |out| {
        if values.is_empty() {
            writeln!(out, "no value published")?;
        }
        for p in values {
            writeln!(
                out,
                "{} = {}  (step {}, {})",
                p.key,
                p.value,
                p.idx,
                rfc3339(p.at)
            )?;
        }
        Ok(())
    })
}

/// `waiting at step 1 for signal `paid` or `refused` until T`.
fn waiting_for(l: &cairn::Listening) -> String {
    let until = l.deadline.map(|d| format!(" until {}", rfc3339(d)));
    format!(
        "waiting at step {} for signal `{}`{}",
        l.idx,
        l.names.join("` or `"),
        until.unwrap_or_default()
    )
}
