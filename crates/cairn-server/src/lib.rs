//! Cairn's HTTP API: JSON over axum, versioned under `/v1`, plus an embedded
//! runner that executes the runs the API queues.
//!
//! [`router`] builds the API from an [`AppState`] (for tests and for
//! embedding in a service); [`serve`] is what `cairn serve` calls: it opens
//! the database, loads the crews, binds, runs the API and the runner, and
//! stops gracefully on Ctrl-C or SIGTERM.
//!
//! | route | what |
//! | --- | --- |
//! | `POST /v1/runs` | submit a run (201; 200 for a repeated idempotency key) |
//! | `GET /v1/runs` | runs oldest first: `?status=&crew=&limit=&cursor=` |
//! | `GET /v1/runs/{id}` | one run with its steps (`cairn runs show --json`) |
//! | `GET /v1/runs/{id}/events` | the run's events as Server-Sent Events |
//! | `POST /v1/runs/{id}/retry` | a failed run's failed step runs again (queues it) |
//! | `POST /v1/runs/{id}/continue` | an interrupted run carries on (queues it) |
//! | `POST /v1/runs/{id}/cancel` | cancel now, or request it of a running run |
//! | `POST /v1/runs/{id}/fork` | a new run copying the first `from_step` checkpoints (201) |
//! | `GET /v1/waits` | human waits: `?run=&status=` (`cairn waits list --json`) |
//! | `POST /v1/waits/{id}/answer` | approve, edit, reject or answer a wait |
//! | `GET /v1/crews` | the crew versions loaded from the crews directory |
//! | `GET /v1/crews/stored`, `GET /v1/crews/{name}/versions/{version}`, `GET /v1/crews/{name}/diff` | stored crew versions, one definition, a diff (`versions.rs`) |
//! | `POST /v1/crews/{name}/upgrade` | move unfinished runs to a loaded version |
//! | `GET /v1/openapi.json` | the OpenAPI 3.1 document |
//! | `GET /metrics` | Prometheus text |
//! | `GET /healthz`, `GET /readyz` | liveness, database readiness: it answers and takes writes (no token needed) |
//! | `GET /`, `GET /runs/{id}`, `GET /waits`, `GET /threads/{id}`, `GET /crews` | the web console's pages (`console.rs`; a session cookie, not a token) |
//! | `POST /runs/{id}/{retry,continue,cancel,fork}`, `POST /waits/{id}/answer`, `POST /crews/{name}/{version}/upgrade` | the console's forms (CSRF token) |
//! | `GET /login`, `POST /login`, `POST /logout` | the console's sign-in with an API token |
//!
//! Errors are `{"error": {"code", "message"}}`; see [`ApiError`].
//!
//! **Browsers** (`browser.rs`, `throttle.rs`): without tokens (development
//! mode) only requests addressed to a loopback name (`127.0.0.1`, `[::1]`,
//! `localhost`, any port) or to the public URL's host are served, others
//! are 400 `host_not_allowed`, so a DNS rebinding page cannot reach the
//! console or `/v1`; every response carries `X-Frame-Options: DENY` and a
//! `Content-Security-Policy` of `default-src 'self'; frame-ancestors
//! 'none'` (and a few more); a client address that presents too many wrong
//! tokens (bearer or sign-in) is answered 429 `too_many_attempts` with
//! `Retry-After` for a while. The public URL ([`ServeOptions::public_url`],
//! [`AppState::with_public_url`]) is the address browsers use: its host is
//! allowed in development mode, and with `https` the session cookie is
//! `Secure`. `X-Forwarded-Proto` and `X-Forwarded-For` are not read: the
//! server has no notion of a trusted proxy, so a client could set them.
//!
//! **Invariant:** the server decides nothing about runs: it translates HTTP
//! into `cairn::Engine` calls and typed errors into statuses.
//! **Invariant:** no internal detail (SQL, paths, hosts) reaches a client in a 5xx.

mod actions;
mod api;
mod auth;
mod bounds;
mod browser;
mod console;
mod crews;
mod error;
mod extract;
mod hooks;
mod keys;
mod listen;
mod metrics;
mod notify;
mod people;
mod published;
mod retention;
mod runner;
mod schedules;
mod serve;
mod signals;
mod sse;
mod threads;
mod throttle;
mod versions;
mod waits;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use tokio::sync::{watch, Semaphore};

use cairn::Engine;

pub use api::OPENAPI_JSON;
pub use auth::MIN_TOKEN_LEN;
pub use crews::Crews;
pub use error::{ApiError, Error};
pub use notify::{MailOptions, NotifyOptions};
pub use serve::{
    serve, shutdown_signal, ServeOptions, Server, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The default request body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// The default time a client gets to send a request's body once its
/// headers arrived (408 `request_timeout` beyond).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The default number of event streams (`GET /v1/runs/{id}/events`) open
/// at once; each polls the database, so they are capped (503 beyond).
pub const DEFAULT_MAX_EVENT_STREAMS: usize = 100;

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    engine: Engine,
    crews: Arc<Crews>,
    tokens: Arc<auth::Tokens>,
    body_limit: usize,
    metrics: Arc<metrics::Metrics>,
    waker: cairn::WakeUp,
    shutdown: Arc<watch::Sender<bool>>,
    body_timeout: Duration,
    /// One permit per event stream that may be open.
    streams: Arc<Semaphore>,
    max_event_streams: usize,
    /// Retry, continue and fork runs of crews this server does not offer.
    foreign_runs: bool,
    /// The console's development-mode form token.
    sessions: Arc<console::Sessions>,
    /// Whether requests need a token (`CAIRN_API_TOKENS` or principals).
    closed: Arc<people::Closed>,
    /// Wrong tokens per client address.
    throttle: Arc<throttle::Throttle>,
    /// The address browsers use to reach the server, if configured.
    public_url: Option<Arc<url::Url>>,
}

impl AppState {
    /// An open API (no tokens) with the default body limit.
    pub fn new(engine: Engine, crews: Crews) -> AppState {
        AppState {
            engine,
            crews: Arc::new(crews),
            tokens: Arc::default(),
            body_limit: DEFAULT_BODY_LIMIT,
            metrics: Arc::default(),
            waker: cairn::WakeUp::default(),
            shutdown: Arc::new(watch::channel(false).0),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            streams: Arc::new(Semaphore::new(DEFAULT_MAX_EVENT_STREAMS)),
            max_event_streams: DEFAULT_MAX_EVENT_STREAMS,
            foreign_runs: false,
            sessions: Arc::default(),
            closed: Arc::default(),
            throttle: Arc::default(),
            public_url: None,
        }
    }

    /// Requires `Authorization: Bearer <token>` with one of these tokens on
    /// every route but `/healthz` and `/readyz`. Blank tokens are ignored;
    /// none at all leaves the API open.
    pub fn with_tokens<S: AsRef<str>>(mut self, tokens: impl IntoIterator<Item = S>) -> AppState {
        self.tokens = Arc::new(auth::Tokens::new(tokens));
        self
    }

    /// Refuses request bodies larger than this (413 `too_large`).
    pub fn with_body_limit(mut self, bytes: usize) -> AppState {
        self.body_limit = bytes;
        self
    }

    /// How long a client gets to send a body once its headers arrived
    /// (408 `request_timeout` beyond): a client that stops half-way holds
    /// its connection no longer than this.
    pub fn with_body_timeout(mut self, timeout: Duration) -> AppState {
        self.body_timeout = timeout;
        self
    }

    /// At most this many event streams open at once (503
    /// `too_many_streams` beyond).
    pub fn with_max_event_streams(mut self, streams: usize) -> AppState {
        let streams = streams.min(Semaphore::MAX_PERMITS);
        self.streams = Arc::new(Semaphore::new(streams));
        self.max_event_streams = streams;
        self
    }

    /// Whether retry, continue and fork may act on runs of crews this
    /// server does not offer (runs submitted elsewhere on a shared
    /// database). Off by default: a fork from step 0 re-executes the
    /// run's crew with an input the caller picks, so allowing it would let
    /// an API client run any crew ever stored, not only the ones in the
    /// crews directory.
    pub fn with_foreign_runs(mut self, allow: bool) -> AppState {
        self.foreign_runs = allow;
        self
    }

    /// The address browsers use to reach this server (e.g. its address
    /// behind a TLS-terminating proxy). Its host is served in development
    /// mode besides the loopback names; with `https` the console's
    /// session cookie is `Secure`.
    pub fn with_public_url(mut self, url: url::Url) -> AppState {
        self.public_url = Some(Arc::new(url));
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn crews(&self) -> &Crews {
        &self.crews
    }

    pub fn body_limit(&self) -> usize {
        self.body_limit
    }

    /// Whether requests need a token: `CAIRN_API_TOKENS` were given, or
    /// the database holds a principal (as last seen: `people::Closed`).
    pub fn requires_token(&self) -> bool {
        !self.tokens.is_empty() || self.closed.get()
    }

    pub(crate) fn closed(&self) -> &people::Closed {
        &self.closed
    }

    pub(crate) fn body_timeout(&self) -> Duration {
        self.body_timeout
    }

    pub(crate) fn streams(&self) -> &Arc<Semaphore> {
        &self.streams
    }

    pub(crate) fn max_event_streams(&self) -> usize {
        self.max_event_streams
    }

    pub(crate) fn foreign_runs(&self) -> bool {
        self.foreign_runs
    }

    pub(crate) fn tokens(&self) -> &auth::Tokens {
        &self.tokens
    }

    pub(crate) fn sessions(&self) -> &console::Sessions {
        &self.sessions
    }

    pub(crate) fn throttle(&self) -> &throttle::Throttle {
        &self.throttle
    }

    /// The public URL's host (`[v6]` bracketed), if one is configured.
    pub(crate) fn public_host(&self) -> Option<&str> {
        self.public_url.as_deref().and_then(url::Url::host_str)
    }

    /// Whether the session cookie gets `Secure`: the public URL is `https`.
    pub(crate) fn secure_cookies(&self) -> bool {
        self.public_url
            .as_deref()
            .is_some_and(|u| u.scheme() == "https")
    }

    pub(crate) fn metrics(&self) -> &Arc<metrics::Metrics> {
        &self.metrics
    }

    /// Tells the embedded runner (if any) to look for queued runs now.
    pub(crate) fn wake_runner(&self) {
        self.waker.wake();
    }

    pub(crate) fn waker(&self) -> &cairn::WakeUp {
        &self.waker
    }

    /// Becomes `true` when the server begins to shut down.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Ends event streams and stops the runner from launching runs.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }
}

/// Every route of the API with its methods, as the router serves them
/// (the OpenAPI document is checked against this list).
pub fn route_table() -> Vec<(&'static str, &'static [&'static str])> {
    api::routes()
        .into_iter()
        .map(|r| (r.path, r.methods))
        .collect()
}

/// The API's router, state applied.
///
/// The token check is a layer over every route, the "no such route"
/// fallback and every route's "wrong method" answer alike, so a client
/// without a token learns nothing about which routes or methods exist
/// (401 before 404 or 405); it lets the open routes (`/healthz`,
/// `/readyz`) through. Inside it, bodies are read under the body timeout.
/// Outside it, development mode's `Host` check, then the request count,
/// and outermost the security headers, so that every answer carries them.
pub fn router(state: AppState) -> Router {
    let mut router = console::routes();
    for route in api::routes() {
        router = router.route(route.path, route.handlers);
    }
    router
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            bounds::read_body,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            browser::check_host,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .layer(DefaultBodyLimit::max(state.body_limit))
        .layer(middleware::from_fn(browser::security_headers))
        .with_state(state)
}

/// Counts every answered request by route and status, and logs it.
async fn count_requests(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    state.metrics.record_request(&route, status.as_u16());
    tracing::debug!(%method, %route, status = status.as_u16(), ms = started.elapsed().as_millis() as u64, "request");
    response
}
