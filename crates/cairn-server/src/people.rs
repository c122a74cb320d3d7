//! Who is calling, and what they may do. The token check (`auth.rs`)
//! resolves a bearer token to a [`Caller`]: an admin for a token of
//! `CAIRN_API_TOKENS` (named `api`, as every caller was before
//! principals), else the principal whose token it is. [`needed`] is the
//! one table from a route to the access it needs: reads need a viewer,
//! other methods an operator, the admin paths an admin. Handlers record
//! the caller as the actor of what they do ([`Caller::actor`]): a `by`
//! in a body is kept only as a note.
//!
//! Routes: `GET /v1/principals`, `POST /v1/principals`,
//! `POST /v1/principals/{name}/disable`, `POST /v1/principals/{name}/rotate`
//! (admins), and `GET /v1/audit` (admins).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, Path, State};
use axum::http::{request::Parts, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use cairn::{Access, Actor, AuditEntry, AuditFilter, NewPrincipal, Origin, Principal, Tenant, Via};

use crate::extract::{ApiJson, ApiQuery};
use crate::{ApiError, AppState};

/// The name `CAIRN_API_TOKENS`' tokens act under, and an open API's caller.
pub(crate) const API_PRINCIPAL: &str = "api";

/// The routes only admins may use (any method).
const ADMIN_PATHS: &[&str] = &[
    "/v1/principals",
    "/v1/principals/{name}/disable",
    "/v1/principals/{name}/rotate",
    "/v1/audit",
    "/v1/limits/pause",
    "/v1/limits/resume",
    "/v1/limits/set",
    "/v1/limits/reset",
    "/v1/compact",
    "/v1/crews/{name}/upgrade",
];

/// The access a request needs: an admin path needs an admin, a read a
/// viewer, anything else an operator.
pub(crate) fn needed(method: &Method, path: Option<&str>) -> Access {
    if path.is_some_and(|p| ADMIN_PATHS.contains(&p)) {
        return Access::Admin;
    }
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Access::Viewer,
        _ => Access::Operator,
    }
}

/// Who is calling: a principal (or `CAIRN_API_TOKENS`' admin, or the open
/// API's), its token's id and where from.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub name: String,
    pub access: Access,
    pub groups: Vec<String>,
    pub tenants: Vec<Tenant>,
    pub token: Option<String>,
    pub via: Via,
    pub client: Option<IpAddr>,
}

impl Caller {
    /// A `CAIRN_API_TOKENS` token's holder (`token`: its public id,
    /// `env-` and 8 hex digits of its digest), or the open API's caller.
    pub fn api(token: Option<String>, client: Option<IpAddr>) -> Caller {
        Caller {
            name: API_PRINCIPAL.to_owned(),
            access: Access::Admin,
            groups: vec![],
            tenants: vec![],
            token,
            via: Via::Api,
            client,
        }
    }

    pub fn of(principal: Principal, via: Via, client: Option<IpAddr>) -> Caller {
        Caller {
            name: principal.name,
            access: principal.role,
            groups: principal.groups,
            tenants: principal.tenants,
            token: Some(principal.token_id),
            via,
            client,
        }
    }

    /// Refuses (403 `forbidden`) unless the caller's role covers `needed`.
    pub fn require(&self, needed: Access) -> Result<(), ApiError> {
        match self.access.covers(needed) {
            true => Ok(()),
            false => Err(ApiError::Forbidden(format!(
                "`{}` is {}; this needs {}",
                self.name,
                with_article(self.access),
                with_article(needed),
            ))),
        }
    }

    /// Where the caller's actions come from; `note` is what a body's `by` said.
    pub fn origin(&self, note: Option<String>) -> Origin {
        Origin {
            via: Some(self.via),
            token: self.token.clone(),
            client: self.client.map(|c| c.to_string()),
            note: note
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty() && n != &self.name),
        }
    }

    /// The actor of an action: the caller, whatever a body's `by` says
    /// (kept as a note), with the reason given.
    pub fn actor(&self, by: Option<String>, reason: Option<String>) -> Actor {
        let actor = Actor::new(self.name.clone()).from(self.origin(by));
        match reason.filter(|r| !r.trim().is_empty()) {
            Some(reason) => actor.because(reason),
            None => actor,
        }
    }

    /// Whether a wait under `policy` would take this caller's answer (the
    /// policy's allow list; the rule on a run's own people is the
    /// server's to apply when the answer comes).
    pub fn may_answer(&self, policy: Option<&cairn::Approvers>) -> bool {
        let voter = cairn::Voter {
            name: &self.name,
            groups: &self.groups,
            is_own: false,
            local: false,
        };
        self.access.covers(Access::Operator) && policy.is_none_or(|p| p.admits(&voter).is_ok())
    }

    /// The tenant a submit runs as: the one named, if the caller may
    /// submit as it; a caller bound to one tenant that names none gets
    /// that one. Anything else is 403 `forbidden`, before anything is stored.
    pub fn tenant(&self, named: Option<String>) -> Result<Option<String>, ApiError> {
        let named = match (named, self.tenants.as_slice()) {
            (None, [only]) => return Ok(Some(only.to_string())),
            (named, []) => return Ok(named),
            (named, _) => named,
        };
        let bound: Vec<&str> = self.tenants.iter().map(Tenant::as_str).collect();
        match named {
            Some(t) if bound.contains(&t.as_str()) => Ok(Some(t)),
            other => Err(ApiError::Forbidden(format!(
                "`{}` submits only as tenant {}, not {}",
                self.name,
                bound.join(", "),
                other.map_or("none".to_owned(), |t| format!("`{t}`")),
            ))),
        }
    }
}

/// Audits a refusal of `caller` (its role, its tenants) as `refused`, with
/// what was asked; a failure to record it is logged, never in its place.
pub(crate) async fn audit_refusal(state: &AppState, caller: &Caller, detail: serde_json::Value) {
    record(state, &caller.actor(None, None), "refused", detail).await;
}

/// Audits `action` by `actor` that no run event records (a provider key's
/// pause or limits, a thread's budget, a compaction), right after it: a
/// failure to record it is logged.
pub(crate) async fn record(
    state: &AppState,
    actor: &Actor,
    action: &str,
    detail: serde_json::Value,
) {
    state.engine().audit_change(actor, action, detail).await;
}

/// `a viewer`, `an operator`, `an admin`.
fn with_article(access: Access) -> String {
    match access {
        Access::Viewer => "a viewer".to_owned(),
        a => format!("an {a}"),
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    /// The caller the token check found; none (a route it let through
    /// open): the open API's.
    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        let client = crate::throttle::client_ip(&parts.extensions);
        Ok(parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_else(|| Caller {
                via: via_of(&parts.headers),
                ..Caller::api(None, client)
            }))
    }
}

/// The channel a request to the API came through: `cli` when its
/// `User-Agent` is the CLI's (`cairn-cli/VERSION`), else `api`. It names
/// the channel in the audit and binds nothing: the token decides.
pub(crate) fn via_of(headers: &axum::http::HeaderMap) -> Via {
    let agent = headers.get(axum::http::header::USER_AGENT);
    match agent.and_then(|v| v.to_str().ok()) {
        Some(a) if a.starts_with(CLI_AGENT) => Via::Cli,
        _ => Via::Api,
    }
}

/// The start of the CLI's `User-Agent`.
const CLI_AGENT: &str = "cairn-cli/";

/// Whether the API is closed: `CAIRN_API_TOKENS` or any stored principal.
/// Once closed it stays closed; while open, the database is asked again
/// at most once a second, so a principal added by `cairn principals add`
/// closes a running server within a second. While the database does not
/// answer, whether the API is open is unknown: [`Closed::refresh`] says so
/// and asks again on every request until it answers, and the request is
/// refused as unavailable (never let in, never told a token is needed when
/// none may be).
#[derive(Debug, Default)]
pub(crate) struct Closed {
    closed: AtomicBool,
    /// The last read of the principals failed.
    unknown: AtomicBool,
    checked: Mutex<Option<Instant>>,
}

impl Closed {
    pub fn get(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Reads whether principals exist, when it is time to; the error of
    /// the read while the database does not answer.
    pub async fn refresh(&self, state: &AppState) -> Result<(), cairn::Error> {
        if self.get() {
            return Ok(());
        }
        if !self.unknown.load(Ordering::Relaxed) {
            let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            if checked.is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
                return Ok(());
            }
            *checked = Some(Instant::now());
        }
        match state.engine().principals().await {
            Ok(p) => {
                if !p.is_empty() {
                    self.closed.store(true, Ordering::Relaxed);
                }
                self.unknown.store(false, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %cairn::ErrorChain(&e), "could not read principals; refusing requests until the database answers");
                self.unknown.store(true, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}

/// The caller whose token `token` is, coming through `via`: a
/// `CAIRN_API_TOKENS` token's admin, or an enabled principal.
pub(crate) async fn principal(
    state: &AppState,
    token: &str,
    via: Via,
    client: Option<std::net::IpAddr>,
) -> Result<Option<Caller>, ApiError> {
    if let Some(id) = state.tokens().id_of(token) {
        let caller = Caller::api(Some(id), client);
        return Ok(Some(Caller { via, ..caller }));
    }
    let found = state.engine().authenticate(token).await?;
    Ok(found.map(|p| Caller::of(p, via, client)))
}

// ------------------------------------------------------------ the routes

/// `GET /v1/principals` (admins).
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<Vec<Principal>>, ApiError> {
    Ok(Json(state.engine().principals().await?))
}

/// The body of `POST /v1/principals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddBody {
    name: String,
    role: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    tenants: Vec<String>,
    /// Where its notices are mailed.
    #[serde(default)]
    email: Option<String>,
}

/// `POST /v1/principals` (admins): 201 with the principal and its token,
/// shown this once.
pub(crate) async fn add(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<AddBody>,
) -> Result<Response, ApiError> {
    let role = body
        .role
        .parse::<Access>()
        .map_err(|e| ApiError::InvalidBody(format!("role: {e}")))?;
    let tenants = body
        .tenants
        .into_iter()
        .map(Tenant::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(cairn::Error::from)?;
    let new = NewPrincipal {
        name: body.name,
        role,
        groups: body.groups,
        tenants,
        email: body.email,
    };
    let issued = state
        .engine()
        .add_principal(new, &caller.actor(None, None))
        .await?;
    tracing::info!(principal = ?issued.principal.name, role = %issued.principal.role, by = ?caller.name, "principal added");
    Ok((StatusCode::CREATED, Json(issued)).into_response())
}

/// `POST /v1/principals/{name}/disable` (admins).
pub(crate) async fn disable(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Principal>, ApiError> {
    let actor = caller.actor(None, None);
    let principal = state.engine().disable_principal(&name, &actor).await?;
    tracing::info!(principal = ?name, by = ?caller.name, "principal disabled");
    Ok(Json(principal))
}

/// `POST /v1/principals/{name}/rotate` (admins): the new token, shown once.
pub(crate) async fn rotate(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<cairn::Issued>, ApiError> {
    let actor = caller.actor(None, None);
    let issued = state.engine().rotate_token(&name, &actor).await?;
    tracing::info!(principal = ?name, by = ?caller.name, "token rotated");
    Ok(Json(issued))
}

/// The query of `GET /v1/audit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    principal: Option<String>,
    since: Option<DateTime<Utc>>,
    after: Option<i64>,
    limit: Option<u32>,
}

/// `GET /v1/audit` (admins): entries oldest first; page with `after`.
pub(crate) async fn audit(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let filter = AuditFilter {
        principal: q.principal.filter(|p| !p.is_empty()),
        since: q.since,
        after: q.after,
        limit: q.limit,
    };
    Ok(Json(state.engine().audit(&filter).await?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_need_a_viewer_actions_an_operator_and_admin_paths_an_admin() {
        assert_eq!(needed(&Method::GET, Some("/v1/runs")), Access::Viewer);
        assert_eq!(needed(&Method::POST, Some("/v1/runs")), Access::Operator);
        assert_eq!(
            needed(&Method::POST, Some("/v1/waits/{id}/answer")),
            Access::Operator
        );
        assert_eq!(needed(&Method::GET, Some("/v1/audit")), Access::Admin);
        assert_eq!(needed(&Method::POST, Some("/v1/compact")), Access::Admin);
        assert_eq!(needed(&Method::DELETE, None), Access::Operator);
        let routes: Vec<&str> = crate::route_table().into_iter().map(|(p, _)| p).collect();
        for admin in ADMIN_PATHS {
            assert!(routes.contains(admin), "{admin} is a route");
        }
    }

    fn bound(tenants: &[&str]) -> Caller {
        Caller {
            tenants: tenants.iter().map(|t| Tenant::new(*t).unwrap()).collect(),
            access: Access::Operator,
            name: "svc".into(),
            ..Caller::api(None, None)
        }
    }

    #[test]
    fn a_bound_caller_submits_only_as_its_tenants() {
        assert_eq!(bound(&[]).tenant(None).unwrap(), None);
        assert_eq!(
            bound(&[]).tenant(Some("x".into())).unwrap().as_deref(),
            Some("x")
        );
        assert_eq!(
            bound(&["acme"]).tenant(None).unwrap().as_deref(),
            Some("acme")
        );
        assert!(bound(&["acme"]).tenant(Some("other".into())).is_err());
        assert!(bound(&["acme", "beta"]).tenant(None).is_err());
        let beta = bound(&["acme", "beta"])
            .tenant(Some("beta".into()))
            .unwrap();
        assert_eq!(beta.as_deref(), Some("beta"));
    }

    #[test]
    fn the_cli_is_named_by_its_agent_and_anything_else_is_api() {
        let with = |agent: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(axum::http::header::USER_AGENT, agent.parse().unwrap());
            via_of(&headers)
        };
        assert_eq!(with("cairn-cli/0.1.0"), Via::Cli);
        assert_eq!(with("curl/8.5.0"), Via::Api);
        assert_eq!(via_of(&axum::http::HeaderMap::new()), Via::Api);
    }

    #[test]
    fn a_body_by_is_a_note_never_the_actor() {
        let caller = bound(&[]);
        let actor = caller.actor(Some("mallory".into()), Some("because".into()));
        assert_eq!(actor.by, "svc");
        assert_eq!(actor.origin.note.as_deref(), Some("mallory"));
        assert_eq!(actor.origin.via, Some(Via::Api));
        assert_eq!(actor.reason.as_deref(), Some("because"));
    }
}
