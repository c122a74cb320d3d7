//! How long things took, as the pages print it. A step's time is
//! [`cairn::StepTime`], the rule `cairn runs show` prints by too; a run's
//! leaves out the time it waited for people.

use chrono::{DateTime, Utc};

use cairn::step_time::waited_between;
use cairn::WaitRecord;

/// `12 ms`, `1.2 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`.
pub(crate) fn duration(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    millis((to - from).num_milliseconds())
}

/// [`duration`] of a number of milliseconds (negative: 0): the one rule
/// the CLI prints by too (`cairn::text::duration_ms`).
pub(crate) fn millis(ms: i64) -> String {
    cairn::text::duration_ms(ms)
}

/// A run's duration without the time it waited for people: `2.0 s`, or
/// `ran 2.0 s, waited 3 h 0 min` when it waited. `waits` may hold other
/// runs' waits too.
pub(crate) fn run_time(run: &cairn::RunRecord, waits: &[WaitRecord], now: DateTime<Utc>) -> String {
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
