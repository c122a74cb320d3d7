//! Threads: `GET /v1/threads` (every thread's summary),
//! `GET /v1/threads/{id}` (one thread's runs and totals) and
//! `POST /v1/threads/{id}/budget` (its budget set or raised), the documents
//! of `cairn threads list|show|budget --json`.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use cairn::{BadThreadId, ErrorClass, ThreadBudget, ThreadPage, ThreadView};

use crate::extract::{ApiJson, ApiQuery};
use crate::{ApiError, AppState};

/// The query of `GET /v1/threads`: both optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadsQuery {
    limit: Option<String>,
    cursor: Option<String>,
}

/// Threads a page holds at most.
const MAX_LIMIT: u32 = 1000;

/// `GET /v1/threads`: threads, the one whose newest run is oldest first;
/// every one, or with `limit` a page, a `Link: <…>; rel="next"` header
/// naming the next (`cursor`: the last thread id of a page).
pub(crate) async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ThreadsQuery>,
) -> Result<Response, ApiError> {
    let given = |p: Option<String>| p.filter(|v| !v.is_empty());
    let limit = match given(q.limit) {
        None => None,
        Some(text) => match text.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Some(n),
            _ => {
                return Err(ApiError::BadQuery(format!(
                    "limit: `{text}` is not a number from 1 to {MAX_LIMIT}"
                )))
            }
        },
    };
    let page = ThreadPage {
        after: given(q.cursor),
        // One more than asked, to know whether a next page exists.
        limit: limit.map(|n| n + 1),
    };
    let mut threads = match state.engine().threads_page(&page).await {
        Ok(threads) => threads,
        Err(e) if matches!(e.class(), ErrorClass::NotFound | ErrorClass::BadInput) => {
            return Err(ApiError::BadCursor)
        }
        Err(e) => return Err(ApiError::Engine(e)),
    };
    let next = match limit {
        Some(n) if threads.len() > n as usize => {
            threads.truncate(n as usize);
            threads.last().map(|t| (n, t.thread_id.clone()))
        }
        _ => None,
    };
    let mut response = Json(threads).into_response();
    if let Some((n, last)) = next {
        let link = format!(
            "</v1/threads?limit={n}&cursor={}>; rel=\"next\"",
            cairn::text::path_segment(&last)
        );
        if let Ok(value) = axum::http::HeaderValue::from_str(&link) {
            response
                .headers_mut()
                .insert(axum::http::header::LINK, value);
        }
    }
    Ok(response)
}

/// The `{id}` path segment as a thread id. The one path parameter fails
/// only to percent-decode into UTF-8.
fn thread_id(id: Result<Path<String>, PathRejection>) -> Result<String, cairn::Error> {
    let Path(id) = id.map_err(|_| {
        cairn::Error::from(BadThreadId {
            field: "thread_id",
            problem: "is not percent-encoded UTF-8".to_owned(),
        })
    })?;
    Ok(id)
}

/// `GET /v1/threads/{id}`: the thread's runs, oldest first, and their
/// totals. The id is percent-decoded; one that breaks the thread id rule is
/// 400 `bad_thread_id`, one no run belongs to 404 `thread_not_found`.
pub(crate) async fn show(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ThreadView>, ApiError> {
    let id = thread_id(id)?;
    Ok(Json(state.engine().thread(&id).await?))
}

/// The body of `POST /v1/threads/{id}/budget`: exactly one of `set` and
/// `raise`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadBudgetBody {
    #[serde(default)]
    set: Option<cairn::Budget>,
    #[serde(default)]
    raise: Option<cairn::Budget>,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/threads/{id}/budget`: `set` replaces the limits it names,
/// `raise` raises each named limit the thread has (400 `bad_budget` for
/// one it lacks). The thread need not have a run yet.
pub(crate) async fn budget(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    id: Result<Path<String>, PathRejection>,
    ApiJson(body): ApiJson<ThreadBudgetBody>,
) -> Result<Json<ThreadBudget>, ApiError> {
    let id = thread_id(id)?;
    let (budget, raise) = match (body.set, body.raise) {
        (Some(set), None) => (set, false),
        (None, Some(raise)) => (raise, true),
        _ => {
            return Err(ApiError::BadBody(
                "give exactly one of `set` and `raise`".to_owned(),
            ))
        }
    };
    let actor = caller.actor(body.by, body.reason);
    let budget = state
        .engine()
        .set_thread_budget(&id, &budget, raise, &actor)
        .await?;
    tracing::info!(thread = %id, by = %actor.by, budget = ?budget.budget, "thread budget set");
    let action = if raise {
        "thread_budget_raised"
    } else {
        "thread_budget_set"
    };
    let detail = serde_json::json!({"thread": id, "budget": budget.budget, "reason": actor.reason});
    crate::people::record(&state, &actor, action, detail).await;
    Ok(Json(budget))
}
