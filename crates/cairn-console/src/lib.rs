//! The web console's pages, rendered on the server from stored records:
//! the runs table, a run with its timeline (an SVG waterfall drawn here),
//! and the sign-in page. Pure functions from records to HTML (maud), so
//! what a page shows is derived from stored state alone and is right after
//! any resume, takeover or reload. No I/O: `cairn-server` reads the records
//! and serves the pages.
//!
//! **Invariant:** every text from a record is escaped (maud escapes
//! `(expr)` splices); no token or secret is ever an argument of a page.

mod timeline;

use chrono::{DateTime, Utc};
use maud::{html, Markup, DOCTYPE};

use cairn::{
    EventRecord, JournalEntry, JournalKind, RunRecord, RunStatus, RunView, StepRecord, StepStatus,
};

pub use timeline::timeline_svg;

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
                    nav { a href="/" { "Runs" } " " a href="/waits" { "Waits" } " " a href="/crews" { "Crews" } }
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
/// (`next`: the id to continue after).
pub fn runs_page(
    runs: &[RunRecord],
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
                q.push(format!("{k}={}", url_escape(v)));
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
                                td { @if let Some(t) = &run.thread_id { a href=(format!("/threads/{}", url_escape(t))) { (t) } } }
                                td { time datetime=(run.created_at.to_rfc3339()) { (run.created_at.format("%Y-%m-%d %H:%M:%S")) } }
                                td { (duration(run.created_at, run.finished_at.unwrap_or(now))) }
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

/// A form that posts an operator action with a reason.
fn action_form(action: &str, label: &str, target: &str, csrf: &str, extra: Markup) -> Markup {
    html! {
        form.action method="post" action=(target) {
            input type="hidden" name="csrf" value=(csrf);
            (extra)
            label { "Reason " input type="text" name="reason" required placeholder=(format!("why {action}")); }
            button type="submit" { (label) }
        }
    }
}

/// The journals of a run's `llm` steps, by step index (every generation).
pub type Journals = std::collections::BTreeMap<u32, Vec<JournalEntry>>;

/// A run: its header, the timeline, the actions it allows, the live text of
/// a streaming `llm` step, the steps with their outputs (and an `llm`
/// step's journal as a conversation), the events.
pub fn run_page(
    view: &RunView,
    events: &[EventRecord],
    journals: &Journals,
    csrf: &str,
    now: DateTime<Utc>,
) -> Markup {
    let run = &view.run;
    let (tokens_in, tokens_out) = view.steps.iter().fold((0u64, 0u64), |(i, o), s| {
        (
            i + s.input_tokens.unwrap_or(0),
            o + s.output_tokens.unwrap_or(0),
        )
    });
    let takeovers: u32 = view.steps.iter().map(|s| s.takeovers).sum();
    let attempts: u32 = view.steps.iter().map(|s| s.attempt.get()).sum();
    // While it can still change, the page follows the run's events.
    let live = (!run.status.is_finished()).then(|| format!("/runs/{}/events", run.id));
    html! {
        div #live data-live=[live] {
        h1 { "Run " code { (run.id) } }
        dl.header {
            dt { "Status" } dd { (status_badge(run.status)) }
            dt { "Crew" } dd { (run.crew) " v" (run.crew_version) " " code.fp { (run.crew_fingerprint) } }
            @if let Some(thread) = &run.thread_id { dt { "Thread" } dd { (thread) } }
            @if let Some(parent) = &run.parent_run_id {
                dt { "Forked from" }
                dd {
                    a href=(format!("/runs/{parent}")) { code { (short_id(&parent.to_string())) } }
                    @if let Some(step) = run.parent_step_idx { " at step " (step.get()) }
                }
            }
            dt { "Progress" } dd { (run.cursor.get()) " of " (run.step_count) " steps" }
            dt { "Attempts" } dd { (attempts) " over " (view.steps.len()) " steps run" }
            dt { "Lease epoch" } dd { (run.lease_epoch.0) }
            dt { "Takeovers" } dd { (takeovers) }
            dt { "Tokens" } dd { (tokens_in) " in / " (tokens_out) " out" }
            dt { "Wall time" } dd { (duration(run.created_at, run.finished_at.unwrap_or(now))) }
            @if let Some(error) = &run.error {
                dt { "Last error" } dd.error { (error.message) }
            }
        }
        h2 { "Actions" }
        div.actions {
            @let base = format!("/runs/{}", run.id);
            @if run.status == RunStatus::Failed {
                (action_form("retry", "Retry the failed step", &format!("{base}/retry"), csrf, html! {}))
            }
            @if run.status == RunStatus::Interrupted {
                (action_form("continue", "Continue", &format!("{base}/continue"), csrf, html! {}))
            }
            @if !run.status.is_finished() {
                (action_form("cancel", "Cancel", &format!("{base}/cancel"), csrf, html! {}))
            }
            (action_form("fork", "Fork", &format!("{base}/fork"), csrf, html! {
                label { "From step "
                    input type="number" name="from_step" min="0" max=(run.step_count) value=(run.cursor.get().min(run.step_count)) required;
                }
                label { "New input (JSON, from step 0 only) "
                    input type="text" name="input" placeholder="{}";
                }
            }))
        }
        @for step in view.steps.iter().filter(|s| s.status == StepStatus::Running) {
            @if let Some(journal) = journals.get(&step.idx.get()) {
                (live_text(step, journal))
            }
        }
        h2 { "Timeline" }
        div.scroll { (timeline_svg(&view.steps, events, run.created_at, run.finished_at.unwrap_or(now))) }
        h2 { "Steps" }
        div.scroll {
            table.steps {
                thead { tr {
                    th { "#" } th { "Role" } th { "Status" } th { "Attempt" }
                    th { "Duration" } th { "Tokens in/out" }
                } }
                tbody {
                    @for step in &view.steps {
                        tr { (step_row(step, now)) }
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

fn step_row(step: &StepRecord, now: DateTime<Utc>) -> Markup {
    html! {
        td { (step.idx.get()) }
        td { (step.role.as_str()) }
        td { span class=(format!("badge {}", step.status.as_str())) { (step.status.as_str()) } }
        td { (step.attempt.get()) }
        td { (duration(step.started_at, step.finished_at.unwrap_or(now))) }
        td {
            @match (step.input_tokens, step.output_tokens) {
                (None, None) => { "–" }
                (i, o) => { (i.unwrap_or(0)) " / " (o.unwrap_or(0)) }
            }
        }
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

/// `1.234 s`, `12 ms`, `3 min 4 s`.
pub(crate) fn duration(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let ms = (to - from).num_milliseconds().max(0);
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// Percent-escapes a query value (what a browser would send for it).
fn url_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The open waits, each with the answers its kind takes.
pub fn waits_page(waits: &[cairn::WaitRecord], csrf: &str) -> Markup {
    use cairn::WaitKind;
    html! {
        h1 { "Waits" }
        @if waits.is_empty() {
            p { "No open waits." }
        }
        @for w in waits {
            section.wait id=(format!("wait-{}", w.id)) {
                h2 {
                    (w.kind.as_str()) " for step " (w.step_idx.get()) " of run "
                    a href=(format!("/runs/{}", w.run_id)) { code { (short_id(&w.run_id.to_string())) } }
                }
                @if let Some(deadline) = w.deadline {
                    p { "Deadline " time datetime=(deadline.to_rfc3339()) { (deadline.format("%Y-%m-%d %H:%M:%S")) } }
                }
                pre { code { (pretty(Some(&w.prompt))) } }
                @let target = format!("/waits/{}/answer", w.id);
                @let answer = |decision: &str, label: &str, extra: Markup| html! {
                    form.action method="post" action=(target) {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="decision" value=(decision);
                        (extra)
                        label { "Reason " input type="text" name="reason" required placeholder=(format!("why {decision}")); }
                        button type="submit" { (label) }
                    }
                };
                @match w.kind {
                    WaitKind::Review => {
                        (answer("approve", "Approve", html! {}))
                        (answer("edit", "Commit this output instead", html! {
                            label { "Output (JSON) " textarea name="output" rows="4" required { (pretty(Some(&w.prompt))) } }
                        }))
                        (answer("reject", "Reject and run again", html! {
                            label { "Feedback " input type="text" name="feedback" required; }
                        }))
                    }
                    WaitKind::Approval => {
                        (answer("approve", "Approve", html! {}))
                        (answer("reject", "Reject", html! {
                            label { "Why " input type="text" name="feedback" required; }
                        }))
                    }
                    _ => {
                        (answer("answer", "Answer", html! {
                            label { "Answer (text, or JSON) " input type="text" name="value" required; }
                        }))
                    }
                }
            }
        }
    }
}

/// A thread as a conversation: its runs oldest first, each with its input
/// and its final output (`None`: not finished), and the totals.
pub fn thread_page(
    view: &cairn::ThreadView,
    turns: &[(RunRecord, Option<serde_json::Value>)],
) -> Markup {
    html! {
        h1 { "Thread " code { (view.thread_id) } }
        p {
            (view.totals.runs) " runs · "
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
                    Some(v) => { pre { code { (pretty(Some(v))) } } }
                    None => { p { em { "(not finished)" } } }
                }
            }
        }
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
}

/// The crews, each with its agents and a small SVG chart of step
/// durations (bars) and tokens per role.
pub fn crews_page(crews: &[CrewStats]) -> Markup {
    html! {
        h1 { "Crews" }
        @if crews.is_empty() {
            p { "This server offers no crews." }
        }
        @for crew in crews {
            section.crew {
                h2 { (crew.name) " v" (crew.version) " " code.fp { (crew.fingerprint) } }
                p { "From the steps of its " (crew.runs) " most recent runs." }
                div.scroll { (role_chart(&crew.roles)) }
            }
        }
    }
}

fn role_chart(roles: &[RoleStats]) -> Markup {
    const W: f64 = 720.0;
    const LABEL: f64 = 200.0;
    const ROW: f64 = 22.0;
    let longest = roles
        .iter()
        .map(|r| r.mean_ms)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let height = ROW * roles.len().max(1) as f64 + 6.0;
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {W} {height}")) width=(W) height=(height) {
            title { "Mean step duration and tokens per role" }
            @for (i, r) in roles.iter().enumerate() {
                @let y = i as f64 * ROW + 4.0;
                @let w = ((W - LABEL - 180.0) * r.mean_ms / longest).max(1.0);
                text x="4" y=(format!("{:.1}", y + 11.0)) { (r.role) " (" (r.kind) ")" }
                rect x=(LABEL) y=(format!("{y:.1}")) width=(format!("{w:.1}")) height="14" rx="2" {}
                text x=(format!("{:.1}", LABEL + w + 4.0)) y=(format!("{:.1}", y + 11.0)) {
                    @if r.steps == 0 { "no steps yet" } @else {
                        (format!("{:.0} ms", r.mean_ms)) " · " (r.input_tokens) "/" (r.output_tokens) " tokens · " (r.steps) " steps"
                    }
                }
            }
        }
    }
}
