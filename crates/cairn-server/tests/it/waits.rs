//! Human waits over HTTP: `GET /v1/waits` with its filters, and every
//! answer (approve, edit, reject with feedback), the repeated answer, a
//! different answer to a closed wait, an answer that does not fit, unknown
//! and malformed ids, and body mistakes.

use axum::http::{Method, StatusCode};
use cairn::{RunId, WaitFilter, WaitId};
use serde_json::{json, Value};

use crate::support::Api;

/// A run of `review` driven until it waits for the review of step 0;
/// returns it and the open wait's id.
async fn waiting_run(api: &Api, topic: &str) -> (RunId, String) {
    let id = api.submit("review", json!({"topic": topic})).await;
    api.engine.execute(id).await.unwrap();
    let run = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(run["status"], "waiting", "{run}");
    let waits = api.get(&format!("/v1/waits?run={id}&status=open")).await;
    assert_eq!(waits.status, StatusCode::OK, "{}", waits.text);
    let waits = waits.json()["waits"].as_array().unwrap().clone();
    assert_eq!(waits.len(), 1, "{waits:?}");
    (id, waits[0]["id"].as_str().unwrap().to_owned())
}

/// A new API with a run of `topic` waiting on its review, rejected with
/// `feedback`: the API, the run and the rejected wait.
async fn rejected_review(topic: &str, feedback: &str) -> (Api, RunId, String) {
    let api = Api::sqlite().await;
    let (id, wait) = waiting_run(&api, topic).await;
    let body = json!({"decision": "reject", "feedback": feedback});
    api.answer(&wait, &body).await.assert_ok();
    (api, id, wait)
}

async fn run_json(api: &Api, id: RunId) -> Value {
    api.get(&format!("/v1/runs/{id}")).await.json()
}

#[tokio::test]
async fn waits_list_matches_the_cli_json_and_filters_by_run_and_status() {
    let api = Api::sqlite().await;
    let empty = api.get("/v1/waits").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.json(), json!({"waits": []}));

    let (a, wait_a) = waiting_run(&api, "a").await;
    let (b, _) = waiting_run(&api, "b").await;
    let all = api.get("/v1/waits").await.json();
    let all = all["waits"].as_array().unwrap();
    assert_eq!(all.len(), 2);
    // Each entry is the WaitRecord's JSON, as `cairn waits list --json`.
    let stored = api.engine.waits(&WaitFilter::default()).await.unwrap();
    assert_eq!(
        Value::Array(all.clone()),
        serde_json::to_value(&stored).unwrap()
    );
    let first = &all[0];
    assert_eq!(first["id"], wait_a);
    assert_eq!(first["run_id"], a.to_string());
    assert_eq!(first["step_idx"], 0);
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["kind"], "review");
    assert_eq!(first["status"], "open");
    assert_eq!(first["prompt"], "Draft on a", "{first}");
    for field in ["answer", "answered_by", "answered_at", "deadline"] {
        assert_eq!(first[field], Value::Null, "{field}");
    }

    let only_b = api.get(&format!("/v1/waits?run={b}")).await.json();
    assert_eq!(only_b["waits"].as_array().unwrap().len(), 1);
    assert_eq!(only_b["waits"][0]["run_id"], b.to_string());
    let none = api.get("/v1/waits?status=answered").await.json();
    assert_eq!(none, json!({"waits": []}));
    // Empty parameters mean "not given".
    let blank = api.get("/v1/waits?run=&status=").await.json();
    assert_eq!(blank["waits"].as_array().unwrap().len(), 2);

    for (query, names) in [
        ("status=closed", "status"),
        ("run=nope", "run"),
        ("step=1", "step"),
    ] {
        let message = api
            .get(&format!("/v1/waits?{query}"))
            .await
            .assert_error(StatusCode::BAD_REQUEST, "bad_query");
        assert!(message.contains(names), "{query}: {message}");
    }
}

#[tokio::test]
async fn approve_commits_the_output_and_queues_the_run() {
    let api = Api::sqlite().await;
    let (id, wait) = waiting_run(&api, "rust").await;
    let reply = api
        .answer(&wait, &json!({"decision": "approve", "by": "ann"}))
        .await;
    let answered = reply.ok_json();
    assert_eq!(answered["id"], wait);
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["answer"], json!({"decision": "approve"}));
    // The caller answers (the open API's `api`), whatever `by` says.
    assert_eq!(answered["answered_by"], "api");
    assert!(answered["answered_at"].is_string());

    let run = run_json(&api, id).await;
    assert_eq!(run["status"], "queued", "recorded, not executed");
    assert_eq!(run["steps"][0]["status"], "succeeded");
    api.engine.execute(id).await.unwrap();
    let done = run_json(&api, id).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["steps"][1]["output"], "PUBLISHED Draft on rust");

    // The same answer again: 200, nothing changes (even the `by`).
    let again = api
        .answer(&wait, &json!({"decision": "approve", "by": "bob"}))
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    // The wait as it was; `run` is where the run stands now.
    let (mut again, mut answered) = (again.json(), answered);
    assert_eq!(again["run"]["status"], "succeeded");
    assert_eq!(answered["run"]["status"], "queued");
    again.as_object_mut().unwrap().remove("run");
    answered.as_object_mut().unwrap().remove("run");
    assert_eq!(again, answered);
    assert_eq!(run_json(&api, id).await, done);

    // A different answer to the closed wait is refused.
    let message = api
        .answer(
            &wait,
            &json!({"decision": "reject", "feedback": "too late"}),
        )
        .await
        .assert_error(StatusCode::CONFLICT, "wait_closed");
    assert!(message.contains("`answered`"), "{message}");
    assert_eq!(run_json(&api, id).await, done);
}

#[tokio::test]
async fn edit_commits_the_given_output_and_by_defaults_to_api() {
    let api = Api::sqlite().await;
    let (id, wait) = waiting_run(&api, "x").await;
    let reply = api
        .answer(
            &wait,
            &json!({"decision": "edit", "output": "Edited draft"}),
        )
        .await;
    assert_eq!(reply.ok_json()["answered_by"], "api");
    api.engine.execute(id).await.unwrap();
    let done = run_json(&api, id).await;
    assert_eq!(done["steps"][0]["output"], "Edited draft");
    assert_eq!(done["steps"][1]["output"], "PUBLISHED Edited draft");
}

#[tokio::test]
async fn reject_runs_the_step_again_with_the_feedback_and_opens_a_new_wait() {
    let (api, id, wait) = rejected_review("y", "shorter").await;
    assert_eq!(run_json(&api, id).await["status"], "queued");
    api.engine.execute(id).await.unwrap();
    let run = run_json(&api, id).await;
    assert_eq!(run["status"], "waiting");
    assert_eq!(run["steps"][0]["attempt"], 2);
    let open = api
        .get(&format!("/v1/waits?run={id}&status=open"))
        .await
        .json();
    let open = open["waits"].as_array().unwrap();
    assert_eq!(open.len(), 1);
    assert_ne!(open[0]["id"], wait);
    assert_eq!(open[0]["attempt"], 2);
    assert_eq!(open[0]["prompt"], "Draft on y [shorter]");
}

#[tokio::test]
async fn answer_refusals_and_body_mistakes() {
    let api = Api::sqlite().await;
    let (id, wait) = waiting_run(&api, "z").await;
    let uri = format!("/v1/waits/{wait}/answer");
    let events = api.engine.events(id).await.unwrap();

    // A question's answer does not fit a review.
    let message = api
        .post_json(&uri, &json!({"decision": "answer", "value": 42}))
        .await
        .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "bad_answer");
    assert!(message.contains("review"), "{message}");

    // Not an answer at all: the message names the problem.
    for (body, names) in [
        (json!({}), "decision"),
        (json!({"by": "ann"}), "decision"),
        (json!({"decision": "maybe"}), "maybe"),
        (json!({"decision": "edit"}), "output"),
        (json!({"decision": "reject"}), "feedback"),
        (json!({"decision": "reject", "feedback": 3}), "string"),
        (json!({"decision": "approve", "output": "x"}), "`output`"),
        (json!({"decision": "approve", "by": 1}), "`by`"),
        (json!(["approve"]), "map"),
        (json!("approve"), "map"),
    ] {
        let message = api
            .post_json(&uri, &body)
            .await
            .assert_error(StatusCode::BAD_REQUEST, "invalid_body");
        assert!(message.contains(names), "{body}: {message}");
    }
    api.post_raw(&uri, "application/json", b"{\"decision\":".to_vec())
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_json");
    api.call(Method::POST, &uri, &[], None)
        .await
        .assert_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");

    // Unknown and malformed wait ids.
    let unknown = WaitId::new();
    let message = api
        .answer(&unknown, &json!({"decision": "approve"}))
        .await
        .assert_error(StatusCode::NOT_FOUND, "wait_not_found");
    assert!(message.contains(&unknown.to_string()), "{message}");
    let message = api
        .post_json(
            "/v1/waits/not-a-wait/answer",
            &json!({"decision": "approve"}),
        )
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_wait_id");
    assert!(message.contains("not-a-wait"), "{message}");
    api.get_error(&uri, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
        .await;

    // An answer over the engine's cap (256 KiB) in a body the server takes.
    let big = "x".repeat(300 * 1024);
    let message = api
        .post_json(&uri, &json!({"decision": "edit", "output": big}))
        .await
        .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    assert!(
        message.contains("the answer") && message.contains("cap"),
        "{message}"
    );

    // Nothing was recorded; the wait is still open and still answers.
    assert_eq!(api.engine.events(id).await.unwrap(), events);
    let reply = api.post_json(&uri, &json!({"decision": "approve"})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
}

#[tokio::test]
async fn a_cancelled_runs_wait_is_closed() {
    let api = Api::sqlite().await;
    let (id, wait) = waiting_run(&api, "c").await;
    let reply = api
        .call(Method::POST, &format!("/v1/runs/{id}/cancel"), &[], None)
        .await;
    assert_eq!(reply.ok_json()["status"], "cancelled");
    let waits = api.get(&format!("/v1/waits?run={id}")).await.json();
    assert_eq!(waits["waits"][0]["status"], "cancelled");
    let message = api
        .answer(&wait, &json!({"decision": "approve"}))
        .await
        .assert_error(StatusCode::CONFLICT, "wait_closed");
    assert!(message.contains("`cancelled`"), "{message}");
}

/// A rejected review runs its step again and opens a new wait: an answer
/// to the old one is 409 `wait_closed`, and the body names the run's open
/// wait (`error.open_wait`), so a client need not look it up.
#[tokio::test]
async fn a_closed_waits_conflict_names_the_runs_open_wait() {
    let (api, id, old) = rejected_review("o", "again").await;
    api.engine.execute(id).await.unwrap();
    let waits = api.get(&format!("/v1/waits?run={id}&status=open")).await;
    let new = waits.json()["waits"][0]["id"].as_str().unwrap().to_owned();
    assert_ne!(new, old);

    let reply = api.answer(&old, &json!({"decision": "approve"})).await;
    let message = reply.assert_error(StatusCode::CONFLICT, "wait_closed");
    assert!(message.contains(&new), "{message}");
    let error = &reply.json()["error"];
    assert_eq!(error["open_wait"]["id"], json!(new), "{error}");
    assert_eq!(error["open_wait"]["kind"], "review");
    assert_eq!(error["run_id"], json!(id.to_string()));
    // Nothing was answered: the new wait is still open.
    let open = api.get(&format!("/v1/waits?run={id}&status=open")).await;
    assert_eq!(open.json()["waits"][0]["id"], json!(new));
}
