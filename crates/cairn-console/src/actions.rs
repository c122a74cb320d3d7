//! A run's action forms: retry, continue, cancel (styled as destructive),
//! a budget raise and fork, each with a reason; what the server lets a
//! run's page offer decides which show.

use super::*;

/// What an action's button looks like: destructive actions (cancel,
/// reject) stand out from the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    Plain,
    Destructive,
}

impl Look {
    pub(crate) fn class(self) -> Option<&'static str> {
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
        // No form token: a viewer who may not act gets no form.
        @if !csrf.is_empty() { form.action method="post" action=(target) {
            input type="hidden" name="csrf" value=(csrf);
            (extra)
            label { "Reason " input type="text" name="reason" required placeholder=(format!("why {action}")); }
            button type="submit" class=[look.class()] { (label) }
        } }
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

/// The actions a run allows: retry, continue, cancel, a budget raise and
/// fork (only cancel for a run whose crew the server does not offer).
pub(crate) fn run_actions(p: &RunPage<'_>) -> Markup {
    let (view, csrf) = (p.view, p.csrf);
    let run = &view.run;
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
    let base = format!("/runs/{}", run.id);
    let cancel = html! {
        @if !run.status.is_finished() {
            (action_form("cancel", "Cancel", &format!("{base}/cancel"), csrf, Look::Destructive, html! {}))
        }
    };
    html! {
        h2 { "Actions" }
        @if p.offer.foreign && !run.status.is_finished() {
            p.note.foreign {
                "This server does not offer this run's crew (" code { (run.crew_fingerprint) }
                "): it refuses to retry, continue, fork or raise it. Act where the run was \
                 submitted, or start the server with " code { "cairn serve --foreign-runs" } "."
            }
        }
        div.actions {
            @if p.offer.foreign {
                (cancel)
            } @else {
                @if run.status == RunStatus::Failed {
                    (action_form("retry", "Retry the failed step", &format!("{base}/retry"), csrf, Look::Plain, html! {}))
                }
                @if run.status == RunStatus::Interrupted {
                    (action_form("continue", "Continue", &format!("{base}/continue"), csrf, Look::Plain, html! {}))
                }
                (cancel)
                @if view.spent.is_some() && !run.status.is_finished() {
                    (raise_form(run, &format!("{base}/budget"), csrf))
                }
                (fork_form(run, fork_from, p.offer.versions, &format!("{base}/fork"), csrf))
            }
        }
    }
}
