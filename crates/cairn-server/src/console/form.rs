//! `ConsoleForm`: the console's form extractor, which answers a body that
//! does not parse with a console page naming what is wrong, not the
//! framework's plain text.

use axum::extract::Request;
use axum::response::Response;
use axum::Form;

use super::{html, Seat};
use crate::AppState;

/// A form body, or (when it does not parse) a console page saying what is
/// wrong with it, instead of the framework's plain text.
pub(crate) struct ConsoleForm<T>(pub T);

impl<T> axum::extract::FromRequest<AppState> for ConsoleForm<T>
where
    T: serde::de::DeserializeOwned + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let viewer = match req.extensions().get::<Seat>() {
            Some(seat) => seat.viewer.clone(),
            None => cairn_console::Viewer::Development {
                csrf: String::new(),
            },
        };
        match Form::<T>::from_request(req, state).await {
            Ok(Form(value)) => Ok(ConsoleForm(value)),
            Err(rejection) => {
                let body = maud::html! {
                    h1 { "The form was not accepted" }
                    p.error { (rejection.body_text()) }
                    p { "Go back, fill the form in again and send it once more." }
                    p { a href="/" { "All runs" } }
                };
                Err(html(
                    rejection.status(),
                    cairn_console::page("Error", &viewer, body),
                ))
            }
        }
    }
}
