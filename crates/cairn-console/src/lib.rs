//! The web console's pages, rendered on the server from stored records:
//! the runs table, a run with its timeline (an SVG waterfall drawn here),
//! the open waits, the threads, the crews, the provider keys and the sign-in page. Pure functions from records to HTML (maud), so
//! what a page shows is derived from stored state alone and is right after
//! any resume, takeover or reload. No I/O: `cairn-server` reads the records
//! and serves the pages.
//!
//! **Invariant:** every text from a record is escaped (maud escapes
//! `(expr)` splices); no token or secret is ever an argument of a page.

mod fleet;
mod pages;
mod timeline;

use chrono::{DateTime, Utc};
use maud::{html, Markup, DOCTYPE};

use cairn::{
    EventRecord, JournalEntry, JournalKind, KeyState, RunRecord, RunStatus, RunView, StepRecord,
    StepStatus, ThreadSummary, WaitRecord, WaitStatus,
};

pub use fleet::{diff_page, workers_page};
pub use pages::{
    crews_page, limits_page, thread_page, threads_page, upgrade_page, waits_page, CrewStats,
    RoleStats, WaitCard,
};
pub use timeline::{timeline_legend, timeline_svg};

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
    /// Signed in; the session's token.
    SignedIn { csrf: String },
}

impl Viewer {
    pub fn csrf(&self) -> &str {
        match self {
            Viewer::Development { csrf } | Viewer::SignedIn { csrf } => csrf,
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
                        a href="/limits" { "Limits" } " " a href="/workers" { "Workers" }
                    }
                    @match viewer {
                        Viewer::Development { .. } => {
                            p.notice role="note" {
                                "Development mode: no API tokens are configured, so there is no sign-in (the server listens on loopback only)."
                            }
                        }
                        Viewer::SignedIn { csrf } => {
                            form.signout method="post" action="/logout" {
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

/// The runs table, newest first, with filters and a link to the next page
/// (`next`: the id to continue after). `waits`: the listed runs' waits
/// (any status), whose time a run's duration leaves out.
pub fn runs_page(
    runs: &[RunRecord],
    waits: &[WaitRecord],
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
            div.scroll {
                table.runs {
                    thead { tr {
                        th { "Status" } th { "Run" } th { "Crew" } th { "Thread" }
                        th { "Started" } th { "Duration" } th { "Steps" }
                    } }
                    tbody {
                        @for run in runs {
                            tr {
                                td { (status_badge(run.status)) }
                                td { a href=(format!("/runs/{}", run.id)) { code { (short_id(&run.id.to_string())) } } }
                                td { (run.crew) }
                                td { @if let Some(t) = &run.thread_id { a href=(format!("/threads/{}", cairn::text::path_segment(t))) { (t) } } }
                                td { time datetime=(run.created_at.to_rfc3339()) { (run.created_at.format("%Y-%m-%d %H:%M:%S")) } }
                                td { (run_time(run, waits, now)) }
                                td { (run.cursor.get()) " of " (run.step_count) }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(href) = next_href {
            p { a href=(href) { "Older runs →" } }
        }
        }
    }
}

/// What an action's button looks like: destructive actions (cancel,
/// reject) stand out from the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    Plain,
    Destructive,
}

impl Look {
    fn class(self) -> Option<&'static str> {
        (self == Look::Destructive).then_some("danger")
    }
}

/// A form that posts an operator action with a reason.
fn action_form(
    action: &str,
    label: &str,
    target: &str,
    csrf: &str,
    look: Look,
    extra: Markup,
) -> Markup {
    html! {
        form.action method="post" action=(target) {
            input type="hidden" name="csrf" value=(csrf);
            (extra)
            label { "Reason " input type="text" name="reason" required placeholder=(format!("why {action}")); }
            button type="submit" class=[look.class()] { (label) }
        }
    }
}

/// A budgeted run's raise form: the raise (`tokens=+50000 cost_usd=+1`)
/// and a reason; an interrupted run, or a waiting parent's stopped
/// children, then carry on.
fn raise_form(run: &RunRecord, target: &str, csrf: &str) -> Markup {
    let label = match run.status {
        RunStatus::Interrupted => "Raise the budget and continue",
        _ => "Raise the budget",
    };
    action_form(
        "the budget is raised",
        label,
        target,
        csrf,
        Look::Plain,
        html! {
            label { "Raise " input type="text" name="raise" required placeholder="tokens=+50000 cost_usd=+1"; }
        },
    )
}

/// A run's fork form: from which step, a new input (from step 0 only),
/// and, when the server offers other versions of its crew, on which.
fn fork_form(
    run: &RunRecord,
    fork_from: u32,
    versions: &[String],
    target: &str,
    csrf: &str,
) -> Markup {
    action_form(
        "fork",
        "Fork",
        target,
        csrf,
        Look::Plain,
        html! {
            label { "From step "
                input type="number" name="from_step" min="0" max=(run.step_count) value=(fork_from) required;
            }
            label { "New input (JSON, from step 0 only) "
                input type="text" name="input" placeholder="{}";
            }
            @if !versions.is_empty() {
                label { "On version "
                    select name="crew_version" {
                        option value="" { "v" (run.crew_version) " (its own)" }
                        @for v in versions { option value=(v) { "v" (v) } }
                    }
                }
            }
        },
    )
}

/// What the server lets a run's page offer.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    /// The other versions of the run's crew the server offers, which the
    /// fork form offers to run the fork on.
    pub versions: &'a [String],
    /// The server does not offer the run's crew and refuses to execute it
    /// (no `--foreign-runs`): retry, continue, fork and a raise are not
    /// offered, and the page says why.
    pub foreign: bool,
}

/// The journals of a run's `llm` steps, by step index (every generation).
pub type Journals = std::collections::BTreeMap<u32, Vec<JournalEntry>>;

/// A run: its header, the timeline, the actions it allows, the live text of
/// a streaming `llm` step, the steps with their outputs (and an `llm`
/// step's journal as a conversation), the events. `waits`: the run's
/// waits (any status), whose time its durations leave out. `offer`: what
/// the server lets this page offer.
pub fn run_page(
    view: &RunView,
    events: &[EventRecord],
    journals: &Journals,
    waits: &[WaitRecord],
    offer: &Offer<'_>,
    csrf: &str,
    now: DateTime<Utc>,
) -> Markup {
    let versions = offer.versions;
    let run = &view.run;
    let (tokens_in, tokens_out) = view.steps.iter().fold((0u64, 0u64), |(i, o), s| {
        (
            i + s.input_tokens.unwrap_or(0),
            o + s.output_tokens.unwrap_or(0),
        )
    });
    let takeovers: u32 = view.steps.iter().map(|s| s.takeovers).sum();
    let attempts: u32 = view.steps.iter().map(|s| s.attempt.get()).sum();
    let step_waits: Vec<i64> = view
        .steps
        .iter()
        .map(|s| step_waited_ms(s, waits, now))
        .collect();
    let any_wait = step_waits.iter().any(|w| *w > 0);
    // Fork from the failed step of a failed run, else from the last step
    // there is: the new run re-runs it (and what follows).
    let fork_from = view
        .steps
        .iter()
        .rev()
        .find(|s| run.status == RunStatus::Failed && s.status == StepStatus::Failed)
        .or(view.steps.last())
        .map_or(0, |s| s.idx.get())
        .min(run.step_count);
    // While it can still change, the page follows the run's events.
    let live = (!run.status.is_finished()).then(|| format!("/runs/{}/events", run.id));
    html! {
        div #live data-live=[live] {
        h1 { "Run " code { (run.id) } }
        dl.header {
            dt { "Status" } dd {
                (status_badge(run.status))
                @if let Some(wait) = view.children_wait() {
                    " " span class=(children_badge(&wait)) { (wait.describe()) }
                }
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
            dt { "Duration" } dd { (run_time(run, waits, now)) }
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
        (children_table(&view.children))
        h2 { "Actions" }
        @if offer.foreign && !run.status.is_finished() {
            p.note.foreign {
                "This server does not offer this run's crew (" code { (run.crew_fingerprint) }
                "): it refuses to retry, continue, fork or raise it. Act where the run was \
                 submitted, or start the server with " code { "cairn serve --foreign-runs" } "."
            }
        }
        div.actions {
            @let base = format!("/runs/{}", run.id);
            @if offer.foreign {
                @if !run.status.is_finished() {
                    (action_form("cancel", "Cancel", &format!("{base}/cancel"), csrf, Look::Destructive, html! {}))
                }
            } @else {
            @if run.status == RunStatus::Failed {
                (action_form("retry", "Retry the failed step", &format!("{base}/retry"), csrf, Look::Plain, html! {}))
            }
            @if run.status == RunStatus::Interrupted {
                (action_form("continue", "Continue", &format!("{base}/continue"), csrf, Look::Plain, html! {}))
            }
            @if !run.status.is_finished() {
                (action_form("cancel", "Cancel", &format!("{base}/cancel"), csrf, Look::Destructive, html! {}))
            }
            @if view.spent.is_some() && !run.status.is_finished() {
                (raise_form(run, &format!("{base}/budget"), csrf))
            }
            (fork_form(run, fork_from, versions, &format!("{base}/fork"), csrf))
            }
        }
        @for step in view.steps.iter().filter(|s| s.status == StepStatus::Running) {
            @if let Some(journal) = journals.get(&step.idx.get()) {
                (live_text(step, journal))
            }
        }
        h2 { "Timeline" }
        div.scroll { (timeline_svg(&view.steps, events, &view.children, run.created_at, run.finished_at.unwrap_or(now))) }
        (timeline_legend())
        h2 { "Steps" }
        div.scroll {
            table.steps {
                thead { tr {
                    th { "#" } th { "Role" } th { "Status" } th { "Attempt" }
                    th { "Duration" } @if any_wait { th { "Waited" } } th { "Tokens in/out" }
                } }
                tbody {
                    @for (step, waited) in view.steps.iter().zip(&step_waits) {
                        tr { (step_row(step, any_wait.then_some(*waited), now)) }
                    }
                }
            }
        }
        @for step in &view.steps {
            details.output id=(format!("step-{}", step.idx.get())) {
                summary { "Step " (step.idx.get()) " · " (step.role.as_str()) }
                @if let Some(error) = &step.error {
                    p.error { (error.message) }
                }
                pre { code { (pretty(step.output.as_ref())) } }
                @if let Some(journal) = journals.get(&step.idx.get()) {
                    (conversation(journal))
                }
            }
        }
        h2 { "Events" }
        ol.events {
            @for e in events {
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

/// Where a running `llm` step's text appears as it streams (`console.js`
/// fills it from `output_delta` events). `data-seq` is the step's newest
/// journal item shown on this page: pieces sent before it are already in
/// the conversation, so the script shows only pieces with `after_seq` at or
/// past it, and no text appears twice.
/// A parent's children: key, run (linked), status, tokens.
fn children_table(children: &[cairn::ChildOutcome]) -> Markup {
    html! {
        @if !children.is_empty() {
            h2 { "Children" }
            table.children {
                thead { tr { th { "Key" } th { "Run" } th { "Status" } th { "Why" } th { "Tokens" } } }
                tbody {
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
                }
            }
        }
    }
}

fn live_text(step: &StepRecord, journal: &[JournalEntry]) -> Markup {
    let newest = journal.iter().map(|e| e.seq).max().unwrap_or(0);
    html! {
        section.live-output {
            h2 { "Live output · step " (step.idx.get()) " · " (step.role.as_str()) }
            pre.live-text id=(format!("live-text-{}", step.idx.get()))
                data-idx=(step.idx.get()) data-attempt=(step.attempt.get()) data-seq=(newest)
                aria-live="polite" {}
        }
    }
}

/// An `llm` step's journal as a conversation: text, tool calls with their
/// arguments, results, human answers, each repair marked with its kind, and
/// where each response ended. A new generation (after a rejected review)
/// starts under its own heading.
fn conversation(journal: &[JournalEntry]) -> Markup {
    // A heading where a generation after the first begins.
    let headed: Vec<(Option<u32>, &JournalEntry)> = journal
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let previous = i.checked_sub(1).map(|p| journal[p].generation);
            let starts = previous.map_or(e.generation > 0, |g| g != e.generation);
            (starts.then_some(e.generation), e)
        })
        .collect();
    html! {
        ol.conversation {
            @for (heading, e) in headed {
                @if let Some(g) = heading {
                    li.generation { "Journal " (g) " (after " (g) " rejected review" @if g != 1 { "s" } ")" }
                }
                (journal_item(e))
            }
        }
    }
}

fn journal_item(e: &JournalEntry) -> Markup {
    let p = &e.payload;
    let text = |key: &str| p.get(key).and_then(|v| v.as_str()).unwrap_or("").to_owned();
    let seq = html! { span.seq title=(format!("attempt {}", e.attempt.get())) { "#" (e.seq) } };
    html! {
        @match e.kind {
            JournalKind::AssistantText => li.assistant { (seq) " " strong { "Assistant" } pre { (text("text")) } },
            JournalKind::ToolCallStarted => li.tool-started { (seq) " " strong { "Tool call started" } " " code { (text("name")) } },
            JournalKind::ToolCall => li.tool-call {
                (seq) " " strong { "Tool call" } " " code { (text("name")) }
                pre { (text("arguments")) }
            },
            JournalKind::ToolResult => li.tool-result.error[p.get("is_error").and_then(|v| v.as_bool()).unwrap_or(false)] {
                (seq) " " strong { "Result" }
                @if p.get("synthesized").and_then(|v| v.as_bool()).unwrap_or(false) { " " span.badge { "synthesized" } }
                pre { (p.get("content").map(|c| c.as_str().map(str::to_owned).unwrap_or_else(|| c.to_string())).unwrap_or_default()) }
            },
            JournalKind::HumanAnswer => li.human { (seq) " " strong { "Human answer" } pre { (pretty(p.get("answer"))) } },
            JournalKind::Repair => li.repair {
                (seq) " " strong { "Repair" } " " span.badge.repair { (text("action")) }
                " " code { (p.to_string()) }
            },
            JournalKind::TurnEnd => li.turn-end {
                (seq) " end of response: " (text("stop_reason"))
                " · " (p.get("input_tokens").and_then(|v| v.as_u64()).unwrap_or(0)) " in / "
                (p.get("output_tokens").and_then(|v| v.as_u64()).unwrap_or(0)) " out · "
                (p.get("ms").and_then(|v| v.as_u64()).unwrap_or(0)) " ms"
            },
            _ => li { (seq) " " (e.kind.as_str()) " " code { (p.to_string()) } },
        }
    }
}

/// A step's row; `waited`: the column of its time waiting for people, when
/// the table has one (its duration leaves that time out either way).
fn step_row(step: &StepRecord, waited: Option<i64>, now: DateTime<Utc>) -> Markup {
    let wall = (step.finished_at.unwrap_or(now) - step.started_at).num_milliseconds();
    let ran = wall - waited.unwrap_or(0);
    html! {
        td { (step.idx.get()) }
        td { (step.role.as_str()) }
        td { span class=(format!("badge {}", step.status.as_str())) { (step.status.as_str()) } }
        td { (step.attempt.get()) }
        td { (millis(ran)) }
        @if let Some(waited) = waited {
            td { @if waited > 0 { (millis(waited)) } @else { "–" } }
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

/// The class of the badge of a run waiting for its children: distinct
/// from a wait for a person (`waiting`), and from stopped children.
fn children_badge(wait: &cairn::ChildrenWait) -> &'static str {
    match wait {
        cairn::ChildrenWait::Working { .. } => "badge children-working",
        cairn::ChildrenWait::Stopped { .. } => "badge children-stopped",
        cairn::ChildrenWait::Person { .. } => "badge children-person",
    }
}

fn status_badge(status: RunStatus) -> Markup {
    html! { span class=(format!("badge {}", status.as_str())) { (status.as_str()) } }
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

/// `12 ms`, `1.2 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`.
pub(crate) fn duration(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    millis((to - from).num_milliseconds())
}

/// [`duration`] of a number of milliseconds (negative: 0).
pub(crate) fn millis(ms: i64) -> String {
    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;
    const DAY: i64 = 24 * HOUR;
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ if ms < HOUR => format!("{} min {} s", ms / MIN, (ms % MIN) / 1000),
        _ if ms < DAY => format!("{} h {} min", ms / HOUR, (ms % HOUR) / MIN),
        _ => format!("{} d {} h", ms / DAY, (ms % DAY) / HOUR),
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

/// How long `waits` (of one run) kept it waiting for people within
/// `from..to`: each from its opening to its answer (to `now` while open),
/// clipped to the span. As `cairn runs show` computes a step's `waited`.
fn waited_between<'a>(
    waits: impl IntoIterator<Item = &'a WaitRecord>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> i64 {
    waits
        .into_iter()
        .map(|w| {
            let end = match w.status {
                WaitStatus::Open => now,
                _ => w.answered_at.unwrap_or(w.created_at),
            };
            (end.min(to) - w.created_at.max(from))
                .num_milliseconds()
                .max(0)
        })
        .sum()
}

/// How long a step waited for people within its row's time (its current
/// attempt): the waits of its index, clipped to the row's start and end.
fn step_waited_ms(step: &StepRecord, waits: &[WaitRecord], now: DateTime<Utc>) -> i64 {
    let end = step.finished_at.unwrap_or(now);
    let own = waits.iter().filter(|w| w.step_idx == step.idx);
    waited_between(own, step.started_at, end, now)
}

/// A run's duration without the time it waited for people: `2.0 s`, or
/// `ran 2.0 s, waited 3 h 0 min` when it waited. `waits` may hold other
/// runs' waits too.
fn run_time(run: &RunRecord, waits: &[WaitRecord], now: DateTime<Utc>) -> String {
    let end = run.finished_at.unwrap_or(now);
    let own = waits.iter().filter(|w| w.run_id == run.id);
    let wall = (end - run.created_at).num_milliseconds().max(0);
    let waited = waited_between(own, run.created_at, end, now).min(wall);
    if waited == 0 {
        millis(wall)
    } else {
        format!("ran {}, waited {}", millis(wall - waited), millis(waited))
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
