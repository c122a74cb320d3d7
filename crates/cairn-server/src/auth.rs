//! Bearer-token authentication. Tokens are kept as SHA-256 digests and a
//! presented token is compared against every one in constant time, so
//! neither its content nor which token matched shows in the timing.
//! Wrong tokens are counted per client address (`throttle.rs`): past a
//! small budget, a request presenting a token is 429 `too_many_attempts`
//! (with `Retry-After`) before its token is looked at.

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

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

    /// Whether `presented` is one of the tokens; looks at all of them.
    pub(crate) fn accepts(&self, presented: &str) -> bool {
        let presented = digest(presented);
        let mut any = subtle::Choice::from(0);
        for token in &self.0 {
            any |= token.ct_eq(&presented);
        }
        any.into()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Middleware: with tokens configured, requires `Authorization: Bearer
/// <token>` on every request but those of the open routes (health checks):
/// unknown paths and wrong methods too, so they answer 401, not 404 or 405.
/// A client address out of tries is 429 whatever token it presents.
pub(crate) async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let tokens = state.tokens();
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
    if tokens.is_empty() || open_route {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let Some(token) = presented else {
        return ApiError::Unauthorized.into_response();
    };
    let client = crate::throttle::client_ip(request.extensions());
    let now = std::time::Instant::now();
    if let Some(retry_after) = state.throttle().wait(client, now) {
        return ApiError::TooManyAttempts { retry_after }.into_response();
    }
    if tokens.accepts(token) {
        return next.run(request).await;
    }
    state.throttle().failed(client, now);
    ApiError::Unauthorized.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_configured_nonblank_tokens() {
        let tokens = Tokens::new(["alpha", " beta ", "", "  "]);
        assert!(!tokens.is_empty());
        assert!(tokens.accepts("alpha"));
        assert!(tokens.accepts("beta"));
        assert!(!tokens.accepts(""));
        assert!(!tokens.accepts("alph"));
        assert!(!tokens.accepts("alphaa"));
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
