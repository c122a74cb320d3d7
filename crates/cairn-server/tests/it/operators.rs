//! Operator actions over HTTP: retry, continue, cancel and fork through the
//! router; each is recorded (an event with who and why), answered with the
//! run, and never executed in the request; every refusal and body mistake.

use axum::http::{header, Method, StatusCode};
use cairn::{EventKind, RunId};
use serde_json::{json, Value};

use crate::support::{Api, Reply};

/// A POST without a body and without a content type.
async fn post_empty(api: &Api, uri: &str) -> Reply {
    api.call(Method::POST, uri, &[], None).await
}

/// The data of the run's last event of `kind`.
async fn last_event(api: &Api, id: RunId, kind: EventKind) -> Value {
    api.engine
        .events(id)
        .await
        .unwrap()
        .into_iter()
        .rev()
        .find(|e| e.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} event"))
        .data
}

/// A run of `flaky`, driven until its step 1 failed (permanently).
async fn failed_run(api: &Api) -> RunId {
    let id = api.submit("flaky", json!({"name": "f"})).await;
    api.engine.execute(id).await.unwrap();
    assert_eq!(
        api.get(&format!("/v1/runs/{id}")).await.json()["status"],
        "failed"
    );
    id
}

#[tokio::test]
async fn retry_queues_a_failed_run_without_executing_it() {
    let api = Api::sqlite().await;
    let id = failed_run(&api).await;
    let reply = api
        .post_json(
            &format!("/v1/runs/{id}/retry"),
            &json!({"by": "ops@example", "reason": "fixed the script"}),
        )
        .await;
    let run = reply.ok_json();
    assert_eq!(run["id"], id.to_string());
    assert_eq!(run["status"], "queued", "recorded, not executed");
    assert_eq!(run["error"], Value::Null);
    assert_eq!(run["steps"][1]["status"], "failed");
    assert_eq!(run["steps"][1]["attempt"], 1);
    let event = last_event(&api, id, EventKind::RunRetried).await;
    // The caller acts (the open API's `api`); the body's `by` is a note.
    assert_eq!(event["by"], "api");
    assert_eq!(
        (&event["note"], &event["via"]),
        (&json!("ops@example"), &json!("api"))
    );
    assert_eq!(event["reason"], "fixed the script");
    assert_eq!(event["step"], 1);

    // The runner's drive: the failed step runs again as attempt 2.
    api.engine.execute(id).await.unwrap();
    let done = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["steps"][1]["attempt"], 2);
    assert_eq!(done["steps"][1]["output"], json!({"attempt": 2}));
    assert_eq!(done["steps"][0]["attempt"], 1, "step 0 was not run again");
}

#[tokio::test]
async fn the_body_of_an_action_is_optional_and_by_defaults_to_api() {
    let api = Api::sqlite().await;
    for body in [None, Some(""), Some("  \n"), Some("{}")] {
        let id = failed_run(&api).await;
        let uri = format!("/v1/runs/{id}/retry");
        let reply = match body {
            None => post_empty(&api, &uri).await,
            Some(text) => {
                api.post_raw(&uri, "application/json", text.as_bytes().to_vec())
                    .await
            }
        };
        assert_eq!(reply.status, StatusCode::OK, "{body:?}: {}", reply.text);
        let event = last_event(&api, id, EventKind::RunRetried).await;
        assert_eq!(event["by"], "api", "{body:?}");
        assert_eq!(event["reason"], Value::Null, "{body:?}");
    }
    // A blank `by` is no name either.
    let id = failed_run(&api).await;
    api.post_json(&format!("/v1/runs/{id}/retry"), &json!({"by": " "}))
        .await;
    assert_eq!(
        last_event(&api, id, EventKind::RunRetried).await["by"],
        "api"
    );
}

#[tokio::test]
async fn action_body_mistakes_are_4xx_and_change_nothing() {
    let api = Api::sqlite().await;
    let id = failed_run(&api).await;
    let uri = format!("/v1/runs/{id}/retry");
    api.post_json(&uri, &json!({"by": "x", "extra": 1}))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    api.post_json(&uri, &json!({"by": 7}))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    api.post_raw(&uri, "application/json", b"{\"by\":".to_vec())
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_json");
    api.post_raw(&uri, "text/plain", b"{}".to_vec())
        .await
        .assert_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let huge = format!("{{\"reason\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    api.post_raw(&uri, "application/json", huge.into_bytes())
        .await
        .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let run = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(run["status"], "failed");
}

#[tokio::test]
async fn continue_queues_an_interrupted_run() {
    let api = Api::sqlite().await;
    let id = failed_run(&api).await;
    // Nothing interrupts a step yet (limits arrive with LLM agents), so put
    // the run in that state as a limit would leave it.
    api.db
        .exec("UPDATE runs SET status = 'interrupted', error = NULL")
        .await;
    api.db
        .exec("UPDATE steps SET status = 'interrupted' WHERE idx = 1")
        .await;
    let reply = api
        .post_json(
            &format!("/v1/runs/{id}/continue"),
            &json!({"by": "ops", "reason": "limit raised"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json()["status"], "queued");
    let event = last_event(&api, id, EventKind::RunContinued).await;
    assert_eq!(
        (&event["by"], &event["note"], &event["reason"]),
        (&json!("api"), &json!("ops"), &json!("limit raised"))
    );
}

#[tokio::test]
async fn cancel_of_a_queued_run_is_immediate() {
    let api = Api::sqlite().await;
    let id = api.submit("greet", json!({"name": "c"})).await;
    let reply = post_empty(&api, &format!("/v1/runs/{id}/cancel")).await;
    let run = reply.ok_json();
    assert_eq!(run["status"], "cancelled");
    assert!(run["finished_at"].is_string());
    assert_eq!(
        last_event(&api, id, EventKind::RunCancelled).await["by"],
        "api"
    );
}

#[tokio::test]
async fn actions_in_the_wrong_state_are_409_naming_the_state() {
    let api = Api::sqlite().await;
    let done = api.submit("greet", json!({"name": "d"})).await;
    api.drive(done).await;
    let queued = api.submit("greet", json!({"name": "q"})).await;
    let failed = failed_run(&api).await;
    let cases = [
        (done, "retry", "`succeeded`"),
        (done, "continue", "`succeeded`"),
        (done, "cancel", "`succeeded`"),
        (queued, "retry", "`queued`"),
        (queued, "continue", "`queued`"),
        (failed, "continue", "`failed`"),
    ];
    for (id, action, state) in cases {
        let before = api.engine.events(id).await.unwrap();
        let message = post_empty(&api, &format!("/v1/runs/{id}/{action}"))
            .await
            .assert_error(StatusCode::CONFLICT, "wrong_state");
        assert!(
            message.contains(state) && message.contains(action),
            "{action} on {state}: {message}"
        );
        assert_eq!(api.engine.events(id).await.unwrap(), before, "{action}");
    }
}

#[tokio::test]
async fn actions_on_unknown_or_malformed_runs_are_404_and_400() {
    let api = Api::sqlite().await;
    let unknown = RunId::new();
    for action in ["retry", "continue", "cancel"] {
        let message = post_empty(&api, &format!("/v1/runs/{unknown}/{action}"))
            .await
            .assert_error(StatusCode::NOT_FOUND, "run_not_found");
        assert!(message.contains(&unknown.to_string()), "{message}");
        post_empty(&api, &format!("/v1/runs/nope/{action}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "bad_run_id");
        api.get_error(
            &format!("/v1/runs/{unknown}/{action}"),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        )
        .await;
    }
    api.post_json(
        &format!("/v1/runs/{unknown}/fork"),
        &json!({"from_step": 0}),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "run_not_found");
    api.post_json("/v1/runs/nope/fork", &json!({"from_step": 0}))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_run_id");
}

#[tokio::test]
async fn fork_creates_a_queued_run_copying_the_steps_before_it() {
    let api = Api::sqlite().await;
    let source = api.submit("pipeline", json!({"name": "src"})).await;
    api.drive(source).await;
    let before = api.get(&format!("/v1/runs/{source}")).await.json();

    let reply = api
        .post_json(
            &format!("/v1/runs/{source}/fork"),
            &json!({"from_step": 1, "by": "ops", "reason": "new template"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let fork = reply.json();
    let fork_id = fork["id"].as_str().unwrap();
    assert_ne!(fork_id, source.to_string());
    assert_eq!(
        reply.headers[header::LOCATION].to_str().unwrap(),
        format!("/v1/runs/{fork_id}")
    );
    assert_eq!(fork["status"], "queued", "recorded, not executed");
    assert_eq!(fork["parent_run_id"], source.to_string());
    assert_eq!(fork["parent_step_idx"], 1);
    assert_eq!(fork["cursor"], 1);
    assert_eq!(fork["input"], json!({"name": "src"}));
    assert_eq!(fork["steps"].as_array().unwrap().len(), 1);
    assert_eq!(fork["steps"][0], before["steps"][0], "copied verbatim");
    let event = last_event(&api, fork_id.parse().unwrap(), EventKind::RunForked).await;
    assert_eq!(
        (&event["by"], &event["note"]),
        (&json!("api"), &json!("ops"))
    );
    assert_eq!(event["parent"], source.to_string());
    // The source is untouched.
    assert_eq!(api.get(&format!("/v1/runs/{source}")).await.json(), before);

    // From step 0 with a new input: a fresh run of the same crew.
    let reply = api
        .post_json(
            &format!("/v1/runs/{source}/fork"),
            &json!({"from_step": 0, "input": {"name": "other"}}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let fresh = reply.json();
    assert_eq!(fresh["input"], json!({"name": "other"}));
    assert_eq!(fresh["steps"], json!([]));
    let fresh_id: RunId = fresh["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        last_event(&api, fresh_id, EventKind::RunForked).await["by"],
        "api"
    );
    api.drive(fresh_id).await;
    let done = api.get(&format!("/v1/runs/{fresh_id}")).await.json();
    assert_eq!(done["steps"][1]["output"], "n=1 for other");
}

#[tokio::test]
async fn refused_forks_are_409_fork_refused_and_body_mistakes_400() {
    let api = Api::sqlite().await;
    let source = api.submit("pipeline", json!({"name": "src"})).await;
    let uri = format!("/v1/runs/{source}/fork");
    // Nothing has succeeded yet: only step 0 can be forked from.
    let message = api
        .post_json(&uri, &json!({"from_step": 1}))
        .await
        .assert_error(StatusCode::CONFLICT, "fork_refused");
    assert!(message.contains("step 0 at most"), "{message}");
    api.drive(source).await;
    let message = api
        .post_json(&uri, &json!({"from_step": 3}))
        .await
        .assert_error(StatusCode::CONFLICT, "fork_refused");
    assert!(message.contains("2 steps"), "{message}");
    let message = api
        .post_json(&uri, &json!({"from_step": 1, "input": {"name": "x"}}))
        .await
        .assert_error(StatusCode::CONFLICT, "fork_refused");
    assert!(message.contains("new input"), "{message}");

    for body in [
        json!({}),
        json!({"from_step": -1}),
        json!({"from_step": "1"}),
        json!({"from_step": 0, "inputs": {}}),
    ] {
        api.post_json(&uri, &body)
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    }
    post_empty(&api, &uri)
        .await
        .assert_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    // Only the source run exists.
    assert_eq!(api.runs().await.len(), 1);
}

/// `POST /v1/runs/{id}/context`: a queued run's input takes the context
/// (recorded with who and why) and its step sees it; a finished run is 409
/// `wrong_state`, a context that is not an object 422 `bad_context`, and
/// neither writes anything.
#[tokio::test]
async fn context_is_merged_into_a_queued_runs_input_and_recorded() {
    let api = Api::sqlite().await;
    let id = api.submit("greet", json!({"name": "?"})).await;
    let uri = format!("/v1/runs/{id}/context");
    let reply = api.post_json(&uri, &json!({"context": [1]})).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text
    );
    assert_eq!(reply.json()["error"]["code"], "bad_context");
    let reply = api
        .post_json(
            &uri,
            &json!({"context": {"name": "Ada"}, "by": "ops", "reason": "the real name"}),
        )
        .await;
    let run = reply.ok_json();
    assert_eq!(run["status"], "queued", "recorded, not executed");
    assert_eq!(run["input"], json!({"name": "Ada"}));
    let event = last_event(&api, id, EventKind::ContextAdded).await;
    assert_eq!(
        (&event["by"], &event["note"]),
        (&json!("api"), &json!("ops"))
    );
    assert_eq!(event["reason"], "the real name");
    assert_eq!(event["replaced"], json!({"name": "?"}));
    api.engine.execute(id).await.unwrap();
    let done = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(done["steps"][0]["output"], "Hello Ada");
    // Finished: refused, nothing written.
    let events = api.engine.events(id).await.unwrap().len();
    let reply = api
        .post_json(&uri, &json!({"context": {"name": "Bob"}}))
        .await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
    assert_eq!(reply.json()["error"]["code"], "wrong_state");
    assert_eq!(api.engine.events(id).await.unwrap().len(), events);
}
