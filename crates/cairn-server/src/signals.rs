//! Signals over HTTP: `POST /v1/signals` sends one to a run, `key:K` or
//! `thread:T` (with `start`, a signal-with-submit of a crew this server
//! loaded); `GET /v1/runs/{id}/signals` lists a run's signals and what
//! it waits for. A send is recorded with its caller as any action is.

use axum::extract::State;
use axum::Json;

use cairn::{RunSignals, Sent, SignalRequest};

use crate::extract::{ApiJson, IdPath, RunIdPath};
use crate::people::Caller;
use crate::{ApiError, AppState};

/// `POST /v1/signals`: the signal stored (or the first of its `id`), the
/// run that took it, and whether it woke it or started it.
pub(crate) async fn send(
    State(state): State<AppState>,
    caller: Caller,
    headers: axum::http::HeaderMap,
    ApiJson(mut body): ApiJson<SignalRequest>,
) -> Result<Json<Sent>, ApiError> {
    if body.traceparent.is_none() {
        let header = headers.get("traceparent").and_then(|v| v.to_str().ok());
        body.traceparent = header.map(str::to_owned);
    }
    let crew = match &body.start {
        None => None,
        Some(start) => Some(
            match &start.version {
                None => state.crews().get(&start.crew),
                Some(v) => state.crews().get_version(&start.crew, v),
            }
            .ok_or_else(|| ApiError::UnknownCrew(start.crew.clone()))?,
        ),
    };
    let by = caller.actor(None, None);
    let engine = state.engine();
    let sent = engine
        .send_signal_as(&body, crew, &by, &caller.tenants)
        .await?;
    if sent.woke || sent.started {
        state.wake_runner();
    }
    tracing::info!(run = %sent.signal.run_id, signal = %sent.signal.name, id = %sent.signal.id,
        duplicate = sent.duplicate, by = %caller.name, "signal sent");
    Ok(Json(sent))
}

/// `GET /v1/runs/{id}/signals`.
pub(crate) async fn of_run(
    State(state): State<AppState>,
    IdPath(id): RunIdPath,
) -> Result<Json<RunSignals>, ApiError> {
    Ok(Json(state.engine().run_signals(id).await?))
}
