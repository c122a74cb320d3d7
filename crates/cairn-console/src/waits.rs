//! The open waits: the `/waits` page (a card per open wait) and the same
//! controls on a waiting run's page. What a wait asks reads as text: an
//! output under review that is a string is its text (and is edited as
//! text), an approval names the step it lets run, a question is its
//! question; anything else is pretty JSON. Each answer posts to
//! `/waits/{id}/answer`; a form on a run's page says so (`back=run`), and
//! the answer lands back there, with a line saying what happened.

use super::*;
use cairn::{WaitKind, WaitStatus};

/// An open wait with what its card names besides the wait itself: the
/// crew of its run and the role of its step.
#[derive(Debug, Clone)]
pub struct WaitCard {
    pub wait: WaitRecord,
    pub crew: String,
    pub crew_version: String,
    pub role: String,
    /// Where its run hangs, nearest parent first: empty for a run no
    /// `children` step started.
    pub parents: Vec<cairn::ChildOf>,
    /// Its approver policy and the votes so far (no policy: any operator).
    pub ballot: cairn::Ballot,
    /// Whether the viewer's answer would count (else no answer form: the
    /// server refuses it anyway).
    pub theirs: bool,
}

/// Which page an answer form came from, and so where its answer lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Back {
    Waits,
    Run,
}

/// The open waits, each with its crew, role and how long it has waited,
/// and the answers its kind takes. `answered`: the wait the form that led
/// here answered, named in a line at the top.
pub fn waits_page(
    cards: &[WaitCard],
    answered: Option<&WaitCard>,
    csrf: &str,
    now: DateTime<Utc>,
) -> Markup {
    html! {
        h1 { "Waits" }
        @if let Some(card) = answered {
            @if let Some(line) = crate::notice::answered(&card.wait, &card.role) {
                (crate::notice::flash(html! {
                    (line) " "
                    a href=(format!("/runs/{}", card.wait.run_id)) { "Its run" }
                }))
            }
        }
        @if cards.is_empty() {
            p { "No open waits." }
        }
        @for card in cards {
            @let w = &card.wait;
            section.wait id=(format!("wait-{}", w.id)) {
                h2 {
                    (w.kind.as_str()) " for step " (w.step_idx.get()) " of run "
                    a href=(format!("/runs/{}", w.run_id)) { code { (short_id(&w.run_id.to_string())) } }
                }
                (wait_facts(card, now))
                (asks(w, &card.role))
                (answer_forms(w, if card.theirs { csrf } else { "" }, Back::Waits))
            }
        }
    }
}

/// A card's facts: crew, role, parents, how long it has waited, deadline.
fn wait_facts(card: &WaitCard, now: DateTime<Utc>) -> Markup {
    let w = &card.wait;
    html! {
        dl.wait-facts {
            dt { "Crew" } dd.crew { (card.crew) " v" (card.crew_version) }
            dt { "Role" } dd.role { (card.role) }
            @if !card.parents.is_empty() {
                dt { "Child of" }
                dd.parents {
                    @for (i, p) in card.parents.iter().enumerate() {
                        @if i > 0 { " ← " }
                        "key " code { (p.key) } " of run "
                        a href=(format!("/runs/{}", p.parent_run_id)) { code { (short_id(&p.parent_run_id.to_string())) } }
                    }
                }
            }
            dt { "Waiting" }
            dd.waited {
                (duration(w.created_at, now)) ", since "
                time datetime=(w.created_at.to_rfc3339()) { (w.created_at.format("%Y-%m-%d %H:%M:%S")) }
            }
            @if let Some(deadline) = w.deadline {
                dt { "Deadline" }
                dd { time datetime=(deadline.to_rfc3339()) { (deadline.format("%Y-%m-%d %H:%M:%S")) } }
            }
            @if let Some(policy) = &card.ballot.approvers {
                (approvals(policy, &card.ballot.votes))
            }
        }
    }
}

/// A policy's line: who may answer, and "1 of 2 approvals: ana".
fn approvals(policy: &cairn::Approvers, votes: &[cairn::event::payload::CastVote]) -> Markup {
    let approved: Vec<&str> = votes
        .iter()
        .filter(|v| v.decision == "approve")
        .map(|v| v.by.as_str())
        .collect();
    html! {
        dt { "Approvers" }
        dd.approvers {
            @if policy.allow.is_empty() { "any operator" } @else { (policy.allow.join(", ")) }
            @if !policy.self_approval { " (not the run's own people)" }
        }
        dt { "Approvals" }
        dd.approvals {
            (approved.len()) " of " (policy.required) " approvals"
            @if !approved.is_empty() { ": " (approved.join(", ")) }
        }
    }
}

/// A waiting run's open waits on its page, with the same answers as on
/// `/waits`, which land back on the run's page.
pub(crate) fn run_waits(
    run: &RunRecord,
    waits: &[WaitRecord],
    not_theirs: &[cairn::WaitId],
    csrf: &str,
    now: DateTime<Utc>,
) -> Markup {
    let role = |w: &WaitRecord| {
        run.crew_definition
            .agents
            .get(w.step_idx.as_usize())
            .map_or_else(String::new, |a| a.role.as_str().to_owned())
    };
    html! {
        @for w in waits.iter().filter(|w| w.status == WaitStatus::Open) {
            section.wait.run-wait id=(format!("wait-{}", w.id)) {
                h2 {
                    "Waiting for a person: " (w.kind.as_str()) " of step " (w.step_idx.get())
                    " (" (role(w)) ")"
                }
                p.waited {
                    "For " (duration(w.created_at, now)) ", since "
                    time datetime=(w.created_at.to_rfc3339()) { (w.created_at.format("%Y-%m-%d %H:%M:%S")) }
                }
                (asks(w, &role(w)))
                (answer_forms(w, if not_theirs.contains(&w.id) { "" } else { csrf }, Back::Run))
            }
        }
    }
}

/// A parent whose children wait for a person: where to answer them (each
/// waiting child's page, or `/waits`).
pub(crate) fn children_waits(view: &RunView) -> Markup {
    let person = matches!(
        view.children_wait(),
        Some(cairn::ChildrenWait::Person { .. })
    );
    let waiting = view
        .children
        .iter()
        .filter(|c| c.status == RunStatus::Waiting);
    html! {
        @if person {
            p.children-waits {
                "Its children wait for a person: answer them on their pages ("
                @for (i, c) in waiting.enumerate() {
                    @if i > 0 { ", " }
                    a href=(format!("/runs/{}", c.run_id)) { "key " (c.key) }
                }
                ") or on " a href="/waits" { "Waits" } "."
            }
        }
    }
}

/// What a wait asks, as a person reads it.
fn asks(w: &WaitRecord, role: &str) -> Markup {
    let p = &w.prompt;
    html! {
        @match (w.kind, p) {
            (WaitKind::Review, serde_json::Value::String(text)) => {
                p.asks { "The output to review (text):" }
                pre.prompt.text { (text) }
            }
            (WaitKind::Review, _) => {
                p.asks { "The output to review (JSON):" }
                pre.prompt { code { (pretty(Some(p))) } }
            }
            (WaitKind::Approval, _) => {
                p.asks.prompt {
                    "Step " (w.step_idx.get()) " (" (p["role"].as_str().unwrap_or(role)) ") waits for your approval before it runs"
                    @if let Some(attempt) = p["attempt"].as_u64().filter(|a| *a > 1) { " (attempt " (attempt) ")" }
                    "."
                }
            }
            (WaitKind::Question, _) => {
                p.asks { "Step " (w.step_idx.get()) " (" (role) ") asks:" }
                pre.prompt.text {
                    @match p["question"].as_str() {
                        Some(q) => (q),
                        None => (pretty(Some(p))),
                    }
                }
            }
        }
    }
}

/// The answers a wait's kind takes, each a form with a reason.
fn answer_forms(w: &WaitRecord, csrf: &str, back: Back) -> Markup {
    if csrf.is_empty() {
        // No form token: a viewer who may not answer gets no form.
        return html! {};
    }
    let target = format!("/waits/{}/answer", w.id);
    let answer = |decision: &str, label: &str, extra: Markup| {
        html! {
            form.action method="post" action=(target) {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="decision" value=(decision);
                @if back == Back::Run { input type="hidden" name="back" value="run"; }
                (extra)
                label { "Reason " input type="text" name="reason" required placeholder=(format!("why {decision}")); }
                @let look = if decision == "reject" { Look::Destructive } else { Look::Plain };
                button type="submit" class=[look.class()] { (label) }
            }
        }
    };
    html! {
        @match w.kind {
            WaitKind::Review => {
                (answer("approve", "Approve", html! {}))
                (answer("edit", "Commit this output instead", edit_box(&w.prompt)))
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
            WaitKind::Question => {
                (answer("answer", "Answer", html! {
                    label { "Answer (text, or JSON) " input type="text" name="value" required; }
                }))
            }
        }
    }
}

/// The box an edited output is typed in: a string output as its text
/// (committed as a string, `output_as=text`), anything else as JSON.
fn edit_box(output: &serde_json::Value) -> Markup {
    html! {
        @match output {
            serde_json::Value::String(text) => {
                input type="hidden" name="output_as" value="text";
                label { "Output (text) " textarea name="output" rows="4" required { (text) } }
            }
            other => {
                label { "Output (JSON) " textarea name="output" rows="4" required { (pretty(Some(other))) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(kind: WaitKind, prompt: serde_json::Value) -> WaitRecord {
        WaitRecord {
            id: cairn::WaitId::new(),
            run_id: cairn::RunId::new(),
            step_idx: cairn::StepIdx(1),
            attempt: cairn::Attempt(1),
            kind,
            status: WaitStatus::Open,
            prompt,
            question_id: None,
            deadline: None,
            on_deadline: None,
            answer: None,
            answered_by: None,
            answered_at: None,
            created_at: Utc::now(),
            parents: vec![],
        }
    }

    #[test]
    fn a_string_under_review_reads_and_is_edited_as_text() {
        let text = "Line one\nline \"two\" <b>";
        let review = wait(WaitKind::Review, serde_json::json!(text));
        let shown = asks(&review, "writer").into_string();
        assert!(
            shown.contains(
                "<pre class=\"prompt text\">Line one\nline &quot;two&quot; &lt;b&gt;</pre>"
            ),
            "{shown}"
        );
        assert!(!shown.contains("\\n"), "no JSON escapes: {shown}");
        let forms = answer_forms(&review, "t", Back::Run).into_string();
        assert!(
            forms.contains(r#"name="output_as" value="text""#)
                && forms.contains(">Line one\nline &quot;two&quot; &lt;b&gt;</textarea>"),
            "{forms}"
        );
        assert!(forms.contains(r#"name="back" value="run""#), "{forms}");
        // An object stays JSON, edited as JSON.
        let object = wait(WaitKind::Review, serde_json::json!({"title": "T"}));
        let forms = answer_forms(&object, "t", Back::Waits).into_string();
        assert!(
            !forms.contains("output_as") && !forms.contains(r#"name="back""#),
            "{forms}"
        );
    }

    #[test]
    fn an_approval_and_a_question_say_what_they_ask() {
        let approval = wait(
            WaitKind::Approval,
            serde_json::json!({"idx": 1, "role": "publisher", "attempt": 1}),
        );
        let shown = asks(&approval, "publisher").into_string();
        assert!(
            shown.contains("Step 1 (publisher) waits for your approval before it runs."),
            "{shown}"
        );
        assert!(!shown.contains("&quot;idx&quot;"), "{shown}");
        let question = wait(
            WaitKind::Question,
            serde_json::json!({"question": "Which?\nA or B"}),
        );
        let shown = asks(&question, "picker").into_string();
        assert!(shown.contains(">Which?\nA or B</pre>"), "{shown}");
    }
}
