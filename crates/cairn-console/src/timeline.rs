//! The timeline: a waterfall of a run's steps drawn as SVG on the server,
//! on the run's own clock (created → finished, or now). Each step's row
//! shows its current attempt, from the start of the step's time (see
//! `durations.rs`) to its end (now, for one in flight), coloured by its
//! status; then on top of it, from the run's events, its earlier failed
//! attempts, the durable back-offs between them, the waits for people (to
//! their answer, with who answered how), the waits for children (from
//! their spawn to their join), and takeovers (a mark where another process
//! took the step over, after a band for the time lost to the crash: from
//! the dead holder's last sign of life, its last recorded event, to the
//! takeover). A step that started child runs has lines under it: a bar per
//! child on the same clock, from its start to its end, coloured by its
//! status and linked to it. [`timeline_legend`] says what each mark means.

use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

use cairn::{
    ChildOutcome, EventData as D, EventKind, EventRecord, StepIdx, StepRecord, WaitRecord,
};

use cairn::step_time::{children_spans, StepTime};

const WIDTH: f64 = 720.0;
const LABEL: f64 = 160.0;
const ROW: f64 = 22.0;
const BAR: f64 = 14.0;
/// One lane of a step's children, and one child's bar in it.
const LANE: f64 = 8.0;
const CHILD: f64 = 6.0;
/// A child's bar is at least this wide (so it can be clicked).
const CHILD_MIN: f64 = 4.0;
/// Lanes of children per step; more children share them.
const MAX_LANES: usize = 8;
/// Children drawn per step; the rest are counted.
const MAX_CHILDREN_DRAWN: usize = 48;

/// One drawn stretch of a step's row.
struct Span {
    class: &'static str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    title: String,
}

/// Whether a process holding the run (a claim's lease) records events of
/// this kind: its last one is its last sign of life the store keeps (its
/// heartbeats are not kept). People's and operators' events are not.
fn holders_event(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::RunClaimed
            | EventKind::StepSucceeded
            | EventKind::StepFailed
            | EventKind::StepRetryScheduled
            | EventKind::StepCancelled
            | EventKind::StepInterrupted
            | EventKind::WaitOpened
            | EventKind::ModelCalled
            | EventKind::ToolExecuted
            | EventKind::TranscriptRepaired
    )
}

/// What the events add to step `idx`'s row: failed attempts, back-offs,
/// waits, the time lost to a crash before each takeover; and the takeover
/// marks.
fn history(
    idx: u32,
    events: &[EventRecord],
    end: DateTime<Utc>,
) -> (Vec<Span>, Vec<DateTime<Utc>>) {
    let mut spans = Vec::new();
    let mut takeovers = Vec::new();
    let mut open_wait: Option<(DateTime<Utc>, &'static str)> = None;
    // The newest event of a process that held the run.
    let mut last_sign: Option<&EventRecord> = None;
    let ours = |i: StepIdx| i.get() == idx;
    for e in events {
        match e.payload() {
            Ok(D::StepFailed(f)) if ours(f.idx) => {
                let ms = f.duration_ms.unwrap_or(0);
                spans.push(Span {
                    class: "failed",
                    from: e.at - millis(ms),
                    to: e.at,
                    title: format!(
                        "attempt {} failed after {ms} ms: {}",
                        f.attempt.map_or(0, |a| a.get()),
                        f.error.message
                    ),
                });
            }
            Ok(D::StepRetryScheduled(r)) if ours(r.idx) => {
                spans.push(Span {
                    class: "backoff",
                    from: e.at,
                    to: e.at + millis(r.delay_ms),
                    title: format!(
                        "back-off of {} ms before attempt {}",
                        r.delay_ms, r.next_attempt
                    ),
                });
            }
            Ok(D::WaitOpened(w)) if ours(w.idx) => open_wait = Some((e.at, w.kind.as_str())),
            Ok(D::WaitAnswered(w)) if ours(w.idx) => {
                let how = format!("answered {} by {}", w.answer.decision(), w.by);
                spans.extend(waited(open_wait.take(), e.at, how));
            }
            Ok(D::WaitExpired(w)) if ours(w.idx) => {
                spans.extend(waited(open_wait.take(), e.at, "expired".into()));
            }
            Ok(D::RunClaimed(c)) if c.took_over_step && ours(c.cursor) => {
                if let Some(sign) = last_sign.filter(|s| s.at < e.at) {
                    spans.push(lost(sign, e.at));
                }
                takeovers.push(e.at);
            }
            _ => {}
        }
        if holders_event(e.kind) {
            last_sign = Some(e);
        }
    }
    if let Some((from, kind)) = open_wait {
        spans.push(Span {
            class: "wait",
            from,
            to: end,
            title: format!("{kind}: waiting for a person"),
        });
    }
    (spans, takeovers)
}

/// A wait's stretch, from its opening to `to`, ended as `how` says.
fn waited(open: Option<(DateTime<Utc>, &str)>, to: DateTime<Utc>, how: String) -> Option<Span> {
    let (from, kind) = open?;
    Some(Span {
        class: "wait",
        from,
        to,
        title: format!("{kind}: {how}"),
    })
}

/// The time lost to a crash: from the dead holder's last sign of life to
/// the takeover at `to`.
fn lost(sign: &EventRecord, to: DateTime<Utc>) -> Span {
    Span {
        class: "lost",
        from: sign.at,
        to,
        title: format!(
            "lost to a crash: {} from the last sign of life of the process \
             that held the run ({} at {}) to the takeover",
            crate::duration(sign.at, to),
            sign.kind.as_str(),
            sign.at.format("%H:%M:%S%.3f")
        ),
    }
}

fn millis(ms: u64) -> Duration {
    Duration::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The stretches a step's children add to its row: each spawn to its join
/// (to `end` while undecided), of every attempt.
fn children_history(idx: u32, events: &[EventRecord], end: DateTime<Utc>) -> Vec<Span> {
    children_spans(idx, None, events, end)
        .into_iter()
        .map(|s| {
            let count = s.spawned.children;
            let how = match s.joined {
                None => "not joined yet".to_owned(),
                Some(j) => format!(
                    "joined ({}): {} of {} succeeded",
                    if j.met { "met" } else { "failed" },
                    j.ok,
                    j.total
                ),
            };
            Span {
                class: "children",
                from: s.from,
                to: s.to,
                title: format!(
                    "waiting for {count} children, {}: {how}",
                    crate::duration(s.from, s.to)
                ),
            }
        })
        .collect()
}

/// What a timeline draws: a run's steps, events, waits and children, on
/// its clock from `start` to `end`.
#[derive(Debug, Clone, Copy)]
pub struct Timeline<'a> {
    pub steps: &'a [StepRecord],
    pub events: &'a [EventRecord],
    pub waits: &'a [WaitRecord],
    pub children: &'a [ChildOutcome],
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// The run's clock as x coordinates.
#[derive(Debug, Clone, Copy)]
struct Axis {
    start: DateTime<Utc>,
    span: i64,
    scale: f64,
}

impl Axis {
    fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Axis {
        let span = (end - start).num_milliseconds().max(1);
        Axis {
            start,
            span,
            scale: (WIDTH - LABEL - 8.0) / span as f64,
        }
    }

    fn x(&self, t: DateTime<Utc>) -> f64 {
        LABEL + ((t - self.start).num_milliseconds().clamp(0, self.span) as f64) * self.scale
    }
}

/// A step's children drawn on the axis: each one's run page, status,
/// title, its bar's ends and its lane.
struct ChildBar<'a> {
    child: &'a ChildOutcome,
    from: f64,
    to: f64,
    lane: usize,
}

/// The drawn children of `kids` (at most [`MAX_CHILDREN_DRAWN`]), each from
/// its start to its end (`end` while it runs; the step's start if its
/// times are unknown), packed into lanes: each on the first lane free by
/// its start, at most [`MAX_LANES`] (then the one that frees first).
fn child_bars<'a>(
    kids: &[&'a ChildOutcome],
    axis: &Axis,
    step_from: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Vec<ChildBar<'a>> {
    let mut lane_ends: Vec<f64> = Vec::new();
    let mut bars = Vec::new();
    for child in kids.iter().take(MAX_CHILDREN_DRAWN) {
        let from = axis.x(child.created_at.unwrap_or(step_from));
        let to = axis
            .x(child.finished_at.unwrap_or(end))
            .max(from + CHILD_MIN);
        let free = lane_ends.iter().position(|e| *e < from);
        let lane = match free {
            Some(lane) => lane,
            None if lane_ends.len() < MAX_LANES => {
                lane_ends.push(0.0);
                lane_ends.len() - 1
            }
            None => (0..lane_ends.len())
                .min_by(|a, b| lane_ends[*a].total_cmp(&lane_ends[*b]))
                .unwrap_or(0),
        };
        lane_ends[lane] = lane_ends[lane].max(to);
        bars.push(ChildBar {
            child,
            from,
            to,
            lane,
        });
    }
    bars
}

/// The height of the line of children under a step's bar.
fn children_height(bars: &[ChildBar<'_>]) -> f64 {
    match bars.iter().map(|b| b.lane + 1).max() {
        None => 0.0,
        Some(lanes) => lanes as f64 * LANE + 4.0,
    }
}

/// The waterfall of `steps` between `start` and `end`, with what `events`
/// tell of each step's attempts, back-offs, waits, children and takeovers.
pub fn timeline_svg(t: &Timeline<'_>) -> Markup {
    let axis = Axis::new(t.start, t.end);
    let rows: Vec<(StepTime, Vec<ChildBar<'_>>)> = t
        .steps
        .iter()
        .map(|step| {
            let time = StepTime::of(step, t.events, t.waits, t.end);
            let kids: Vec<&ChildOutcome> = t
                .children
                .iter()
                .filter(|c| c.step == Some(step.idx))
                .collect();
            let bars = child_bars(&kids, &axis, time.from, t.end);
            (time, bars)
        })
        .collect();
    let mut tops = Vec::with_capacity(rows.len());
    let mut top = 0.0;
    for (_, bars) in &rows {
        tops.push(top);
        top += ROW + children_height(bars);
    }
    let height = top.max(ROW) + 24.0;
    html! {
        svg.timeline xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {WIDTH} {height}")) width=(WIDTH) height=(height) {
            title { "Timeline of " (t.steps.len()) " steps over " (crate::duration(t.start, t.end)) }
            @for (row, (step, (time, bars))) in t.steps.iter().zip(&rows).enumerate() {
                (step_row(step, time, t, &axis, tops[row] + 4.0))
                (children_line(bars, t.children.iter().filter(|c| c.step == Some(step.idx)).count(), tops[row] + ROW))
            }
            line x1=(LABEL) y1=(height - 18.0) x2=(WIDTH - 8.0) y2=(height - 18.0) {}
            text x=(LABEL) y=(height - 4.0) { "0" }
            text x=(WIDTH - 8.0) y=(height - 4.0) text-anchor="end" { (crate::duration(t.start, t.end)) }
        }
    }
}

/// One step's row at `y`: its label, its current attempt (from the start
/// of the step's time), then on top what the events add (failed attempts,
/// back-offs, waits for people and for children, time lost to a crash),
/// then the takeover marks.
fn step_row(step: &StepRecord, time: &StepTime, t: &Timeline<'_>, axis: &Axis, y: f64) -> Markup {
    let (mut spans, takeovers) = history(step.idx.get(), t.events, t.end);
    spans.extend(children_history(step.idx.get(), t.events, t.end));
    let from = axis.x(time.from);
    let to = axis.x(time.to).max(from + 2.0);
    html! {
        text x="4" y=(format!("{:.1}", y + BAR - 3.0)) {
            (step.idx.get()) " " (step.role.as_str())
        }
        g class=(format!("bar {}", step.status.as_str())) {
            title {
                "Step " (step.idx.get()) " " (step.role.as_str()) ": " (step.status.as_str())
                ", attempt " (step.attempt.get()) ", " (time.describe())
            }
            rect x=(format!("{from:.1}")) y=(format!("{y:.1}"))
                width=(format!("{:.1}", to - from)) height=(BAR) rx="2" {}
            @if step.attempt.get() > 1 {
                text.attempt x=(format!("{:.1}", to + 3.0)) y=(format!("{:.1}", y + BAR - 3.0)) {
                    "×" (step.attempt.get())
                }
            }
        }
        @for s in &spans {
            @let from = axis.x(s.from);
            g class=(format!("bar {}", s.class)) {
                title { "Step " (step.idx.get()) ": " (s.title) }
                rect x=(format!("{from:.1}")) y=(format!("{y:.1}"))
                    width=(format!("{:.1}", (axis.x(s.to) - from).max(2.0))) height=(BAR) rx="2" {}
            }
        }
        @for at in &takeovers {
            g.takeover {
                title { "Step " (step.idx.get()) ": taken over by another process" }
                line x1=(format!("{:.1}", axis.x(*at))) y1=(format!("{:.1}", y - 2.0))
                    x2=(format!("{:.1}", axis.x(*at))) y2=(format!("{:.1}", y + BAR + 2.0)) {}
            }
        }
    }
}

/// A step's children under its bar, each a bar on the run's clock from its
/// start to its end, coloured by its status and linked to its run page;
/// `total`: how many it started (those past the drawn ones are counted).
fn children_line(bars: &[ChildBar<'_>], total: usize, y: f64) -> Markup {
    html! {
        @if total > 0 {
            text.children x="16" y=(format!("{:.1}", y + LANE)) {
                (total) " children"
                @if total > bars.len() { ", " (bars.len()) " drawn" }
            }
            @for b in bars {
                a href=(format!("/runs/{}", b.child.run_id)) {
                    g class=(format!("bar child {}", b.child.status.as_str())) {
                        title { "Child " (b.child.key) ": " (b.child.status.as_str()) }
                        rect x=(format!("{:.1}", b.from)) y=(format!("{:.1}", y + b.lane as f64 * LANE))
                            width=(format!("{:.1}", b.to - b.from)) height=(CHILD) rx="1" {}
                    }
                }
            }
        }
    }
}

/// What each mark of the timeline means, each next to a small picture of
/// it (drawn as the timeline draws it).
pub fn timeline_legend() -> Markup {
    let bar = |class: &str| {
        html! {
            svg.swatch xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 14" width="24" height="14" aria-hidden="true" {
                g class=(format!("bar {class}")) { rect x="1" y="1" width="22" height="12" rx="2" {} }
            }
        }
    };
    let entries = [
        ("succeeded", bar("succeeded"), "attempt that succeeded"),
        ("running", bar("running"), "attempt in flight"),
        ("failed", bar("failed"), "failed attempt"),
        (
            "backoff",
            bar("backoff"),
            "back-off before the next attempt",
        ),
        (
            "wait",
            bar("wait"),
            "waiting for a person (review, approval, answer)",
        ),
        (
            "children",
            bar("children"),
            "waiting for children: from their spawn to their join",
        ),
        (
            "takeover",
            html! {
                svg.swatch xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 14" width="24" height="14" aria-hidden="true" {
                    g.takeover { line x1="12" y1="0" x2="12" y2="14" {} }
                }
            },
            "takeover: another process took the step over",
        ),
        (
            "lost",
            bar("lost"),
            "lost to a crash: from the dead holder's last sign of life to the takeover",
        ),
    ];
    html! {
        ul.legend aria-label="Timeline legend" {
            @for (class, picture, meaning) in entries {
                li class=(format!("legend-{class}")) { (picture) " " (meaning) }
            }
            li.legend-attempt { span.swatch-text { "×2" } " attempt number, when a step ran more than once" }
            li.legend-child {
                svg.swatch xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 14" width="24" height="14" aria-hidden="true" {
                    g class="bar child succeeded" { rect x="1" y="2" width="14" height="5" rx="1" {} }
                    g class="bar child running" { rect x="7" y="8" width="16" height="5" rx="1" {} }
                }
                " a child run the step started, from its start to its end, coloured by its status (a link to it)"
            }
        }
    }
}

#[cfg(test)]
mod tests;
