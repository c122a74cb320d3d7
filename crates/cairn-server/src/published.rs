//! Values a run published for its callers: `GET /v1/runs/{id}/values`
//! (the newest of each key) and `GET /v1/runs/{id}/values/{key}`. Each is
//! also a `value_published` event in the run's stream
//! (`/v1/runs/{id}/events`), for a caller that waits for one.

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;

use cairn::{Published, RunId};

use crate::{ApiError, AppState};

#[derive(Debug, Serialize)]
pub(crate) struct Values {
    values: Vec<Published>,
}

fn run_id(id: &str) -> Result<RunId, ApiError> {
    id.parse().map_err(|_| ApiError::BadRunId(id.to_owned()))
}

/// `GET /v1/runs/{id}/values`.
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Values>, ApiError> {
    let values = state.engine().published(run_id(&id)?).await?;
    Ok(Json(Values { values }))
}

/// `GET /v1/runs/{id}/values/{key}`: 404 `value_not_found` until one is.
pub(crate) async fn one(
    State(state): State<AppState>,
    Path((id, key)): Path<(String, String)>,
) -> Result<Json<Published>, ApiError> {
    let run = run_id(&id)?;
    match state.engine().published_value(run, &key).await? {
        Some(p) => Ok(Json(p)),
        None => Err(ApiError::ValueNotFound { run, key }),
    }
}
