//! The console's waits: the `/waits` page (every open wait, with its run's
//! crew and its step's role) and the answer form's route
//! (`POST /waits/{id}/answer`), whose redirect lands back where the form
//! was (`back=run`: the run's page; else `/waits`) with `?done=answer&wait=ID`,
//! which the page confirms in a line read from the answered wait.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::str::FromStr;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use cairn::{RunId, WaitRecord};
use cairn_console::Done;

use super::form::ConsoleForm;
use super::{error_page, forbidden, html, Seat};
use crate::{ApiError, AppState};

/// The waits page's query: what the form that led here did, and (an
/// answer) the run of the wait answered.
#[derive(serde::Deserialize, Default)]
pub(super) struct WaitsParams {
    #[serde(flatten)]
    done: super::DoneParams,
    run: Option<String>,
}

/// One read per run, however many of its waits are shown.
type Runs = HashMap<RunId, cairn::RunRecord>;

/// `wait`'s card: its run's crew and its step's role (its run read once).
async fn card(
    state: &AppState,
    seat: &Seat,
    runs: &mut Runs,
    wait: WaitRecord,
) -> Result<cairn_console::WaitCard, cairn::Error> {
    let run = match runs.entry(wait.run_id) {
        Entry::Occupied(known) => known.into_mut(),
        Entry::Vacant(new) => new.insert(state.engine().get_run(wait.run_id).await?),
    };
    let role = run
        .crew_definition
        .agents
        .get(wait.step_idx.as_usize())
        .map(|a| a.role.as_str().to_owned())
        .unwrap_or_default();
    let ballot = state.engine().ballot(wait.id).await?;
    Ok(cairn_console::WaitCard {
        theirs: seat.caller.may_answer(ballot.approvers.as_ref()),
        ballot,
        crew: run.crew.clone(),
        crew_version: run.crew_version.clone(),
        role,
        parents: wait.parents.clone(),
        wait,
    })
}

/// The wait a `?done=answer&wait=ID&run=ID` names, as a card: `None` for
/// any other query, or a wait that is not that run's.
async fn answered(
    state: &AppState,
    seat: &Seat,
    runs: &mut Runs,
    params: &WaitsParams,
) -> Result<Option<cairn_console::WaitCard>, cairn::Error> {
    let Some(Done::Answer(id)) = params.done.done() else {
        return Ok(None);
    };
    let Some(run) = params.run.as_deref().and_then(|r| RunId::from_str(r).ok()) else {
        return Ok(None);
    };
    let filter = cairn::WaitFilter {
        run: Some(run),
        step: None,
        status: None,
    };
    let found = state.engine().waits(&filter).await?;
    match found.into_iter().find(|w| w.id == id) {
        Some(wait) => Ok(Some(card(state, seat, runs, wait).await?)),
        None => Ok(None),
    }
}

/// `GET /waits`: the open waits, each with its run's crew and its step's
/// role, and their answer forms; a line naming the wait just answered.
pub(super) async fn page(
    State(state): State<AppState>,
    seat: Seat,
    Query(params): Query<WaitsParams>,
) -> Response {
    let viewer = seat.viewer.clone();
    let filter = cairn::WaitFilter {
        run: None,
        step: None,
        status: Some(cairn::WaitStatus::Open),
    };
    let cards = async {
        let waits = state.engine().waits(&filter).await?;
        let mut runs = Runs::new();
        let done = answered(&state, &seat, &mut runs, &params).await?;
        let mut cards = Vec::with_capacity(waits.len());
        for wait in waits {
            cards.push(card(&state, &seat, &mut runs, wait).await?);
        }
        Ok::<_, cairn::Error>((cards, done))
    };
    let (cards, done) = match cards.await {
        Ok(found) => found,
        Err(e) => return error_page(&viewer, e.into()),
    };
    let body = cairn_console::waits_page(
        &cards,
        done.as_ref(),
        viewer.form_csrf(),
        chrono::Utc::now(),
    );
    html(StatusCode::OK, cairn_console::page("Waits", &viewer, body))
}

#[derive(serde::Deserialize)]
pub(super) struct AnswerForm {
    csrf: String,
    decision: String,
    output: Option<String>,
    /// `text`: the edited output is a string, as typed (else JSON).
    output_as: Option<String>,
    feedback: Option<String>,
    value: Option<String>,
    reason: Option<String>,
    /// `run`: the form is on the run's page, and the answer lands there.
    back: Option<String>,
}

/// The answer a form says, or why it says none.
fn answer_of(form: AnswerForm) -> Result<cairn::Answer, ApiError> {
    let text = |t: Option<String>| t.unwrap_or_default().trim().to_owned();
    Ok(match form.decision.as_str() {
        "approve" => cairn::Answer::Approve,
        "reject" => cairn::Answer::Reject {
            feedback: text(form.feedback),
        },
        // A browser sends a textarea's line breaks as CRLF.
        "edit" if form.output_as.as_deref() == Some("text") => cairn::Answer::Edit {
            output: serde_json::Value::String(
                form.output.unwrap_or_default().replace("\r\n", "\n"),
            ),
        },
        "edit" => match serde_json::from_str(&text(form.output)) {
            Ok(output) => cairn::Answer::Edit { output },
            Err(e) => return Err(ApiError::BadQuery(format!("output: not JSON ({e})"))),
        },
        "answer" => {
            // JSON if it reads as JSON, else the text itself.
            let value = text(form.value);
            cairn::Answer::Answer {
                value: serde_json::from_str(&value).unwrap_or(serde_json::Value::String(value)),
            }
        }
        other => return Err(ApiError::BadQuery(format!("`{other}` is not a decision"))),
    })
}

/// `POST /waits/{id}/answer`: the answer the form says, by `console`, with
/// the form's reason; then back where the form was, saying it was done.
pub(super) async fn answer(
    State(state): State<AppState>,
    seat: Seat,
    Path(id): Path<String>,
    ConsoleForm(form): ConsoleForm<AnswerForm>,
) -> Response {
    if !seat.csrf_ok(&form.csrf) {
        return forbidden();
    }
    let viewer = seat.viewer.clone();
    let Ok(id) = cairn::WaitId::from_str(&id) else {
        return error_page(
            &viewer,
            ApiError::BadQuery(format!("`{id}` is not a wait id")),
        );
    };
    let actor = seat.actor(form.reason.as_deref().unwrap_or(""));
    let to_run = form.back.as_deref() == Some("run");
    let answer = match answer_of(form) {
        Ok(answer) => answer,
        Err(e) => return error_page(&viewer, e),
    };
    match state.engine().answer_as(id, &answer, &actor).await {
        Ok(wait) => {
            state.wake_runner();
            let done = Done::Answer(id).query();
            let to = match to_run {
                true => format!("/runs/{}?{done}", wait.run_id),
                false => format!("/waits?{done}&run={}", wait.run_id),
            };
            Redirect::to(&to).into_response()
        }
        Err(e) => error_page(&viewer, e.into()),
    }
}
