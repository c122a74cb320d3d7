//! Who is at the console: the session gate resolves a request's cookie to
//! a signed-in principal (sessions are stored in the database, by the
//! digest of their cookie, so every server behind one name knows them)
//! and puts a [`Seat`] in the request: the page's viewer, the caller whose
//! actions the forms record, and the form token. Without tokens
//! (development mode) the seat is the development one.

use std::net::IpAddr;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use cairn::{Access, Via};
use cairn_console::Viewer;

use super::{cookie, OPEN};
use crate::people::{Caller, API_PRINCIPAL};
use crate::AppState;

/// The development mode's form token (no sessions then).
pub(crate) struct Sessions {
    pub(super) dev_csrf: String,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            dev_csrf: cairn::people::secret(),
        }
    }
}

/// The person at the console, for one request.
#[derive(Debug, Clone)]
pub(crate) struct Seat {
    pub viewer: Viewer,
    /// Whose actions the forms record (`via: console`).
    pub caller: Caller,
    /// The session cookie's value, when signed in.
    pub cookie: Option<String>,
}

impl Seat {
    fn development(state: &AppState, client: Option<IpAddr>) -> Seat {
        Seat {
            viewer: Viewer::Development {
                csrf: state.sessions().dev_csrf.clone(),
            },
            caller: Caller {
                name: "console".to_owned(),
                via: Via::Console,
                ..Caller::api(None, client)
            },
            cookie: None,
        }
    }

    /// Not signed in, on an open page: no form token any check accepts.
    fn nobody(client: Option<IpAddr>) -> Seat {
        Seat {
            viewer: Viewer::Development {
                csrf: String::new(),
            },
            caller: Caller {
                name: "nobody".to_owned(),
                access: Access::Viewer,
                via: Via::Console,
                ..Caller::api(None, client)
            },
            cookie: None,
        }
    }

    /// Whether a form's CSRF token is the seat's (in constant time).
    pub fn csrf_ok(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        let expected = self.viewer.csrf().as_bytes();
        !expected.is_empty() && bool::from(expected.ct_eq(presented.as_bytes()))
    }

    /// The actor of a form's action: the signed-in principal, with the
    /// form's reason.
    pub fn actor(&self, reason: &str) -> cairn::Actor {
        self.caller.actor(None, Some(reason.to_owned()))
    }
}

impl FromRequestParts<AppState> for Seat {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        let client = crate::throttle::client_ip(&parts.extensions);
        Ok(parts
            .extensions
            .get::<Seat>()
            .cloned()
            .unwrap_or_else(|| Seat::nobody(client)))
    }
}

/// The seat of a signed-in request, if its cookie names an open session
/// of an enabled principal (or of `CAIRN_API_TOKENS`' admin).
async fn signed_in(state: &AppState, headers: &HeaderMap, client: Option<IpAddr>) -> Option<Seat> {
    let cookie = cookie(headers)?;
    let session = match state.engine().session(&cookie).await {
        Ok(s) => s?,
        Err(e) => {
            tracing::warn!(error = %cairn::ErrorChain(&e), "could not read a console session");
            return None;
        }
    };
    // A session lasts only as long as the token it was opened with.
    let token = session.token_id.as_deref().unwrap_or_default();
    let caller = match state.engine().principal(&session.principal).await {
        Ok(Some(p)) if !p.is_disabled() && p.token_id == token => {
            Caller::of(p, Via::Console, client)
        }
        Ok(None) if session.principal == API_PRINCIPAL && state.tokens().has_id(token) => Caller {
            via: Via::Console,
            ..Caller::api(Some(token.to_owned()), client)
        },
        _ => return None,
    };
    Some(Seat {
        viewer: Viewer::SignedIn {
            csrf: session.csrf,
            name: caller.name.clone(),
            operator: caller.access.covers(Access::Operator),
            admin: caller.access.covers(Access::Admin),
        },
        caller,
        cookie: Some(cookie),
    })
}

/// What a console form needs: upgrading a crew's runs an admin, any other
/// form (but signing in and out) an operator; pages a viewer.
fn needed(method: &Method, path: &str) -> Access {
    match (method, path) {
        (_, "/login" | "/logout") => Access::Viewer,
        (&Method::POST, "/crews/{name}/{version}/upgrade") => Access::Admin,
        (&Method::POST, _) => Access::Operator,
        _ => Access::Viewer,
    }
}

/// Middleware for the console's paths (called by the token check): a page
/// without a session goes to the sign-in page; a form the principal's
/// role does not allow is refused (403) before it is read.
pub(crate) async fn gate(
    state: &AppState,
    path: &str,
    mut request: Request,
    next: Next,
) -> Response {
    let client = crate::throttle::client_ip(request.extensions());
    if !state.requires_token() {
        request
            .extensions_mut()
            .insert(Seat::development(state, client));
        return next.run(request).await;
    }
    match signed_in(state, request.headers(), client).await {
        Some(seat) => {
            let needed = needed(request.method(), path);
            if let Err(e) = seat.caller.require(needed) {
                let page = super::error_page(&seat.viewer, e);
                return page;
            }
            request.extensions_mut().insert(seat);
            next.run(request).await
        }
        None if OPEN.contains(&path) => next.run(request).await,
        None => Redirect::to("/login").into_response(),
    }
}
