//! The line that confirms what a console form did. A form's redirect names
//! what it did in the query (`?done=answer&wait=ID`, `?done=cancel`, …, see
//! [`Done`]); the page it lands on says what happened in a line at its
//! top, read from the stored records (the answered wait, the run's newest
//! event of that action), never from the URL: a link someone crafted can
//! only show what is true, and shows nothing when it did not happen. No
//! cookie is involved, and a reload shows the line again.

use maud::{html, Markup};

use cairn::event::payload::RunCancelled;
use cairn::{
    Actor, Answer, EventData, EventData as D, EventKind, EventRecord, WaitId, WaitKind, WaitRecord,
    WaitStatus,
};

/// What a console form did, as its redirect's query names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// A wait was answered.
    Answer(WaitId),
    Retry,
    Continue,
    Cancel,
    /// The budget was raised (and what it stopped carried on).
    Budget,
    /// The run was forked: the new run's page says so.
    Fork,
    /// A signal was sent to the run.
    Signal,
}

impl Done {
    /// From the query's `done` (and `wait`, for an answer); `None` for
    /// anything else.
    pub fn parse(done: Option<&str>, wait: Option<&str>) -> Option<Done> {
        match done? {
            "answer" => wait?.parse().ok().map(Done::Answer),
            "retry" => Some(Done::Retry),
            "continue" => Some(Done::Continue),
            "cancel" => Some(Done::Cancel),
            "budget" => Some(Done::Budget),
            "fork" => Some(Done::Fork),
            "signal" => Some(Done::Signal),
            _ => None,
        }
    }

    /// The query string a redirect carries: `done=answer&wait=ID`.
    pub fn query(&self) -> String {
        let name = match self {
            Done::Answer(wait) => return format!("done=answer&wait={wait}"),
            Done::Retry => "retry",
            Done::Continue => "continue",
            Done::Cancel => "cancel",
            Done::Budget => "budget",
            Done::Fork => "fork",
            Done::Signal => "signal",
        };
        format!("done={name}")
    }
}

/// The confirmation line, as a page shows it.
pub(crate) fn flash(line: Markup) -> Markup {
    html! { p.flash role="status" { (line) } }
}

/// ` by console (“why”)`: who did it and the reason given, from an event's
/// or a wait's data.
fn by(who: Option<&str>, reason: Option<&str>) -> String {
    let mut text = format!(" by {}", who.unwrap_or("?"));
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        text += &format!(" (“{reason}”)");
    }
    text
}

/// What answering `wait` (of a step of `role`) did, once it is answered.
pub(crate) fn answered(wait: &WaitRecord, role: &str) -> Option<String> {
    if wait.status != WaitStatus::Answered {
        return None;
    }
    let step = format!("step {} ({role})", wait.step_idx.get());
    let what = match (wait.kind, wait.answer.as_ref()?) {
        (WaitKind::Review, Answer::Approve) => {
            format!("Approved the review of {step}: its output is committed and the run goes on.")
        }
        (WaitKind::Review, Answer::Edit { .. }) => {
            format!("Committed your edit of {step}'s output: the run goes on.")
        }
        (WaitKind::Review, Answer::Reject { feedback }) => format!(
            "Rejected the review of {step} with the feedback “{feedback}”: the step runs again."
        ),
        (WaitKind::Approval, Answer::Approve) => format!("Approved {step}: it runs now."),
        (WaitKind::Approval, Answer::Reject { feedback }) => {
            format!("Rejected {step} (“{feedback}”): it does not run, and the run fails.")
        }
        (_, Answer::Answer { .. }) => {
            format!("Answered the question of {step}: the step goes on with the answer.")
        }
        _ => format!("Answered the {} of {step}.", wait.kind.as_str()),
    };
    let at = wait
        .answered_at
        .map(|t| format!(", at {}", t.format("%H:%M:%S")))
        .unwrap_or_default();
    Some(format!(
        "{what} Answered{}{at}.",
        by(wait.answered_by.as_deref(), None)
    ))
}

/// What a run action did, from the run's newest event of it that names
/// who did it; `None` when the run has none (the action did not happen).
pub(crate) fn run_action(done: Done, events: &[EventRecord]) -> Option<String> {
    let kinds: &[EventKind] = match done {
        Done::Answer(_) => return None,
        Done::Retry => &[EventKind::RunRetried],
        Done::Continue => &[EventKind::RunContinued],
        Done::Cancel => &[EventKind::RunCancelled, EventKind::RunCancelRequested],
        Done::Budget => &[EventKind::BudgetRaised],
        Done::Fork => &[EventKind::RunForked],
        Done::Signal => &[EventKind::SignalReceived],
    };
    // A person's: the engine's own `run_cancelled` after a requested
    // cancel names nobody.
    let (e, data, actor) = events
        .iter()
        .rev()
        .filter(|e| kinds.contains(&e.kind))
        .find_map(|e| {
            let data = e.payload().ok()?;
            let actor = actor_of(&data)?.clone();
            Some((e, data, actor))
        })?;
    let who = by(Some(&actor.by), actor.reason.as_deref());
    let at = e.at.format("%H:%M:%S");
    Some(match &data {
        D::RunRetried(_) => format!("Retried{who} at {at}: the failed step runs again."),
        D::RunContinued(_) => format!("Continued{who} at {at}: the run carries on."),
        D::RunCancelled(_) => format!("Cancelled{who} at {at}."),
        D::RunCancelRequested(_) => format!(
            "Cancel requested{who} at {at}: the step in flight stops at its next check, then \
             the run ends cancelled."
        ),
        D::BudgetRaised(_) => format!("Raised the budget{who} at {at}."),
        D::RunForked(f) => format!(
            "Forked{who} at {at} from run {} at step {}: this is the new run.",
            f.parent, f.from_step
        ),
        D::SignalReceived(s) => match s.woke {
            true => format!("Sent signal `{}`{who} at {at}: it woke the run.", s.name),
            false => format!(
                "Sent signal `{}`{who} at {at}: buffered until a step waits for it.",
                s.name
            ),
        },
        _ => return None,
    })
}

/// Who did an operator's action, from its event (`None`: the engine did,
/// as its own `run_cancelled` after a requested cancel).
fn actor_of(data: &EventData) -> Option<&Actor> {
    Some(match data {
        D::RunRetried(a) | D::RunContinued(a) | D::RunCancelRequested(a) => &a.actor,
        D::RunCancelled(RunCancelled::ByOperator(a)) => &a.actor,
        D::BudgetRaised(b) => &b.actor,
        D::RunForked(f) => &f.actor,
        D::SignalReceived(s) => &s.actor,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_done_reads_back_what_it_wrote_and_nothing_else() {
        let wait = WaitId::new();
        for done in [
            Done::Answer(wait),
            Done::Retry,
            Done::Cancel,
            Done::Fork,
            Done::Signal,
        ] {
            let query = done.query();
            let mut parts = query
                .split('&')
                .map(|p| p.split_once('=').map_or("", |p| p.1));
            let (first, second) = (parts.next(), parts.next());
            assert_eq!(Done::parse(first, second), Some(done), "{query}");
        }
        assert_eq!(Done::parse(Some("drop tables"), None), None);
        assert_eq!(Done::parse(Some("answer"), Some("not-a-wait")), None);
    }

    #[test]
    fn a_run_action_is_confirmed_only_by_its_event() {
        let event = |kind, data| crate::fixtures::event(1, kind, chrono::Utc::now(), data);
        assert_eq!(run_action(Done::Cancel, &[]), None, "nothing happened");
        let by_engine = event(EventKind::RunCancelled, serde_json::json!({"idx": 0}));
        assert_eq!(run_action(Done::Cancel, &[by_engine]), None);
        let cancelled = event(
            EventKind::RunCancelled,
            serde_json::json!({"by": "console", "reason": "not needed",
                               "from_status": "queued", "step": 0}),
        );
        let line = run_action(Done::Cancel, &[cancelled]).unwrap_or_default();
        assert!(
            line.starts_with("Cancelled by console (“not needed”) at "),
            "{line}"
        );
    }
}
