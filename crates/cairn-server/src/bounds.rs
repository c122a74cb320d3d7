//! What bounds a client's hold on the server besides the listener's
//! header timeout and connection limit (`listen.rs`): a request body must
//! arrive within the body timeout, and event streams are capped.
//!
//! The body is read here, whole, before any handler runs (bodies are small
//! JSON documents under the body limit), so a client that sends headers
//! and then trickles or stalls its body is answered 408 and loses the
//! connection instead of holding it forever.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::{ApiError, AppState};

/// Middleware: reads the request body within `AppState::body_timeout`
/// (408 `request_timeout` otherwise) and at most `body_limit` bytes of it
/// (413 `too_large`), then hands the handler the bytes read.
pub(crate) async fn read_body(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if axum::body::HttpBody::is_end_stream(request.body()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let timeout = state.body_timeout();
    match tokio::time::timeout(timeout, collect(body, state.body_limit())).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => close(e.into_response()),
        Err(_) => close(ApiError::BodyTimeout { after: timeout }.into_response()),
    }
}

/// The body's bytes, refused past `limit`.
async fn collect(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadBody(e.to_string()))?;
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::TooLarge { limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The rest of an unread body cannot be skipped safely: the connection
/// ends after this response.
fn close(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        HeaderValue::from_static("close"),
    );
    response
}

/// Formats a duration for a message: `30s`, `250ms`.
pub(crate) fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}
