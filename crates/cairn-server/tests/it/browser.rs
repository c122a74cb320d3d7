//! The browser-facing hardening, each through a real server as a browser
//! or an attacker meets it: DNS rebinding against development mode (only
//! loopback `Host`s are served), framing (`X-Frame-Options`, a CSP the
//! pages live within), wrong tokens throttled per client address, the
//! number of console sessions capped, and a `Secure` session cookie when
//! the public URL is `https`.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use cairn_server::{Error, ServeOptions, Server};
use cairn_testkit::TestDb;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use crate::support::{start, write_crews, Reply};

const TOKEN: &str = "tok-0123456789abcdef";
const FORM: &str = "application/x-www-form-urlencoded";
const ALICE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const BOB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

fn with_tokens(o: ServeOptions) -> ServeOptions {
    ServeOptions {
        tokens: vec![TOKEN.into()],
        ..o
    }
}

/// One keep-alive connection to the server from a local address of the
/// test's choosing (Linux routes all of 127.0.0.0/8 to loopback).
struct Client {
    server: SocketAddr,
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

async fn connect(server: SocketAddr, from: Ipv4Addr) -> Client {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let stream = socket.connect(server).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    Client { server, sender }
}

impl Client {
    /// Sends a request; `Host` is the server's address unless `headers`
    /// give one.
    async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            request = request.header(header::HOST, self.server.to_string());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = Full::new(Bytes::from(body.unwrap_or_default()));
        self.sender.ready().await.unwrap();
        let response = self
            .sender
            .send_request(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            text: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    async fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send(Method::GET, path, headers, None).await
    }

    /// `POST /login` with this token.
    async fn sign_in(&mut self, token: &str, headers: &[(&str, &str)]) -> Reply {
        let mut all = vec![("content-type", FORM)];
        all.extend_from_slice(headers);
        self.send(Method::POST, "/login", &all, Some(format!("token={token}")))
            .await
    }

    /// Signs in with the right token: the session cookie (`name=value`).
    async fn session(&mut self) -> String {
        let reply = self.sign_in(TOKEN, &[]).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
        set_cookie(&reply.headers)
            .split(';')
            .next()
            .unwrap()
            .to_owned()
    }
}

fn set_cookie(headers: &HeaderMap) -> String {
    headers[header::SET_COOKIE].to_str().unwrap().to_owned()
}

fn header_of<'a>(reply: &'a Reply, name: &str) -> &'a str {
    reply
        .headers
        .get(name)
        .map(|v| v.to_str().unwrap())
        .unwrap_or("")
}

/// Development mode serves only requests addressed to a loopback name
/// (with or without the port) or the public URL's host; a rebinding
/// page's name gets a 400 that says why and what to do — JSON on the API,
/// a short text on the console, never the console's CSRF token — and its
/// submit stores nothing. Health checks answer whatever the name; with
/// tokens the `Host` is not checked, as before.
#[tokio::test]
async fn development_mode_serves_only_loopback_hosts() {
    let server = start(|o| o).await;
    let port = server.addr.port();
    let mut c = connect(server.addr, ALICE).await;
    for host in [
        format!("rebind.example:{port}"),
        "rebind.example".to_owned(),
        format!("127.0.0.1.rebind.example:{port}"),
        format!("localhost.rebind.example:{port}"),
    ] {
        let h = [("host", host.as_str())];
        let message = c
            .get("/v1/runs", &h)
            .await
            .assert_error(StatusCode::BAD_REQUEST, "host_not_allowed");
        for said in [host.as_str(), "127.0.0.1", "localhost", "CAIRN_API_TOKENS"] {
            assert!(message.contains(said), "{said}: {message}");
        }
        let page = c.get("/", &h).await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{host}");
        assert!(
            header_of(&page, "content-type").starts_with("text/plain"),
            "{page:?}"
        );
        assert!(page.text.contains(&host), "{}", page.text);
        assert!(!page.text.contains("csrf"), "{}", page.text);
        let submit = c
            .send(
                Method::POST,
                "/v1/runs",
                &[
                    ("host", host.as_str()),
                    ("content-type", "application/json"),
                ],
                Some(json!({"crew": "greet", "input": {"name": "x"}}).to_string()),
            )
            .await;
        submit.assert_error(StatusCode::BAD_REQUEST, "host_not_allowed");
        assert_eq!(c.get("/healthz", &h).await.status, StatusCode::OK);
    }
    for host in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_owned(),
        format!("localhost:{port}"),
        "LOCALHOST".to_owned(),
        format!("[::1]:{port}"),
        "[::1]".to_owned(),
    ] {
        let h = [("host", host.as_str())];
        let runs = c.get("/v1/runs", &h).await;
        assert_eq!(runs.status, StatusCode::OK, "{host}: {}", runs.text);
        assert_eq!(runs.json()["runs"], json!([]), "nothing was submitted");
        let page = c.get("/", &h).await;
        assert_eq!(page.status, StatusCode::OK, "{host}: {}", page.text);
        assert!(page.text.contains("Development mode"), "{}", page.text);
    }
    server.stop().await;

    // The public URL's host is served too, and named in the refusal.
    let server = start(|o| ServeOptions {
        public_url: Some("http://cairn.test:8080/".parse().unwrap()),
        ..o
    })
    .await;
    let mut c = connect(server.addr, ALICE).await;
    let own = format!("cairn.test:{}", server.addr.port());
    let crews = c.get("/v1/crews", &[("host", own.as_str())]).await;
    assert_eq!(crews.status, StatusCode::OK, "{}", crews.text);
    let message = c
        .get("/v1/crews", &[("host", "rebind.example")])
        .await
        .assert_error(StatusCode::BAD_REQUEST, "host_not_allowed");
    assert!(message.contains("cairn.test"), "{message}");
    server.stop().await;

    // With tokens, any name (a token or a session is needed anyway).
    let server = start(with_tokens).await;
    let mut c = connect(server.addr, ALICE).await;
    let auth = format!("Bearer {TOKEN}");
    let crews = c
        .get(
            "/v1/crews",
            &[("host", "cairn.example.com"), ("authorization", &auth)],
        )
        .await;
    assert_eq!(crews.status, StatusCode::OK, "{}", crews.text);
    server.stop().await;
}

/// Asserts the framing headers and a CSP that forbids framing and
/// foreign content without `unsafe-inline`.
#[track_caller]
fn assert_unframeable(reply: &Reply, what: &str) {
    assert_eq!(header_of(reply, "x-frame-options"), "DENY", "{what}");
    assert_eq!(
        header_of(reply, "x-content-type-options"),
        "nosniff",
        "{what}"
    );
    let csp = header_of(reply, "content-security-policy");
    for directive in ["default-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(directive), "{what}: {csp}");
    }
    assert!(!csp.contains("unsafe"), "{what}: {csp}");
}

/// Asserts a page needs nothing the CSP forbids: no inline script or
/// style, no handler attributes, nothing from another origin.
#[track_caller]
fn assert_within_the_policy(page: &str, what: &str) {
    let lower = page.to_ascii_lowercase();
    for forbidden in [
        "<style",
        " style=",
        " onclick=",
        " onload=",
        " onsubmit=",
        " onchange=",
        "javascript:",
        "src=\"http",
        "href=\"http",
        "href=\"//",
        "src=\"//",
        "url(",
    ] {
        assert!(!lower.contains(forbidden), "{what}: {forbidden} in {page}");
    }
    for script in lower.split("<script").skip(1) {
        let tag = script.split('>').next().unwrap_or("");
        assert!(tag.contains(" src=\"/"), "{what}: an inline script: {page}");
    }
}

/// Every console answer — pages with a timeline, a chart and forms, an
/// error page, assets, redirects, the sign-in page — forbids framing, and
/// the pages load only what `default-src 'self'` allows; the API's
/// answers carry the same headers.
#[tokio::test]
async fn console_responses_forbid_framing_and_pages_fit_the_policy() {
    let server = start(|o| ServeOptions {
        concurrency: 1,
        poll_interval: Duration::from_millis(50),
        ..o
    })
    .await;
    let mut c = connect(server.addr, ALICE).await;
    let submitted = c
        .send(
            Method::POST,
            "/v1/runs",
            &[("content-type", "application/json")],
            Some(
                json!({"crew": "pipeline", "input": {"name": "<b>x</b>"}, "thread_id": "t-1"})
                    .to_string(),
            ),
        )
        .await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.text);
    assert_unframeable(&submitted, "POST /v1/runs");
    let id = submitted.json()["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run: Value = c.get(&format!("/v1/runs/{id}"), &[]).await.json();
        if run["status"] == "succeeded" {
            break;
        }
        assert!(Instant::now() < deadline, "{run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for path in [
        "/".to_owned(),
        format!("/runs/{id}"),
        "/waits".to_owned(),
        "/crews".to_owned(),
        "/threads/t-1".to_owned(),
        "/runs/not-a-run-id".to_owned(),
        "/console.css".to_owned(),
        "/console.js".to_owned(),
        "/login".to_owned(),
    ] {
        let reply = c.get(&path, &[]).await;
        assert!(reply.status.as_u16() < 500, "{path}: {reply:?}");
        assert_unframeable(&reply, &path);
        if header_of(&reply, "content-type").starts_with("text/html") {
            assert_within_the_policy(&reply.text, &path);
        }
    }
    server.stop().await;

    let server = start(with_tokens).await;
    let mut c = connect(server.addr, ALICE).await;
    let redirect = c.get("/", &[]).await;
    assert_eq!(redirect.status, StatusCode::SEE_OTHER);
    assert_unframeable(&redirect, "redirect to sign-in");
    let login = c.get("/login", &[]).await;
    assert_unframeable(&login, "/login");
    assert_within_the_policy(&login.text, "/login");
    let wrong = c.sign_in("not-the-token-at-all", &[]).await;
    assert_unframeable(&wrong, "a wrong sign-in");
    server.stop().await;
}

/// A client address that presents ten wrong tokens, bearer or at sign-in,
/// is answered 429 with `Retry-After` from then on, whatever token it
/// presents (the right one too, or the answers would still tell a right
/// guess); a request without a token is still 401 and health checks
/// answer. Another address keeps its own budget.
#[tokio::test]
async fn wrong_tokens_are_throttled_per_client_address() {
    let server = start(with_tokens).await;
    let mut alice = connect(server.addr, ALICE).await;
    for n in 0..10 {
        let auth = format!("Bearer wrong-token-number-{n}");
        alice
            .get("/v1/crews", &[("authorization", &auth)])
            .await
            .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let auth = format!("Bearer {TOKEN}");
    for token in ["Bearer wrong-token-again", auth.as_str()] {
        let refused = alice.get("/v1/crews", &[("authorization", token)]).await;
        let message = refused.assert_error(StatusCode::TOO_MANY_REQUESTS, "too_many_attempts");
        assert!(message.contains("try again"), "{message}");
        let wait: u64 = header_of(&refused, "retry-after").parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
    let sign_in = alice.sign_in(TOKEN, &[]).await;
    assert_eq!(
        sign_in.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        sign_in.text
    );
    assert!(!header_of(&sign_in, "retry-after").is_empty());
    assert!(sign_in.headers.get(header::SET_COOKIE).is_none());
    assert!(sign_in.text.contains("try again"), "{}", sign_in.text);
    alice
        .get("/v1/crews", &[])
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(alice.get("/healthz", &[]).await.status, StatusCode::OK);

    // Bob is not Alice; his wrong sign-ins count as wrong tokens do.
    let mut bob = connect(server.addr, BOB).await;
    let crews = bob.get("/v1/crews", &[("authorization", &auth)]).await;
    assert_eq!(crews.status, StatusCode::OK, "{}", crews.text);
    for _ in 0..10 {
        let wrong = bob.sign_in("not-the-token-at-all", &[]).await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{}", wrong.text);
    }
    let refused = bob.sign_in(TOKEN, &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(!header_of(&refused, "retry-after").is_empty());
    bob.get("/v1/crews", &[("authorization", &auth)])
        .await
        .assert_error(StatusCode::TOO_MANY_REQUESTS, "too_many_attempts");
    server.stop().await;
}

/// At most 1,000 console sessions are kept per principal (in the
/// database): the 1,001st sign-in ends the oldest session, and only it.
#[tokio::test]
async fn sessions_beyond_the_cap_end_the_oldest() {
    let server = start(with_tokens).await;
    let mut c = connect(server.addr, ALICE).await;
    let first = c.session().await;
    // Sessions are ordered by their start (to the millisecond on SQLite).
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = c.session().await;
    let mut last = String::new();
    for _ in 0..999 {
        last = c.session().await;
    }
    let page = |cookie: String| {
        let server = server.addr;
        async move {
            let mut c = connect(server, ALICE).await;
            c.get("/", &[("cookie", &cookie)]).await
        }
    };
    let ended = page(first).await;
    assert_eq!(ended.status, StatusCode::SEE_OTHER, "{}", ended.text);
    assert_eq!(header_of(&ended, "location"), "/login");
    for kept in [second, last] {
        assert_eq!(page(kept).await.status, StatusCode::OK);
    }
    server.stop().await;
}

/// The session cookie is `Secure` when the public URL is `https` (on
/// signing in and out), and not otherwise: a client's `X-Forwarded-Proto`
/// is not trusted. A public URL that is not http(s) stops the startup.
#[tokio::test]
async fn the_session_cookie_is_secure_when_the_public_url_is_https() {
    let server = start(|o| ServeOptions {
        public_url: Some("https://cairn.example.com".parse().unwrap()),
        ..with_tokens(o)
    })
    .await;
    let mut c = connect(server.addr, ALICE).await;
    let signed = c.sign_in(TOKEN, &[]).await;
    let set = set_cookie(&signed.headers);
    assert!(
        set.contains("; Secure") && set.contains("HttpOnly"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let page = c.get("/", &[("cookie", &cookie)]).await;
    let csrf = page
        .text
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let out = c
        .send(
            Method::POST,
            "/logout",
            &[("content-type", FORM), ("cookie", &cookie)],
            Some(format!("csrf={csrf}")),
        )
        .await;
    let cleared = set_cookie(&out.headers);
    assert!(
        cleared.contains("Max-Age=0") && cleared.contains("; Secure"),
        "{cleared}"
    );
    server.stop().await;

    let server = start(with_tokens).await;
    let mut c = connect(server.addr, ALICE).await;
    let signed = c.sign_in(TOKEN, &[("x-forwarded-proto", "https")]).await;
    let set = set_cookie(&signed.headers);
    assert!(!set.contains("Secure"), "{set}");
    server.stop().await;

    let crews = tempfile::tempdir().unwrap();
    write_crews(crews.path());
    let db = TestDb::sqlite();
    let err = Server::bind(ServeOptions {
        db_url: db.url.clone(),
        crews_dir: crews.path().to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        public_url: Some("ftp://cairn.example.com".parse().unwrap()),
        ..ServeOptions::default()
    })
    .await
    .err()
    .unwrap();
    assert!(matches!(err, Error::PublicUrl { .. }), "{err}");
    assert!(err.to_string().contains("ftp://cairn.example.com"), "{err}");
}
