//! The OpenAPI document agrees with the server where a hostile tester found
//! it did not: for values at and past each documented bound, the server
//! accepts exactly what the document's schema (checked with a JSON Schema
//! validator, formats included) calls valid, and answers what it does not
//! with a documented 400; responses match their documented schemas. And
//! the document says what the server has: every error code, on each
//! operation the refusals that precede any handler, and shapes that client
//! generators can build (`scripts/openapi-client-check` builds a client and
//! drives a real server with it).

use axum::http::{Method, StatusCode};
use cairn::RunId;
use serde_json::{json, Value};

use crate::support::{Api, Reply};

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

/// Whether the document lets the parameter be sent empty (as if it were
/// not given): `allowEmptyValue` on a query parameter; a header cannot say
/// so in its schema (its schema is the typed value a client sends), so
/// its description does.
fn empty_allowed(doc: &Value, path: &str, method: &str, name: &str) -> bool {
    let params = doc["paths"][path][method]["parameters"].as_array().unwrap();
    let p = params.iter().find(|p| p["name"] == name).unwrap();
    match p["in"].as_str().unwrap() {
        "query" => p["allowEmptyValue"] == true,
        "header" => p["description"]
            .as_str()
            .unwrap()
            .contains("An empty value is the same as none"),
        _ => false,
    }
}

/// Whether the document calls `text` a valid value of the parameter: an
/// empty one where it allows that, else by its schema (`json` is the value
/// as a client generated from the schema would hold it).
fn param_valid(
    doc: &Value,
    path: &str,
    method: &str,
    name: &str,
    text: &str,
    json: &Value,
) -> bool {
    if text.is_empty() {
        return empty_allowed(doc, path, method, name);
    }
    valid(doc, &param(doc, path, method, name), json)
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
fn agrees(doc_valid: bool, reply: &Reply, code: &str, what: &str) {
    let (status, body) = (reply.status, &reply.text);
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

/// Posts `body` to `to.0`; the server [`agrees`] with the schema at `to.1`
/// (refusing with `refusal.0`, the case named `refusal.1`): whether the
/// document calls the body valid, and the reply.
async fn posted_agrees(
    api: &Api,
    doc: &Value,
    to: (&str, &str),
    body: &Value,
    refusal: (&str, &str),
) -> (bool, Reply) {
    let reply = api.post_json(to.0, body).await;
    let ok = valid(doc, to.1, body);
    agrees(ok, &reply, refusal.0, refusal.1);
    (ok, reply)
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
        let ok = param_valid(&doc, "/v1/runs", "get", "cursor", text, &json!(text));
        agrees(ok, &reply, "bad_cursor", &format!("cursor={text}"));
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
        let ok = param_valid(&doc, "/v1/runs", "get", name, text, &as_json(text));
        agrees(ok, &reply, "bad_query", &format!("{name}={text}"));
    }

    // `step`: a u32.
    for text in ["", "0", "4294967295", "4294967296", "-1", "1.5"] {
        let reply = api.get(&format!("/v1/runs/{id}/journal?step={text}")).await;
        let ok = param_valid(
            &doc,
            "/v1/runs/{id}/journal",
            "get",
            "step",
            text,
            &as_json(text),
        );
        agrees(ok, &reply, "bad_query", &format!("step={text}"));
    }

    // `Last-Event-ID`: an i64 from 0 (the run finished, so the stream ends).
    for text in ["", "0", "9223372036854775807", "9223372036854775808", "-1"] {
        let reply = api
            .call(
                Method::GET,
                &format!("/v1/runs/{id}/events"),
                &[("last-event-id", text)],
                None,
            )
            .await;
        let ok = param_valid(
            &doc,
            "/v1/runs/{id}/events",
            "get",
            "Last-Event-ID",
            text,
            &as_json(text),
        );
        agrees(
            ok,
            &reply,
            "bad_last_event_id",
            &format!("Last-Event-ID: {text}"),
        );
    }

    // `run` and `status` of `GET /v1/waits`.
    let run = id.to_string();
    for (name, text) in [
        ("run", ""),
        ("run", "nope"),
        ("run", run.as_str()),
        ("status", ""),
        ("status", "open"),
        ("status", "closed"),
    ] {
        let reply = api.get(&format!("/v1/waits?{name}={text}")).await;
        let ok = param_valid(&doc, "/v1/waits", "get", name, text, &json!(text));
        agrees(ok, &reply, "bad_query", &format!("{name}={text}"));
    }

    // Each parameter's schema is one typed value (a generated client
    // sends it as such); "empty" is `allowEmptyValue`, not a union.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                let schema = p["schema"].as_object().unwrap();
                for key in ["anyOf", "oneOf", "allOf"] {
                    assert!(
                        !schema.contains_key(key),
                        "{method} {path} {}: {key}",
                        p["name"]
                    );
                }
            }
        }
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
        let uri = format!("/v1/runs/{id}/fork");
        let what = format!("from_step {from_step}");
        posted_agrees(&api, &doc, (&uri, fork), &body, ("invalid_body", &what)).await;
    }
    let reply = api
        .post_json(&format!("/v1/runs/{id}/fork"), &json!({"from_step": 2.0}))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(reply.json()["parent_step_idx"], 2);

    // `thread_id`: 1 to 256 bytes, no NUL.
    let to = ("/v1/runs", "/components/schemas/SubmitRequest");
    let (x256, x257) = ("x".repeat(256), "x".repeat(257));
    for thread in ["", "t", "a\u{0}b", x256.as_str(), x257.as_str()] {
        let body = json!({"crew": "greet", "input": {}, "thread_id": thread});
        posted_agrees(&api, &doc, to, &body, ("bad_thread_id", "thread_id")).await;
    }

    // `tenant`: 1 to 128 bytes, no control character, `,` or `=`.
    let (x128, x129) = ("x".repeat(128), "x".repeat(129));
    for tenant in [
        "",
        "acme",
        "a,b",
        "a=b",
        "a\u{1}b",
        x128.as_str(),
        x129.as_str(),
    ] {
        let body = json!({"crew": "greet", "input": {}, "tenant": tenant});
        posted_agrees(&api, &doc, to, &body, ("bad_tenant", "tenant")).await;
    }

    // `priority`: an integer from -1000 to 1000, or null.
    for priority in [
        json!(null),
        json!(-1000),
        json!(7),
        json!(1000),
        json!(1001),
        json!(-1001),
        json!(2.5),
        json!("7"),
        json!(4294967296u64),
    ] {
        let body = json!({"crew": "greet", "input": {}, "priority": priority});
        let (ok, reply) = posted_agrees(&api, &doc, to, &body, ("invalid_body", "priority")).await;
        if ok {
            let stored = reply.json()["priority"].as_i64();
            assert_eq!(stored, Some(priority.as_i64().unwrap_or(0)), "{priority}");
        }
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
        let what = format!("keep_per_thread {keep}");
        let to = ("/v1/compact", compact);
        posted_agrees(&api, &doc, to, &body, ("invalid_body", &what)).await;
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
    let reply = api.answer(&wait, &json!({"decision": "approve"})).await;
    let answered = reply.ok_json();
    check("Answered", &answered);
    // Where the run stands: queued again for the publisher.
    assert_eq!(answered["run"]["id"], id.to_string());
    assert_eq!(answered["run"]["status"], "queued");
    assert_eq!(answered["status"], "answered");
    let missing = api.get(&format!("/v1/runs/{}", RunId::new())).await.json();
    check("ErrorResponse", &missing);
}

/// The schema or response a `$ref` names, or `v` itself.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) => resolve(doc, doc.pointer(r.strip_prefix('#').unwrap()).unwrap()),
        None => v,
    }
}

/// The answer body: the server takes exactly the bodies `AnswerRequest`
/// calls valid (to a wait that does not exist: 404, after the body was
/// read) and refuses the others with 400 `invalid_body`.
#[tokio::test]
async fn answer_bodies_are_the_documented_ones() {
    let api = Api::sqlite().await;
    let doc = doc();
    let uri = format!("/v1/waits/{}/answer", cairn::WaitId::new());
    for body in [
        json!({"decision": "approve"}),
        json!({"decision": "approve", "by": "ann", "reason": null}),
        json!({"decision": "approve", "by": null, "reason": "fine"}),
        json!({"decision": "edit", "output": {"title": "t"}}),
        json!({"decision": "edit", "output": null}),
        json!({"decision": "reject", "feedback": "shorter", "by": "ann"}),
        json!({"decision": "answer", "value": [1, 2], "reason": "asked"}),
        json!({"decision": "edit"}),
        json!({"decision": "reject"}),
        json!({"decision": "reject", "feedback": 7}),
        json!({"decision": "answer"}),
        json!({"decision": "approve", "output": 1}),
        json!({"decision": "reject", "feedback": "x", "value": 1}),
        json!({"decision": "approve", "extra": true}),
        json!({"decision": "approve", "by": 5}),
        json!({"decision": "nope"}),
        json!({"decision": 1}),
        json!({"feedback": "no decision"}),
        json!([]),
    ] {
        let to = (uri.as_str(), "/components/schemas/AnswerRequest");
        let what = body.to_string();
        let (ok, reply) = posted_agrees(&api, &doc, to, &body, ("invalid_body", &what)).await;
        if ok {
            reply.assert_error(StatusCode::NOT_FOUND, "wait_not_found");
        }
    }
}

/// What client generators need of the document's shapes (openapi-python-client
/// drops an operation whose body is an `allOf` over a `oneOf`, and
/// openapi-generator picks a `oneOf` member by its discriminator): every
/// `allOf` member is an object schema, and every `oneOf` with a
/// discriminator lists named object schemas, each of which requires the
/// discriminating property as the constant its mapping gives it.
#[test]
fn composed_schemas_are_ones_generators_build() {
    let doc = doc();
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a serde_json::Map<String, Value>>) {
        match v {
            Value::Object(m) => {
                out.push(m);
                m.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut schemas = vec![];
    walk(&doc, &mut schemas);
    let mut discriminated = 0;
    for m in schemas {
        for member in m
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let member = resolve(&doc, member);
            assert_eq!(member["type"], "object", "allOf member {member:#}");
            assert!(member.get("oneOf").is_none() && member.get("anyOf").is_none());
        }
        let Some(disc) = m.get("discriminator") else {
            continue;
        };
        discriminated += 1;
        let property = disc["propertyName"].as_str().unwrap();
        let mapping = disc["mapping"].as_object().unwrap();
        let members = m["oneOf"].as_array().unwrap();
        assert_eq!(members.len(), mapping.len());
        for (value, target) in mapping {
            assert!(members.iter().any(|r| r["$ref"] == *target), "{target}");
            let named = json!({"$ref": target});
            let member = resolve(&doc, &named);
            assert_eq!(member["type"], "object", "{target}");
            assert!(
                member["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(property)),
                "{target}"
            );
            assert_eq!(member["properties"][property]["const"], *value, "{target}");
        }
    }
    assert!(discriminated >= 3, "Answer, AnswerRequest, OnDeadline");

    // Each answer form is a whole body: its field and `by`, `reason`.
    let request = &doc["components"]["schemas"]["AnswerRequest"];
    assert!(request.get("allOf").is_none());
    for member in request["oneOf"].as_array().unwrap() {
        let member = resolve(&doc, member);
        for field in ["decision", "by", "reason"] {
            assert!(member["properties"].get(field).is_some(), "{member:#}");
        }
        assert_eq!(member["additionalProperties"], false);
    }
}

/// The string literals after `start` in `source`, up to `end`.
fn literals(source: &str, start: &str, end: &str) -> Vec<String> {
    let from = source.find(start).unwrap_or_else(|| panic!("{start}"));
    let body = &source[from..];
    let body = &body[..body.find(end).unwrap_or_else(|| panic!("{end}"))];
    body.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(str::to_owned)
        .collect()
}

/// Every error code the server can answer is listed in the document: the
/// codes of `ApiError::code`, the engine's codes of every class but a 500
/// (a 500 is always `internal`), and the connection limit's. They are read
/// from the sources, so a new code fails here until it is documented.
#[test]
fn every_error_code_is_documented() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
    let server = read("src/error.rs");
    let mut codes = literals(&server, "pub fn code(&self)", "\n    }\n");
    let engine = read("../cairn/src/error.rs");
    for start in ["fn classified(&self)", "fn store_class("] {
        let from = engine.find(start).unwrap();
        let body = &engine[from..];
        let body = &body[..body.find("\n}\n").unwrap()];
        for row in body.split("(ErrorClass::").skip(1) {
            let class = row.split([',', '(']).next().unwrap();
            let code = row.split('"').nth(1).unwrap();
            if !["Internal", "Config"].contains(&class) {
                codes.push(code.to_owned());
            }
        }
    }
    let listen = read("src/listen.rs");
    for row in listen.split("\"code\": \"").skip(1) {
        codes.push(row.split('"').next().unwrap().to_owned());
    }
    for code in [
        "host_not_allowed",
        "too_many_attempts",
        "unstorable",
        "wait_closed",
        "too_many_connections",
    ] {
        assert!(
            codes.iter().any(|c| c == code),
            "{code} not read: {codes:?}"
        );
    }
    let doc = doc();
    let listed = doc["components"]["schemas"]["ErrorResponse"]["properties"]["error"]["properties"]
        ["code"]["description"]
        .as_str()
        .unwrap();
    for code in &codes {
        let word = |c: char| c.is_ascii_lowercase() || c == '_';
        assert!(
            listed.split(|c: char| !word(c)).any(|w| w == code),
            "ErrorResponse does not list `{code}`"
        );
    }
}

/// The refusals that come before any handler answer every operation that
/// needs a token, with the status the server gives them: `unauthorized`
/// (401), `forbidden` (403: the role check), `host_not_allowed` (400, development mode) and
/// `too_many_attempts` (429 with `Retry-After`). Each such operation
/// documents each of them.
#[tokio::test]
async fn refusals_before_the_handler_are_documented_on_every_operation() {
    use axum::response::IntoResponse;
    use cairn_server::ApiError;
    let doc = doc();
    let refusals = [
        ApiError::Unauthorized,
        ApiError::Forbidden("a viewer".to_owned()),
        ApiError::HostNotAllowed {
            host: "rebind.example".to_owned(),
            public_host: None,
        },
        ApiError::TooManyAttempts {
            retry_after: std::time::Duration::from_millis(2500),
        },
    ];
    let mut checked = 0;
    for error in refusals {
        let (status, code) = error.status_and_code();
        let response = error.into_response();
        assert_eq!(response.status(), status);
        let retry_after = response.headers().get("retry-after").cloned();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if op.get("security") == Some(&json!([])) {
                    continue;
                }
                let documented = &op["responses"][status.as_str()];
                assert!(!documented.is_null(), "{method} {path}: no {status}");
                let documented = resolve(&doc, documented);
                assert!(
                    documented["description"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("`{code}`")),
                    "{method} {path}: {status} does not name `{code}`"
                );
                if let Some(value) = &retry_after {
                    assert_eq!(value, "3");
                    let header = &documented["headers"]["Retry-After"];
                    assert_eq!(header["required"], true, "{method} {path}");
                    assert_eq!(header["schema"]["type"], "integer", "{method} {path}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 4 * 15, "{checked}");
}
