//! The process registry on every surface of a server: a run whose Rust
//! agents no live process offers is blocked in `GET /v1/runs/{id}`, on the
//! console's run and workers pages and in `/metrics`; once a process
//! offering its version claims it, `GET /v1/workers` lists that process
//! with what it offers and the run is no longer blocked.

use axum::http::StatusCode;
use serde_json::json;

use cairn::{async_trait, Agent, Crew, StepContext, StepOutput, Stop, SubmitOptions};

use crate::support::Api;

struct Echo;

#[async_trait]
impl Agent for Echo {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        Ok(StepOutput::new(json!("done")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_no_live_process_can_execute_is_blocked_on_every_surface() {
    let api = Api::sqlite().await;
    let crew = Crew::builder("coded", "3")
        .agent_named("worker", "echo", Echo)
        .build()
        .unwrap();
    // Submitted here, but this process works nothing: nobody offers it.
    let run = api
        .engine
        .submit(&crew, json!({}), SubmitOptions::default())
        .await
        .unwrap();
    let id = run.run.id;

    let shown = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(shown["status"], "queued");
    assert_eq!(shown["blocked"]["crew"], "coded");
    assert_eq!(shown["blocked"]["version"], "3");
    assert_eq!(shown["blocked"]["handlers"], json!(["echo"]));
    let page = api.get(&format!("/runs/{id}")).await;
    crate::support::assert_contains(&page.text, "no live process offers crew");
    let workers = api.get("/workers").await;
    assert_eq!(workers.status, StatusCode::OK);
    crate::support::assert_contains(&workers.text, &id.to_string()[..13]);
    crate::support::assert_contains(&workers.text, "No process has worked");
    let metrics = api.get("/metrics").await.text;
    assert!(metrics.contains("\ncairn_runs_blocked 1\n"), "{metrics}");
    assert_eq!(api.get("/v1/workers").await.json(), json!([]));

    // A claim by a process offering it: registered, and the run runs.
    let claimed = api.engine.claim_next().await.unwrap().expect("the run");
    assert_eq!(claimed.run.id, id);
    let workers = api.get("/v1/workers").await.json();
    let process = &workers.as_array().unwrap()[0];
    assert_eq!(process["live"], true);
    assert_eq!(process["held"], 1);
    let offers = process["offers"].as_array().unwrap();
    assert!(offers
        .iter()
        .any(|o| o["name"] == "coded" && o["needs_code"] == true));
    api.engine.drive_claimed(claimed).await.unwrap();
    let shown = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(shown["status"], "succeeded");
    assert!(shown.get("blocked").is_none(), "{shown}");
    let metrics = api.get("/metrics").await.text;
    assert!(metrics.contains("\ncairn_runs_blocked 0\n"), "{metrics}");
    let page = api.get("/workers").await.text;
    assert!(page.contains("coded v3 (Rust agents)"), "{page}");
}
