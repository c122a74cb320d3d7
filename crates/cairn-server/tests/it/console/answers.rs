//! Answering waits from the console, through the router: a waiting run's
//! page carries its open wait's answers, which land back on it; every
//! answer and run action is confirmed by a line on the page it lands on,
//! read from what is stored (`?done=…` names it; a crafted link shows
//! nothing that did not happen); what a wait asks reads as text (a string
//! under review, an approval's step), and a string is edited as text.

use axum::http::StatusCode;
use serde_json::json;

use super::{csrf_of, location, post_form, post_page_form, redirected};
use crate::console::fanout::api_with;

/// A step a person lets run first.
const GATED: &str = "name = \"gated\"\nversion = \"1\"\n[[agents]]\nrole = \"ship\"\n\
    kind = \"template\"\ntemplate = \"shipped\"\napproval = \"before\"\n";

/// The confirmation line of a page, if it has one.
fn flash(page: &str) -> Option<&str> {
    let at = page.find(r#"<p class="flash" role="status">"#)?;
    let line = &page[at..];
    Some(&line[..line.find("</p>")?])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_runs_page_answers_its_wait_and_says_what_happened() {
    let api = api_with(&[]).await;
    let id = api
        .submit("review", json!({"topic": "cairns\nand \"stones\""}))
        .await;
    api.drive(id).await;
    let wait = api.waits().await[0].id;
    let page = api.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    // The open wait, its text as text (no JSON quotes or escapes), and
    // its answers, which come back here.
    crate::support::assert_contains(&page.text, r#"class="wait run-wait""#);
    assert!(
        page.text
            .contains("<pre class=\"prompt text\">Draft on cairns\nand &quot;stones&quot;</pre>"),
        "{}",
        page.text
    );
    assert!(!page.text.contains(r"cairns\nand"), "{}", page.text);
    let target = format!("/waits/{wait}/answer");
    assert!(page.text.contains(&format!(r#"action="{target}""#)));
    assert!(page.text.contains(r#"name="back" value="run""#));
    let fields = [
        ("decision", "approve"),
        ("reason", "reads well"),
        ("back", "run"),
    ];
    let answered = post_page_form(&api, &page.text, &target, &fields).await;
    let back = redirected(&answered);
    assert_eq!(back, format!("/runs/{id}?done=answer&wait={wait}"));
    let landed = api.get(&back).await;
    let line = flash(&landed.text).unwrap_or_else(|| panic!("no line: {}", landed.text));
    assert!(
        line.contains("Approved the review of step 0 (writer): its output is committed")
            && line.contains("Answered by console, at "),
        "{line}"
    );
    assert!(!landed.text.contains("run-wait"), "the wait is answered");
    // A link that names what did not happen shows nothing.
    let crafted = api.get(&format!("/runs/{id}?done=cancel")).await;
    assert_eq!(flash(&crafted.text), None, "{}", crafted.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waits_page_confirms_an_answer_and_edits_text_as_text() {
    let api = api_with(&[("gated", GATED)]).await;
    let id = api.submit("review", json!({"topic": "cairns"})).await;
    api.drive(id).await;
    let gated = api.submit("gated", json!({})).await;
    api.drive(gated).await;
    let waits = api.get("/waits").await;
    let wait = api
        .waits()
        .await
        .into_iter()
        .find(|w| w.run_id == id)
        .unwrap();
    // A string under review reads as text, and is edited as text.
    assert!(
        waits
            .text
            .contains(r#"<pre class="prompt text">Draft on cairns</pre>"#),
        "{}",
        waits.text
    );
    assert!(
        waits
            .text
            .contains(r#"<input type="hidden" name="output_as" value="text">"#)
            && waits.text.contains(">Draft on cairns</textarea>"),
        "{}",
        waits.text
    );
    // An approval says which step it lets run, not its JSON.
    assert!(
        waits
            .text
            .contains("Step 0 (ship) waits for your approval before it runs."),
        "{}",
        waits.text
    );
    assert!(!waits.text.contains("&quot;idx&quot;"), "{}", waits.text);
    let csrf = csrf_of(&waits.text);
    let edited = post_form(
        &api,
        &format!("/waits/{}/answer", wait.id),
        &[
            ("csrf", &csrf),
            ("decision", "edit"),
            ("output_as", "text"),
            ("output", "A title\r\nand a body"),
            ("reason", "tighter"),
        ],
    )
    .await;
    let back = redirected(&edited);
    assert_eq!(
        back,
        format!("/waits?done=answer&wait={}&run={id}", wait.id)
    );
    let landed = api.get(&back).await;
    let line = flash(&landed.text).unwrap_or_else(|| panic!("no line: {}", landed.text));
    assert!(
        line.contains("Committed your edit of step 0 (writer)")
            && line.contains(&format!(r#"href="/runs/{id}""#)),
        "{line}"
    );
    api.drive(id).await;
    let done = api.engine.show(id).await.unwrap();
    assert_eq!(done.steps[0].output, Some(json!("A title\nand a body")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_action_lands_on_its_page_with_a_line_saying_what_it_did() {
    let api = api_with(&[]).await;
    let flaky = api.submit("flaky", json!({"name": "n"})).await;
    api.drive(flaky).await;
    let page = api.get(&format!("/runs/{flaky}")).await;
    let csrf = csrf_of(&page.text);
    let retried = post_form(
        &api,
        &format!("/runs/{flaky}/retry"),
        &[("csrf", &csrf), ("reason", "fixed the flake")],
    )
    .await;
    let landed = api.get(location(&retried)).await;
    let line = flash(&landed.text).unwrap_or_else(|| panic!("no line: {}", landed.text));
    assert!(
        line.contains("Retried by console (“fixed the flake”) at "),
        "{line}"
    );
    let queued = api.submit("greet", json!({"name": "x"})).await;
    let cancelled = post_form(
        &api,
        &format!("/runs/{queued}/cancel"),
        &[("csrf", &csrf), ("reason", "not needed")],
    )
    .await;
    assert_eq!(location(&cancelled), format!("/runs/{queued}?done=cancel"));
    let landed = api.get(location(&cancelled)).await;
    let line = flash(&landed.text).unwrap_or_else(|| panic!("no line: {}", landed.text));
    assert!(
        line.contains("Cancelled by console (“not needed”) at "),
        "{line}"
    );
}
