//! The timeline: a waterfall of a run's steps drawn as SVG on the server,
//! on the run's own clock (created → finished, or now). Each step's row
//! shows, from the run's events, its earlier failed attempts, the durable
//! back-offs between them, the waits for people (to their answer, with who
//! answered how) and takeovers (a mark where another process took the step
//! over, after a band for the time lost to the crash: from the dead
//! holder's last sign of life, its last recorded event, to the takeover);
//! then the current attempt, from its start to its end (now, for one in
//! flight), coloured by its status. A step that started child runs has a
//! second line: a square per child, coloured by the child's status and
//! linked to it. [`timeline_legend`] says what each mark means.

use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

use cairn::{ChildOutcome, EventKind, EventRecord, StepRecord};

const WIDTH: f64 = 720.0;
const LABEL: f64 = 160.0;
const ROW: f64 = 22.0;
const BAR: f64 = 14.0;
/// The line of a step's children, and one child's square on it.
const CHILD_ROW: f64 = 14.0;
const CHILD: f64 = 9.0;
/// Squares drawn per step; the rest are counted.
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
    let of_step = |e: &EventRecord, key: &str| e.data[key].as_u64() == Some(u64::from(idx));
    let mut spans = Vec::new();
    let mut takeovers = Vec::new();
    let mut open_wait: Option<(DateTime<Utc>, String)> = None;
    // The newest event of a process that held the run.
    let mut last_sign: Option<&EventRecord> = None;
    for e in events {
        match e.kind {
            EventKind::StepFailed if of_step(e, "idx") => {
                let ms = e.data["duration_ms"].as_i64().unwrap_or(0);
                let message = e.data["error"]["message"].as_str().unwrap_or("");
                spans.push(Span {
                    class: "failed",
                    from: e.at - Duration::milliseconds(ms),
                    to: e.at,
                    title: format!(
                        "attempt {} failed after {ms} ms: {message}",
                        e.data["attempt"].as_u64().unwrap_or(0)
                    ),
                });
            }
            EventKind::StepRetryScheduled if of_step(e, "idx") => {
                let ms = e.data["delay_ms"].as_i64().unwrap_or(0);
                spans.push(Span {
                    class: "backoff",
                    from: e.at,
                    to: e.at + Duration::milliseconds(ms),
                    title: format!(
                        "back-off of {ms} ms before attempt {}",
                        e.data["next_attempt"].as_u64().unwrap_or(0)
                    ),
                });
            }
            EventKind::WaitOpened if of_step(e, "idx") => {
                let kind = e.data["kind"].as_str().unwrap_or("wait").to_owned();
                open_wait = Some((e.at, kind));
            }
            EventKind::WaitAnswered | EventKind::WaitExpired if of_step(e, "idx") => {
                if let Some((from, kind)) = open_wait.take() {
                    let how = match e.kind {
                        EventKind::WaitExpired => "expired".to_owned(),
                        _ => format!(
                            "answered {} by {}",
                            e.data["answer"]["decision"].as_str().unwrap_or("?"),
                            e.data["by"].as_str().unwrap_or("?")
                        ),
                    };
                    spans.push(Span {
                        class: "wait",
                        from,
                        to: e.at,
                        title: format!("{kind}: {how}"),
                    });
                }
            }
            EventKind::RunClaimed if e.data["took_over_step"] == true && of_step(e, "cursor") => {
                if let Some(sign) = last_sign.filter(|s| s.at < e.at) {
                    spans.push(Span {
                        class: "lost",
                        from: sign.at,
                        to: e.at,
                        title: format!(
                            "lost to a crash: {} from the last sign of life of the process \
                             that held the run ({} at {}) to the takeover",
                            crate::duration(sign.at, e.at),
                            sign.kind.as_str(),
                            sign.at.format("%H:%M:%S%.3f")
                        ),
                    });
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

/// The waterfall of `steps` between `start` and `end`, with what `events`
/// tell of each step's attempts, back-offs, waits and takeovers.
pub fn timeline_svg(
    steps: &[StepRecord],
    events: &[EventRecord],
    children: &[ChildOutcome],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Markup {
    let span = ((end - start).num_milliseconds().max(1)) as f64;
    let scale = (WIDTH - LABEL - 8.0) / span;
    let x = |t: DateTime<Utc>| {
        LABEL + ((t - start).num_milliseconds().clamp(0, span as i64) as f64) * scale
    };
    let kids = |step: &StepRecord| -> Vec<&ChildOutcome> {
        children
            .iter()
            .filter(|c| c.step == Some(step.idx))
            .collect()
    };
    let mut tops = Vec::with_capacity(steps.len());
    let mut top = 0.0;
    for step in steps {
        tops.push(top);
        top += ROW
            + if kids(step).is_empty() {
                0.0
            } else {
                CHILD_ROW
            };
    }
    let height = top.max(ROW) + 24.0;
    html! {
        svg.timeline xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {WIDTH} {height}")) width=(WIDTH) height=(height) {
            title { "Timeline of " (steps.len()) " steps over " (crate::duration(start, end)) }
            @for (row, step) in steps.iter().enumerate() {
                @let y = tops[row] + 4.0;
                @let (spans, takeovers) = history(step.idx.get(), events, end);
                text x="4" y=(format!("{:.1}", y + BAR - 3.0)) {
                    (step.idx.get()) " " (step.role.as_str())
                }
                @for s in &spans {
                    @let from = x(s.from);
                    g class=(format!("bar {}", s.class)) {
                        title { "Step " (step.idx.get()) ": " (s.title) }
                        rect x=(format!("{from:.1}")) y=(format!("{y:.1}"))
                            width=(format!("{:.1}", (x(s.to) - from).max(2.0))) height=(BAR) rx="2" {}
                    }
                }
                @let from = x(step.started_at);
                @let to = x(step.finished_at.unwrap_or(end)).max(from + 2.0);
                g class=(format!("bar {}", step.status.as_str())) {
                    title {
                        "Step " (step.idx.get()) " " (step.role.as_str()) ": " (step.status.as_str())
                        ", attempt " (step.attempt.get()) ", "
                        (crate::duration(step.started_at, step.finished_at.unwrap_or(end)))
                    }
                    rect x=(format!("{from:.1}")) y=(format!("{y:.1}"))
                        width=(format!("{:.1}", to - from)) height=(BAR) rx="2" {}
                    @if step.attempt.get() > 1 {
                        text.attempt x=(format!("{:.1}", to + 3.0)) y=(format!("{:.1}", y + BAR - 3.0)) {
                            "×" (step.attempt.get())
                        }
                    }
                }
                @for at in &takeovers {
                    g.takeover {
                        title { "Step " (step.idx.get()) ": taken over by another process" }
                        line x1=(format!("{:.1}", x(*at))) y1=(format!("{:.1}", y - 2.0))
                            x2=(format!("{:.1}", x(*at))) y2=(format!("{:.1}", y + BAR + 2.0)) {}
                    }
                }
                (children_line(&kids(step), y + ROW - 2.0))
            }
            line x1=(LABEL) y1=(height - 18.0) x2=(WIDTH - 8.0) y2=(height - 18.0) {}
            text x=(LABEL) y=(height - 4.0) { "0" }
            text x=(WIDTH - 8.0) y=(height - 4.0) text-anchor="end" { (crate::duration(start, end)) }
        }
    }
}

/// A step's children as a line of squares under its bar, each coloured by
/// the child's status and linked to its run page.
fn children_line(kids: &[&ChildOutcome], y: f64) -> Markup {
    let more = kids.len().saturating_sub(MAX_CHILDREN_DRAWN);
    html! {
        @if !kids.is_empty() {
            text.children x="16" y=(format!("{:.1}", y + CHILD - 1.0)) { (kids.len()) " children" }
            @for (i, c) in kids.iter().take(MAX_CHILDREN_DRAWN).enumerate() {
                a href=(format!("/runs/{}", c.run_id)) {
                    g class=(format!("bar child {}", c.status.as_str())) {
                        title { "Child " (c.key) ": " (c.status.as_str()) }
                        rect x=(format!("{:.1}", LABEL + i as f64 * (CHILD + 2.0))) y=(format!("{y:.1}"))
                            width=(CHILD) height=(CHILD) rx="1" {}
                    }
                }
            }
            @if more > 0 {
                text.children x=(format!("{:.1}", LABEL + MAX_CHILDREN_DRAWN as f64 * (CHILD + 2.0) + 4.0))
                    y=(format!("{:.1}", y + CHILD - 1.0)) { "+" (more) }
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
                    g class="bar child succeeded" { rect x="1" y="3" width="9" height="9" rx="1" {} }
                    g class="bar child running" { rect x="13" y="3" width="9" height="9" rx="1" {} }
                }
                " a child run the step started, coloured by its status (a link to it)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn::{Role, StepIdx, StepStatus};

    fn step(
        idx: u32,
        status: StepStatus,
        from_ms: i64,
        to_ms: Option<i64>,
        t0: DateTime<Utc>,
    ) -> StepRecord {
        StepRecord {
            idx: StepIdx(idx),
            role: Role::new(format!("r<{idx}>")),
            status,
            attempt: cairn::Attempt(if idx == 1 { 2 } else { 1 }),
            output: None,
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            started_at: t0 + Duration::milliseconds(from_ms),
            finished_at: to_ms.map(|ms| t0 + Duration::milliseconds(ms)),
            error: None,
            takeovers: 0,
        }
    }

    #[test]
    fn bars_sit_on_the_runs_clock_and_text_is_escaped() {
        let t0 = Utc::now();
        let steps = [
            step(0, StepStatus::Succeeded, 0, Some(500), t0),
            step(1, StepStatus::Running, 500, None, t0),
        ];
        let svg =
            timeline_svg(&steps, &[], &[], t0, t0 + Duration::milliseconds(1000)).into_string();
        // Step 0 takes the first half of the drawable width, step 1 the rest.
        let half = LABEL + (WIDTH - LABEL - 8.0) / 2.0;
        assert!(
            svg.contains(&format!(
                r#"x="{LABEL:.1}" y="4.0" width="{:.1}""#,
                half - LABEL
            )),
            "{svg}"
        );
        assert!(svg.contains(&format!(r#"x="{half:.1}""#)), "{svg}");
        assert!(svg.contains(r#"class="bar succeeded""#) && svg.contains(r#"class="bar running""#));
        // A retried step says so.
        assert!(svg.contains("×2"), "{svg}");
        // Roles are escaped, never raw markup.
        assert!(svg.contains("r&lt;1&gt;") && !svg.contains("r<1>"), "{svg}");
    }

    fn event(seq: i64, kind: EventKind, at: DateTime<Utc>, data: serde_json::Value) -> EventRecord {
        EventRecord {
            run_id: cairn::RunId::new(),
            seq,
            at,
            kind,
            data,
        }
    }

    #[test]
    fn failed_attempts_back_offs_waits_and_takeovers_come_from_the_events() {
        let t0 = Utc::now();
        let ms = Duration::milliseconds;
        let events = [
            event(
                1,
                EventKind::StepFailed,
                t0 + ms(100),
                serde_json::json!({"idx": 1, "attempt": 1, "duration_ms": 100, "error": {"message": "503"}}),
            ),
            event(
                2,
                EventKind::StepRetryScheduled,
                t0 + ms(100),
                serde_json::json!({"idx": 1, "next_attempt": 2, "delay_ms": 200}),
            ),
            event(
                3,
                EventKind::RunClaimed,
                t0 + ms(300),
                serde_json::json!({"cursor": 1, "took_over_step": false}),
            ),
            event(
                4,
                EventKind::RunClaimed,
                t0 + ms(400),
                serde_json::json!({"cursor": 1, "took_over_step": true}),
            ),
            event(
                5,
                EventKind::WaitOpened,
                t0 + ms(500),
                serde_json::json!({"idx": 1, "kind": "review"}),
            ),
            event(
                6,
                EventKind::WaitAnswered,
                t0 + ms(700),
                serde_json::json!({"idx": 1, "answer": {"decision": "approve"}, "by": "ann"}),
            ),
            event(
                7,
                EventKind::StepFailed,
                t0 + ms(50),
                serde_json::json!({"idx": 0, "attempt": 1, "duration_ms": 50}),
            ),
        ];
        let (spans, takeovers) = history(1, &events, t0 + ms(1000));
        let drawn: Vec<(&str, i64, i64)> = spans
            .iter()
            .map(|s| {
                (
                    s.class,
                    (s.from - t0).num_milliseconds(),
                    (s.to - t0).num_milliseconds(),
                )
            })
            .collect();
        assert_eq!(
            drawn,
            vec![
                ("failed", 0, 100),
                ("backoff", 100, 300),
                // From the claim of the process that died to the takeover.
                ("lost", 300, 400),
                ("wait", 500, 700)
            ]
        );
        assert!(
            spans[2].title.contains("lost to a crash") && spans[2].title.contains("run_claimed"),
            "{}",
            spans[2].title
        );
        assert!(
            spans[3].title.contains("approve by ann"),
            "{}",
            spans[3].title
        );
        assert_eq!(
            takeovers,
            vec![t0 + ms(400)],
            "only the claim that took the step over"
        );
        let svg = timeline_svg(
            &[step(1, StepStatus::Succeeded, 300, Some(800), t0)],
            &events,
            &[],
            t0,
            t0 + ms(1000),
        )
        .into_string();
        for class in [
            "bar failed",
            "bar backoff",
            "bar wait",
            "bar lost",
            "takeover",
        ] {
            assert!(svg.contains(class), "{class}: {svg}");
        }
    }

    /// The lost band starts at the dead holder's newest event, not at an
    /// operator's event in between, and a takeover of another step draws
    /// none on this one.
    #[test]
    fn the_time_lost_to_a_crash_runs_from_the_holders_last_event_to_the_takeover() {
        let t0 = Utc::now();
        let ms = Duration::milliseconds;
        let events = [
            event(
                1,
                EventKind::RunClaimed,
                t0,
                serde_json::json!({"cursor": 0, "took_over_step": false}),
            ),
            event(
                2,
                EventKind::StepSucceeded,
                t0 + ms(100),
                serde_json::json!({"idx": 0}),
            ),
            event(
                3,
                EventKind::ModelCalled,
                t0 + ms(250),
                serde_json::json!({"idx": 1}),
            ),
            event(
                4,
                EventKind::RunCancelRequested,
                t0 + ms(300),
                serde_json::json!({"by": "ann"}),
            ),
            event(
                5,
                EventKind::RunClaimed,
                t0 + ms(35_250),
                serde_json::json!({"cursor": 1, "took_over_step": true}),
            ),
        ];
        let (spans, takeovers) = history(1, &events, t0 + ms(40_000));
        assert_eq!(takeovers, vec![t0 + ms(35_250)]);
        assert_eq!(spans.len(), 1);
        assert_eq!(
            (spans[0].class, spans[0].from, spans[0].to),
            ("lost", t0 + ms(250), t0 + ms(35_250))
        );
        assert!(spans[0].title.contains("35.0 s"), "{}", spans[0].title);
        let (others, _) = history(0, &events, t0 + ms(40_000));
        assert!(others.is_empty(), "step 0 was not taken over");
    }

    #[test]
    fn a_steps_children_are_squares_under_it_by_status_and_linked() {
        let t0 = Utc::now();
        let steps = [
            step(0, StepStatus::Succeeded, 0, Some(500), t0),
            step(2, StepStatus::Running, 500, None, t0),
        ];
        let child = |key: &str, status: cairn::RunStatus| ChildOutcome {
            key: key.into(),
            run_id: cairn::RunId::new(),
            status,
            output: None,
            error: None,
            tokens: 0,
            usage: cairn::Usage::default(),
            held: false,
            step: Some(StepIdx(0)),
        };
        let kids = [
            child("a", cairn::RunStatus::Succeeded),
            child("b", cairn::RunStatus::Failed),
        ];
        let end = t0 + Duration::milliseconds(1000);
        let svg = timeline_svg(&steps, &[], &kids, t0, end).into_string();
        for c in &kids {
            assert!(
                svg.contains(&format!(r#"href="/runs/{}""#, c.run_id)),
                "{svg}"
            );
        }
        assert!(svg.contains(r#"class="bar child succeeded""#), "{svg}");
        assert!(svg.contains(r#"class="bar child failed""#), "{svg}");
        assert!(
            svg.contains("Child b: failed") && svg.contains("2 children"),
            "{svg}"
        );
        // Step 2's row sits below step 0's line of children.
        let below = ROW + CHILD_ROW + 4.0;
        assert!(svg.contains(&format!(r#"y="{below:.1}""#)), "{svg}");
        let without = timeline_svg(&steps, &[], &[], t0, end).into_string();
        assert!(!without.contains("children") && !without.contains(&format!(r#"y="{below:.1}""#)));
    }

    #[test]
    fn the_legend_names_every_mark() {
        let legend = timeline_legend().into_string();
        for meaning in [
            "attempt that succeeded",
            "failed attempt",
            "back-off",
            "waiting for a person",
            "takeover",
            "lost to a crash",
            "a child run the step started",
        ] {
            assert!(legend.contains(meaning), "{meaning}: {legend}");
        }
        // Drawn with the timeline's own classes, without inline style.
        assert!(legend.contains(r#"class="bar lost""#) && !legend.contains("style="));
    }
}
