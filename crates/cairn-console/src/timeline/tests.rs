//! The timeline's tests: bars on the run's clock, what the events add,
//! children, the legend.

use super::*;
use crate::fixtures::event;
use cairn::{Role, StepIdx, StepStatus};

/// The timeline of `steps` with `events` and `children`, no waits.
fn draw(
    steps: &[StepRecord],
    events: &[EventRecord],
    children: &[ChildOutcome],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> String {
    timeline_svg(&Timeline {
        steps,
        events,
        waits: &[],
        children,
        start,
        end,
    })
    .into_string()
}

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
    let svg = draw(&steps, &[], &[], t0, t0 + Duration::milliseconds(1000));
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
    let svg = draw(
        &[step(1, StepStatus::Succeeded, 300, Some(800), t0)],
        &events,
        &[],
        t0,
        t0 + ms(1000),
    );
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

/// A child of step 0, started and ended at `times`, if known.
fn child(
    key: &str,
    status: cairn::RunStatus,
    times: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> ChildOutcome {
    ChildOutcome {
        key: key.into(),
        run_id: cairn::RunId::new(),
        status,
        output: None,
        error: None,
        tokens: 0,
        usage: cairn::Usage::default(),
        held: false,
        step: Some(StepIdx(0)),
        created_at: times.map(|t| t.0),
        finished_at: times.map(|t| t.1),
    }
}

#[test]
fn a_steps_children_are_bars_under_it_by_status_and_linked() {
    let t0 = Utc::now();
    let steps = [
        step(0, StepStatus::Succeeded, 0, Some(500), t0),
        step(2, StepStatus::Running, 500, None, t0),
    ];
    let kids = [
        child("a", cairn::RunStatus::Succeeded, None),
        child("b", cairn::RunStatus::Failed, None),
    ];
    let end = t0 + Duration::milliseconds(1000);
    let svg = draw(&steps, &[], &kids, t0, end);
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
    // Step 2's row sits below step 0's lines of children (two: both ran
    // at once).
    let below = ROW + 2.0 * LANE + 4.0 + 4.0;
    assert!(svg.contains(&format!(r#"y="{below:.1}""#)), "{svg}");
    let without = draw(&steps, &[], &[], t0, end);
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
        "waiting for children",
        "takeover",
        "lost to a crash",
        "a child run the step started",
    ] {
        assert!(legend.contains(meaning), "{meaning}: {legend}");
    }
    // Drawn with the timeline's own classes, without inline style.
    assert!(legend.contains(r#"class="bar lost""#) && !legend.contains("style="));
}

/// A `children` step: the claim at 0 ms, the spawn at 10, the join at 800,
/// the step woken again at 810 (where its stored row starts) and done at
/// 815; its children ran 10-500 and 10-800.
fn fan_out(t0: DateTime<Utc>) -> (StepRecord, Vec<EventRecord>, Vec<ChildOutcome>) {
    let ms = Duration::milliseconds;
    let events = vec![
        event(
            1,
            EventKind::RunClaimed,
            t0,
            serde_json::json!({"cursor": 0}),
        ),
        event(
            2,
            EventKind::ChildrenSpawned,
            t0 + ms(10),
            serde_json::json!({"idx": 0, "attempt": 1, "children": 2}),
        ),
        event(
            3,
            EventKind::ChildrenJoined,
            t0 + ms(800),
            serde_json::json!({"idx": 0, "attempt": 1, "met": true, "ok": 2, "total": 2}),
        ),
        event(
            4,
            EventKind::RunClaimed,
            t0 + ms(810),
            serde_json::json!({"cursor": 0}),
        ),
    ];
    let kids = vec![
        child(
            "a",
            cairn::RunStatus::Succeeded,
            Some((t0 + ms(10), t0 + ms(500))),
        ),
        child(
            "b",
            cairn::RunStatus::Succeeded,
            Some((t0 + ms(10), t0 + ms(800))),
        ),
    ];
    (
        step(0, StepStatus::Succeeded, 810, Some(815), t0),
        events,
        kids,
    )
}

/// Equal as drawn (to a tenth of a pixel, give or take rounding).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.11
}

/// The rect of the first `<g class="{class}">` in `svg`: (x, y, width).
fn rect_of(svg: &str, class: &str) -> (f64, f64, f64) {
    let g = &svg[svg
        .find(&format!(r#"class="{class}""#))
        .unwrap_or_else(|| panic!("{class}: {svg}"))..];
    let rect = &g[g.find("<rect").unwrap_or(0)..];
    let attr = |name: &str| -> f64 {
        rect.split(&format!(r#" {name}=""#))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    (attr("x"), attr("y"), attr("width"))
}

#[test]
fn a_children_step_is_drawn_from_spawn_to_join_with_its_children_on_the_clock() {
    let t0 = Utc::now();
    let (fan, events, kids) = fan_out(t0);
    let end = t0 + Duration::milliseconds(1000);
    let svg = draw(std::slice::from_ref(&fan), &events, &kids, t0, end);
    let axis = Axis::new(t0, end);
    let at = |ms: i64| axis.x(t0 + Duration::milliseconds(ms));
    // Waiting for children, spawn to join.
    let (x, y, width) = rect_of(&svg, "bar children");
    assert!(close(x, at(10)) && y == 4.0, "{svg}");
    assert!(close(x + width, at(800)), "{x} + {width}: {svg}");
    assert!(svg.contains("waiting for 2 children"), "{svg}");
    // The step's bar covers its whole time, from the claim that spawned.
    let (x, _, width) = rect_of(&svg, "bar succeeded");
    assert!(close(x, at(0)), "{svg}");
    assert!(close(x + width, at(815)), "{x} + {width}: {svg}");
    // Each child from its start to its end, on the run's clock, not
    // lined up at the axis' left edge; both ran at once: two lanes.
    let bars: Vec<(f64, f64, f64)> = svg
        .match_indices(r#"class="bar child succeeded""#)
        .map(|(i, _)| rect_of(&svg[i..], "bar child succeeded"))
        .collect();
    assert_eq!(bars.len(), 2, "{svg}");
    assert!(bars.iter().all(|b| close(b.0, at(10))), "{bars:?}");
    assert!(close(bars[0].2, at(500) - at(10)), "{bars:?}");
    assert!(close(bars[1].2, at(800) - at(10)), "{bars:?}");
    assert_eq!(bars[1].1 - bars[0].1, LANE, "{bars:?}");
    // And its time, by the one rule: its children's time is its own.
    let time = StepTime::of(&fan, &events, &[], end);
    assert_eq!(
        (time.ran_ms(), time.children_ms, time.waited_ms),
        (815, 790, 0)
    );
}

/// A step still waiting for its children: its stored row ended at the
/// spawn, but its time runs on to now (found in `cairn run` of a fan-out
/// stopped by its parent's budget, which printed `0 ms`).
#[test]
fn a_step_still_waiting_for_its_children_counts_their_time_to_now() {
    let t0 = Utc::now();
    let (_, mut events, _) = fan_out(t0);
    events.truncate(2); // claimed, spawned: no join yet
    let waiting = step(0, StepStatus::Waiting, 10, Some(10), t0);
    let now = t0 + Duration::milliseconds(1000);
    let time = StepTime::of(&waiting, &events, &[], now);
    assert_eq!(
        (time.ran_ms(), time.children_ms, time.waited_ms),
        (1000, 990, 0)
    );
}

#[test]
fn an_answered_reviews_wait_is_drawn_over_the_attempt_in_the_legends_amber() {
    let t0 = Utc::now();
    let ms = Duration::milliseconds;
    let events = [
        event(
            1,
            EventKind::WaitOpened,
            t0 + ms(100),
            serde_json::json!({"idx": 0, "kind": "review"}),
        ),
        event(
            2,
            EventKind::WaitAnswered,
            t0 + ms(900),
            serde_json::json!({"idx": 0, "answer": {"decision": "approve"}, "by": "ann"}),
        ),
    ];
    let reviewed = step(0, StepStatus::Succeeded, 0, Some(900), t0);
    let svg = draw(&[reviewed], &events, &[], t0, t0 + ms(1000));
    // The wait comes after the attempt's bar, so it is drawn over it.
    let attempt = svg.find(r#"class="bar succeeded""#);
    let wait = svg.find(r#"class="bar wait""#);
    assert!(
        attempt.is_some() && attempt < wait,
        "the attempt's green covers the wait: {svg}"
    );
}
