//! Issue 13's defects, each through the server as a client meets it: short
//! API tokens, routes and methods revealed before authentication, actions
//! on runs of crews the server does not offer, half-sent headers and
//! bodies, too many connections and event streams, and PostgreSQL TLS.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use cairn::{Crew, Engine, ResumeOptions};
use cairn_server::{Error, ServeOptions, Server};
use cairn_testkit::{Kind, TestDb};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

use crate::support::{crew, greet, sh, start, write_crews, Api};

const TOKEN: &str = "tok-0123456789abcdef";

/// A guard against a test hanging forever when a fix regresses; never a
/// measurement (nothing asserts how long anything took).
const GUARD: Duration = Duration::from_secs(30);

#[tokio::test]
async fn startup_refuses_api_tokens_shorter_than_16_characters() {
    let db = TestDb::sqlite();
    let crews = tempfile::tempdir().unwrap();
    write_crews(crews.path());
    let opts = |tokens: &[&str]| ServeOptions {
        db_url: db.url.clone(),
        crews_dir: crews.path().to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        ..ServeOptions::default()
    };
    for (tokens, len) in [
        (&["#"][..], 1),
        (&["0123456789abcdef", "short-secret"], 12),
        (&["0123456789abcde", ""], 15),
    ] {
        let err = Server::bind(opts(tokens)).await.err().unwrap();
        assert!(
            matches!(err, Error::WeakToken { len: l, min: 16 } if l == len),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("at least 16") && message.contains("CAIRN_API_TOKENS"),
            "{message}"
        );
        for token in tokens.iter().filter(|t| !t.is_empty()) {
            assert!(
                !message.contains(token),
                "the message shows a token: {message}"
            );
        }
    }
    // Sixteen characters are enough; blank entries are still ignored.
    Server::bind(opts(&["0123456789abcdef", " "]))
        .await
        .unwrap();
}

/// Without a token, a wrong method on a guarded route is 401 like
/// everything else there: a 405 would tell a stranger the route exists.
#[tokio::test]
async fn wrong_methods_and_unknown_routes_answer_401_before_405_or_404() {
    let api = Api::with(Kind::Sqlite, |s| s.with_tokens([TOKEN])).await;
    let id = "0193a1b2-0000-7000-8000-000000000000";
    let probes = [
        (Method::DELETE, "/v1/runs".to_owned()),
        (Method::PUT, format!("/v1/runs/{id}")),
        (Method::GET, format!("/v1/runs/{id}/fork")),
        (Method::DELETE, "/v1/waits".to_owned()),
        (Method::GET, "/v1/compact".to_owned()),
        (Method::POST, "/metrics".to_owned()),
        (Method::GET, "/v1/no-such-route".to_owned()),
    ];
    for (method, uri) in &probes {
        api.call(method.clone(), uri, &[], None)
            .await
            .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    // With the token, the same requests get their real answers.
    let auth = [("authorization", "Bearer tok-0123456789abcdef")];
    for (method, uri) in &probes[..6] {
        api.call(method.clone(), uri, &auth, None)
            .await
            .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    }
    api.call(Method::GET, "/v1/no-such-route", &auth, None)
        .await
        .assert_error(StatusCode::NOT_FOUND, "not_found");
    // The open routes stay open, wrong methods included.
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    api.call(Method::POST, "/healthz", &[], None)
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}

/// A crew named like one the server offers, but another definition (a
/// `command` step): what a CLI user of a shared database could submit.
fn impostor() -> String {
    crew("greet", &[sh("greeter", "cat > /dev/null; echo ran", "")])
}

/// Fails its only step permanently: a failed run an operator could retry.
fn foreign_broken() -> String {
    let fails = sh(
        "fails",
        "cat > /dev/null; exit 2",
        "permanent_exit_codes = [2]\n",
    );
    crew("elsewhere", &[fails])
}

async fn retry_continue_and_fork_refuse_runs_of_crews_the_server_does_not_offer(kind: Kind) {
    let api = Api::with(kind, |s| s).await;
    // A run of the impostor, finished, and a failed run of a crew the
    // server never loaded, both stored by another process.
    let impostor = Crew::from_toml(&impostor()).unwrap();
    let done = api.submit_crew(&impostor, json!({"name": "x"})).await;
    api.drive(done).await;
    let broken = Crew::from_toml(&foreign_broken()).unwrap();
    let failed = api.submit_crew(&broken, json!({})).await;
    let _ = api.engine.resume(failed, ResumeOptions::default()).await;
    assert_eq!(
        api.engine.get_run(failed).await.unwrap().status.as_str(),
        "failed"
    );
    let runs_before = api.runs().await.len();

    let reply = api
        .post_json(
            &format!("/v1/runs/{done}/fork"),
            &json!({"from_step": 0, "input": {"name": "picked by the caller"}}),
        )
        .await;
    let message = reply.assert_error(StatusCode::NOT_FOUND, "crew_not_offered");
    assert!(
        message.contains(&done.to_string()) && message.contains("`greet`"),
        "{message}"
    );
    let reply = api
        .post_json(&format!("/v1/runs/{failed}/retry"), &json!({}))
        .await;
    reply.assert_error(StatusCode::NOT_FOUND, "crew_not_offered");
    let reply = api
        .post_json(&format!("/v1/runs/{failed}/continue"), &json!({}))
        .await;
    reply.assert_error(StatusCode::NOT_FOUND, "crew_not_offered");
    // Nothing was stored or changed.
    assert_eq!(api.runs().await.len(), runs_before);
    assert_eq!(
        api.engine.get_run(failed).await.unwrap().status.as_str(),
        "failed"
    );
    // Cancelling stays allowed: it stops work, it starts none.
    let reply = api
        .post_json(&format!("/v1/runs/{failed}/cancel"), &json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);

    // A run of a crew the server offers forks as before.
    let own = api.submit("greet", json!({"name": "own"})).await;
    api.drive(own).await;
    let reply = api
        .post_json(&format!("/v1/runs/{own}/fork"), &json!({"from_step": 0}))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);

    // The explicit setting lets the API act on any run.
    let open = Api::with(kind, |s| s.with_foreign_runs(true)).await;
    let elsewhere = open.submit_crew(&impostor, json!({"name": "y"})).await;
    open.drive(elsewhere).await;
    let reply = open
        .post_json(
            &format!("/v1/runs/{elsewhere}/fork"),
            &json!({"from_step": 0}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
}

cairn_testkit::both!(retry_continue_and_fork_refuse_runs_of_crews_the_server_does_not_offer);

/// A body that sends a few bytes and then nothing, forever.
fn stalled_body() -> Body {
    let first = futures_util::stream::once(async {
        Ok::<_, std::io::Error>(Bytes::from_static(b"{\"crew\": \"greet\", "))
    });
    Body::from_stream(futures_util::StreamExt::chain(
        first,
        futures_util::stream::pending(),
    ))
}

#[tokio::test]
async fn a_body_that_stalls_is_408_and_the_connection_closes() {
    let api = Api::with(Kind::Sqlite, |s| {
        s.with_body_timeout(Duration::from_millis(200))
    })
    .await;
    let request = Request::post("/v1/runs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(stalled_body())
        .unwrap();
    let response = tokio::time::timeout(GUARD, api.app.clone().oneshot(request))
        .await
        .expect("a stalled body is cut off")
        .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(response.headers()[header::CONNECTION], "close");
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    assert!(api.runs().await.is_empty());
    // A body sent whole is unaffected.
    api.submit("greet", json!({"name": "whole"})).await;
}

#[tokio::test]
async fn event_streams_beyond_the_cap_are_503_until_one_ends() {
    let api = Api::with(Kind::Sqlite, |s| s.with_max_event_streams(1)).await;
    // Never driven: the run stays queued, so its stream stays open.
    let id = api.submit("greet", json!({"name": "s"})).await;
    let uri = format!("/v1/runs/{id}/events");
    let open = |uri: String| {
        let app = api.app.clone();
        async move {
            app.oneshot(Request::get(uri).body(Body::empty()).unwrap())
                .await
                .unwrap()
        }
    };
    let first = open(uri.clone()).await;
    assert_eq!(first.status(), StatusCode::OK);
    let refused = api.get(&uri).await;
    let message = refused.assert_error(StatusCode::SERVICE_UNAVAILABLE, "too_many_streams");
    assert!(message.contains('1'), "{message}");
    assert_eq!(refused.headers[header::RETRY_AFTER], "1");
    // The client goes away: its place is free again.
    drop(first);
    let again = open(uri).await;
    assert_eq!(again.status(), StatusCode::OK);
}

/// Everything the server sends until it closes the connection.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut text = vec![];
    match tokio::time::timeout(GUARD, stream.read_to_end(&mut text)).await {
        Ok(Ok(_)) => {}
        // A reset is a close too.
        Ok(Err(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Err(_) => panic!("the server never closed the connection"),
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// `GET /healthz` on a fresh connection: the status line's code.
async fn healthz(addr: SocketAddr) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .ok()?;
    let text = read_to_close(&mut stream).await;
    text.split(' ').nth(1)?.parse().ok()
}

#[tokio::test]
async fn half_sent_headers_and_idle_connections_are_closed_by_the_header_timeout() {
    let server = start(|o| ServeOptions {
        header_timeout: Duration::from_millis(300),
        ..o
    })
    .await;
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ")
        .await
        .unwrap();
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    // Closed without an answer, each of them.
    assert_eq!(read_to_close(&mut half).await, "");
    assert_eq!(read_to_close(&mut idle).await, "");
    // A whole request is answered as before.
    assert_eq!(healthz(server.addr).await, Some(200));
    server.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_limit_are_answered_503_and_closed() {
    let server = start(|o| ServeOptions {
        max_connections: 2,
        header_timeout: Duration::from_secs(120),
        ..o
    })
    .await;
    // Two connections hold the two places (accepted in order).
    let held: Vec<TcpStream> = vec![
        TcpStream::connect(server.addr).await.unwrap(),
        TcpStream::connect(server.addr).await.unwrap(),
    ];
    let mut third = TcpStream::connect(server.addr).await.unwrap();
    let text = read_to_close(&mut third).await;
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "too_many_connections", "{body}");
    // One place frees up: requests are served again.
    drop(held);
    let mut answered = None;
    for _ in 0..600 {
        answered = healthz(server.addr).await;
        if answered == Some(200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answered, Some(200));
    server.stop().await;
}

/// The lower-cased error chain of opening `url`, which must fail.
async fn open_error(url: &str) -> String {
    let err = Engine::open(url).await.err().unwrap();
    cairn::ErrorChain(&err).to_string().to_lowercase()
}

/// PostgreSQL over TLS (sqlx's rustls): `sslmode=require` connects to a
/// server that offers TLS (the shared test server does, with a self-signed
/// certificate) and refuses one that does not, saying it is about TLS;
/// `verify-full` checks the certificate; `prefer` and `disable` connect to
/// both as before. Built without TLS, every `require` failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sslmode_require_uses_tls_and_says_so_when_the_server_has_none() {
    let db = TestDb::postgres().await;
    let with = |url: &str, mode: &str| {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}sslmode={mode}")
    };
    for mode in ["prefer", "disable"] {
        let engine = Engine::open(&with(&db.url, mode)).await.unwrap();
        engine.list(&Default::default()).await.unwrap();
    }
    // The shared server may or may not offer TLS (Debian's does, with a
    // self-signed certificate): either TLS is used, or the refusal says why.
    match Engine::open(&with(&db.url, "require")).await {
        Ok(engine) => {
            engine.list(&Default::default()).await.unwrap();
            let chain = open_error(&with(&db.url, "verify-full")).await;
            assert!(chain.contains("certificate"), "{chain}");
        }
        Err(e) => {
            let chain = cairn::ErrorChain(&e).to_string().to_lowercase();
            assert!(chain.contains("tls"), "{chain}");
        }
    }

    let cluster = tokio::task::block_in_place(cairn_testkit::PgCluster::start)
        .expect("a throwaway PostgreSQL cluster (no TLS)");
    let chain = open_error(&with(&cluster.url(), "require")).await;
    assert!(chain.contains("tls"), "{chain}");
    assert!(!chain.contains("unknown"), "{chain}");
    for mode in ["prefer", "disable"] {
        let engine = Engine::open(&with(&cluster.url(), mode)).await.unwrap();
        engine.list(&Default::default()).await.unwrap();
    }
    drop(cluster);
}

/// The crew the impostor pretends to be is loaded under the same name.
#[test]
fn the_impostor_differs_from_the_offered_crew() {
    let offered = Crew::from_toml(&greet()).unwrap();
    let impostor = Crew::from_toml(&impostor()).unwrap();
    assert_eq!(offered.def().name, impostor.def().name);
    assert_ne!(offered.fingerprint(), impostor.fingerprint());
}
