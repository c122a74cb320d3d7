//! The web console's pages, rendered on the server from stored records:
//! the runs table, a run with its timeline (an SVG waterfall drawn here),
//! the open waits, the threads, the crews, the provider keys and the sign-in page. Pure functions from records to HTML (maud), so
//! what a page shows is derived from stored state alone and is right after
//! any resume, takeover or reload. No I/O: `cairn-server` reads the records
//! and serves the pages.
//!
//! **Invariant:** every text from a record is escaped (maud escapes
//! `(expr)` splices); no token or secret is ever an argument of a page.

mod actions;
mod conversation;
mod durations;
#[cfg(test)]
mod fixtures;
mod fleet;
mod notice;
mod pages;
mod signals;
mod timeline;
mod waits;

use chrono::{DateTime, Utc};
use maud::{html, Markup, DOCTYPE};

use cairn::{
    EventRecord, JournalEntry, JournalKind, KeyState, RunRecord, RunStatus, RunView, StepRecord,
    StepStatus, ThreadSummary, WaitRecord,
};

pub use actions::Offer;
use actions::{run_actions, Look};
pub use cairn::StepTime;
use conversation::{conversation, live_text};
pub(crate) use durations::{duration, millis, run_time};
pub use fleet::{diff_page, workers_page};
pub use notice::Done;
pub use pages::{
    crews_page, limits_page, thread_page, threads_page, upgrade_page, CrewStats, RoleStats,
};
pub use signals::schedules_page;
pub use timeline::{timeline_legend, timeline_svg, Timeline};
pub use waits::{waits_page, WaitCard};

/// The stylesheet, served by `cairn serve` at [`CSS_PATH`].
pub const CSS: &str = include_str!("console.css");
/// Where the stylesheet is served.
pub const CSS_PATH: &str = "/console.css";
/// The pages' one script (live updates), served at [`JS_PATH`].
pub const JS: &str = include_str!("console.js");
pub const JS_PATH: &str = "/console.js";

/// What a page knows of the person reading it, and the token its
/// state-changing forms carry (a page of another site cannot read it).
#[derive(Debug, Clone)]
pub enum Viewer {
    /// No API tokens are configured (loopback only): no sign-in; the
    /// server's own token guards the forms.
    Development { csrf: String },
    /// Signed in as `name`; the session's token, and whether the
    /// principal may act (an operator or an admin): a viewer's pages carry
    /// no forms (the server refuses them anyway).
    SignedIn {
        csrf: String,
        name: String,
        operator: bool,
        /// An admin also gets the admin's forms (a crew upgrade).
        admin: bool,
    },
}

impl Viewer {
    pub fn csrf(&self) -> &str {
        match self {
            Viewer::Development { csrf } | Viewer::SignedIn { csrf, .. } => csrf,
        }
    }

    /// The token the page's forms carry: none (`""`) for a viewer who may
    /// not act, and then the pages render no action forms.
    pub fn form_csrf(&self) -> &str {
        match self {
            Viewer::SignedIn {
                operator: false, ..
            } => "",
            v => v.csrf(),
        }
    }

    /// The token of an admin's forms (a crew upgrade): none (`""`) for
    /// anyone else, who then gets no such form.
    pub fn admin_csrf(&self) -> &str {
        match self {
            Viewer::SignedIn { admin: false, .. } => "",
            v => v.csrf(),
        }
    }
}

/// A page's `<head>`: the stylesheet, and the live script on pages that
/// have live parts.
fn head(title: &str, script: bool) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Cairn" }
            link rel="stylesheet" href=(CSS_PATH);
            @if script { script src=(JS_PATH) defer {} }
        }
    }
}

/// A page around `body`: header, navigation, sign-out or the development
/// notice.
pub fn page(title: &str, viewer: &Viewer, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, true))
            body {
                header {
                    a.brand href="/" { "Cairn" }
                    nav {
                        a href="/" { "Runs" } " " a href="/waits" { "Waits" } " "
                        a href="/threads" { "Threads" } " " a href="/crews" { "Crews" } " "
                        a href="/limits" { "Limits" } " " a href="/workers" { "Workers" } " "
                        a href="/schedules" { "Schedules" }
                    }
                    @match viewer {
                        Viewer::Development { .. } => {
                            p.notice role="note" {
                                "Development mode: no API tokens are configured, so there is no sign-in (the server listens on loopback only)."
                            }
                        }
                        Viewer::SignedIn { csrf, name, .. } => {
                            form.signout method="post" action="/logout" {
                                span.who { "Signed in as " strong { (name) } " " }
                                input type="hidden" name="csrf" value=(csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A page reached by a notice's link: no navigation, no session (the
/// link is the credential), `body` as given.
pub fn link_page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, false))
            body {
                main.login.link { (body) }
            }
        }
    }
}

/// The sign-in page; `error` says why the last try failed.
pub fn login_page(error: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Sign in", false))
            body {
                main.login {
                    h1 { "Cairn" }
                    @if let Some(error) = error {
                        p.error role="alert" { (error) }
                    }
                    form method="post" action="/login" {
                        label for="token" { "API token" }
                        input #token type="password" name="token" autocomplete="current-password" required autofocus;
                        button type="submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// The filters of the runs table, as the query string gave them.
#[derive(Debug, Clone, Default)]
pub struct RunsQuery {
    pub status: Option<String>,
    pub crew: Option<String>,
    pub thread: Option<String>,
}

/// Where each listed run waiting for its children stands, by run.
pub type Standing = std::collections::HashMap<cairn::RunId, cairn::ChildrenWait>;

/// The runs table, newest first, with filters and a link to the next page
/// (`next`: the id to continue after). `waits`: the listed runs' waits
/// (any status), whose time a run's duration leaves out; `standing`: the
/// listed runs that wait for children, badged as such.
pub fn runs_page(
    runs: &[RunRecord],
    waits: &[WaitRecord],
    standing: &Standing,
    query: &RunsQuery,
    next: Option<&str>,
    first_page: bool,
    now: DateTime<Utc>,
) -> Markup {
    let statuses = [
        "queued",
        "running",
        "waiting",
        "interrupted",
        "succeeded",
        "failed",
        "cancelled",
    ];
    let next_href = next.map(|after| {
        let mut q = vec![format!("after={after}")];
        for (k, v) in [
            ("status", &query.status),
            ("crew", &query.crew),
            ("thread", &query.thread),
        ] {
            if let Some(v) = v {
                q.push(format!("{k}={}", cairn::text::path_segment(v)));
            }
        }
        format!("/?{}", q.join("&"))
    });
    html! {
        h1 { "Runs" }
        div #live data-poll=[first_page.then_some("3000")] {
        form.filters method="get" action="/" {
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for s in statuses {
                        option value=(s) selected[query.status.as_deref() == Some(s)] { (s) }
                    }
                }
            }
            label { "Crew " input type="text" name="crew" value=[query.crew.as_deref()]; }
            label { "Thread " input type="text" name="thread" value=[query.thread.as_deref()]; }
            button type="submit" { "Filter" }
        }
        @if runs.is_empty() {
            p { "No runs." }
        } @else {
            (scroll_table(
                "runs",
                &["Status", "Run", "Crew", "Thread", "Started", "Duration", "Steps"],
                html! {
                    @for run in runs {
                        tr {
                            td {
                                (status_badge(run.status))
                                @if let Some(wait) = standing.get(&run.id) { " " (children_badge(wait)) }
                            }
                            td { a href=(format!("/runs/{}", run.id)) { code { (short_id(&run.id.to_string())) } } }
                            td { (run.crew) }
                            td { @if let Some(t) = &run.thread_id { a href=(format!("/threads/{}", cairn::text::path_segment(t))) { (t) } } }
                            td { time datetime=(run.created_at.to_rfc3339()) { (run.created_at.format("%Y-%m-%d %H:%M:%S")) } }
                            td { (run_time(run, waits, now)) }
                            td { (run.cursor.get()) " of " (run.step_count) }
                        }
                    }
                },
            ))
        }
        @if let Some(href) = next_href {
            p { a href=(href) { "Older runs →" } }
        }
        }
    }
}

/// The journals of a run's `llm` steps, by step index (every generation).
pub type Journals = std::collections::BTreeMap<u32, Vec<JournalEntry>>;

/// Everything a run's page is drawn from.
#[derive(Debug, Clone, Copy)]
pub struct RunPage<'a> {
    pub view: &'a RunView,
    pub events: &'a [EventRecord],
    pub journals: &'a Journals,
    /// The run's waits (any status), whose time its durations leave out.
    pub waits: &'a [WaitRecord],
    /// The open waits whose policy does not admit the viewer: shown,
    /// without answer forms.
    pub not_theirs: &'a [cairn::WaitId],
    /// What the server lets this page offer.
    pub offer: Offer<'a>,
    pub csrf: &'a str,
    /// What the form that led here did, confirmed in a line at the top.
    pub done: Option<Done>,
    pub now: DateTime<Utc>,
}

/// A run: a line confirming what the form that led here did, its header,
/// the open waits with their answers, the timeline, the actions it allows,
/// the live text of a streaming `llm` step, the steps with their outputs
/// (and an `llm` step's journal as a conversation), the events.
pub fn run_page(p: &RunPage<'_>) -> Markup {
    let run = &p.view.run;
    let steps = &p.view.steps;
    let times: Vec<StepTime> = steps
        .iter()
        .map(|s| StepTime::of(s, p.events, p.waits, p.now))
        .collect();
    let any_wait = times.iter().any(|t| t.waited_ms > 0);
    // While it can still change, the page follows the run's events.
    let live = (!run.status.is_finished()).then(|| format!("/runs/{}/events", run.id));
    let timeline = Timeline {
        steps,
        events: p.events,
        waits: p.waits,
        children: &p.view.children,
        start: run.created_at,
        end: run.finished_at.unwrap_or(p.now),
    };
    html! {
        @if let Some(line) = p.done.and_then(|done| confirmation(p, done)) {
            (notice::flash(html! { (line) }))
        }
        div #live data-live=[live] {
        h1 { "Run " code { (run.id) } }
        (run_header(p))
        (waits::run_waits(run, p.waits, p.not_theirs, p.csrf, p.now))
        (waits::children_waits(p.view))
        (children_table(&p.view.children))
        (signals::run_signals(p.view, p.csrf))
        (run_actions(p))
        @for step in steps.iter().filter(|s| s.status == StepStatus::Running) {
            @if let Some(journal) = p.journals.get(&step.idx.get()) {
                (live_text(step, journal))
            }
        }
        h2 { "Timeline" }
        div.scroll { (timeline_svg(&timeline)) }
        (timeline_legend())
        h2 { "Steps" }
        div.scroll {
            table.steps {
                thead { tr {
                    th { "#" } th { "Role" } th { "Status" } th { "Attempt" }
                    th { "Duration" } @if any_wait { th { "Waited" } } th { "Tokens in/out" }
                } }
                tbody {
                    @for (step, time) in steps.iter().zip(&times) {
                        tr { (step_row(step, time, any_wait)) }
                    }
                }
            }
        }
        @for step in steps {
            details.output id=(format!("step-{}", step.idx.get())) {
                summary { "Step " (step.idx.get()) " · " (step.role.as_str()) }
                @if let Some(error) = &step.error {
                    p.error { (error.message) }
                }
                (value_view(step.output.as_ref()))
                @if let Some(journal) = p.journals.get(&step.idx.get()) {
                    (conversation(journal))
                }
            }
        }
        h2 { "Events" }
        ol.events {
            @for e in p.events {
                li {
                    time datetime=(e.at.to_rfc3339()) { (e.at.format("%H:%M:%S%.3f")) }
                    " " strong { (e.kind.as_str()) } " "
                    code { (e.data.to_string()) }
                }
            }
        }
        }
    }
}

/// The line confirming what the form that led to a run's page did, from
/// the run's stored waits and events.
fn confirmation(p: &RunPage<'_>, done: Done) -> Option<String> {
    match done {
        Done::Answer(id) => {
            let wait = p.waits.iter().find(|w| w.id == id)?;
            let role = p
                .view
                .run
                .crew_definition
                .agents
                .get(wait.step_idx.as_usize())
                .map_or("", |a| a.role.as_str());
            notice::answered(wait, role)
        }
        other => notice::run_action(other, p.events),
    }
}

/// A run's header: status (and where a wait for children stands), crew,
/// where it hangs, progress, attempts, tokens, budget, duration, errors.
fn run_header(p: &RunPage<'_>) -> Markup {
    let view = p.view;
    let run = &view.run;
    let (tokens_in, tokens_out) = view.steps.iter().fold((0u64, 0u64), |(i, o), s| {
        (
            i + s.input_tokens.unwrap_or(0),
            o + s.output_tokens.unwrap_or(0),
        )
    });
    let takeovers: u32 = view.steps.iter().map(|s| s.takeovers).sum();
    let attempts: u32 = view.steps.iter().map(|s| s.attempt.get()).sum();
    html! {
        dl.header {
            dt { "Status" } dd {
                (status_badge(run.status))
                @if let Some(wait) = view.children_wait() { " " (children_badge(&wait)) }
            }
            dt { "Crew" } dd { (run.crew) " v" (run.crew_version) " " code.fp { (run.crew_fingerprint) } }
            @if let Some(tenant) = &run.tenant {
                dt { "Tenant" } dd { (tenant) }
            }
            @if let Some(thread) = &run.thread_id {
                dt { "Thread" } dd { a href=(format!("/threads/{}", cairn::text::path_segment(thread))) { (thread) } }
            }
            @if let Some(child) = &run.child {
                dt { "Child of" }
                dd.parent {
                    a href=(format!("/runs/{}", child.parent_run_id)) { code { (short_id(&child.parent_run_id.to_string())) } }
                    " step " (child.step_idx.get()) ", key " code { (child.key) }
                }
            } @else if let Some(parent) = &run.parent_run_id {
                dt { "Forked from" }
                dd {
                    a href=(format!("/runs/{parent}")) { code { (short_id(&parent.to_string())) } }
                    @if let Some(step) = run.parent_step_idx { " at step " (step.get()) }
                }
            }
            dt { "Progress" } dd { (run.cursor.get()) " of " (run.step_count) " steps" }
            dt { "Attempts" } dd { (plural(attempts as usize, "attempt")) " over " (plural(view.steps.len(), "step")) }
            dt { "Lease epoch" } dd { (run.lease_epoch.0) }
            dt { "Takeovers" } dd { (takeovers) }
            dt { "Tokens" } dd { (tokens_in) " in / " (tokens_out) " out" }
            @if let (Some(spent), Some(budget)) = (view.spent, cairn::Budget::in_force(run.budget, run.crew_definition.budget)) {
                dt { "Budget" } dd.budget { (budget.against(&spent)) }
            }
            dt { "Duration" } dd { (run_time(run, p.waits, p.now)) }
            @if let Some(error) = &run.error {
                dt { "Last error" } dd.error { (error.message) }
            }
            @if let Some(blocked) = &run.blocked {
                dt { "Blocked" } dd.error {
                    (blocked.to_string()) ". Start a process that registers it ("
                    a href="/workers" { "workers" } "), or move the run to a version one offers."
                }
            }
        }
    }
}

/// A parent's children: key, run (linked), status, tokens.
fn children_table(children: &[cairn::ChildOutcome]) -> Markup {
    html! {
        @if !children.is_empty() {
            h2 { "Children" }
            (scroll_table("children", &["Key", "Run", "Status", "Why", "Tokens"], html! {
                @for c in children {
                    tr {
                        td { code { (c.key) } }
                        td { a href=(format!("/runs/{}", c.run_id)) { code { (short_id(&c.run_id.to_string())) } } }
                        td { (status_badge(c.status)) }
                        td.why {
                            @if let (Some(e), false) = (&c.error, c.status == RunStatus::Succeeded) {
                                (e.message)
                            }
                        }
                        td { (c.tokens) }
                    }
                }
            }))
        }
    }
}

/// A step's row: its time by the console's one rule (see `durations.rs`),
/// and, when the table has the column (`waits`), its time waiting for a
/// person, which its duration leaves out either way.
fn step_row(step: &StepRecord, time: &StepTime, waits: bool) -> Markup {
    html! {
        td { (step.idx.get()) }
        td { (step.role.as_str()) }
        td { span class=(format!("badge {}", step.status.as_str())) { (step.status.as_str()) } }
        td { (step.attempt.get()) }
        td { (millis(time.ran_ms())) }
        @if waits {
            td { @if time.waited_ms > 0 { (millis(time.waited_ms)) } @else { "–" } }
        }
        td {
            @match (step.input_tokens, step.output_tokens) {
                (None, None) => { "–" }
                (i, o) => { (i.unwrap_or(0)) " / " (o.unwrap_or(0)) }
            }
            @if let Some(cost) = step.cost_usd { " · " (cost) }
        }
    }
}

/// The badge of a run waiting for its children (`waiting for 3 children
/// (2 still working)`): distinct from a wait for a person (`waiting`), and
/// from stopped children.
fn children_badge(wait: &cairn::ChildrenWait) -> Markup {
    let class = match wait {
        cairn::ChildrenWait::Working { .. } => "badge children-working",
        cairn::ChildrenWait::Stopped { .. } => "badge children-stopped",
        cairn::ChildrenWait::Person { .. } => "badge children-person",
    };
    html! { span class=(class) { (wait.describe()) } }
}

fn status_badge(status: RunStatus) -> Markup {
    html! { span class=(format!("badge {}", status.as_str())) { (status.as_str()) } }
}

/// A table that scrolls sideways on a narrow screen: class `class`, a
/// header row of `heads`, then `rows`.
fn scroll_table(class: &str, heads: &[&str], rows: Markup) -> Markup {
    html! {
        div.scroll {
            table class=(class) {
                thead { tr { @for h in heads { th { (h) } } } }
                tbody { (rows) }
            }
        }
    }
}

fn short_id(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

fn pretty(value: Option<&serde_json::Value>) -> String {
    match value {
        None => "(no output)".to_owned(),
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
    }
}

/// An output as a person reads it: a string as its text (`pre.text`),
/// anything else as pretty JSON.
fn value_view(value: Option<&serde_json::Value>) -> Markup {
    html! {
        @match value {
            Some(serde_json::Value::String(text)) => { pre.text { (text) } }
            other => { pre { code { (pretty(other)) } } }
        }
    }
}

/// `1 step`, `3 steps`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::{role_chart, text_width};

    #[test]
    fn durations_counts_and_chart_labels_read_right() {
        assert_eq!(millis(-5), "0 ms");
        assert_eq!(millis(1_500), "1.5 s");
        assert_eq!(millis(184_000), "3 min 4 s");
        assert_eq!(millis(3 * 3_600_000 + 5 * 60_000), "3 h 5 min");
        assert_eq!(millis(2 * 86_400_000 + 3_600_000), "2 d 1 h");
        assert_eq!(plural(1, "step"), "1 step");
        assert_eq!(plural(3, "step"), "3 steps");
        assert_eq!(plural(0, "attempt"), "0 attempts");

        let role = |role: &str, steps: u32, mean_ms: f64| RoleStats {
            role: role.into(),
            kind: "command".into(),
            steps,
            mean_ms,
            input_tokens: 123_456,
            output_tokens: 78_901,
            cost_usd: cairn::Usd::default(),
        };
        let chart = role_chart(&[
            role("a-rather-long-role-name", 1, 2_500.0),
            role("b", 3, 1_234_567.0),
        ])
        .into_string();
        assert!(
            chart.contains("· 1 step<") && chart.contains("· 3 steps<"),
            "{chart}"
        );
        assert!(!chart.contains("1 steps"), "{chart}");
        // The longest bar's figures end inside the chart.
        let width: f64 = chart
            .split(r#"width=""#)
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_default();
        let figures = "1234567 ms · 123456/78901 tokens · 3 steps";
        let label_w = text_width("a-rather-long-role-name (command)") + 12.0;
        assert!(
            width >= label_w + 320.0 + 4.0 + text_width(figures),
            "{width}: {chart}"
        );
    }
}
