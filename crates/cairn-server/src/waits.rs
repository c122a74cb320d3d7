//! Human waits: `GET /v1/waits` lists them (the objects `cairn waits list
//! --json` prints) and `POST /v1/waits/{id}/answer` records a person's
//! answer through the engine, which decides what it does to the run (usually
//! queues it again: the runner is woken).

use std::str::FromStr;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use cairn::{Answer, RunId, WaitFilter, WaitRecord, WaitStatus};

use crate::extract::{ApiJson, ApiQuery, IdPath, WaitIdPath};
use crate::{ApiError, AppState};

/// The query of `GET /v1/waits`; an empty parameter means "not given".
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitsQuery {
    run: Option<String>,
    status: Option<String>,
}

/// The answer of `GET /v1/waits`.
#[derive(Debug, Serialize)]
pub(crate) struct WaitList {
    waits: Vec<WaitRecord>,
}

/// `GET /v1/waits`: waits oldest first, by run and status.
pub(crate) async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<WaitsQuery>,
) -> Result<Json<WaitList>, ApiError> {
    let given = |p: Option<String>| p.filter(|v| !v.is_empty());
    let run = given(q.run)
        .map(|text| {
            RunId::from_str(&text)
                .map_err(|_| ApiError::BadQuery(format!("run: `{text}` is not a run id")))
        })
        .transpose()?;
    let status = given(q.status)
        .map(|text| {
            WaitStatus::from_str(&text).map_err(|_| {
                ApiError::BadQuery(format!(
                    "status: `{text}` is not a wait status (open, answered, expired, cancelled)"
                ))
            })
        })
        .transpose()?;
    let waits = state
        .engine()
        .waits(&WaitFilter {
            run,
            step: None,
            status,
        })
        .await?;
    Ok(Json(WaitList { waits }))
}

/// The body of `POST /v1/waits/{id}/answer`: an `Answer` (tagged by
/// `decision`) plus an optional `by`, `reason` and `digest` (the ballot's,
/// of what the person was shown). Read as a map so that a field the
/// decision does not take (`{"decision": "approve", "output": …}`) is
/// refused instead of silently dropped.
pub(crate) struct AnswerBody {
    answer: Answer,
    by: Option<String>,
    reason: Option<String>,
    digest: Option<String>,
}

impl<'de> Deserialize<'de> for AnswerBody {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut fields = Map::<String, Value>::deserialize(d)?;
        let mut text = |name: &str| match fields.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(v)) => Ok(Some(v)),
            Some(other) => Err(D::Error::custom(format!(
                "`{name}` must be a string, not {other}"
            ))),
        };
        let by = text("by")?;
        let reason = text("reason")?;
        let digest = text("digest")?;
        let given: Vec<String> = fields.keys().cloned().collect();
        let answer: Answer = serde_json::from_value(Value::Object(fields))
            .map_err(|e| D::Error::custom(answer_shape(&e.to_string())))?;
        let expected = match serde_json::to_value(&answer) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        if let Some(extra) = given.iter().find(|k| !expected.contains_key(*k)) {
            return Err(D::Error::custom(format!(
                "unknown field `{extra}` for decision `{}`; {}",
                expected
                    .get("decision")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                ANSWER_FORMS
            )));
        }
        Ok(AnswerBody {
            answer,
            by,
            reason,
            digest,
        })
    }
}

/// The four forms of an answer, for error messages.
const ANSWER_FORMS: &str = "send one of {\"decision\": \"approve\"}, {\"decision\": \"edit\", \"output\": …}, {\"decision\": \"reject\", \"feedback\": \"…\"}, {\"decision\": \"answer\", \"value\": …}, with an optional \"by\", \"reason\" and \"digest\"";

/// serde's message about the answer, with the forms it could have taken.
fn answer_shape(serde_message: &str) -> String {
    format!("{serde_message}; {ANSWER_FORMS}")
}

/// The answer of `POST /v1/waits/{id}/answer`: the wait's fields, plus
/// the run as the answer left it (usually `queued`: the runner carries it
/// on; `succeeded` after the last step's review, `failed` after a rejected
/// approval), so a client knows what to wait for next without guessing.
#[derive(Debug, Serialize)]
pub(crate) struct Answered {
    #[serde(flatten)]
    wait: WaitRecord,
    run: cairn::RunRecord,
}

/// A refused answer to a closed wait, naming the open wait of its run.
async fn closed(state: &AppState, id: cairn::WaitId, source: cairn::Error) -> ApiError {
    let Ok(mine) = state.engine().waits(&cairn::WaitFilter::default()).await else {
        return source.into();
    };
    let Some(run) = mine.iter().find(|w| w.id == id).map(|w| w.run_id) else {
        return source.into();
    };
    let open = mine
        .into_iter()
        .find(|w| w.run_id == run && w.status == cairn::WaitStatus::Open)
        .map(Box::new);
    ApiError::WaitClosed { source, run, open }
}

/// `POST /v1/waits/{id}/answer`: records the answer (the caller's vote,
/// on a wait with an approver policy) and returns the wait and where its
/// run stands; 409 `stale_digest` when it quotes another `digest` than
/// the wait's. The same answer again is a no-op that returns the wait as
/// it is.
pub(crate) async fn answer(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): WaitIdPath,
    ApiJson(body): ApiJson<AnswerBody>,
) -> Result<Json<Answered>, ApiError> {
    let actor = caller.actor(body.by, body.reason);
    let quoted = body.digest.as_deref();
    let wait = match state
        .engine()
        .answer_quoting(id, &body.answer, &actor, quoted)
        .await
    {
        Ok(wait) => wait,
        Err(e @ cairn::Error::Store(cairn::StoreError::WaitClosed { .. })) => {
            return Err(closed(&state, id, e).await)
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(wait = %id, run = %wait.run_id, by = %actor.by, status = %wait.status, "answer recorded");
    // The run is usually queued again; when it is not (an approval
    // rejected, a repeated answer) the wake-up costs the runner one listing.
    state.wake_runner();
    let run = state.engine().get_run(wait.run_id).await?;
    Ok(Json(Answered { wait, run }))
}

/// `GET /v1/waits/{id}/ballot`: the wait's approver policy (as copied when
/// it opened) and the votes cast on it so far.
pub(crate) async fn ballot(
    State(state): State<AppState>,
    IdPath(id): WaitIdPath,
) -> Result<Json<cairn::Ballot>, ApiError> {
    Ok(Json(state.engine().ballot(id).await?))
}
