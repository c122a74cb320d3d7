//! Answering in the browser: a waiting run's page shows what its review
//! asks as text and answers it, landing back on the page with a line
//! saying what happened; its timeline keeps the wait amber, over the
//! attempt; `/waits` confirms a rejection the same way.

use super::{browser, browser_case, click_and_land, reload_until, runtime, Console, WAIT};
use crate::support::Kind;

/// A two-line text a person reviews, then a step that quotes it.
const NOTE: &str = "name = \"note\"\nversion = \"1\"\n[[agents]]\nrole = \"draft\"\n\
    kind = \"template\"\ntemplate = \"Line one\\nabout {{ input.topic }}, \\\"quoted\\\"\"\n\
    review = true\n[[agents]]\nrole = \"post\"\nkind = \"template\"\n\
    template = \"posted: {{ outputs.draft }}\"\n";

#[test]
fn a_waiting_runs_page_answers_its_review_of_text_and_says_what_happened() {
    let Some(case) = browser_case(
        "a_waiting_runs_page_answers_its_review_of_text_and_says_what_happened",
        Kind::Sqlite,
    ) else {
        return;
    };
    let console = Console::start(&case, &[("note", NOTE.to_owned())], "2", false);
    let id = console.submit(&case, "note", r#"{"topic": "cairns"}"#, false);
    let approve = "section.run-wait form:has(input[name=decision][value=approve])";
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page(&format!("/runs/{id}"))).await.unwrap();
        // The page follows the run to its review, and shows it as text.
        b.wait_for("section.run-wait", WAIT).await.unwrap();
        let asks = b.text("section.run-wait pre.prompt").await.unwrap();
        assert_eq!(asks, "Line one\nabout cairns, \"quoted\"", "as text: {asks:?}");
        super::assert_fits(&b, "a waiting run's page").await;
        b.fill(&format!("{approve} input[name=reason]"), "reads well")
            .await
            .unwrap();
        click_and_land(&b, &format!("{approve} button"), "the run page's approval").await;
        let url = b.current_url().await.unwrap();
        assert!(url.contains(&format!("/runs/{id}?done=answer")), "{url}");
        let line = b.text("p.flash").await.unwrap();
        assert!(
            line.contains("Approved the review of step 0 (draft)") && line.contains("by console"),
            "{line}"
        );
        b.wait_for_text("dl.header", "succeeded", WAIT).await.unwrap();
        assert!(!b.exists("section.run-wait").await.unwrap(), "answered");
        // The answered wait stays the legend's amber, drawn over the
        // attempt's green.
        let wait = b
            .execute(
                "const r = document.querySelector('svg.timeline g.bar.wait rect').getBoundingClientRect(); \
                 const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2); \
                 const fill = (q) => getComputedStyle(document.querySelector(q)).fill; \
                 return [top.closest('g').getAttribute('class'), fill('svg.timeline g.bar.wait rect'), \
                         fill('ul.legend li.legend-wait g.bar.wait rect')];",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(wait[0], "bar wait", "the wait is on top: {wait}");
        assert_eq!(wait[1], wait[2], "the legend's colour: {wait}");
    });
}

#[test]
fn the_waits_page_confirms_a_rejection_with_a_line() {
    let Some(case) = browser_case(
        "the_waits_page_confirms_a_rejection_with_a_line",
        Kind::Sqlite,
    ) else {
        return;
    };
    let console = Console::start(&case, &[("note", NOTE.to_owned())], "2", false);
    let id = console.submit(&case, "note", r#"{"topic": "tides"}"#, false);
    let reject = "form:has(input[name=decision][value=reject])";
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page("/waits")).await.unwrap();
        reload_until(&b, "the review", |t| t.contains("about tides")).await;
        let asks = b.text("section.wait pre.prompt").await.unwrap();
        assert_eq!(
            asks, "Line one\nabout tides, \"quoted\"",
            "as text: {asks:?}"
        );
        b.fill(&format!("{reject} input[name=feedback]"), "shorter")
            .await
            .unwrap();
        b.fill(&format!("{reject} input[name=reason]"), "too long")
            .await
            .unwrap();
        click_and_land(&b, &format!("{reject} button"), "the rejection").await;
        let line = b.text("p.flash").await.unwrap();
        assert!(
            line.contains("Rejected the review of step 0 (draft) with the feedback “shorter”"),
            "{line}"
        );
        let run = super::href(&b, "p.flash a").await;
        assert!(run.ends_with(&id), "the line links the run");
    });
}
