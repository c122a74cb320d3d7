//! The console's fleet pages: the processes working the database (what
//! each offers, the runs it holds, its last beat) with the runs no live
//! process can execute, and how two versions of a crew differ with which
//! unfinished runs can move. Rendering only.

use super::*;

/// The workers page: every registered process, then the blocked runs.
pub fn workers_page(workers: &[cairn::ProcessRecord], blocked: &[cairn::BlockedRun]) -> Markup {
    html! {
        h1 { "Workers" }
        @if workers.is_empty() {
            p { "No process has worked this database within the hour." }
        } @else {
            table.workers {
                tr {
                    th { "Process" } th { "Host" } th { "PID" } th { "Live" } th { "Runs held" }
                    th { "Last beat" } th { "Offers" }
                }
                @for w in workers {
                    tr {
                        td { code { (w.id) } }
                        td { (w.host) }
                        td { (w.pid) }
                        td { @if w.live { "live" } @else { "gone" } }
                        td { (w.held) }
                        td { time datetime=(w.beat_at.to_rfc3339()) { (w.beat_at.format("%Y-%m-%d %H:%M:%S")) } }
                        td {
                            @for (i, o) in w.offers.iter().enumerate() {
                                @if i > 0 { ", " }
                                (o.name) " v" (o.version)
                                @if o.needs_code { " (Rust agents)" }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Blocked runs" }
        @if blocked.is_empty() {
            p { "None: every runnable run has a live process that can execute it." }
        } @else {
            p {
                "These runs are runnable, but their crew version has Rust agents no live process offers. "
                "Start a process that registers the version, or move the runs to one a process offers."
            }
            table.blocked {
                tr { th { "Run" } th { "Crew" } th { "Needs handlers" } }
                @for b in blocked {
                    tr {
                        td { a href={ "/runs/" (b.run) } { (b.run) } }
                        td { (b.blocked.crew) " v" (b.blocked.version) " " code.fp { (b.blocked.fingerprint.as_str()) } }
                        td { (b.blocked.handlers.join(", ")) }
                    }
                }
            }
        }
    }
}

/// How version `diff.to` of crew `name` differs from `diff.from`, step by
/// step, and whether each unfinished run of `diff.from` can move.
pub fn diff_page(name: &str, diff: &cairn::CrewDiff) -> Markup {
    html! {
        h1 { "Crew " (name) ": v" (diff.from.version) " to v" (diff.to.version) }
        table.diff {
            tr { th { "Step" } th { "Change" } th { "v" (diff.from.version) } th { "v" (diff.to.version) } }
            @for s in &diff.steps {
                tr {
                    td { (s.idx) }
                    td { (format!("{:?}", s.change).to_lowercase()) }
                    td { (s.from.clone().unwrap_or_default()) }
                    td { (s.to.clone().unwrap_or_default()) }
                }
            }
        }
        h2 { "Unfinished runs of v" (diff.from.version) }
        @if diff.runs.is_empty() {
            p { "None." }
        } @else {
            table.upgrade {
                tr { th { "Run" } th { "Status" } th { "Step" } th { "Can move" } }
                @for v in &diff.runs {
                    tr {
                        td { a href={ "/runs/" (v.run_id) } { (v.run_id) } }
                        td { (v.status.as_str()) }
                        td { (v.cursor) }
                        td {
                            @if v.movable { "yes" }
                            @else { "no: " (v.reason.clone().unwrap_or_default()) }
                        }
                    }
                }
            }
        }
        p { a href="/crews" { "Crews" } }
    }
}
