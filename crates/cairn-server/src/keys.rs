//! `/v1/limits`: provider keys' shared pauses and limits, as `cairn
//! limits` shows them. `GET` lists every key ever paused or limited with
//! its pause, limits, permits in use and queue; `POST /v1/limits/set`
//! replaces a key's limits; `POST
//! /v1/limits/pause` pauses one for a while (`for`, written as the CLI's
//! ages: `10m`, `30s`, `250ms`); `POST /v1/limits/resume` ends a pause and
//! wakes the runs deferred on the key. Keys, operators and reasons are
//! the client's text: they are logged escaped (`{:?}`), so a newline in
//! one cannot forge a line of the log.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;

use cairn::{parse_age, Actor, KeyLimits, KeyState};

use crate::extract::ApiJson;
use crate::{ApiError, AppState};

/// `GET /v1/limits`.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<Vec<KeyState>>, ApiError> {
    Ok(Json(state.engine().keys().await?))
}

/// The body of a pause.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PauseBody {
    key: String,
    /// How long, from now: `10m`, `30s`, `250ms`.
    #[serde(rename = "for")]
    wait: String,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/limits/pause`: the key as it stands after the pause.
pub(crate) async fn pause(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    ApiJson(body): ApiJson<PauseBody>,
) -> Result<Json<KeyState>, ApiError> {
    let wait = parse_age(&body.wait).map_err(|e| ApiError::InvalidBody(format!("for: {e}")))?;
    let actor = caller.actor(body.by, body.reason);
    let key = state.engine().pause_key(&body.key, wait, &actor).await?;
    tracing::info!(key = ?key.key, by = ?actor.by, note = ?actor.origin.note, reason = ?actor.reason, ?wait, "provider key paused");
    audited(&state, &actor, "key_paused", &key).await;
    Ok(Json(key))
}

/// The body of a resume.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    key: String,
    #[serde(default)]
    by: Option<String>,
}

/// `POST /v1/limits/resume`: the key, no longer paused; its deferred runs
/// are claimable at once, and the runner is woken for them.
pub(crate) async fn resume(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    ApiJson(body): ApiJson<ResumeBody>,
) -> Result<Json<KeyState>, ApiError> {
    let actor = caller.actor(body.by, None);
    let key = state.engine().resume_key(&body.key).await?;
    tracing::info!(key = ?key.key, by = ?actor.by, "provider key resumed");
    Ok(freed(&state, &actor, "key_resumed", key).await)
}

/// `POST /v1/limits/reset`: the key without limits; its next call applies
/// what its crew or process declares, if anything.
pub(crate) async fn reset(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    ApiJson(body): ApiJson<ResumeBody>,
) -> Result<Json<KeyState>, ApiError> {
    let actor = caller.actor(body.by, None);
    let key = state.engine().reset_limits(&body.key).await?;
    tracing::info!(key = ?key.key, by = ?actor.by, "provider key limits reset");
    Ok(freed(&state, &actor, "key_limits_reset", key).await)
}

/// The body of a limits change: the key's limits, replacing those it had
/// (a limit left out or `null` is removed).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetBody {
    key: String,
    #[serde(default)]
    in_flight: Option<u32>,
    #[serde(default)]
    rpm: Option<u32>,
    #[serde(default)]
    tpm: Option<u32>,
    /// The longest a provider's answer may pause the key, in ms.
    #[serde(default)]
    max_pause_ms: Option<u64>,
    #[serde(default)]
    by: Option<String>,
}

/// `POST /v1/limits/set`: the key with its new limits; runs deferred on it
/// for a permit may be claimable at once.
pub(crate) async fn set(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    ApiJson(body): ApiJson<SetBody>,
) -> Result<Json<KeyState>, ApiError> {
    let actor = caller.actor(body.by, None);
    let limits = KeyLimits {
        in_flight: body.in_flight,
        rpm: body.rpm,
        tpm: body.tpm,
        max_pause_ms: body.max_pause_ms,
    };
    let key = state.engine().set_limits(&body.key, &limits).await?;
    tracing::info!(key = ?key.key, by = ?actor.by, ?limits, "provider key limits set");
    Ok(freed(&state, &actor, "key_limits_set", key).await)
}

/// Records `actor`'s change to `key` in the audit log as `action`.
async fn audited(state: &AppState, actor: &Actor, action: &str, key: &KeyState) {
    crate::people::record(state, actor, action, cairn::people::key_detail(key)).await;
}

/// A change that may let runs deferred on `key` go on: audited as
/// `action`, the runner woken, the key answered.
async fn freed(state: &AppState, actor: &Actor, action: &str, key: KeyState) -> Json<KeyState> {
    audited(state, actor, action, &key).await;
    state.wake_runner();
    Json(key)
}
