//! What `cairn schedules` prints.

use std::io::Write;

use cairn::schedule::rfc3339;
use cairn::{Cadence, Schedule, Slot};

use super::{json_or_text, print_deleted_as, print_json, text_out};

/// Fire times `schedules show` lists ahead.
const AHEAD: usize = 3;

fn cadence(s: &Schedule) -> String {
    match &s.cadence {
        Cadence::Every { secs } => format!("every {secs}s"),
        Cadence::Cron { expr, tz } => format!("cron `{expr}` {tz}"),
    }
}

/// The next fire times from its next slot on.
fn ahead(s: &Schedule) -> Vec<String> {
    s.upcoming(AHEAD).into_iter().map(rfc3339).collect()
}

pub fn print_schedules(list: &[Schedule], json: bool) -> anyhow::Result<()> {
    json_or_text(&list, json, |out| {
        writeln!(
            out,
            "{:<24}  {:<10}  {:<22}  cadence / crew",
            "name", "state", "next"
        )?;
        for s in list {
            let state = if s.paused { "paused" } else { "active" };
            let next = rfc3339(s.next_at);
            writeln!(
                out,
                "{:<24}  {state:<10}  {next:<22}  {} / {}",
                s.name,
                cadence(s),
                s.crew
            )?;
        }
        Ok(())
    })
}

/// A schedule, its next fire times (`next`) and the slots given (`slots`).
pub fn print_schedule(s: &Schedule, slots: &[Slot], json: bool) -> anyhow::Result<()> {
    if json {
        let mut doc = serde_json::to_value(s)?;
        doc["next"] = serde_json::json!(ahead(s));
        doc["slots"] = serde_json::to_value(slots)?;
        return print_json(&doc);
    }
    let mut out = text_out();
    let state = if s.paused { "paused" } else { "active" };
    writeln!(
        out,
        "schedule {} ({state}): {} runs crew {}",
        s.name,
        cadence(s),
        s.crew
    )?;
    let (overlap, catch_up) = (s.overlap.as_str(), s.catch_up);
    writeln!(out, "overlap {overlap}, catch-up {catch_up}")?;
    writeln!(out, "next: {}", ahead(s).join(", "))?;
    if !slots.is_empty() {
        write_slots(&mut out, slots)?;
    }
    Ok(())
}

pub fn print_slots(slots: &[Slot], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&slots);
    }
    write_slots(&mut text_out(), slots)
}

fn write_slots(out: &mut impl Write, slots: &[Slot]) -> anyhow::Result<()> {
    writeln!(out, "{:<22}  {:<9}  run", "slot", "outcome")?;
    for slot in slots {
        let run = slot
            .run_id
            .map(|r| r.to_string())
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:<22}  {:<9}  {run}",
            rfc3339(slot.slot),
            slot.outcome.as_str()
        )?;
    }
    Ok(())
}

/// `schedules delete`: `{"deleted": NAME}`.
pub fn print_deleted(name: &str, json: bool) -> anyhow::Result<()> {
    print_deleted_as(name, json, &format!("deleted schedule {name}"))
}
