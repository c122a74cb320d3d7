//! The timeline: a waterfall of a run's steps drawn as SVG on the server,
//! one bar per step from its start to its end (now, for one in flight), on
//! the run's own clock (created → finished, or now). A step's attempts
//! show as its attempt count; a bar's colour is its status.

use chrono::{DateTime, Utc};
use maud::{html, Markup};

use cairn::StepRecord;

const WIDTH: f64 = 720.0;
const LABEL: f64 = 160.0;
const ROW: f64 = 22.0;
const BAR: f64 = 14.0;

/// The waterfall of `steps` between `start` and `end`.
pub fn timeline_svg(steps: &[StepRecord], start: DateTime<Utc>, end: DateTime<Utc>) -> Markup {
    let span = ((end - start).num_milliseconds().max(1)) as f64;
    let scale = (WIDTH - LABEL - 8.0) / span;
    let x = |t: DateTime<Utc>| LABEL + ((t - start).num_milliseconds().max(0) as f64) * scale;
    let height = ROW * steps.len().max(1) as f64 + 24.0;
    html! {
        svg.timeline xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {WIDTH} {height}")) width=(WIDTH) height=(height) {
            title { "Timeline of " (steps.len()) " steps over " (crate::duration(start, end)) }
            @for (row, step) in steps.iter().enumerate() {
                @let y = row as f64 * ROW + 4.0;
                @let from = x(step.started_at);
                @let to = x(step.finished_at.unwrap_or(end)).max(from + 2.0);
                g class=(format!("bar {}", step.status.as_str())) {
                    title {
                        "Step " (step.idx.get()) " " (step.role.as_str()) ": " (step.status.as_str())
                        ", attempt " (step.attempt.get()) ", "
                        (crate::duration(step.started_at, step.finished_at.unwrap_or(end)))
                    }
                    text x="4" y=(format!("{:.1}", y + BAR - 3.0)) {
                        (step.idx.get()) " " (step.role.as_str())
                    }
                    rect x=(format!("{from:.1}")) y=(format!("{y:.1}"))
                        width=(format!("{:.1}", to - from)) height=(BAR) rx="2" {}
                    @if step.attempt.get() > 1 {
                        text.attempt x=(format!("{:.1}", to + 3.0)) y=(format!("{:.1}", y + BAR - 3.0)) {
                            "×" (step.attempt.get())
                        }
                    }
                }
            }
            line x1=(LABEL) y1=(height - 18.0) x2=(WIDTH - 8.0) y2=(height - 18.0) {}
            text x=(LABEL) y=(height - 4.0) { "0" }
            text x=(WIDTH - 8.0) y=(height - 4.0) text-anchor="end" { (crate::duration(start, end)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn::{Role, StepIdx, StepStatus};
    use chrono::Duration;

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
        let svg = timeline_svg(&steps, t0, t0 + Duration::milliseconds(1000)).into_string();
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
}
