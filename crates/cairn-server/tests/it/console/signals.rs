//! Signals and schedules in the console, through the router: a run waiting
//! for a signal shows what it waits for and a form that sends one (the
//! line on the page it lands on says so, the run consumes it); the
//! schedules page lists each schedule with its next fire times.

use axum::http::StatusCode;
use serde_json::json;

use super::{post_page_form, redirected};
use crate::console::fanout::api_with;

const PAYMENT: &str = "name = \"pay\"\nversion = \"1\"\n[[agents]]\nrole = \"paid\"\n\
    kind = \"signal\"\nsignal = \"paid\"\n[[agents]]\nrole = \"ship\"\nkind = \"template\"\n\
    template = \"shipped {{ outputs.paid.n }}\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_a_signal_is_sent_one_from_its_page() {
    let api = api_with(&[("pay", PAYMENT)]).await;
    let id = api.submit("pay", json!({})).await;
    api.drive(id).await;
    let page = api.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    crate::support::assert_contains(&page.text, "waits for signal <code>paid</code>");
    let target = format!("/runs/{id}/signal");
    crate::support::assert_contains(&page.text, &format!(r#"action="{target}""#));
    let fields = [
        ("signal", "paid"),
        ("payload", r#"{"n": 3}"#),
        ("reason", "paid by phone"),
    ];
    let sent = post_page_form(&api, &page.text, &target, &fields).await;
    let back = redirected(&sent);
    assert_eq!(back, format!("/runs/{id}?done=signal"));
    let landed = api.get(&back).await;
    crate::support::assert_contains(&landed.text, "Sent signal `paid`");
    crate::support::assert_contains(&landed.text, "it woke the run");
    api.drive(id).await;
    let done = api.engine.show(id).await.unwrap();
    assert_eq!(done.steps[1].output, Some(json!("shipped 3")));
    let page = api.get(&format!("/runs/{id}")).await;
    crate::support::assert_contains(&page.text, "consumed by step 0 (attempt 1)");
    // A payload that is not JSON is refused, and nothing is sent.
    let bad = [("signal", "paid"), ("payload", "{nope"), ("reason", "typo")];
    let refused = post_page_form(&api, &page.text, &target, &bad).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(api.engine.run_signals(id).await.unwrap().signals.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedules_page_lists_next_fire_times() {
    let api = api_with(&[("pay", PAYMENT)]).await;
    let empty = api.get("/schedules").await;
    crate::support::assert_contains(&empty.text, "No schedule.");
    let crew = cairn::Crew::from_toml(PAYMENT).unwrap();
    let new = cairn::NewSchedule {
        name: "nightly".into(),
        crew: crew.def().clone(),
        input: json!({}),
        cadence: cairn::Cadence::cron("0 3 * * *", Some("Europe/Paris")).unwrap(),
        overlap: cairn::Overlap::Skip,
        catch_up: cairn::CatchUp::Latest,
        thread: None,
        priority: Default::default(),
        tenant: None,
        by: None,
    };
    let made = api.engine.create_schedule(&new).await.unwrap();
    let page = api.get("/schedules").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    crate::support::assert_contains(&page.text, r#"id="schedule-nightly""#);
    crate::support::assert_contains(&page.text, "cron <code>0 3 * * *</code> Europe/Paris");
    let next = made.next_at.format("%Y-%m-%d %H:%M:%S").to_string();
    crate::support::assert_contains(&page.text, &next);
    crate::support::assert_contains(&page.text, "No slot yet.");
}
