//! A run of a crew this server does not offer (stored by the CLI or another
//! server on a shared database), stopped at its budget: the console hides
//! what the server refuses and says which flag allows it, and a raise that
//! would continue it is refused before anything is written.

use std::time::Duration;

use axum::http::StatusCode;
use cairn::{Budget, Crew, EventKind, RunId, RunStatus, SubmitOptions};
use cairn_testkit::{both, Kind};
use serde_json::json;

use crate::console::{csrf_of, post_form};
use crate::support::Api;

both!(a_foreign_runs_raise_is_refused_before_anything_is_written);

/// The `greet` crew's name with another command: not the crew the server
/// offers, by fingerprint.
fn foreign() -> String {
    crate::support::crew(
        "greet",
        &[crate::support::sh(
            "greeter",
            "cat > /dev/null; echo elsewhere",
            "",
        )],
    )
}

/// A foreign run interrupted at its wall-time budget.
async fn stopped_foreign_run(api: &Api) -> RunId {
    let crew = Crew::from_toml(&foreign()).unwrap();
    let opts = SubmitOptions {
        budget: Some(Budget::parse(["wall_time=1s"], false).unwrap()),
        ..SubmitOptions::default()
    };
    let id = api
        .engine
        .submit(&crew, json!({}), opts)
        .await
        .unwrap()
        .run
        .id;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    api.drive(id).await;
    let run = api.engine.get_run(id).await.unwrap();
    assert_eq!(run.status, RunStatus::Interrupted, "{:?}", run.error);
    id
}

async fn raised(api: &Api, id: RunId) -> (Option<u64>, usize) {
    let run = api.engine.get_run(id).await.unwrap();
    let events = api.engine.events(id).await.unwrap();
    let n = events
        .iter()
        .filter(|e| e.kind == EventKind::BudgetRaised)
        .count();
    (run.budget.and_then(|b| b.wall_time), n)
}

async fn a_foreign_runs_raise_is_refused_before_anything_is_written(kind: Kind) {
    let api = Api::with(kind, |s| s).await;
    let id = stopped_foreign_run(&api).await;
    let before = raised(&api, id).await;
    assert_eq!(before, (Some(1), 0));

    // Its page says why it offers no continue, and names the flag.
    let page = api.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    crate::support::assert_contains(&page.text, "cairn serve --foreign-runs");
    for refused in ["/continue\"", "/retry\"", "/fork\"", "/budget\""] {
        assert!(
            !page.text.contains(refused),
            "{refused} offered: {}",
            page.text
        );
    }

    // The console's raise (a raise and a continue) is refused, nothing written.
    let csrf = csrf_of(&page.text);
    let fields = [
        ("csrf", csrf.as_str()),
        ("raise", "wall_time=+1h"),
        ("reason", "r"),
    ];
    let reply = post_form(&api, &format!("/runs/{id}/budget"), &fields).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    assert!(reply.text.contains("--foreign-runs"), "{}", reply.text);
    assert_eq!(raised(&api, id).await, before, "nothing raised");

    // So is the API's continue with a raise.
    let body = json!({"raise": {"wall_time": 3600}, "by": "ops"});
    let reply = api
        .post_json(&format!("/v1/runs/{id}/continue"), &body)
        .await;
    let message = reply.assert_error(StatusCode::NOT_FOUND, "crew_not_offered");
    assert!(message.contains("--foreign-runs"), "{message}");
    assert_eq!(raised(&api, id).await, before, "nothing raised");

    // The raise alone changes no crew's execution: taken, once.
    let body = json!({"raise": {"wall_time": 3600}, "by": "ops"});
    let reply = api.post_json(&format!("/v1/runs/{id}/budget"), &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(raised(&api, id).await, (Some(3601), 1));
}
