//! Threads: `GET /v1/threads` (every thread's summary) and
//! `GET /v1/threads/{id}` (one thread's runs and totals), the documents of
//! `cairn threads list --json` and `cairn threads show --json`.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::Json;

use cairn::{BadThreadId, ThreadSummary, ThreadView};

use crate::{ApiError, AppState};

/// `GET /v1/threads`: every thread, the one whose newest run is oldest first.
pub(crate) async fn list(
    State(state): State<AppState>,
) -> Result<Json<Vec<ThreadSummary>>, ApiError> {
    Ok(Json(state.engine().threads().await?))
}

/// `GET /v1/threads/{id}`: the thread's runs, oldest first, and their
/// totals. The id is percent-decoded; one that breaks the thread id rule is
/// 400 `bad_thread_id`, one no run belongs to 404 `thread_not_found`.
pub(crate) async fn show(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ThreadView>, ApiError> {
    // The one path parameter fails only to percent-decode into UTF-8.
    let Path(id) = id.map_err(|_| {
        cairn::Error::from(BadThreadId {
            field: "thread_id",
            problem: "is not percent-encoded UTF-8".to_owned(),
        })
    })?;
    Ok(Json(state.engine().thread(&id).await?))
}
