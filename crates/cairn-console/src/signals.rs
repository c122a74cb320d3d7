//! The console's signals and schedules: on a run's page, the signal its
//! step waits for, its signals, and (for operators) a form that sends one;
//! the schedules page, each schedule with its next fire times and newest
//! slots, missed ones marked. Rendering only.

use cairn::{RunView, Schedule, Slot, SlotOutcome};

use super::*;

/// How many fire times ahead the schedules page lists.
const AHEAD: usize = 3;

/// A run's signal wait, its signals and the send form (a viewer who may
/// not act gets no form: `csrf` is empty). Nothing for a run that has
/// neither.
pub(crate) fn run_signals(view: &RunView, csrf: &str) -> Markup {
    let run = &view.run;
    if view.listening.is_none() && view.signals.is_empty() {
        return html! {};
    }
    let name = view
        .listening
        .as_ref()
        .and_then(|l| l.names.first().cloned());
    html! {
        h2 { "Signals" }
        @if let Some(l) = &view.listening {
            p.listening {
                "Step " (l.idx) " waits for signal "
                @for (i, n) in l.names.iter().enumerate() {
                    @if i > 0 { " or " }
                    code { (n) }
                }
                @if let Some(d) = l.deadline {
                    " until " time datetime=(d.to_rfc3339()) { (d.format("%Y-%m-%d %H:%M:%S")) }
                }
                @if let Some(key) = &run.idempotency_key { " (key " code { "key:" (key) } ")" }
                "."
            }
        }
        @if !view.signals.is_empty() {
            table.signals {
                tr { th { "Sent" } th { "Name" } th { "Id" } th { "By" } th { "State" } }
                @for s in &view.signals {
                    tr {
                        td { time datetime=(s.sent_at.to_rfc3339()) { (s.sent_at.format("%Y-%m-%d %H:%M:%S")) } }
                        td { code { (s.name) } }
                        td { code { (s.id) } }
                        td { (s.sent_by.clone().unwrap_or_default()) }
                        td {
                            @match s.consumed_by {
                                Some((idx, attempt)) => { "consumed by step " (idx) " (attempt " (attempt) ")" }
                                None => { "buffered" }
                            }
                        }
                    }
                }
            }
        }
        @if !csrf.is_empty() && !run.status.is_finished() {
            form.action.signal method="post" action={ "/runs/" (run.id) "/signal" } {
                input type="hidden" name="csrf" value=(csrf);
                label { "Signal " input type="text" name="signal" required value=[name]; }
                label { "Payload (JSON) " textarea name="payload" rows="3" { "null" } }
                label { "Reason " input type="text" name="reason" required placeholder="why it is sent by hand"; }
                button type="submit" { "Send signal" }
            }
        }
    }
}

/// Every schedule: its cadence and state, the next fire times, and its
/// newest slots with their runs.
pub fn schedules_page(schedules: &[(Schedule, Vec<Slot>)]) -> Markup {
    html! {
        h1 { "Schedules" }
        @if schedules.is_empty() {
            p { "No schedule. " code { "cairn schedules create" } " makes one." }
        }
        @for (s, slots) in schedules {
            section.schedule id=(format!("schedule-{}", s.name)) {
                h2 { (s.name) }
                p {
                    @match &s.cadence {
                        cairn::Cadence::Every { secs } => { "every " (secs) " s" }
                        cairn::Cadence::Cron { expr, tz } => { "cron " code { (expr) } " " (tz) }
                    }
                    " · crew " (s.crew) " · overlap " (s.overlap.as_str()) " · catch-up " (s.catch_up.to_string())
                    @if s.paused { " · " strong { "paused" } }
                }
                p.next {
                    "Next: "
                    @for (i, t) in s.upcoming(AHEAD).iter().enumerate() {
                        @if i > 0 { ", " }
                        time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S")) }
                    }
                }
                @if slots.is_empty() {
                    p { "No slot yet." }
                } @else {
                    table.slots {
                        tr { th { "Slot" } th { "Outcome" } th { "Run" } }
                        @for slot in slots {
                            tr class=[(slot.outcome == SlotOutcome::Missed).then_some("missed")] {
                                td { time datetime=(slot.slot.to_rfc3339()) { (slot.slot.format("%Y-%m-%d %H:%M:%S")) } }
                                td { (slot.outcome.as_str()) }
                                td {
                                    @if let Some(run) = slot.run_id { a href={ "/runs/" (run) } { (run) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
