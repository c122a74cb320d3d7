//! The route table and its JSON handlers (runs, crews, health, metrics,
//! the OpenAPI document). Handlers only translate: every decision about a
//! run belongs to the engine, every status code to `ApiError`.

use std::str::FromStr;
use std::time::Duration;

use axum::extract::State;
use axum::handler::Handler;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use cairn::{ErrorClass, OnBusy, RunFilter, RunId, RunStatus, SubmitOptions};

use crate::extract::{ApiJson, ApiQuery, IdPath, RunIdPath};
use crate::{
    actions, hooks, keys, people, published, retention, schedules, signals, sse, threads, versions,
    waits, ApiError, AppState,
};

/// The OpenAPI 3.1 document of this API (also `docs/openapi.json`).
pub const OPENAPI_JSON: &str = include_str!("../openapi.json");

/// How long `/readyz` and `/metrics` wait for the store.
const STORE_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs per page when `limit` is not given, and the most a page may hold.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

/// The routes reachable without a token: health checks, and hooks (each
/// checks its own token or signature).
pub(crate) const OPEN_PATHS: &[&str] = &["/healthz", "/readyz", "/v1/hooks/{name}"];

/// One route: its path, its methods, whether it needs a token, and its handlers.
pub(crate) struct ApiRoute {
    pub path: &'static str,
    pub methods: &'static [&'static str],
    pub handlers: MethodRouter<AppState>,
}

/// Every route of the API: the router is built from this table, and the
/// OpenAPI test checks it against the document.
pub(crate) fn routes() -> Vec<ApiRoute> {
    vec![
        route("/healthz", &["GET"], true, get(healthz)),
        route("/readyz", &["GET"], true, get(readyz)),
        get_route("/metrics", metrics),
        get_route("/v1/openapi.json", openapi),
        route(
            "/v1/runs",
            &["GET", "POST"],
            false,
            get(list_runs).post(submit),
        ),
        get_route("/v1/runs/{id}", show_run),
        get_route("/v1/runs/{id}/events", sse::events),
        get_route("/v1/runs/{id}/journal", journal),
        post_route("/v1/runs/{id}/retry", actions::retry),
        post_route("/v1/runs/{id}/continue", actions::continue_run),
        post_route("/v1/runs/{id}/cancel", actions::cancel),
        post_route("/v1/runs/{id}/fork", actions::fork),
        post_route("/v1/runs/{id}/budget", actions::raise_budget),
        post_route("/v1/runs/{id}/context", actions::add_context),
        get_route("/v1/waits/{id}/ballot", waits::ballot),
        get_route("/v1/waits", waits::list),
        post_route("/v1/waits/{id}/answer", waits::answer),
        get_route("/v1/threads", threads::list),
        get_route("/v1/threads/{id}", threads::show),
        post_route("/v1/threads/{id}/budget", threads::budget),
        post_route("/v1/compact", retention::compact),
        get_route("/v1/crews", versions::loaded),
        get_route("/v1/crews/stored", versions::stored),
        get_route("/v1/crews/{name}/versions/{version}", versions::show),
        get_route("/v1/crews/{name}/diff", versions::diff),
        post_route("/v1/crews/{name}/upgrade", versions::upgrade),
        get_route("/v1/workers", versions::workers),
        get_route("/v1/limits", keys::list),
        post_route("/v1/limits/pause", keys::pause),
        post_route("/v1/limits/resume", keys::resume),
        post_route("/v1/limits/set", keys::set),
        post_route("/v1/limits/reset", keys::reset),
        route(
            "/v1/principals",
            &["GET", "POST"],
            false,
            get(people::list).post(people::add),
        ),
        post_route("/v1/principals/{name}/disable", people::disable),
        post_route("/v1/principals/{name}/rotate", people::rotate),
        get_route("/v1/audit", people::audit),
    ]
    .into_iter()
    .chain(schedule_routes())
    .chain(signal_routes())
    .collect()
}

/// `/v1/signals`, a run's signals and published values, and hooks.
fn signal_routes() -> Vec<ApiRoute> {
    vec![
        post_route("/v1/signals", signals::send),
        get_route("/v1/runs/{id}/signals", signals::of_run),
        get_route("/v1/runs/{id}/values", published::list),
        get_route("/v1/runs/{id}/values/{key}", published::one),
        route("/v1/hooks/{name}", &["POST"], true, post(hooks::deliver)),
    ]
}

/// `/v1/schedules` and its actions.
fn schedule_routes() -> Vec<ApiRoute> {
    vec![
        route(
            "/v1/schedules",
            &["GET", "POST"],
            false,
            get(schedules::list).post(schedules::create),
        ),
        route(
            "/v1/schedules/{name}",
            &["GET", "DELETE"],
            false,
            get(schedules::show).delete(schedules::delete),
        ),
        post_route("/v1/schedules/{name}/pause", schedules::pause),
        post_route("/v1/schedules/{name}/resume", schedules::resume),
        post_route("/v1/schedules/{name}/trigger", schedules::trigger),
        post_route("/v1/schedules/{name}/backfill", schedules::backfill),
    ]
}

/// One route of the table. `open`: reachable without a token;
/// `OPEN_PATHS` is what the token check reads, this column keeps the table
/// readable.
fn route(
    path: &'static str,
    methods: &'static [&'static str],
    open: bool,
    handlers: MethodRouter<AppState>,
) -> ApiRoute {
    debug_assert_eq!(open, OPEN_PATHS.contains(&path), "{path}");
    ApiRoute {
        path,
        methods,
        handlers,
    }
}

/// A `GET` route that needs a token.
fn get_route<H: Handler<T, AppState>, T: 'static>(path: &'static str, handler: H) -> ApiRoute {
    route(path, &["GET"], false, get(handler))
}

/// A `POST` route that needs a token.
fn post_route<H: Handler<T, AppState>, T: 'static>(path: &'static str, handler: H) -> ApiRoute {
    route(path, &["POST"], false, post(handler))
}

/// `GET /healthz`: the process answers.
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: the database answers a trivial query and takes writes
/// (not a standby, not read-only: while a failover leaves only such a
/// server answering, every write would fail).
async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let filter = RunFilter {
        limit: Some(1),
        ..RunFilter::default()
    };
    let engine = state.engine();
    let probe = async {
        engine.list(&filter).await?;
        engine.replication().await
    };
    match tokio::time::timeout(STORE_TIMEOUT, probe).await {
        Ok(Ok(Some(r))) if !r.writable() => {
            let refused = ApiError::ReadOnly {
                in_recovery: r.in_recovery,
            };
            tracing::warn!("readiness probe failed: {refused}");
            Err(refused)
        }
        Ok(Ok(_)) => Ok(Json(json!({"status": "ok"}))),
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::error::ErrorChain(&e), "readiness probe failed");
            Err(ApiError::NotReady)
        }
        Err(_) => {
            tracing::warn!(
                "readiness probe failed: the database did not answer in {STORE_TIMEOUT:?}"
            );
            Err(ApiError::NotReady)
        }
    }
}

/// `GET /metrics`: Prometheus text.
async fn metrics(State(state): State<AppState>) -> Response {
    let stats = tokio::time::timeout(STORE_TIMEOUT, state.engine().stats()).await;
    let snapshot = match stats {
        Ok(Ok(stats)) => Some(stats),
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::error::ErrorChain(&e), "metrics: cannot count runs");
            None
        }
        Err(_) => {
            tracing::warn!("metrics: the database did not answer in {STORE_TIMEOUT:?}");
            None
        }
    };
    // Provider keys, missed slots and buffered signals only when the store
    // answered the counts in time.
    let (keys, outside) = match snapshot {
        Some(_) => {
            let engine = state.engine();
            let keys = tokio::time::timeout(STORE_TIMEOUT, engine.keys()).await;
            let counts = async {
                Ok::<_, cairn::Error>((
                    engine.missed_slots().await?,
                    engine.buffered_signals().await?,
                ))
            };
            let counts = tokio::time::timeout(STORE_TIMEOUT, counts).await;
            (
                keys.ok().and_then(Result::ok).unwrap_or_default(),
                counts.ok().and_then(Result::ok),
            )
        }
        None => (vec![], None),
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics().render(snapshot.as_ref(), &keys, outside),
    )
        .into_response()
}

/// `GET /v1/openapi.json`.
async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

/// The body of `POST /v1/runs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitBody {
    /// A crew name from `GET /v1/crews`.
    crew: String,
    /// The run's input: any JSON value.
    input: Value,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    thread_id: Option<String>,
    /// `queue` (the default), `reject` or `interrupt`: what to do when the
    /// thread has a run that is not done yet.
    #[serde(default)]
    on_busy: Option<String>,
    /// Claim order, -1000 to 1000 (default 0): higher first, with ageing.
    #[serde(default, deserialize_with = "crate::extract::opt_priority")]
    priority: Option<cairn::Priority>,
    /// Whose run it is (1 to 128 bytes, no control or format character, `,` or
    /// `=`): claims go round-robin across tenants within a priority.
    #[serde(default)]
    tenant: Option<String>,
    /// Limits on the run's model use (`{"tokens": N, "model_calls": N, "tool_calls": N}`),
    /// over its crew's `[budget]` per limit.
    #[serde(default)]
    budget: Option<cairn::Budget>,
    /// The caller's trace, as a W3C `traceparent` (the header of the same
    /// name is read when this is absent).
    #[serde(default)]
    traceparent: Option<String>,
    /// The run's own upgrade policy, over its crew's: `pinned`,
    /// `compatible` or `manual`.
    #[serde(default)]
    upgrade: Option<String>,
    /// The crew version to run, among those the server loads (default:
    /// the newest).
    #[serde(default)]
    crew_version: Option<String>,
}

/// The caller's trace: the body's `traceparent`, else the header's.
fn traceparent(
    headers: &axum::http::HeaderMap,
    body: Option<&str>,
) -> Result<Option<cairn::TraceContext>, ApiError> {
    let text = match body {
        Some(t) => Some(t),
        None => headers.get("traceparent").and_then(|v| v.to_str().ok()),
    };
    text.map(cairn::TraceContext::parse_traceparent)
        .transpose()
        .map_err(|e| ApiError::InvalidBody(format!("traceparent: {e}")))
}

/// `POST /v1/runs`: records a queued run (201), or returns the run an
/// earlier submit with the same idempotency key created (200).
async fn submit(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<SubmitBody>,
) -> Result<Response, ApiError> {
    let crew = state
        .crews()
        .get(&body.crew)
        .ok_or_else(|| ApiError::UnknownCrew(body.crew.clone()))?;
    let crew = match &body.crew_version {
        None => crew,
        Some(v) => state.crews().get_version(&body.crew, v).ok_or_else(|| {
            ApiError::UnknownCrewVersion {
                crew: body.crew.clone(),
                version: v.clone(),
                loaded: state
                    .crews()
                    .iter()
                    .filter(|c| c.def().name == body.crew)
                    .map(|c| c.def().version.clone())
                    .collect(),
            }
        })?,
    };
    let on_busy = body
        .on_busy
        .as_deref()
        .map(str::parse::<OnBusy>)
        .transpose()
        .map_err(|e| ApiError::InvalidBody(format!("on_busy: {e}")))?
        .unwrap_or_default();
    let priority = body.priority.unwrap_or_default();
    let tenant = match caller.tenant(body.tenant) {
        Ok(tenant) => tenant,
        Err(e) => {
            let detail = json!({"method": "POST", "path": "/v1/runs", "why": e.to_string()});
            crate::people::audit_refusal(&state, &caller, detail).await;
            return Err(e);
        }
    };
    let traceparent = traceparent(&headers, body.traceparent.as_deref())?;
    let upgrade = body
        .upgrade
        .as_deref()
        .map(|u| {
            cairn::upgrade::UpgradePolicy::parse(u).ok_or_else(|| {
                ApiError::InvalidBody(format!(
                    "upgrade: `{u}` is not one of pinned, compatible, manual"
                ))
            })
        })
        .transpose()?;
    let submitted = state
        .engine()
        .submit(
            crew,
            body.input,
            SubmitOptions {
                idempotency_key: body.idempotency_key,
                thread_id: body.thread_id,
                on_busy,
                priority,
                tenant,
                budget: body.budget,
                traceparent,
                upgrade,
                by: Some(caller.actor(None, None)),
            },
        )
        .await?;
    let id = submitted.run.id;
    // A new run is answered as the submit's own transaction read it (no
    // steps yet): on PostgreSQL a worker may claim it the moment it
    // commits, so a second read could already see it running. An existing
    // run (same idempotency key) is answered as it stands now.
    let view = if submitted.created {
        cairn::RunView {
            run: submitted.run.clone(),
            steps: vec![],
            children: vec![],
            spent: None,
            scheduled: cairn::Scheduled::of(&submitted.run),
            signals: vec![],
            listening: None,
        }
    } else {
        state.engine().show(id).await?
    };
    if submitted.run.status == RunStatus::Queued {
        state.wake_runner();
    }
    if submitted.created {
        tracing::info!(run = %id, crew = %view.run.crew, "run submitted");
        Ok((
            StatusCode::CREATED,
            [(header::LOCATION, format!("/v1/runs/{id}"))],
            Json(view),
        )
            .into_response())
    } else {
        Ok((StatusCode::OK, Json(view)).into_response())
    }
}

/// The query of `GET /v1/runs`. Strings, parsed by hand, so every mistake
/// gets a message naming the parameter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    status: Option<String>,
    crew: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
    order: Option<String>,
    /// Only the children of this run.
    parent: Option<String>,
    /// Only the runs of this tenant.
    tenant: Option<String>,
}

/// A page of runs.
#[derive(Debug, Serialize)]
struct RunPage {
    /// Each run's record, and `schedule`/`scheduled_for` when a schedule
    /// started it.
    runs: Vec<Value>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    next_cursor: Option<String>,
}

/// `GET /v1/runs`: runs oldest first (`order=newest`: newest first),
/// filtered and paginated.
///
/// A keyset page from the store: the cursor is the last run id returned,
/// and the next page holds the runs after it in (created_at, id) order, so
/// runs that change status between pages are neither repeated nor skipped.
/// One more run than asked is read to know whether a next page exists.
async fn list_runs(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<RunPage>, ApiError> {
    // An empty parameter (`?status=` from a form) means "not given".
    let given = |p: Option<String>| p.filter(|v| !v.is_empty());
    let q = ListQuery {
        status: given(q.status),
        crew: given(q.crew),
        limit: given(q.limit),
        cursor: given(q.cursor),
        order: given(q.order),
        parent: given(q.parent),
        tenant: given(q.tenant),
    };
    let parent = q
        .parent
        .as_deref()
        .map(|text| {
            RunId::from_str(text)
                .map_err(|_| ApiError::BadQuery(format!("parent: `{text}` is not a run id")))
        })
        .transpose()?;
    let newest_first = match q.order.as_deref() {
        None | Some("oldest") => false,
        Some("newest") => true,
        Some(other) => {
            return Err(ApiError::BadQuery(format!(
                "order: `{other}` is neither `oldest` nor `newest`"
            )))
        }
    };
    let status = q
        .status
        .as_deref()
        .map(RunStatus::from_str)
        .transpose()
        .map_err(|e| ApiError::BadQuery(format!("status: {e}")))?;
    let limit = match q.limit.as_deref() {
        None => DEFAULT_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::BadQuery(format!(
                    "limit: `{text}` is not a number from 1 to {MAX_LIMIT}"
                )))
            }
        },
    };
    let after = q
        .cursor
        .as_deref()
        .map(|text| RunId::from_str(text).map_err(|_| ApiError::BadCursor))
        .transpose()?;
    let filter = RunFilter {
        status,
        crew: q.crew.clone(),
        tenant: q.tenant.clone(),
        parent,
        after,
        limit: Some(limit as u32 + 1),
        newest_first,
        ..RunFilter::default()
    };
    let mut page = match state.engine().list(&filter).await {
        Ok(runs) => runs,
        // The cursor names no run.
        Err(e) if e.class() == ErrorClass::NotFound => return Err(ApiError::BadCursor),
        Err(e) => return Err(ApiError::Engine(e)),
    };
    let next_cursor = if page.len() > limit {
        page.truncate(limit);
        page.last().map(|r| r.id.to_string())
    } else {
        None
    };
    let runs = page.iter().map(|r| json!(cairn::Listed::of(r))).collect();
    Ok(Json(RunPage { runs, next_cursor }))
}

/// `GET /v1/runs/{id}`: the run with its steps (`cairn runs show --json`).
async fn show_run(
    State(state): State<AppState>,
    IdPath(id): RunIdPath,
) -> Result<Json<cairn::RunView>, ApiError> {
    Ok(Json(state.engine().show(id).await?))
}

/// The query of `GET /v1/runs/{id}/journal`; an empty parameter means "not given".
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JournalQuery {
    step: Option<String>,
}

/// The answer of `GET /v1/runs/{id}/journal`.
#[derive(Debug, Serialize)]
struct JournalList {
    items: Vec<cairn::StepJournalEntry>,
}

/// `GET /v1/runs/{id}/journal?step=N`: the journal of the run's agent steps
/// (`cairn runs journal --json`), every generation, by step and `seq`.
async fn journal(
    State(state): State<AppState>,
    IdPath(id): RunIdPath,
    ApiQuery(q): ApiQuery<JournalQuery>,
) -> Result<Json<JournalList>, ApiError> {
    let step = match q.step.filter(|v| !v.is_empty()) {
        None => None,
        Some(text) => Some(
            text.parse::<u32>()
                .map_err(|_| ApiError::BadQuery(format!("step: `{text}` is not a step index")))?,
        ),
    };
    let items = state.engine().journal(id, step).await?;
    Ok(Json(JournalList { items }))
}

/// The fallback: no route matches.
pub(crate) async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_owned())
}

/// The route exists, the method does not.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
