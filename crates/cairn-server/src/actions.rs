//! Operator actions on a run: `POST /v1/runs/{id}/retry`, `/continue`,
//! `/cancel` and `/fork`. Each is recorded by the engine (an event with who
//! and why) and answered at once with the run; nothing executes in the
//! request: a run the action queued is the embedded runner's, woken here.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use cairn::{Actor, ForkRequest, RunStatus, RunView, StepIdx};

use crate::extract::{ApiJson, IdPath, OptionalJson, RunIdPath};
use crate::{ApiError, AppState};

/// The optional body of retry, continue and cancel.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionBody {
    /// Who acts (recorded on the event); default `api`.
    #[serde(default)]
    by: Option<String>,
    /// Why (recorded on the event).
    #[serde(default)]
    reason: Option<String>,
}

/// The optional body of a retry: an action's, and whether a `children`
/// step starts every child again instead of keeping those that succeeded.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryBody {
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    rerun_children: Option<bool>,
}

/// Refuses to act on a run whose crew this server does not offer, unless
/// the server allows foreign runs: retry, continue and fork make the
/// runner execute the run's stored crew (a fork from step 0 with an input
/// the caller picks), which must not become a way around the crews
/// directory. The crew is matched by fingerprint, not name: a crew of the
/// same name submitted elsewhere may run anything.
pub(crate) async fn check_offered(state: &AppState, id: cairn::RunId) -> Result<(), ApiError> {
    if state.foreign_runs() {
        return Ok(());
    }
    let run = state.engine().get_run(id).await?;
    if state.crews().offers(&run.crew_fingerprint) {
        return Ok(());
    }
    tracing::warn!(run = %id, crew = %run.crew, fingerprint = %run.crew_fingerprint, "refused an action on a run of a crew this server does not offer");
    Err(ApiError::CrewNotOffered {
        run: id,
        crew: run.crew,
        fingerprint: run.crew_fingerprint.to_string(),
    })
}

/// An operator action on a run other than a fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunAction {
    Retry,
    /// A retry whose `children` step starts every child again.
    RetryRerunningChildren,
    Continue,
    Cancel,
}

/// An action as the API and the console take it: refused for a run of a
/// crew this server does not offer (but a cancel), recorded by the engine
/// with its actor, and the runner woken if it queued the run.
pub(crate) async fn run_action(
    state: &AppState,
    id: cairn::RunId,
    action: RunAction,
    actor: &Actor,
) -> Result<cairn::RunRecord, ApiError> {
    let engine = state.engine();
    let run = match action {
        RunAction::Retry => {
            check_offered(state, id).await?;
            engine.retry(id, actor).await?
        }
        RunAction::RetryRerunningChildren => {
            check_offered(state, id).await?;
            engine.retry_rerunning_children(id, actor).await?
        }
        RunAction::Continue => {
            check_offered(state, id).await?;
            engine.continue_run(id, actor).await?
        }
        RunAction::Cancel => engine.cancel(id, actor).await?,
    };
    tracing::info!(run = %id, ?action, by = %actor.by, note = ?actor.origin.note, status = %run.status, "run action recorded");
    if run.status == RunStatus::Queued {
        state.wake_runner();
    }
    Ok(run)
}

/// A fork as the API and the console take it: the new run, queued (the
/// runner woken) unless it is complete already.
pub(crate) async fn fork_run(
    state: &AppState,
    id: cairn::RunId,
    request: &ForkRequest,
    actor: &Actor,
) -> Result<cairn::RunRecord, ApiError> {
    check_offered(state, id).await?;
    let child = state.engine().fork(id, request, actor).await?;
    tracing::info!(run = %id, fork = %child.id, from_step = %request.from_step, by = %actor.by, "run forked");
    if child.status == RunStatus::Queued {
        state.wake_runner();
    }
    Ok(child)
}

/// An action's answer: the run as it now stands.
async fn act(
    state: AppState,
    caller: crate::people::Caller,
    id: cairn::RunId,
    action: RunAction,
    body: Option<ActionBody>,
) -> Result<Json<RunView>, ApiError> {
    let body = body.unwrap_or_default();
    let run = run_action(&state, id, action, &caller.actor(body.by, body.reason)).await?;
    Ok(Json(state.engine().show(run.id).await?))
}

/// `POST /v1/runs/{id}/retry`: a `failed` run's failed step will run again.
pub(crate) async fn retry(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): RunIdPath,
    OptionalJson(body): OptionalJson<RetryBody>,
) -> Result<Json<RunView>, ApiError> {
    let body = body.unwrap_or_default();
    let action = match body.rerun_children {
        Some(true) => RunAction::RetryRerunningChildren,
        _ => RunAction::Retry,
    };
    let body = ActionBody {
        by: body.by,
        reason: body.reason,
    };
    act(state, caller, id, action, Some(body)).await
}

/// The optional body of a continue: an action's, and a raise of the
/// run's budget made in the same transaction.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContinueBody {
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    /// Added to the run's budget first: `{"tokens": N, …}`.
    #[serde(default)]
    raise: Option<cairn::Budget>,
}

/// `POST /v1/runs/{id}/continue`: an `interrupted` run carries on; with
/// `raise`, its budget is raised first in the same transaction, so a
/// refused continue writes no raise.
pub(crate) async fn continue_run(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): RunIdPath,
    OptionalJson(body): OptionalJson<ContinueBody>,
) -> Result<Json<RunView>, ApiError> {
    let body = body.unwrap_or_default();
    let actor = caller.actor(body.by, body.reason);
    let run = match body.raise.filter(|r| !r.is_empty()) {
        Some(raise) => continue_with_budget(&state, id, &raise, &actor).await?,
        None => run_action(&state, id, RunAction::Continue, &actor).await?,
    };
    Ok(Json(state.engine().show(run.id).await?))
}

/// A raise and a continue in one transaction, as the API and the console
/// take it: refused before anything is written for a run of a crew this
/// server does not offer.
pub(crate) async fn continue_with_budget(
    state: &AppState,
    id: cairn::RunId,
    raise: &cairn::Budget,
    actor: &Actor,
) -> Result<cairn::RunRecord, ApiError> {
    check_offered(state, id).await?;
    let run = state
        .engine()
        .continue_with_budget(id, raise, actor)
        .await?;
    tracing::info!(run = %id, by = %actor.by, budget = ?run.budget, status = %run.status, "budget raised, run continued");
    if run.status == RunStatus::Queued {
        state.wake_runner();
    }
    Ok(run)
}

/// `POST /v1/runs/{id}/cancel`: cancelled at once, or (a `running` run) a
/// cancel request its executor honours within moments.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): RunIdPath,
    OptionalJson(body): OptionalJson<ActionBody>,
) -> Result<Json<RunView>, ApiError> {
    act(state, caller, id, RunAction::Cancel, body).await
}

/// The body of `POST /v1/runs/{id}/context`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContextBody {
    /// A JSON object merged into the run's input (its keys replace the
    /// input's).
    context: Value,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/runs/{id}/context`: more context for a queued run's steps
/// (an interrupted run is continued with it): merged into its input and
/// recorded as a `context_added` event; 409 `wrong_state` for any other
/// status, 422 `bad_context` unless the context and the input are objects.
pub(crate) async fn add_context(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): RunIdPath,
    ApiJson(body): ApiJson<ContextBody>,
) -> Result<Json<RunView>, ApiError> {
    check_offered(&state, id).await?;
    let actor = caller.actor(body.by, body.reason);
    let run = state
        .engine()
        .add_context(id, &body.context, &actor)
        .await?;
    tracing::info!(run = %id, by = %actor.by, "context added");
    if run.status == RunStatus::Queued {
        state.wake_runner();
    }
    Ok(Json(state.engine().show(run.id).await?))
}

/// The body of `POST /v1/runs/{id}/budget`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetBody {
    /// How much to add to each limit: `{"tokens": N, "model_calls": N, "tool_calls": N}`.
    raise: cairn::Budget,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/runs/{id}/budget`: the run's budget raised (its own limits,
/// or its crew's where it has none), recorded as a `budget_raised` event;
/// 409 `wrong_state` for a finished run. The run is not continued: a
/// `continue` follows.
pub(crate) async fn raise_budget(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): RunIdPath,
    ApiJson(body): ApiJson<BudgetBody>,
) -> Result<Json<RunView>, ApiError> {
    let actor = caller.actor(body.by, body.reason);
    let run = state.engine().raise_budget(id, &body.raise, &actor).await?;
    tracing::info!(run = %id, by = %actor.by, budget = ?run.budget, "budget raised");
    Ok(Json(state.engine().show(run.id).await?))
}

/// The body of `POST /v1/runs/{id}/fork`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// Steps `0..from_step` are copied; the fork executes from `from_step`.
    #[serde(deserialize_with = "crate::extract::u32_integer")]
    from_step: u32,
    /// A new run input (only with `from_step = 0`). Absent or `null`: the
    /// source run's input.
    #[serde(default)]
    input: Option<Value>,
    /// The fork's thread; absent or `null`: the source run's.
    #[serde(default)]
    thread_id: Option<String>,
    /// Another stored version of the run's crew for the fork to run on.
    #[serde(default)]
    crew_version: Option<String>,
    /// A `children` step the fork runs again starts every child anew
    /// instead of keeping the source's that succeeded with the same key,
    /// crew version and input.
    #[serde(default)]
    rerun_children: Option<bool>,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/runs/{id}/fork`: a new queued run copying the source's first
/// `from_step` checkpoints (201, `Location` of the new run).
pub(crate) async fn fork(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    IdPath(id): RunIdPath,
    ApiJson(body): ApiJson<ForkBody>,
) -> Result<Response, ApiError> {
    let actor = caller.actor(body.by, body.reason);
    let crew = match &body.crew_version {
        Some(version) => {
            let name = state.engine().get_run(id).await?.crew;
            let crew = crate::versions::version(&state, &name, version).await?;
            Some(crew.def().clone())
        }
        None => None,
    };
    let request = ForkRequest {
        from_step: StepIdx(body.from_step),
        input: body.input,
        thread_id: body.thread_id,
        crew,
        rerun_children: body.rerun_children.unwrap_or(false),
    };
    let child = fork_run(&state, id, &request, &actor).await?;
    let child_id = child.id;
    let view = state.engine().show(child_id).await?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/v1/runs/{child_id}"))],
        Json(view),
    )
        .into_response())
}
