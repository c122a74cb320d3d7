//! `server::Error` (why the server could not start or stopped) and
//! `ApiError`, the one place where a failure becomes an HTTP status and a
//! `{"error": {"code", "message"}}` body. 5xx details are logged, never sent.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn::ErrorClass;
use serde_json::json;

/// Why the server could not start, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No API tokens were given and the listen address is not a loopback
    /// address: the API would be open to the network.
    #[error("refusing to listen on {listen} without API tokens: anyone who reaches it could submit runs, and `command` agents run programs; add a principal (`cairn principals add NAME --role admin`), set CAIRN_API_TOKENS (comma-separated) or listen on a loopback address such as 127.0.0.1:8080")]
    OpenOnNetwork { listen: SocketAddr },
    /// The crews directory could not be read.
    #[error("cannot read the crews directory {}: {source}", path.display())]
    CrewsDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A crew file failed to load.
    #[error("cannot load crew file {}", path.display())]
    CrewFile {
        path: PathBuf,
        #[source]
        source: Box<cairn::Error>,
    },
    /// A file of the crews directory that is no crew at all (no `name`):
    /// a price table or a limits file put there, most likely.
    #[error("{} is not a crew file (it has no `name`): the crews directory holds crew files only; a price table goes in its own file named by CAIRN_PRICES, provider key limits in one named by CAIRN_LIMITS (docs/operations.md)", path.display())]
    NotACrew { path: PathBuf },
    /// Two crew files define a crew of the same name.
    #[error("crew `{name}` version `{version}` is defined twice: in {} and in {}; each version of a crew must come from one file", first.display(), second.display())]
    DuplicateCrew {
        version: String,
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// The database could not be opened.
    #[error("cannot open the database")]
    Open(#[source] Box<cairn::Error>),
    /// The listen address could not be bound.
    #[error("cannot listen on {listen}: {source}")]
    Bind {
        listen: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// An API token shorter than [`crate::MIN_TOKEN_LEN`].
    #[error("an API token in CAIRN_API_TOKENS is {len} characters long; tokens must have at least {min} (generate one with `openssl rand -hex 32`)")]
    WeakToken { len: usize, min: usize },
    /// The HTTP server failed while serving.
    #[error("the HTTP server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The public URL is not an `http` or `https` URL with a host.
    #[error("the public URL `{url}` {reason}; give the address browsers use to reach this server, such as https://cairn.example.com")]
    PublicUrl { url: String, reason: &'static str },
    /// The notices' settings do not work (their secret).
    #[error("{0}")]
    Notify(String),
}

/// An API failure: a status, a stable `code` and a message for the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The body is not JSON (syntax error, truncated).
    #[error("the request body is not valid JSON: {0}")]
    BadJson(String),
    /// The body is JSON of the wrong shape (missing field, wrong type).
    #[error("the request body does not match the expected shape: {0}")]
    InvalidBody(String),
    /// The body could not be read.
    #[error("the request body could not be read: {0}")]
    BadBody(String),
    /// A body without `Content-Type: application/json`.
    #[error("send the body as JSON with `Content-Type: application/json`")]
    UnsupportedMediaType,
    /// The body exceeded the server's limit.
    #[error("the request body is larger than the server accepts ({limit} bytes)")]
    TooLarge { limit: usize },
    /// The body did not arrive within the server's body timeout.
    #[error("the request body did not arrive within {}; send it whole, at once", crate::bounds::human(*after))]
    BodyTimeout { after: std::time::Duration },
    /// As many event streams as the server allows are open.
    #[error("{limit} event streams are open, as many as this server allows; try again later")]
    TooManyStreams { limit: usize },
    /// Retry, continue or fork of a run whose crew this server does not
    /// offer (a run submitted elsewhere on a shared database).
    #[error("run {run} belongs to crew `{crew}` ({fingerprint}), which this server does not offer (GET /v1/crews lists what it offers); act on it where it was submitted, or start the server with `cairn serve --foreign-runs` to allow actions on such runs")]
    CrewNotOffered {
        run: cairn::RunId,
        crew: String,
        fingerprint: String,
    },
    /// A query string parameter is malformed or unknown.
    #[error("bad query string: {0}")]
    BadQuery(String),
    /// `cursor` does not name a run.
    #[error(
        "`cursor` does not name a run (it may have been deleted); list again without a cursor"
    )]
    BadCursor,
    /// `Last-Event-ID` is not an event sequence number.
    #[error(
        "`Last-Event-ID` must be an event sequence number (a non-negative integer), not `{0}`"
    )]
    BadLastEventId(String),
    /// A crew name this server does not know.
    #[error("no crew named `{0}` is loaded on this server (GET /v1/crews lists them)")]
    UnknownCrew(String),
    /// The run published no value under this key (yet).
    #[error("run {run} has published no value under `{key}` (yet); GET /v1/runs/{run}/values lists what it published")]
    ValueNotFound { run: cairn::RunId, key: String },
    /// A crew this server loads, but not in the version asked for.
    #[error("crew `{crew}` has no version `{version}` loaded on this server (loaded: {}; GET /v1/crews lists them)", .loaded.join(", "))]
    UnknownCrewVersion {
        crew: String,
        version: String,
        loaded: Vec<String>,
    },
    /// A path segment that is not a run id.
    #[error("`{0}` is not a run id (expected a UUID)")]
    BadRunId(String),
    /// No run has this id.
    #[error("run {0} not found")]
    RunNotFound(String),
    /// A path segment that is not a wait id.
    #[error("`{0}` is not a wait id (expected a UUID)")]
    BadWaitId(String),
    /// No route matches the path.
    #[error("no such route: {0}")]
    NoRoute(String),
    /// The route exists, the method does not.
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    /// Missing or wrong bearer token.
    #[error("a valid `Authorization: Bearer <token>` header is required")]
    Unauthorized,
    /// A valid token whose principal may not do this (its role, or the
    /// tenants it is bound to); nothing was stored.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Too many wrong tokens (bearer or sign-in) from this client's
    /// address: 429 with `Retry-After`.
    #[error("too many wrong API tokens from your address; try again in {} s", retry_after_secs(*retry_after))]
    TooManyAttempts { retry_after: std::time::Duration },
    /// Development mode (no tokens) and a `Host` that is not a loopback
    /// name: a DNS rebinding page would otherwise be same-origin.
    #[error("this server runs without API tokens (development mode) and answers only requests addressed to 127.0.0.1, [::1] or localhost{}, not to host `{host}` (this protects it from DNS rebinding): open it at a loopback address such as http://127.0.0.1:<port>/, or serve with API tokens (CAIRN_API_TOKENS) to reach it by another name", or_public_host(public_host))]
    HostNotAllowed {
        host: String,
        public_host: Option<String>,
    },
    /// The database does not answer.
    #[error("the database does not answer")]
    NotReady,
    /// The database answers but takes no writes: a standby (in recovery)
    /// or a primary set read-only, as during a failover. `/readyz`'s
    /// `not_ready` too, with `error.reason` `read_only`.
    #[error(
        "the database takes no writes: {} (a failover may be under way)",
        match in_recovery {
            true => "it is a standby (in recovery)",
            false => "it is read-only (transaction_read_only = on)",
        }
    )]
    ReadOnly { in_recovery: bool },
    /// An answer to a wait that is no longer open, with the open wait of
    /// the same run, if it has one (the wait a person most likely meant:
    /// a rejected review's re-run opens a new one): its body names it as
    /// `error.open_wait`.
    #[error("{source}; {}", open_wait_text(*.run, .open.as_deref()))]
    WaitClosed {
        source: cairn::Error,
        run: cairn::RunId,
        open: Option<Box<cairn::WaitRecord>>,
    },
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] cairn::Error),
}

/// `WaitClosed`'s pointer to the run's open wait.
fn open_wait_text(run: cairn::RunId, open: Option<&cairn::WaitRecord>) -> String {
    match open {
        Some(w) => format!(
            "run {run} waits on wait {} ({} of step {}): answer that one",
            w.id,
            w.kind.as_str(),
            w.step_idx
        ),
        None => format!("run {run} has no open wait"),
    }
}

impl ApiError {
    /// What kind of failure this is: its HTTP status comes from the one
    /// table in `cairn::ErrorClass`.
    pub fn class(&self) -> ErrorClass {
        match self {
            ApiError::BadJson(_)
            | ApiError::InvalidBody(_)
            | ApiError::BodyTimeout { .. }
            | ApiError::BadBody(_)
            | ApiError::BadQuery(_)
            | ApiError::BadCursor
            | ApiError::BadLastEventId(_)
            | ApiError::BadRunId(_)
            | ApiError::BadWaitId(_)
            | ApiError::HostNotAllowed { .. } => ErrorClass::BadInput,
            ApiError::UnsupportedMediaType => ErrorClass::UnsupportedMediaType,
            ApiError::TooLarge { .. } => ErrorClass::TooLarge,
            ApiError::UnknownCrew(_)
            | ApiError::UnknownCrewVersion { .. }
            | ApiError::CrewNotOffered { .. }
            | ApiError::RunNotFound(_)
            | ApiError::ValueNotFound { .. }
            | ApiError::NoRoute(_) => ErrorClass::NotFound,
            ApiError::MethodNotAllowed => ErrorClass::MethodNotAllowed,
            ApiError::Unauthorized => ErrorClass::Unauthorized,
            ApiError::Forbidden(_) => ErrorClass::Forbidden,
            ApiError::NotReady
            | ApiError::ReadOnly { .. }
            | ApiError::TooManyStreams { .. }
            | ApiError::TooManyAttempts { .. } => ErrorClass::Unavailable,
            ApiError::WaitClosed { .. } => ErrorClass::Conflict,
            ApiError::Engine(e) => e.class(),
        }
    }

    /// The stable `code` of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadJson(_) => "bad_json",
            ApiError::InvalidBody(_) => "invalid_body",
            ApiError::BadBody(_) => "bad_body",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::TooLarge { .. } => "too_large",
            ApiError::BodyTimeout { .. } => "request_timeout",
            ApiError::TooManyStreams { .. } => "too_many_streams",
            ApiError::CrewNotOffered { .. } => "crew_not_offered",
            ApiError::BadQuery(_) => "bad_query",
            ApiError::BadCursor => "bad_cursor",
            ApiError::BadLastEventId(_) => "bad_last_event_id",
            ApiError::UnknownCrew(_) | ApiError::UnknownCrewVersion { .. } => "unknown_crew",
            ApiError::BadRunId(_) => "bad_run_id",
            ApiError::RunNotFound(_) => "run_not_found",
            ApiError::ValueNotFound { .. } => "value_not_found",
            ApiError::BadWaitId(_) => "bad_wait_id",
            ApiError::NoRoute(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::TooManyAttempts { .. } => "too_many_attempts",
            ApiError::HostNotAllowed { .. } => "host_not_allowed",
            ApiError::NotReady | ApiError::ReadOnly { .. } => "not_ready",
            ApiError::WaitClosed { .. } => "wait_closed",
            // A 500 names nothing internal, not even which error it was.
            ApiError::Engine(e) if e.class().http_status() == 500 => "internal",
            ApiError::Engine(e) => e.code(),
        }
    }

    /// The HTTP status and the stable `code` of the JSON body.
    ///
    /// A body timeout is the client's mistake (`BadInput`) but answers 408,
    /// and too many wrong tokens (`Unavailable`: try later) answer 429, the
    /// statuses HTTP clients and proxies know for them; every other status
    /// is the class's.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        let status = match self {
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::from_u16(self.class().http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        };
        (status, self.code())
    }

    /// Maps a rejection of axum's `Json` extractor.
    pub(crate) fn from_json_rejection(rejection: JsonRejection, limit: usize) -> ApiError {
        match rejection {
            JsonRejection::JsonSyntaxError(e) => ApiError::BadJson(source_text(&e)),
            JsonRejection::JsonDataError(e) => ApiError::InvalidBody(source_text(&e)),
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType,
            other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::TooLarge { limit }
            }
            other => ApiError::BadBody(other.body_text()),
        }
    }

    /// Maps a rejection of axum's `Query` extractor.
    pub(crate) fn from_query_rejection(rejection: QueryRejection) -> ApiError {
        match rejection {
            QueryRejection::FailedToDeserializeQueryString(e) => {
                ApiError::BadQuery(source_text(&e))
            }
            other => ApiError::BadQuery(other.body_text()),
        }
    }
}

/// The innermost message of a rejection (serde's "missing field `crew` at
/// line 1 column 2"), without axum's generic prefix.
fn source_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

impl ApiError {
    /// The status, code and message a client may see (5xx details go to
    /// the log, never to the client): the API's JSON and the console's
    /// pages say the same.
    pub(crate) fn public(&self) -> (StatusCode, &'static str, String) {
        let (status, code) = self.status_and_code();
        let message = match status {
            StatusCode::INTERNAL_SERVER_ERROR => {
                tracing::error!(error = %ErrorChain(self), "request failed");
                "internal error; the server log has the details".to_owned()
            }
            StatusCode::SERVICE_UNAVAILABLE
                if matches!(
                    self,
                    ApiError::TooManyStreams { .. } | ApiError::ReadOnly { .. }
                ) =>
            {
                self.to_string()
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                tracing::warn!(error = %ErrorChain(self), "request failed");
                "the database is unavailable; try again later".to_owned()
            }
            _ => self.to_string(),
        };
        (status, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match &self {
            ApiError::TooManyAttempts { retry_after } => Some(retry_after_header(*retry_after)),
            _ => None,
        };
        let (status, code, message) = self.public();
        let mut body = json!({"error": {"code": code, "message": message}});
        if let ApiError::WaitClosed { run, open, .. } = &self {
            body["error"]["run_id"] = json!(run);
            body["error"]["open_wait"] = match open {
                Some(w) => json!({"id": w.id, "kind": w.kind, "step_idx": w.step_idx}),
                None => serde_json::Value::Null,
            };
        }
        match &self {
            ApiError::NotReady => body["error"]["reason"] = json!("no_answer"),
            ApiError::ReadOnly { .. } => body["error"]["reason"] = json!("read_only"),
            _ => {}
        }
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Some(wait) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, wait);
        }
        response
    }
}

/// `HostNotAllowed`'s mention of the public URL's host, if one is set.
fn or_public_host(host: &Option<String>) -> String {
    host.as_deref()
        .map(|h| format!(" (or {h}, the public URL's host)"))
        .unwrap_or_default()
}

/// Whole seconds to wait, rounded up, at least 1 (what `Retry-After` says).
pub(crate) fn retry_after_secs(wait: std::time::Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

/// A `Retry-After` header value for `wait`.
pub(crate) fn retry_after_header(wait: std::time::Duration) -> HeaderValue {
    HeaderValue::from(retry_after_secs(wait))
}

/// Displays an error with its sources, for logs (the facade's).
pub(crate) use cairn::ErrorChain;
