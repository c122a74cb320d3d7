//! Routes other than runs: health, readiness, crews, metrics, the OpenAPI
//! document, unknown routes and methods, and the status of every typed error.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use cairn::{RunId, RunStatus};
use cairn_server::ApiError;
use serde_json::{json, Value};

use crate::support::{assert_lines, Api};

#[tokio::test]
async fn healthz_and_readyz_answer_ok() {
    let api = Api::sqlite().await;
    for path in ["/healthz", "/readyz"] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.json(), json!({"status": "ok"}), "{path}");
    }
}

/// While only a read-only server answers (a primary set read-only, as a
/// failover tool demotes one; a standby alike), `/readyz` is 503
/// `not_ready` with the reason `read_only`, so a load balancer sends no
/// writes to this server; `/healthz` stays 200; once the server takes
/// writes again, so is `/readyz`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_read_only_while_the_cluster_takes_no_writes() {
    let cluster = tokio::task::block_in_place(cairn_testkit::PgCluster::start)
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    let api = Api::on(cairn_testkit::TestDb::postgres_at(cluster.url()), |s| s).await;
    assert_eq!(api.get("/readyz").await.status, StatusCode::OK);
    let flip = |setting: &'static str| {
        tokio::task::block_in_place(|| {
            cluster.sql(setting)?;
            cluster.sql("SELECT pg_reload_conf()")
        })
        .unwrap()
    };
    flip("ALTER SYSTEM SET default_transaction_read_only = on");
    // The reload reaches the pooled connections a moment later.
    let mut reply = api.get("/readyz").await;
    for _ in 0..40 {
        if reply.status != StatusCode::OK {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        reply = api.get("/readyz").await;
    }
    let message = reply.assert_error(StatusCode::SERVICE_UNAVAILABLE, "not_ready");
    assert_eq!(
        reply.json()["error"]["reason"],
        "read_only",
        "{}",
        reply.text
    );
    assert!(message.contains("read-only"), "{message}");
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);

    flip("ALTER SYSTEM RESET default_transaction_read_only");
    let mut reply = api.get("/readyz").await;
    for _ in 0..40 {
        if reply.status == StatusCode::OK {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        reply = api.get("/readyz").await;
    }
    assert_eq!(reply.json(), json!({"status": "ok"}), "{}", reply.text);
}

#[tokio::test]
async fn readyz_is_503_when_the_database_does_not_answer_and_healthz_stays_200() {
    let api = Api::sqlite().await;
    api.db.exec("ALTER TABLE runs RENAME TO runs_gone").await;
    let message = api
        .get("/readyz")
        .await
        .assert_error(StatusCode::SERVICE_UNAVAILABLE, "not_ready");
    assert!(!message.contains("runs"), "{message}");
    let reply = api.get("/readyz").await;
    assert_eq!(
        reply.json()["error"]["reason"],
        "no_answer",
        "{}",
        reply.text
    );
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    let metrics = api.get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    crate::support::assert_contains(&metrics.text, "cairn_store_up 0\n");
    assert!(!metrics.text.contains("cairn_runs{"));
    // A store failure on an API route is a 500 that leaks nothing.
    let message = api
        .get("/v1/runs")
        .await
        .assert_error(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    assert!(!message.contains("runs_gone") && !message.contains("no such table"));
}

#[tokio::test]
async fn crews_lists_the_loaded_crews_by_name() {
    let api = Api::sqlite().await;
    let reply = api.get("/v1/crews").await;
    assert_eq!(reply.status, StatusCode::OK);
    let crews = reply.json();
    let names = crate::support::strs(&crews, "name");
    assert_eq!(
        names,
        ["agent", "broken", "deadline", "flaky", "greet", "pipeline", "review", "slow"]
    );
    let pipeline = &crews[5];
    assert_eq!(pipeline["version"], "1");
    assert!(pipeline["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(
        pipeline["agents"],
        json!([{"role": "counter", "kind": "command"}, {"role": "writer", "kind": "template"}])
    );
}

#[tokio::test]
async fn metrics_count_runs_by_status_and_requests_by_route() {
    let api = Api::sqlite().await;
    let done = api.submit("greet", json!({"name": "a"})).await;
    api.submit("greet", json!({"name": "b"})).await;
    api.drive(done).await;
    api.get("/v1/runs/not-a-uuid").await;
    let reply = api.get("/metrics").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.content_type().starts_with("text/plain"));
    let text = &reply.text;
    assert_lines(
        text,
        &[
            "cairn_store_up 1",
            "cairn_runs{status=\"queued\"} 1",
            "cairn_runs{status=\"succeeded\"} 1",
            "cairn_runs{status=\"failed\"} 0",
            "cairn_queue_ready 1",
            "cairn_http_requests_total{route=\"/v1/runs\",code=\"201\"} 2",
            "cairn_http_requests_total{route=\"/v1/runs/{id}\",code=\"400\"} 1",
            "cairn_runner_in_flight 0",
            "cairn_step_duration_seconds_count 0",
        ],
    );
    // Every sample line belongs to a declared metric.
    let declared: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap();
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|b| declared.contains(b))
            .unwrap_or(name);
        assert!(declared.contains(base), "undeclared metric in `{line}`");
    }
}

/// The document in the crate, the one under docs/ and the one served are
/// the same, and it names exactly the routes the router serves.
#[tokio::test]
async fn openapi_document_matches_the_router() {
    let api = Api::sqlite().await;
    let served = api.get("/v1/openapi.json").await;
    assert_eq!(served.status, StatusCode::OK);
    assert!(served.content_type().starts_with("application/json"));
    assert_eq!(served.text, cairn_server::OPENAPI_JSON);
    let checked_in = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json"),
    )
    .unwrap();
    assert_eq!(
        checked_in,
        cairn_server::OPENAPI_JSON,
        "docs/openapi.json differs from crates/cairn-server/openapi.json: copy one over the other"
    );

    let doc = served.json();
    assert_eq!(doc["openapi"].as_str().unwrap(), "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((path.clone(), method.to_uppercase()));
        }
    }
    let mut routed = BTreeSet::new();
    for (path, methods) in cairn_server::route_table() {
        for method in methods {
            routed.insert((path.to_owned(), method.to_string()));
        }
    }
    assert_eq!(documented, routed, "OpenAPI paths vs router");

    // And each really is routed: the answer is the handler's, not the
    // router's fallback for an unknown path or method.
    for (path, method) in &routed {
        let uri = path.replace("{id}", &RunId::new().to_string());
        let body = (method == "POST").then(|| b"{}".to_vec());
        let reply = api
            .call(
                Method::from_bytes(method.as_bytes()).unwrap(),
                &uri,
                &[("content-type", "application/json")],
                body,
            )
            .await;
        assert_ne!(
            reply.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        if reply.status == StatusCode::NOT_FOUND {
            let want = if path.starts_with("/v1/waits/") {
                "wait_not_found"
            } else if path.starts_with("/v1/threads/") {
                "thread_not_found"
            } else if path.ends_with("/upgrade") {
                "unknown_crew"
            } else if path.starts_with("/v1/crews/") {
                "crew_version_not_found"
            } else if path.starts_with("/v1/principals/") {
                "principal_not_found"
            } else if path.starts_with("/v1/schedules/") {
                "schedule_not_found"
            } else if path.starts_with("/v1/hooks/") {
                "hook_not_found"
            } else {
                "run_not_found"
            };
            assert_eq!(reply.json()["error"]["code"], want, "{method} {path}");
        }
    }

    // Every `$ref` resolves.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = vec![];
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let pointer = r.strip_prefix('#').unwrap();
        assert!(doc.pointer(pointer).is_some(), "unresolved $ref {r}");
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json_errors() {
    let api = Api::sqlite().await;
    api.get_error("/v2/runs", StatusCode::NOT_FOUND, "not_found")
        .await;
    // (`/` is the console's runs page, `console.rs`.)
    api.get_error("/nope", StatusCode::NOT_FOUND, "not_found")
        .await;
    api.call(Method::DELETE, "/v1/runs", &[], None)
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    api.call(Method::POST, "/healthz", &[], None)
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}

async fn respond(e: cairn::Error) -> (StatusCode, Value) {
    let response = ApiError::from(e).into_response();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// The engine's refusals map to the documented statuses, including those
/// the routes can hardly provoke (a run failed under the executor).
#[tokio::test]
async fn engine_errors_map_to_statuses_without_leaking_internals() {
    use cairn::StoreError as S;
    let run = RunId::new();
    let wrong_state = S::WrongState {
        run,
        status: RunStatus::Succeeded,
        action: "cancel it",
    };
    let (status, body) = respond(wrong_state.into()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "wrong_state");

    let failed = cairn::ExecutorError::RunFailed { run, error: None };
    let (status, body) = respond(failed.into()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "wrong_state");

    let (status, body) = respond(S::RunNotFound(run).into()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "run_not_found");

    let corrupt = S::Corruption(cairn::Corruption::new(run, "secret detail"));
    let (status, body) = respond(corrupt.into()).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body["error"]["code"], "internal");
    assert!(!body.to_string().contains("secret detail"), "{body}");

    let unreachable = S::Unreachable {
        target: "postgres db.internal:5432/cairn".into(),
        reason: "refused".into(),
    };
    let (status, body) = respond(unreachable.into()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "unavailable");
    assert!(!body.to_string().contains("db.internal"), "{body}");
}
