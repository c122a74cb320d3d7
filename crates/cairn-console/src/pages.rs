//! The console's list pages: threads, one thread, the provider keys, and
//! crews (with a chart per crew; the waits are in `waits.rs`). Rendering
//! only, as the rest of the crate; the helpers they share live in `lib.rs`.

use super::*;

/// A thread as a conversation: its runs oldest first, each with its input
/// and its final output (`None`: not finished), and the totals.
pub fn thread_page(
    view: &cairn::ThreadView,
    turns: &[(RunRecord, Option<serde_json::Value>)],
) -> Markup {
    html! {
        h1 { "Thread " code { (view.thread_id) } }
        p {
            (plural(view.totals.runs as usize, "run")) " · "
            (view.totals.input_tokens) " tokens in / " (view.totals.output_tokens) " out"
        }
        @for (run, output) in turns {
            section.turn {
                h2 {
                    (status_badge(run.status)) " "
                    a href=(format!("/runs/{}", run.id)) { code { (short_id(&run.id.to_string())) } }
                    " " (run.crew) " · " (run.created_at.format("%Y-%m-%d %H:%M:%S"))
                }
                p.role { "Input" }
                pre { code { (pretty(Some(&run.input))) } }
                p.role { "Output" }
                @match output {
                    Some(v) => { (value_view(Some(v))) }
                    None => { p { em { "(not finished)" } } }
                }
            }
        }
    }
}

/// The threads, as `cairn threads list` gives them but newest first: each
/// linked to its page, with its runs, their tokens and its newest run.
pub fn threads_page(threads: &[ThreadSummary]) -> Markup {
    html! {
        h1 { "Threads" }
        @if threads.is_empty() {
            p { "No threads: runs submitted with a thread id appear here." }
        } @else {
            (scroll_table("threads", &["Thread", "Runs", "Tokens in/out", "Last run"], html! {
                @for t in threads {
                    tr {
                        td { a href=(format!("/threads/{}", cairn::text::path_segment(&t.thread_id))) { (t.thread_id) } }
                        td { (t.runs) }
                        td { (t.input_tokens) " / " (t.output_tokens) }
                        td { time datetime=(t.last_run_at.to_rfc3339()) { (t.last_run_at.format("%Y-%m-%d %H:%M:%S")) } }
                    }
                }
            }))
        }
    }
}

/// The provider keys (`cairn limits list`): each key's pause, if it
/// stands, the runs deferred on it, its pauses and the last reason. Read
/// only: `cairn limits resume KEY` ends a pause.
pub fn limits_page(keys: &[KeyState]) -> Markup {
    html! {
        h1 { "Provider keys" }
        @if keys.is_empty() {
            p { "No provider key has been paused or limited: a model provider's rate limit that says how long to wait pauses its key for every run, " code { "cairn limits set" } " gives a key limits, and the key appears here." }
        } @else {
            (scroll_table(
                "keys",
                &["Key", "Paused until", "Limits", "Permits in use", "Deferred runs", "Pauses", "Last reason"],
                html! {
                    @for k in keys {
                        tr {
                            td { code { (k.key) } }
                            td { @match k.paused_until {
                                Some(t) => time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S")) },
                                None => "not paused",
                            } }
                            td { (limits_text(&k.limits)) }
                            td { (k.permits_in_use) @if let Some(cap) = k.limits.in_flight { " of " (cap) } }
                            td { (k.deferred_runs) }
                            td { (k.pauses) }
                            td { (k.reason.as_deref().unwrap_or("")) @if let Some(by) = &k.paused_by { " (" (by) ")" } }
                        }
                    }
                },
            ))
            p { "End a pause early: " code { "cairn limits resume KEY" } "; change limits: " code { "cairn limits set KEY --in-flight N --rpm N --tpm N" } "." }
        }
    }
}

/// A key's limits as `in flight 8, 500 rpm, 200000 tpm` (`none`).
fn limits_text(l: &cairn::KeyLimits) -> String {
    let mut parts = vec![];
    if let Some(n) = l.in_flight {
        parts.push(format!("in flight {n}"));
    }
    if let Some(n) = l.rpm {
        parts.push(format!("{n} rpm"));
    }
    if let Some(n) = l.tpm {
        parts.push(format!("{n} tpm"));
    }
    match parts.is_empty() {
        true => "none".to_owned(),
        false => parts.join(", "),
    }
}

/// One role of a crew, as its recent stored steps show it.
#[derive(Debug, Clone, Default)]
pub struct RoleStats {
    pub role: String,
    /// `command`, `template`, `llm`, …
    pub kind: String,
    /// Finished steps seen.
    pub steps: u32,
    /// Their mean duration.
    pub mean_ms: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What their priced model calls cost.
    pub cost_usd: cairn::Usd,
}

/// A crew the server offers, with what its recent runs' steps cost.
#[derive(Debug, Clone, Default)]
pub struct CrewStats {
    pub name: String,
    pub version: String,
    pub fingerprint: String,
    /// Runs of this exact definition the figures come from.
    pub runs: usize,
    pub roles: Vec<RoleStats>,
    /// The version a submit that names none takes.
    pub newest: bool,
    /// Its runs that have not ended.
    pub unfinished: u64,
    /// The crew's newest version (this one's, when `newest`).
    pub newest_version: String,
    /// The newest version: the unfinished runs of its crew's older
    /// versions (an upgrade form moves the compatible ones here).
    pub older_unfinished: u64,
}

/// The crews, each with its agents and a small SVG chart of step
/// durations (bars) and tokens per role.
pub fn crews_page(crews: &[CrewStats], csrf: &str) -> Markup {
    html! {
        h1 { "Crews" }
        @if crews.is_empty() {
            p { "This server offers no crews." }
        }
        @for crew in crews {
            section.crew {
                h2 { (crew.name) " v" (crew.version) " " code.fp { (crew.fingerprint) } }
                p.version {
                    @if crew.newest { "Newest version. " } @else { "An older version. " }
                    (crew.unfinished) " unfinished runs."
                    @if !crew.newest {
                        " " a href={ "/crews/" (crew.name) "/diff?from=" (crew.version) "&to=" (crew.newest_version) } {
                            "How v" (crew.newest_version) " differs, and which runs can move"
                        }
                    }
                }
                @if crew.newest && crew.older_unfinished > 0 && !csrf.is_empty() {
                    form.upgrade method="post" action={ "/crews/" (crew.name) "/" (crew.version) "/upgrade" } {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="text" name="reason" placeholder="why (recorded)";
                        button type="submit" {
                            "Move the compatible runs of older versions ("
                            (crew.older_unfinished) " unfinished) to v" (crew.version)
                        }
                    }
                }
                @let cost = crew.roles.iter().fold(cairn::Usd::default(), |c, r| c.saturating_add(r.cost_usd));
                p.usage {
                    "From the steps of its " (crew.runs) " most recent runs"
                    @if !cost.is_zero() { ", which cost " (cost) }
                    "."
                }
                div.scroll { (role_chart(&crew.roles)) }
            }
        }
    }
}

/// The width an SVG text of `text` takes at the charts' 11 px, generously
/// (so that a label is never cut off at the chart's edge).
pub(crate) fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 7.0
}

pub(crate) fn role_chart(roles: &[RoleStats]) -> Markup {
    /// The longest bar.
    const BARS: f64 = 320.0;
    const ROW: f64 = 22.0;
    let longest = roles
        .iter()
        .map(|r| r.mean_ms)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let rows: Vec<(String, f64, String)> = roles
        .iter()
        .map(|r| {
            let label = format!("{} ({})", r.role, r.kind);
            let bar = (BARS * r.mean_ms / longest).max(1.0);
            let figures = if r.steps == 0 {
                "no steps yet".to_owned()
            } else {
                let cost = match r.cost_usd.is_zero() {
                    true => String::new(),
                    false => format!(" · {}", r.cost_usd),
                };
                format!(
                    "{:.0} ms · {}/{} tokens{cost} · {}",
                    r.mean_ms,
                    r.input_tokens,
                    r.output_tokens,
                    plural(r.steps as usize, "step")
                )
            };
            (label, bar, figures)
        })
        .collect();
    // The labels' column, then the bars, each followed by its figures: as
    // wide as the widest row needs.
    let label_w = rows
        .iter()
        .map(|(label, _, _)| text_width(label))
        .fold(120.0f64, f64::max)
        + 12.0;
    let width = rows
        .iter()
        .map(|(_, bar, figures)| label_w + bar + 4.0 + text_width(figures))
        .fold(label_w + BARS, f64::max)
        + 8.0;
    let height = ROW * roles.len().max(1) as f64 + 6.0;
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {width:.0} {height}")) width=(format!("{width:.0}")) height=(height) {
            title { "Mean step duration and tokens per role" }
            @for (i, (label, bar, figures)) in rows.iter().enumerate() {
                @let y = i as f64 * ROW + 4.0;
                text x="4" y=(format!("{:.1}", y + 11.0)) { (label) }
                rect x=(format!("{label_w:.1}")) y=(format!("{y:.1}")) width=(format!("{bar:.1}")) height="14" rx="2" {}
                text.figures x=(format!("{:.1}", label_w + bar + 4.0)) y=(format!("{:.1}", y + 11.0)) { (figures) }
            }
        }
    }
}

/// The answer to an upgrade form: each unfinished run judged, moved or
/// not, and why not.
pub fn upgrade_page(name: &str, version: &str, verdicts: &[cairn::UpgradeVerdict]) -> Markup {
    let moved = verdicts.iter().filter(|v| v.moved).count();
    html! {
        h1 { "Crew " (name) " v" (version) }
        p { "Moved " (moved) " of " (verdicts.len()) " unfinished runs of older versions." }
        table.upgrade {
            tr { th { "Run" } th { "Status" } th { "Was on" } th { "Step" } th { "Moved" } }
            @for v in verdicts {
                tr {
                    td { a href={ "/runs/" (v.run_id) } { (v.run_id) } }
                    td { (v.status.as_str()) }
                    td { "v" (v.version) }
                    td { (v.cursor) }
                    td {
                        @if v.moved { "moved" }
                        @else { "not moved: " (v.reason.clone().unwrap_or_default()) }
                    }
                }
            }
        }
        p { a href="/crews" { "Crews" } }
    }
}
