//! Bearer-token authentication. A token is one of `CAIRN_API_TOKENS`
//! (kept as SHA-256 digests and compared against every one in constant
//! time, so neither its content nor which token matched shows in the
//! timing; its holder is the admin `api`) or a principal's
//! (`cairn::Engine::authenticate`). The caller found is put in the
//! request for the handlers (`people::Caller`) once its role covers what
//! the route needs (`people::needed`; 403 `forbidden` otherwise).
//! Wrong tokens are counted per client address (`throttle.rs`): past a
//! small budget, a request presenting a token is 429 `too_many_attempts`
//! (with `Retry-After`) before its token is looked at.

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::people::Caller;
use crate::{ApiError, AppState};

/// The shortest API token `Server::bind` accepts, in bytes: a token is
/// the only thing between the network and `command` agents, so one a
/// person could guess (or a placeholder such as `x`) stops the startup.
pub const MIN_TOKEN_LEN: usize = 16;

/// The accepted tokens (digests). Empty: the API is open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens(Vec<[u8; 32]>);

impl Tokens {
    /// Blank tokens (e.g. from a trailing comma) are dropped, never accepted.
    pub fn new<S: AsRef<str>>(tokens: impl IntoIterator<Item = S>) -> Tokens {
        Tokens(
            tokens
                .into_iter()
                .map(|t| t.as_ref().trim().to_owned())
                .filter(|t| !t.is_empty())
                .map(|t| digest(&t))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The length of the shortest non-blank token, if it is below
    /// [`MIN_TOKEN_LEN`] (the token itself is never reported).
    pub fn too_short<S: AsRef<str>>(tokens: impl IntoIterator<Item = S>) -> Option<usize> {
        tokens
            .into_iter()
            .map(|t| t.as_ref().trim().len())
            .filter(|len| *len > 0)
            .min()
            .filter(|len| *len < MIN_TOKEN_LEN)
    }

    /// The public id of the token `presented` is, if it is one: `env-`
    /// and the first 8 hex digits of its digest (stable however the list
    /// is reordered). Looks at every token, in constant time each.
    pub(crate) fn id_of(&self, presented: &str) -> Option<String> {
        let presented = digest(presented);
        let mut found = None;
        for token in &self.0 {
            if bool::from(token.ct_eq(&presented)) {
                found = Some(public_id(token));
            }
        }
        found
    }

    /// Whether a token of this public id is still configured.
    pub(crate) fn has_id(&self, id: &str) -> bool {
        self.0.iter().any(|t| public_id(t) == id)
    }
}

fn public_id(digest: &[u8; 32]) -> String {
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("env-{hex}")
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Middleware: with tokens configured (or principals stored), requires
/// `Authorization: Bearer <token>` on every request but those of the open
/// routes (health checks): unknown paths and wrong methods too, so they
/// answer 401, not 404 or 405. A client address out of tries is 429
/// whatever token it presents.
pub(crate) async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let unknown = state.closed().refresh(&state).await.err();
    let matched = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    // The console's pages take its session cookie, never a bearer token.
    if let Some(path) = matched
        .as_deref()
        .filter(|p| crate::console::PATHS.contains(p))
    {
        return crate::console::gate(&state, path, request, next).await;
    }
    let open_route = matched
        .as_deref()
        .is_some_and(|p| crate::api::OPEN_PATHS.contains(&p));
    if open_route {
        return next.run(request).await;
    }
    if !state.requires_token() {
        // Open, unless the database could not say whether principals
        // exist: then nobody is let in, and the answer is "unavailable".
        return match unknown {
            Some(e) => crate::ApiError::from(e).into_response(),
            None => next.run(request).await,
        };
    }
    let client = crate::throttle::client_ip(request.extensions());
    let caller = match caller(&state, request.headers(), client).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let needed = crate::people::needed(request.method(), matched.as_deref());
    if let Err(e) = caller.require(needed) {
        let detail = serde_json::json!({"method": request.method().as_str(),
            "path": request.uri().path(), "needed": needed, "why": e.to_string()});
        crate::people::audit_refusal(&state, &caller, detail).await;
        return e.into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The caller a request's bearer token names: 401 without one or with a
/// wrong one (counted against the client's address), 429 for an address
/// out of tries.
async fn caller(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    client: Option<std::net::IpAddr>,
) -> Result<Caller, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .ok_or(ApiError::Unauthorized)?;
    let now = std::time::Instant::now();
    if let Some(retry_after) = state.throttle().wait(client, now) {
        return Err(ApiError::TooManyAttempts { retry_after });
    }
    let via = crate::people::via_of(headers);
    match crate::people::principal(state, presented, via, client).await? {
        Some(caller) => Ok(caller),
        None => {
            state.throttle().failed(client, now);
            Err(ApiError::Unauthorized)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_configured_nonblank_tokens() {
        let tokens = Tokens::new(["alpha", " beta ", "", "  "]);
        assert!(!tokens.is_empty());
        let alpha = tokens.id_of("alpha").unwrap();
        assert!(alpha.starts_with("env-") && alpha.len() == 12, "{alpha}");
        assert_ne!(tokens.id_of("beta"), Some(alpha.clone()));
        assert!(tokens.has_id(&alpha));
        assert!(tokens.id_of("").is_none());
        assert!(tokens.id_of("alph").is_none());
        assert!(tokens.id_of("alphaa").is_none());
        assert!(!Tokens::new(["beta"]).has_id(&alpha), "a token removed");
        assert!(Tokens::new([""]).is_empty());
    }

    #[test]
    fn short_tokens_are_named_by_length_only() {
        assert_eq!(Tokens::too_short(["x"]), Some(1));
        assert_eq!(
            Tokens::too_short(["a-long-enough-token", " abc ", ""]),
            Some(3)
        );
        assert_eq!(Tokens::too_short(["0123456789abcdef", "", "  "]), None);
        assert_eq!(Tokens::too_short(Vec::<String>::new()), None);
    }
}
