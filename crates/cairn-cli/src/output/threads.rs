//! What `cairn threads` prints: a thread's budget, the table of threads,
//! and one thread's runs as a conversation.

use std::io::Write;

use cairn::{ThreadSummary, ThreadView};
use serde_json::Value;

use super::{chrono_secs, cut, json_or_text, render_value, run_table};

/// `threads budget`: the thread's budget as it stands.
pub fn print_thread_budget(b: &cairn::ThreadBudget, json: bool) -> anyhow::Result<()> {
    json_or_text(b, json, |stdout| {
        writeln!(
            stdout,
            "thread {}  budget: {}  (set by {})",
            cairn::text::printable_line(&b.thread_id),
            b.budget.against(&b.spent),
            cairn::text::printable_line(&b.set_by)
        )?;
        Ok(())
    })
}

/// The header of `cairn threads list`'s table: one line per thread (the
/// id last, as it may be long); `--json`: an array of `{thread_id, runs,
/// input_tokens, output_tokens, last_run_at}`.
pub fn thread_header(stdout: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        stdout,
        "{:>6}  {:>15}  {:<24}  thread",
        "runs", "tokens in/out", "last run"
    )?;
    Ok(())
}

/// Lines of the thread table.
pub fn thread_rows(stdout: &mut impl Write, threads: &[ThreadSummary]) -> anyhow::Result<()> {
    for t in threads {
        writeln!(
            stdout,
            "{:>6}  {:>15}  {:<24}  {}",
            t.runs,
            format!("{}/{}", t.input_tokens, t.output_tokens),
            t.last_run_at.to_rfc3339_opts(chrono_secs(), true),
            cairn::text::printable_line(&t.thread_id)
        )?;
    }
    Ok(())
}

/// `cairn threads show`: the totals, then the run table of `runs list`; or
/// `{thread_id, runs, totals: {runs, input_tokens, output_tokens}}`.
pub fn print_thread(view: &ThreadView, json: bool, finals: &[Option<Value>]) -> anyhow::Result<()> {
    json_or_text(view, json, |stdout| {
        let t = &view.totals;
        let cost = match t.cost_usd.is_zero() {
            true => String::new(),
            false => format!("  cost {}", t.cost_usd),
        };
        writeln!(
            stdout,
            "thread {}  runs {}  tokens in/out {}/{}{cost}",
            cairn::text::printable_line(&view.thread_id),
            t.runs,
            t.input_tokens,
            t.output_tokens
        )?;
        if let Some(b) = &view.budget {
            writeln!(stdout, "budget: {}", b.budget.against(&b.spent))?;
        }
        run_table(stdout, &view.runs)?;
        // The conversation, as the console shows it: each run's input and
        // final output (cut when long), oldest first.
        for (r, last) in view.runs.iter().zip(finals) {
            writeln!(stdout, "\nrun {} ({})", r.id, r.status)?;
            let (input, _) = cut(&render_value(&r.input));
            writeln!(stdout, "  input:  {}", input.replace('\n', "\n          "))?;
            match last {
                Some(v) => {
                    let (text, more) = cut(&render_value(v));
                    writeln!(stdout, "  output: {}", text.replace('\n', "\n          "))?;
                    if more > 0 {
                        writeln!(
                            stdout,
                            "          … ({more} more lines: runs show {} --outputs)",
                            r.id
                        )?;
                    }
                }
                None => writeln!(stdout, "  output: -")?,
            }
        }
        Ok(())
    })
}
