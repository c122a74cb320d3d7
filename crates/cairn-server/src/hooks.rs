//! Inbound webhooks: `POST /v1/hooks/{name}`, reachable without an API
//! token (each hook checks its own token or signature, `cairn::hooks`).
//! The answer names the run that took the signal; a refused delivery
//! (401 `hook_unauthorized`) stores nothing and counts against its
//! sender's address (429 once it is out of tries).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;

use cairn::{Delivery, Sent};

use crate::{ApiError, AppState};

/// `POST /v1/hooks/{name}`.
pub(crate) async fn deliver(
    State(state): State<AppState>,
    Path(name): Path<String>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Sent>, ApiError> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned())))
        .collect();
    let client = crate::throttle::client_ip(&extensions);
    // A wrong token or signature counts against the sender's address, as
    // a wrong API token does.
    let now = std::time::Instant::now();
    if let Some(retry_after) = state.throttle().wait(client, now) {
        return Err(ApiError::TooManyAttempts { retry_after });
    }
    let delivery = Delivery {
        headers: &headers,
        body: &body,
        client,
    };
    let crews = state.crews();
    let sent = state
        .engine()
        .deliver(&name, delivery, |crew| crews.get(crew).cloned())
        .await
        .inspect_err(|e| {
            if e.class() == cairn::ErrorClass::Unauthorized {
                state.throttle().failed(client, now);
            }
        })?;
    if sent.woke || sent.started {
        state.wake_runner();
    }
    tracing::info!(hook = %name, run = %sent.signal.run_id, signal = %sent.signal.name,
        duplicate = sent.duplicate, "hook delivery");
    Ok(Json(sent))
}
