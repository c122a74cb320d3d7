//! What keeps browsers from being turned against the server: the `Host`
//! check of development mode, and the headers that keep pages out of
//! frames and foreign content out of pages.
//!
//! **DNS rebinding.** Without tokens (development mode, loopback only)
//! nothing but the browser's same-origin policy stands between a web page
//! and the console; a page whose name is made to resolve to 127.0.0.1 is
//! same-origin with it and could read the console's CSRF token and drive
//! `/v1`. So in development mode a request must be addressed to a loopback
//! name (`localhost`, or a loopback IP literal such as `127.0.0.1` or
//! `[::1]`, any port) or to the host of the configured public URL;
//! another `Host` is answered 400 `host_not_allowed` (JSON, or a short
//! text on the console's pages). A request with no `Host` at all (HTTP/1.0,
//! the router called in-process) is let through: browsers always send one.
//! The health checks are exempt. With tokens configured the `Host` is not
//! checked: a rebinding page is a new origin without the session cookie,
//! and `/v1` needs a token.
//!
//! **Framing.** Every response carries `X-Frame-Options: DENY`,
//! `X-Content-Type-Options: nosniff` and the [`CSP`]: the console's pages
//! load only their own stylesheet and script (no inline script, no
//! inline style, no `style` attributes; the charts are inline SVG drawn
//! with presentation attributes), and the script only fetches the page
//! and its event stream, so `default-src 'self'` holds them and no
//! `'unsafe-inline'` or nonce is needed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, AppState};

/// The console's Content-Security-Policy (sent on every response).
pub(crate) const CSP: &str = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

/// The longest `Host` an error message repeats.
const SHOWN_HOST: usize = 100;

/// Middleware: the framing and sniffing headers on every response.
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Middleware: in development mode, refuses a request addressed to a
/// name that is not loopback (nor the public URL's host).
pub(crate) async fn check_host(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.requires_token() {
        return next.run(request).await;
    }
    let matched = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    if matched
        .as_deref()
        .is_some_and(|p| crate::api::OPEN_PATHS.contains(&p))
    {
        return next.run(request).await;
    }
    let public_host = state.public_host();
    let Some(host) = refused_host(&request, public_host) else {
        return next.run(request).await;
    };
    tracing::debug!(host = %shown(&host), "refused a request for a host that is not loopback (development mode)");
    let error = ApiError::HostNotAllowed {
        host: shown(&host),
        public_host: public_host.map(str::to_owned),
    };
    let console = matched
        .as_deref()
        .is_some_and(|p| crate::console::PATHS.contains(&p));
    if console {
        text_error(&error)
    } else {
        error.into_response()
    }
}

/// An error as a short plain text (for the console's pages).
fn text_error(error: &ApiError) -> Response {
    let (status, _, message) = error.public();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        message,
    )
        .into_response()
}

/// The `Host` header, or the request target's authority, that is not
/// allowed, if one is not.
fn refused_host(request: &Request, public_host: Option<&str>) -> Option<String> {
    let header = request
        .headers()
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let authority = request.uri().authority().map(|a| a.as_str().to_owned());
    [header, authority]
        .into_iter()
        .flatten()
        .find(|host| !allowed(host, public_host))
}

/// At most [`SHOWN_HOST`] characters of a host, for a message.
fn shown(host: &str) -> String {
    host.chars().take(SHOWN_HOST).collect()
}

/// Whether a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`)
/// names this machine's loopback, or the public URL's host.
pub(crate) fn allowed(host: &str, public_host: Option<&str>) -> bool {
    let Some(name) = host_name(host) else {
        return false;
    };
    name.eq_ignore_ascii_case("localhost")
        || public_host.is_some_and(|p| p.eq_ignore_ascii_case(name))
        || loopback_literal(name)
}

/// The name part of a `Host` value, if the value is well formed.
fn host_name(host: &str) -> Option<&str> {
    let split = match host.strip_prefix('[') {
        Some(rest) => rest.find(']').map(|end| end + 2)?,
        None => host.find(':').unwrap_or(host.len()),
    };
    let (name, port) = host.split_at(split);
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok());
    (!name.is_empty() && port_ok).then_some(name)
}

/// Whether `name` is a loopback IP literal (`127.0.0.1`, `[::1]`).
fn loopback_literal(name: &str) -> bool {
    let ip = match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().map(IpAddr::V6),
        None => name.parse::<Ipv4Addr>().map(IpAddr::V4),
    };
    ip.is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_or_without_a_port_are_allowed() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "localhost",
            "LocalHost:8080",
            "[::1]",
            "[::1]:8080",
            "127.0.0.2:1",
        ] {
            assert!(allowed(host, None), "{host}");
        }
    }

    #[test]
    fn other_names_and_malformed_values_are_refused() {
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1:8080",
            "[::2]:8080",
            "localhost:",
            "localhost:8080:1",
            "localhost:99999",
            "localhost:+80",
            "[::1",
            "[::1]x",
            "user@localhost",
            "",
            ":8080",
        ] {
            assert!(!allowed(host, None), "{host}");
        }
    }

    #[test]
    fn the_public_urls_host_is_allowed_too() {
        assert!(allowed("Cairn.Example:443", Some("cairn.example")));
        assert!(allowed("cairn.example", Some("cairn.example")));
        assert!(!allowed("other.example", Some("cairn.example")));
    }
}
