//! The console in token mode: every page the navigation links to, and
//! every console form, takes the signed-in session (never the API's JSON
//! 401), and none takes a bearer token instead of it.

use axum::http::{header, Method, StatusCode};

use crate::console::form;
use crate::support::Api;

const TOKEN: &str = "tok-0123456789abcdef";

/// The pages the console's navigation links to, and the other pages its
/// own pages link to (a crew's diff).
const PAGES: &[&str] = &[
    "/",
    "/waits",
    "/threads",
    "/crews",
    "/limits",
    "/workers",
    "/crews/greet/diff?from=1&to=1",
    "/crews/greet/diff",
];

async fn signed_in(api: &Api) -> String {
    let (h, b) = form(&format!("token={TOKEN}"));
    let signed = api.call(Method::POST, "/login", &h, b).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.text);
    let set = signed.headers[header::SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn every_console_page_and_form_takes_the_session() {
    let api = Api::with(cairn_testkit::Kind::Sqlite, |s| s.with_tokens([TOKEN])).await;
    let cookie = signed_in(&api).await;
    let bearer = format!("Bearer {TOKEN}");
    for page in PAGES {
        let with_session = api
            .call(Method::GET, page, &[("cookie", &cookie)], None)
            .await;
        assert!(
            with_session.content_type().starts_with("text/html"),
            "{page}: {} {}",
            with_session.status,
            with_session.text
        );
        assert_ne!(with_session.status, StatusCode::UNAUTHORIZED, "{page}");
        // A bearer token is the API's: a page without a session signs in.
        let with_token = api
            .call(Method::GET, page, &[("authorization", &bearer)], None)
            .await;
        assert_eq!(with_token.status, StatusCode::SEE_OTHER, "{page}");
    }
    // The upgrade form (a console form) is the session's too: with the
    // session it reaches the console's form check (a wrong CSRF token is
    // refused as such), and with the page's token it is done.
    let (h, b) = form("csrf=guessed&to=1&reason=r");
    let mut with_cookie = h.clone();
    with_cookie.push(("cookie", &cookie));
    let upgrade = api
        .call(Method::POST, "/crews/greet/1/upgrade", &with_cookie, b)
        .await;
    assert_eq!(upgrade.status, StatusCode::FORBIDDEN, "{}", upgrade.text);
    assert!(upgrade.text.contains("CSRF"), "{}", upgrade.text);
    let page = api
        .call(Method::GET, "/crews", &[("cookie", &cookie)], None)
        .await;
    let csrf = crate::console::csrf_of(&page.text);
    let (h, b) = form(&format!("csrf={csrf}&reason=r"));
    let mut with_cookie = h.clone();
    with_cookie.push(("cookie", &cookie));
    let upgrade = api
        .call(Method::POST, "/crews/greet/1/upgrade", &with_cookie, b)
        .await;
    assert!(
        upgrade.status.is_redirection() || upgrade.status == StatusCode::OK,
        "{} {}",
        upgrade.status,
        upgrade.text
    );
}
