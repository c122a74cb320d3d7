//! The request extractors every handler module shares: JSON bodies,
//! optional JSON bodies, query strings and id path segments whose
//! rejections are `ApiError`s (the same JSON error document as every other
//! failure) instead of axum's plain text. (Who acts is the token's
//! principal: `people::Caller`.) They depend on nothing but the
//! state and the error, so the handler modules (`api`, `actions`, `waits`,
//! `sse`) import them without importing each other.

use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::{header, request::Parts, StatusCode};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use cairn::{RunId, WaitId};

use crate::{ApiError, AppState};

/// `Json<T>` whose rejections are `ApiError`s (400 `bad_json`, 400
/// `invalid_body`, 413 `too_large`, 415) instead of axum's plain text.
pub(crate) struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(ApiError::from_json_rejection(rejection, state.body_limit())),
        }
    }
}

/// An optional JSON body: an empty body (with or without a content type)
/// is `None`; anything else is parsed as [`ApiJson`] would, with the same
/// errors.
pub(crate) struct OptionalJson<T>(pub Option<T>);

impl<T: DeserializeOwned> FromRequest<AppState> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let json = is_json(req.headers());
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge {
                    limit: state.body_limit(),
                }
            } else {
                ApiError::BadBody(rejection.body_text())
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(None));
        }
        if !json {
            return Err(ApiError::UnsupportedMediaType);
        }
        Json::<T>::from_bytes(&bytes)
            .map(|Json(value)| OptionalJson(Some(value)))
            .map_err(|rejection| ApiError::from_json_rejection(rejection, state.body_limit()))
    }
}

/// Whether the content type is JSON (`application/json`, or
/// `application/…+json`), as axum's `Json` decides.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// `Query<T>` whose rejections are 400 `bad_query`.
pub(crate) struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| ApiQuery(q))
            .map_err(ApiError::from_query_rejection)
    }
}

/// The `{id}` path segment as an id of type `T` (400 with `T`'s error
/// code, [`PathId::BAD`], if it is not one).
pub(crate) struct IdPath<T>(pub T);

/// The run id of a `{id}` path segment (400 `bad_run_id` if it is not one).
pub(crate) type RunIdPath = IdPath<RunId>;

/// The wait id of a `{id}` path segment (400 `bad_wait_id` if it is not one).
pub(crate) type WaitIdPath = IdPath<WaitId>;

/// An id a path segment may name, and the error for one that does not.
pub(crate) trait PathId: FromStr + Send {
    const BAD: fn(String) -> ApiError;
}

impl PathId for RunId {
    const BAD: fn(String) -> ApiError = ApiError::BadRunId;
}

impl PathId for WaitId {
    const BAD: fn(String) -> ApiError = ApiError::BadWaitId;
}

impl<T: PathId> FromRequestParts<AppState> for IdPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        id_segment(parts, state, T::BAD).await.map(IdPath)
    }
}

/// The `{id}` path segment parsed as an id; `bad` names what is wrong with
/// a segment that is missing or does not parse.
async fn id_segment<T: FromStr>(
    parts: &mut Parts,
    state: &AppState,
    bad: fn(String) -> ApiError,
) -> Result<T, ApiError> {
    let Path(raw) = Path::<String>::from_request_parts(parts, state)
        .await
        .map_err(|e| bad(e.body_text()))?;
    T::from_str(&raw).map_err(|_| bad(raw))
}

/// A `u32` body field as JSON Schema's `integer`, which the OpenAPI
/// document promises: a JSON integer or a number with no fractional part
/// (`3.0`, `2.30666718e8`), from 0 to `u32::MAX`; anything else is refused
/// naming the range.
pub(crate) fn u32_integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    integer_u32(&n).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "expected an integer from 0 to {}, not {n}",
            u32::MAX
        ))
    })
}

/// [`u32_integer`] for an optional field (absent or `null`: `None`).
pub(crate) fn opt_u32_integer<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u32>, D::Error> {
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => integer_u32(&n).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "expected an integer from 0 to {}, or null, not {n}",
                u32::MAX
            ))
        }),
    }
}

/// A priority: an integer (`5.0` too, as JSON Schema counts it) within
/// `cairn::Priority`'s range, or absent/`null` (0).
pub(crate) fn opt_priority<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<cairn::Priority>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        (f.fract() == 0.0 && f.abs() < 1e15).then_some(f as i64)
    });
    let bad = |why: String| serde::de::Error::custom(format!("priority: {why}"));
    let whole = whole.ok_or_else(|| bad(format!("expected an integer, not {n}")))?;
    cairn::Priority::new(whole)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

fn integer_u32(n: &serde_json::Number) -> Option<u32> {
    if let Some(v) = n.as_u64() {
        return u32::try_from(v).ok();
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f)).then_some(f as u32)
}
