//! `POST /v1/compact`: a retention pass with the policy in the body, the
//! counts of `cairn compact --json` back. Ages are written as in the CLI
//! (`30d`, `12h`, `0s`, `250ms`).

use axum::extract::State;
use axum::Json;
use serde::Deserialize;

use cairn::{parse_age, CompactPolicy, Compacted};

use crate::extract::ApiJson;
use crate::{ApiError, AppState};

/// The body: every criterion optional; at least one must be given.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompactBody {
    #[serde(default)]
    events_older_than: Option<String>,
    #[serde(default)]
    journals: bool,
    #[serde(default)]
    finished_older_than: Option<String>,
    #[serde(default)]
    failed_older_than: Option<String>,
    #[serde(default, deserialize_with = "crate::extract::opt_u32_integer")]
    keep_per_thread: Option<u32>,
    /// Only this thread's runs.
    #[serde(default)]
    thread: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

pub(crate) async fn compact(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    ApiJson(body): ApiJson<CompactBody>,
) -> Result<Json<Compacted>, ApiError> {
    let age = |field: &str, v: Option<String>| {
        v.map(|t| parse_age(&t).map_err(|e| ApiError::InvalidBody(format!("{field}: {e}"))))
            .transpose()
    };
    let policy = CompactPolicy {
        events_older_than: age("events_older_than", body.events_older_than)?,
        journals: body.journals,
        finished_older_than: age("finished_older_than", body.finished_older_than)?,
        failed_older_than: age("failed_older_than", body.failed_older_than)?,
        keep_per_thread: body.keep_per_thread,
        thread: body.thread,
        dry_run: body.dry_run,
    };
    if policy.is_empty() {
        return Err(ApiError::InvalidBody(
            "say what to remove: events_older_than, journals, finished_older_than, \
             failed_older_than or keep_per_thread"
                .into(),
        ));
    }
    let removed = state.engine().compact(&policy).await?;
    tracing::info!(?policy, ?removed, "compacted");
    if !policy.dry_run {
        let detail = serde_json::json!({"policy": format!("{policy:?}"), "removed": removed});
        let actor = caller.actor(None, None);
        crate::people::record(&state, &actor, "compacted", detail).await;
    }
    Ok(Json(removed))
}
