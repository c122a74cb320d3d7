//! A notice's link (`notify.rs`): `GET /links/{token}` shows what it
//! answers and as whom, and changes nothing (mail scanners and chat
//! previews fetch links); its confirmation form's `POST` answers once, as
//! the link's principal (`via: link`). A link used, expired or unknown is
//! refused with a page saying which.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

use cairn::{Answer, LinkUse, WaitFilter, WaitStatus};

use super::form::ConsoleForm;
use super::html as page;
use crate::throttle::ClientIp;
use crate::AppState;

fn link_page(status: StatusCode, title: &str, body: maud::Markup) -> Response {
    page(status, cairn_console::link_page(title, body))
}

fn refused(status: StatusCode, why: &str) -> Response {
    link_page(
        status,
        "Link",
        html! { h1 { "Cairn" } p.error role="alert" { (why) } },
    )
}

/// `GET /links/{token}`: the confirmation page.
pub(super) async fn confirm(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    let link = match state.engine().link(&token).await {
        Ok(Some(link)) => link,
        Ok(None) => return refused(StatusCode::NOT_FOUND, "This link is not one Cairn issued."),
        Err(e) => {
            return refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                &crate::ApiError::from(e).public().2,
            )
        }
    };
    if link.consumed_at.is_some() {
        return refused(
            StatusCode::GONE,
            "This link was used already: each link answers once.",
        );
    }
    if link.expired {
        return refused(
            StatusCode::GONE,
            "This link expired; answer in the console instead.",
        );
    }
    let of_run = WaitFilter {
        run: Some(link.run),
        ..WaitFilter::default()
    };
    let waits = state.engine().waits(&of_run).await;
    let Some(wait) = waits
        .ok()
        .and_then(|w| w.into_iter().find(|w| w.id == link.wait))
    else {
        return refused(StatusCode::NOT_FOUND, "The wait this link answers is gone.");
    };
    if wait.status != WaitStatus::Open {
        return refused(
            StatusCode::GONE,
            &format!("This wait is {} already.", wait.status),
        );
    }
    let prompt = match &wait.prompt {
        serde_json::Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let body = html! {
        h1 { "Answer as " (link.principal) }
        p { "The " (wait.kind.as_str()) " of step " (wait.step_idx.get()) " of run " code { (wait.run_id) } " asks:" }
        pre.prompt { (prompt) }
        p { "Nothing is recorded until you confirm below." }
        form method="post" action=(format!("/links/{token}")) {
            label { "Reason " input type="text" name="reason" placeholder="why (recorded)"; }
            button type="submit" name="decision" value="approve" { "Confirm: approve" }
            label { "Feedback (to reject) " input type="text" name="feedback"; }
            button type="submit" name="decision" value="reject" { "Confirm: reject" }
        }
    };
    link_page(StatusCode::OK, "Confirm", body)
}

#[derive(serde::Deserialize)]
pub(super) struct LinkForm {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    feedback: Option<String>,
}

/// `POST /links/{token}`: the confirmation; answers once, as the link's
/// principal.
pub(super) async fn answer(
    State(state): State<AppState>,
    ClientIp(client): ClientIp,
    Path(token): Path<String>,
    ConsoleForm(form): ConsoleForm<LinkForm>,
) -> Response {
    let answer = match form.decision.as_str() {
        "approve" => Answer::Approve,
        "reject" => Answer::Reject {
            feedback: form.feedback.unwrap_or_default(),
        },
        other => {
            return refused(
                StatusCode::BAD_REQUEST,
                &format!("`{other}` is not a decision."),
            )
        }
    };
    let client = client.map(|c| c.to_string());
    let used = state
        .engine()
        .answer_by_link(&token, &answer, form.reason, client)
        .await;
    match used {
        Ok(LinkUse::Answered(wait)) => {
            state.wake_runner();
            let body = html! {
                h1 { "Recorded" }
                p.flash { "Your " (answer.decision()) " was recorded. The wait is " (wait.status) "." }
            };
            link_page(StatusCode::OK, "Recorded", body)
        }
        Ok(LinkUse::Unknown) => {
            refused(StatusCode::NOT_FOUND, "This link is not one Cairn issued.")
        }
        Ok(LinkUse::Used) => refused(
            StatusCode::GONE,
            "This link was used already: each link answers once.",
        ),
        Ok(LinkUse::Expired) => refused(
            StatusCode::GONE,
            "This link expired; answer in the console instead.",
        ),
        Ok(LinkUse::NotAllowed(who)) => refused(
            StatusCode::FORBIDDEN,
            &format!("`{who}` may no longer answer waits."),
        ),
        Err(e) => {
            let (status, _, message) = crate::ApiError::from(e).public();
            refused(status, &message)
        }
    }
}
