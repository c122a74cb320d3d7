//! Bearer tokens: every route but the health checks needs one when tokens
//! are configured; a refusal is a 401 that says nothing about the target.

use axum::http::{header, Method, StatusCode};
use cairn_testkit::Kind;
use serde_json::json;

use crate::support::{Api, Reply};

async fn guarded() -> Api {
    Api::with(Kind::Sqlite, |s| {
        s.with_tokens(["s3cret", "other-token", ""])
    })
    .await
}

/// A run of `greet` for `name`, submitted through the engine (no token).
/// `GET uri` with `authorization` as its header.
async fn get_with(api: &Api, uri: &str, authorization: &str) -> Reply {
    let headers = [("authorization", authorization)];
    api.call(Method::GET, uri, &headers, None).await
}

async fn greeted(api: &Api, name: &str) -> cairn::RunId {
    let greet = cairn::Crew::from_toml(&crate::support::greet()).unwrap();
    api.submit_crew(&greet, json!({ "name": name })).await
}

#[tokio::test]
async fn without_a_right_token_every_api_route_is_401() {
    let api = guarded().await;
    let id = greeted(&api, "hidden").await;
    let run_uri = format!("/v1/runs/{id}");
    let events_uri = format!("/v1/runs/{id}/events");
    let uris = [
        "/v1/runs",
        &run_uri,
        &events_uri,
        "/v1/crews",
        "/v1/openapi.json",
        "/metrics",
        "/v1/nothing-here",
    ];
    let bad_headers: [&[(&str, &str)]; 6] = [
        &[],
        &[("authorization", "Bearer wrong")],
        &[("authorization", "Bearer s3cre")],
        &[("authorization", "Bearer ")],
        &[("authorization", "Basic czNjcmV0Og==")],
        &[("authorization", "s3cret")],
    ];
    for uri in uris {
        for headers in bad_headers {
            let reply = api.call(Method::GET, uri, headers, None).await;
            let message = reply.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
            assert_eq!(reply.headers[header::WWW_AUTHENTICATE], "Bearer");
            assert!(!message.contains(&id.to_string()), "{message}");
            assert!(!reply.text.contains("hidden") && !reply.text.contains("greet"));
        }
    }
    // A refused submit writes nothing.
    let reply = api
        .call(
            Method::POST,
            "/v1/runs",
            &[("content-type", "application/json")],
            Some(
                json!({"crew": "greet", "input": {}})
                    .to_string()
                    .into_bytes(),
            ),
        )
        .await;
    reply.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(api.runs().await.len(), 1);
}

#[tokio::test]
async fn a_right_token_is_accepted_and_health_needs_none() {
    let api = guarded().await;
    for token in ["Bearer s3cret", "Bearer other-token", "bearer s3cret"] {
        let auth = [("authorization", token)];
        let reply = api.call(Method::GET, "/v1/crews", &auth, None).await;
        assert_eq!(reply.status, StatusCode::OK, "{token}: {}", reply.text);
        let reply = api
            .call(
                Method::POST,
                "/v1/runs",
                &[auth[0], ("content-type", "application/json")],
                Some(
                    json!({"crew": "greet", "input": {}})
                        .to_string()
                        .into_bytes(),
                ),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{token}: {}", reply.text);
        let reply = api.call(Method::GET, "/metrics", &auth, None).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    // With a token, mistakes are reported as usual.
    get_with(&api, "/v1/runs/nope", "Bearer s3cret")
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_run_id");
    for path in ["/healthz", "/readyz"] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        let reply = get_with(&api, path, "Bearer wrong").await;
        assert_eq!(reply.status, StatusCode::OK, "{path} with a wrong token");
    }
    // The blank token in the list was dropped, not accepted.
    get_with(&api, "/v1/crews", "Bearer ")
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn no_tokens_means_an_open_api() {
    let api = Api::sqlite().await;
    assert_eq!(api.get("/v1/crews").await.status, StatusCode::OK);
    let api = Api::with(Kind::Sqlite, |s| s.with_tokens([" ", ""])).await;
    assert_eq!(api.get("/v1/crews").await.status, StatusCode::OK);
}

/// Every route of the table but the health checks and hooks needs the
/// token, whatever its method, and a refused action changes nothing.
#[tokio::test]
async fn every_guarded_route_in_the_table_needs_a_token() {
    let api = guarded().await;
    let id = greeted(&api, "x").await;
    let events = api.engine.events(id).await.unwrap();
    for (path, methods) in cairn_server::route_table() {
        let uri = path.replace("{id}", &id.to_string());
        for method in methods {
            let reply = api
                .call(
                    Method::from_bytes(method.as_bytes()).unwrap(),
                    &uri,
                    &[("content-type", "application/json")],
                    (*method == "POST").then(|| b"{\"from_step\": 0}".to_vec()),
                )
                .await;
            if path == "/healthz" || path == "/readyz" {
                assert_eq!(reply.status, StatusCode::OK, "{method} {path}");
            } else if path == "/v1/hooks/{name}" {
                // Open to any caller: each hook checks its own token or
                // signature (here: there is no such hook).
                reply.assert_error(StatusCode::NOT_FOUND, "hook_not_found");
            } else {
                reply.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
            }
        }
    }
    assert_eq!(api.engine.events(id).await.unwrap(), events);
    assert_eq!(api.runs().await.len(), 1);
}

/// A server without tokens or principals (development mode) whose
/// database stops answering cannot tell whether principals exist: it lets
/// nobody in and says the database is unavailable (503, never 401, which
/// would tell a client a token is needed), and once its cluster answers
/// again it is open again. (Found by the fault campaign: a failed read
/// used to close the API for good, every request 401 until a restart.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_development_server_is_open_again_once_its_cluster_answers_after_an_outage() {
    let mut cluster = tokio::task::block_in_place(cairn_testkit::PgCluster::start)
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    // A request waits for a connection at most this long (30 s by default).
    let opts = cairn::OpenOptions {
        acquire_timeout: std::time::Duration::from_secs(1),
        connect_timeout: std::time::Duration::from_secs(1),
        ..Default::default()
    };
    let engine = cairn::Engine::open_with(&cluster.url(), &opts, Default::default())
        .await
        .unwrap();
    let db = cairn_testkit::TestDb::postgres_at(cluster.url());
    let api = Api::with_engine(db, engine, |s| s);
    assert_eq!(api.get("/v1/runs").await.status, StatusCode::OK);
    tokio::task::block_in_place(|| cluster.stop()).unwrap();
    // Past the once-a-second check of the principals: the check fails.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let reply = api.get("/v1/runs").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text
    );
    assert_eq!(
        reply.json()["error"]["code"],
        "unavailable",
        "{}",
        reply.text
    );
    tokio::task::block_in_place(|| cluster.start_again()).unwrap();
    let mut reply = api.get("/v1/runs").await;
    for _ in 0..100 {
        if reply.status == StatusCode::OK {
            break;
        }
        assert_ne!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        reply = api.get("/v1/runs").await;
    }
    assert_eq!(reply.status, StatusCode::OK, "open again: {}", reply.text);
}
