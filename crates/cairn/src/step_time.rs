//! How long a step took, by the one rule every reader uses (the console's
//! pages, `cairn runs show`, the crews page's means): time waiting for a
//! person is left out and shown on its own; time waiting for children is
//! the step's own, since its children do its work. A step's time runs from
//! the start of its current attempt (for a step that started children, of
//! the attempt that started them: the stored row starts again when the
//! join wakes the step) to its end, or now.

use chrono::{DateTime, Utc};

use crate::event::payload::{ChildrenJoined, ChildrenSpawned};
use crate::{
    Attempt, EventData, EventKind, EventRecord, StepIdx, StepRecord, StepStatus, WaitRecord,
    WaitStatus,
};

/// How long `waits` (of one run) kept it waiting for people within
/// `from..to`: each from its opening to its answer (to `now` while open),
/// clipped to the span. As `cairn runs show` computes a step's `waited`.
pub fn waited_between<'a>(
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

/// A stretch of a step waiting for its children: from their spawn to their
/// join (`joined`: `None` while it is not decided; `to` is then the end
/// the caller gave).
pub struct ChildrenSpan {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub spawned: ChildrenSpawned,
    pub joined: Option<ChildrenJoined>,
}

/// Step `idx`'s stretches waiting for children, of `attempt` (of every
/// attempt when `None`), in order: each `children_spawned` to the
/// `children_joined` of the same attempt that follows it, or to `end`.
pub fn children_spans(
    idx: u32,
    attempt: Option<u32>,
    events: &[EventRecord],
    end: DateTime<Utc>,
) -> Vec<ChildrenSpan> {
    let of = |i: StepIdx, a: Attempt| i.get() == idx && attempt.is_none_or(|want| a.get() == want);
    let mut spans: Vec<ChildrenSpan> = Vec::new();
    for e in events {
        if !matches!(
            e.kind,
            EventKind::ChildrenSpawned | EventKind::ChildrenJoined
        ) {
            continue;
        }
        match e.payload() {
            Ok(EventData::ChildrenSpawned(s)) if of(s.idx, s.attempt) => spans.push(ChildrenSpan {
                from: e.at,
                to: end.max(e.at),
                spawned: s,
                joined: None,
            }),
            Ok(EventData::ChildrenJoined(j)) if of(j.idx, j.attempt) => {
                let open = spans
                    .iter_mut()
                    .rev()
                    .find(|s| s.joined.is_none() && s.spawned.attempt == j.attempt);
                if let Some(open) = open {
                    open.to = e.at;
                    open.joined = Some(j);
                }
            }
            _ => {}
        }
    }
    spans
}

/// How long a step took, by the one rule (see the module): its
/// stretch, and of it the time it waited for a person and for children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepTime {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Waiting for a person (reviews, approvals, answers): left out.
    pub waited_ms: i64,
    /// Waiting for its children, spawn to join: its own time.
    pub children_ms: i64,
}

impl StepTime {
    /// The time of `step`, from its run's `events` and `waits` (another
    /// run's are ignored only by step index: pass one run's).
    pub fn of(
        step: &StepRecord,
        events: &[EventRecord],
        waits: &[WaitRecord],
        now: DateTime<Utc>,
    ) -> StepTime {
        let (idx, attempt) = (step.idx.get(), Some(step.attempt.get()));
        // A step waiting for its children carries a finished time from
        // its spawn; its time runs on to now until the join wakes it.
        let waiting_for_children = step.status == StepStatus::Waiting
            && children_spans(idx, attempt, events, now)
                .last()
                .is_some_and(|s| s.joined.is_none());
        let to = match (waiting_for_children, step.finished_at) {
            (true, _) | (_, None) => now,
            (false, Some(at)) => at,
        }
        .max(step.started_at);
        let spans = children_spans(idx, attempt, events, to);
        // The claim that started the attempt which spawned the children.
        let from = spans.first().map_or(step.started_at, |first| {
            let claimed = events
                .iter()
                .filter(|e| e.kind == EventKind::RunClaimed && e.at <= first.from)
                .filter(
                    |e| matches!(e.payload(), Ok(EventData::RunClaimed(c)) if c.cursor == step.idx),
                )
                .map(|e| e.at)
                .next_back();
            claimed.unwrap_or(first.from).min(step.started_at)
        });
        let children_ms = spans
            .iter()
            .map(|s| (s.to.min(to) - s.from.max(from)).num_milliseconds().max(0))
            .sum();
        let own = waits.iter().filter(|w| w.step_idx == step.idx);
        StepTime {
            from,
            to,
            waited_ms: waited_between(own, from, to, now),
            children_ms,
        }
    }

    /// Its time without the time it waited for a person.
    pub fn ran_ms(&self) -> i64 {
        ((self.to - self.from).num_milliseconds() - self.waited_ms).max(0)
    }

    /// `1.2 s`, `4.0 s, 3.9 s of it waiting for children`, with `, waited
    /// 3 h 0 min for a person` when it did.
    pub fn describe(&self) -> String {
        let mut text = crate::text::duration_ms(self.ran_ms());
        if self.children_ms > 0 {
            text += &format!(
                ", {} of it waiting for children",
                crate::text::duration_ms(self.children_ms)
            );
        }
        if self.waited_ms > 0 {
            text += &format!(
                ", waited {} for a person",
                crate::text::duration_ms(self.waited_ms)
            );
        }
        text
    }
}
