//! The OpenAPI document agrees with the server where a hostile tester found
//! it did not: for values at and past each documented bound, the server
//! accepts exactly what the document's schema (checked with a JSON Schema
//! validator, formats included) calls valid, and answers what it does not
//! with a documented 400; responses match their documented schemas.

use axum::http::{Method, StatusCode};
use cairn::RunId;
use serde_json::{json, Value};

use crate::support::Api;

/// The OpenAPI document the server serves.
fn doc() -> Value {
    serde_json::from_str(cairn_server::OPENAPI_JSON).unwrap()
}

/// Whether `value` is valid against the schema at `pointer` in the
/// document (its `$ref`s resolve against the document's components).
fn valid(doc: &Value, pointer: &str, value: &Value) -> bool {
    let mut schema = doc
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{pointer}"))
        .clone();
    schema["components"] = doc["components"].clone();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{pointer}: {e}"))
        .is_valid(value)
}

/// The schema pointer of a parameter of an operation.
fn param(doc: &Value, path: &str, method: &str, name: &str) -> String {
    let params = doc["paths"][path][method]["parameters"].as_array().unwrap();
    let i = params.iter().position(|p| p["name"] == name).unwrap();
    format!(
        "/paths/{}/{method}/parameters/{i}/schema",
        path.replace('~', "~0").replace('/', "~1")
    )
}

/// A query or header value as the document's schema sees it: a number
/// where it reads as one (what a generator from the schema would send).
fn as_json(text: &str) -> Value {
    text.parse::<i128>()
        .ok()
        .and_then(|n| serde_json::Number::from_i128(n).map(Value::Number))
        .unwrap_or_else(|| json!(text))
}

/// Asserts the server took a request the document calls valid, and refused
/// with `code` (400) one it calls invalid.
#[track_caller]
fn agrees(doc_valid: bool, status: StatusCode, body: &str, code: &str, what: &str) {
    if doc_valid {
        assert!(
            status.is_success()
                || status == StatusCode::NOT_FOUND
                || status == StatusCode::CONFLICT,
            "{what}: valid per the document, refused by the server: {status} {body}"
        );
        assert!(!body.contains(code), "{what}: {body}");
    } else {
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {body}");
        assert!(body.contains(code), "{what}: {body}");
    }
}

#[tokio::test]
async fn query_and_header_bounds_are_the_documented_ones() {
    let api = Api::sqlite().await;
    let doc = doc();
    let id = api.submit("greet", json!({"name": "bounds"})).await;
    api.drive(id).await;

    // `cursor`: a run id, or empty.
    let cursor = param(&doc, "/v1/runs", "get", "cursor");
    for text in ["", "not-a-run-id", "123"] {
        let reply = api.get(&format!("/v1/runs?cursor={text}")).await;
        let ok = valid(&doc, &cursor, &json!(text));
        agrees(
            ok,
            reply.status,
            &reply.text,
            "bad_cursor",
            &format!("cursor={text}"),
        );
    }
    let reply = api.get(&format!("/v1/runs?cursor={id}")).await;
    assert!(valid(&doc, &cursor, &json!(id.to_string())));
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);

    // `limit`, `status`: empty means "not given".
    for (name, text) in [
        ("limit", ""),
        ("limit", "1000"),
        ("limit", "1001"),
        ("limit", "0"),
        ("status", ""),
        ("status", "running"),
        ("status", "nope"),
    ] {
        let reply = api.get(&format!("/v1/runs?{name}={text}")).await;
        let ok = valid(&doc, &param(&doc, "/v1/runs", "get", name), &as_json(text));
        agrees(
            ok,
            reply.status,
            &reply.text,
            "bad_query",
            &format!("{name}={text}"),
        );
    }

    // `step`: a u32.
    let step = param(&doc, "/v1/runs/{id}/journal", "get", "step");
    for text in ["", "0", "4294967295", "4294967296", "-1", "1.5"] {
        let reply = api.get(&format!("/v1/runs/{id}/journal?step={text}")).await;
        let ok = valid(&doc, &step, &as_json(text));
        agrees(
            ok,
            reply.status,
            &reply.text,
            "bad_query",
            &format!("step={text}"),
        );
    }

    // `Last-Event-ID`: an i64 from 0 (the run finished, so the stream ends).
    let last = param(&doc, "/v1/runs/{id}/events", "get", "Last-Event-ID");
    for text in ["", "0", "9223372036854775807", "9223372036854775808", "-1"] {
        let reply = api
            .call(
                Method::GET,
                &format!("/v1/runs/{id}/events"),
                &[("last-event-id", text)],
                None,
            )
            .await;
        let ok = valid(&doc, &last, &as_json(text));
        agrees(
            ok,
            reply.status,
            &reply.text,
            "bad_last_event_id",
            &format!("Last-Event-ID: {text}"),
        );
    }

    // `run` of `GET /v1/waits`.
    let run = param(&doc, "/v1/waits", "get", "run");
    for text in ["", "nope"] {
        let reply = api.get(&format!("/v1/waits?run={text}")).await;
        let ok = valid(&doc, &run, &json!(text));
        agrees(
            ok,
            reply.status,
            &reply.text,
            "bad_query",
            &format!("run={text}"),
        );
    }
}

#[tokio::test]
async fn body_bounds_are_the_documented_ones() {
    let api = Api::sqlite().await;
    let doc = doc();
    let id = api.submit("pipeline", json!({"name": "bodies"})).await;
    api.drive(id).await;

    // `from_step`: JSON Schema's integer, a u32 (a number with no
    // fractional part is an integer too).
    let fork = "/components/schemas/ForkRequest";
    for from_step in [
        json!(1),
        json!(1.0),
        json!(230666718.0),
        json!(4294967295u64),
        json!(4294967296u64),
        json!(-1),
        json!(1.5),
        json!("1"),
    ] {
        let body = json!({"from_step": from_step});
        let reply = api.post_json(&format!("/v1/runs/{id}/fork"), &body).await;
        let ok = valid(&doc, fork, &body);
        agrees(
            ok,
            reply.status,
            &reply.text,
            "invalid_body",
            &format!("from_step {from_step}"),
        );
    }
    let reply = api
        .post_json(&format!("/v1/runs/{id}/fork"), &json!({"from_step": 2.0}))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(reply.json()["parent_step_idx"], 2);

    // `thread_id`: 1 to 256 bytes, no NUL.
    let submit = "/components/schemas/SubmitRequest";
    for thread in [
        json!(""),
        json!("t"),
        json!("a\u{0}b"),
        json!("x".repeat(256)),
        json!("x".repeat(257)),
    ] {
        let body = json!({"crew": "greet", "input": {}, "thread_id": thread});
        let reply = api.post_json("/v1/runs", &body).await;
        let ok = valid(&doc, submit, &body);
        agrees(ok, reply.status, &reply.text, "bad_thread_id", "thread_id");
    }

    // `keep_per_thread`: likewise an integer (a dry run removes nothing).
    // (`3.0` is asserted by hand: the validator crate does not count it
    // as an integer under the type list `["integer", "null"]`, though
    // JSON Schema does.)
    let compact = "/components/schemas/CompactRequest";
    let reply = api
        .post_json(
            "/v1/compact",
            &json!({"keep_per_thread": 3.0, "dry_run": true}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    for keep in [json!(1), json!(-1), json!(0.5), json!(4294967296u64)] {
        let body = json!({"keep_per_thread": keep, "dry_run": true});
        let reply = api.post_json("/v1/compact", &body).await;
        let ok = valid(&doc, compact, &body);
        agrees(
            ok,
            reply.status,
            &reply.text,
            "invalid_body",
            &format!("keep_per_thread {keep}"),
        );
    }

    // A body of the wrong shape is 400 `invalid_body`, documented as such.
    let reply = api.post_json("/v1/runs", &json!({"crew": 7})).await;
    reply.assert_error(StatusCode::BAD_REQUEST, "invalid_body");
    assert!(
        doc["paths"]["/v1/runs"]["post"]["responses"]["400"]["description"]
            .as_str()
            .unwrap()
            .contains("invalid_body")
    );
}

#[tokio::test]
async fn responses_match_their_documented_schemas() {
    let api = Api::sqlite().await;
    let doc = doc();
    let id = api.submit("review", json!({"topic": "schemas"})).await;
    api.drive(id).await;
    let check = |schema: &str, value: &Value| {
        assert!(
            valid(&doc, &format!("/components/schemas/{schema}"), value),
            "{schema}: {value:#}"
        );
    };
    check("RunView", &api.get(&format!("/v1/runs/{id}")).await.json());
    check("RunPage", &api.get("/v1/runs").await.json());
    let waits = api
        .get(&format!("/v1/waits?run={id}&status=open"))
        .await
        .json();
    check("WaitList", &waits);
    let wait = waits["waits"][0]["id"].as_str().unwrap().to_owned();
    let reply = api
        .post_json(
            &format!("/v1/waits/{wait}/answer"),
            &json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let answered = reply.json();
    check("Answered", &answered);
    // Where the run stands: queued again for the publisher.
    assert_eq!(answered["run"]["id"], id.to_string());
    assert_eq!(answered["run"]["status"], "queued");
    assert_eq!(answered["status"], "answered");
    let missing = api.get(&format!("/v1/runs/{}", RunId::new())).await.json();
    check("ErrorResponse", &missing);
}
