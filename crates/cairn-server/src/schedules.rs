//! Schedules over HTTP: `GET/POST /v1/schedules`, `GET/DELETE
//! /v1/schedules/{name}`, and its `pause`, `resume`, `trigger` and
//! `backfill`. The crew is one the server loaded (`--crews`), by name and
//! optional version, as a submit names it; a caller bound to tenants
//! schedules only as them. Any server or worker of the database fires it.

use axum::extract::{Path, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use cairn::schedule::{CatchUp, Overlap};
use cairn::{Cadence, NewSchedule, Schedule, Slot};

use crate::extract::ApiJson;
use crate::people::Caller;
use crate::{ApiError, AppState};

/// Fire times a schedule's view lists ahead, and slots it shows.
const AHEAD: usize = 3;
const SHOWN_SLOTS: u32 = 20;

/// A schedule with its next fire times and newest slots.
#[derive(Debug, Serialize)]
pub(crate) struct ScheduleView {
    #[serde(flatten)]
    schedule: Schedule,
    next: Vec<DateTime<Utc>>,
    slots: Vec<Slot>,
}

fn view(schedule: Schedule, slots: Vec<Slot>) -> Json<ScheduleView> {
    let next = schedule.upcoming(AHEAD);
    Json(ScheduleView {
        schedule,
        next,
        slots,
    })
}

#[derive(Debug, Serialize)]
pub(crate) struct ScheduleList {
    schedules: Vec<Schedule>,
}

/// `GET /v1/schedules`.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<ScheduleList>, ApiError> {
    let schedules = state.engine().schedules().await?;
    Ok(Json(ScheduleList { schedules }))
}

/// The body of `POST /v1/schedules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    name: String,
    crew: String,
    #[serde(default)]
    crew_version: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    /// An interval: `30s`, `5m`, `1h`.
    #[serde(default)]
    every: Option<String>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    tz: Option<String>,
    #[serde(default)]
    overlap: Option<String>,
    #[serde(default)]
    catch_up: Option<String>,
    #[serde(default)]
    thread: Option<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    tenant: Option<String>,
}

fn invalid(e: impl std::fmt::Display) -> ApiError {
    ApiError::InvalidBody(e.to_string())
}

fn cadence(body: &CreateBody) -> Result<Cadence, ApiError> {
    match (&body.every, &body.cron) {
        (Some(every), None) => {
            let age = cairn::parse_age(every).map_err(|e| invalid(format!("every: {e}")))?;
            Cadence::every(age).map_err(invalid)
        }
        (None, Some(cron)) => Cadence::cron(cron, body.tz.as_deref()).map_err(invalid),
        _ => Err(invalid("give exactly one of `every` and `cron`")),
    }
}

/// `POST /v1/schedules`: stores it; 409 `schedule_exists` for a name taken.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<Json<ScheduleView>, ApiError> {
    let crew = match &body.crew_version {
        None => state.crews().get(&body.crew),
        Some(v) => state.crews().get_version(&body.crew, v),
    }
    .ok_or_else(|| ApiError::UnknownCrew(body.crew.clone()))?;
    let tenant = caller.tenant(body.tenant.clone())?;
    let new = NewSchedule {
        name: body.name.clone(),
        crew: crew.def().clone(),
        input: body.input.clone().unwrap_or_else(|| serde_json::json!({})),
        cadence: cadence(&body)?,
        overlap: Overlap::parse(body.overlap.as_deref().unwrap_or("skip")).map_err(invalid)?,
        catch_up: CatchUp::parse(body.catch_up.as_deref().unwrap_or("latest")).map_err(invalid)?,
        thread: body.thread.clone(),
        priority: cairn::Priority::new(body.priority.unwrap_or(0)).map_err(invalid)?,
        tenant: tenant
            .map(cairn::Tenant::new)
            .transpose()
            .map_err(invalid)?,
        by: Some(caller.name.clone()),
    };
    let made = state.engine().create_schedule(&new).await?;
    tracing::info!(schedule = %made.name, by = %caller.name, "schedule created");
    Ok(view(made, vec![]))
}

/// `GET /v1/schedules/{name}`: with its next fire times and newest slots.
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    let (schedule, slots) = state.engine().schedule(&name, SHOWN_SLOTS).await?;
    Ok(view(schedule, slots))
}

/// `POST /v1/schedules/{name}/pause`.
pub(crate) async fn pause(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    paused(&state, &name, true).await
}

/// `POST /v1/schedules/{name}/resume`.
pub(crate) async fn resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    paused(&state, &name, false).await
}

/// The schedule `name`, paused or resumed.
async fn paused(
    state: &AppState,
    name: &str,
    paused: bool,
) -> Result<Json<ScheduleView>, ApiError> {
    Ok(view(
        state.engine().pause_schedule(name, paused).await?,
        vec![],
    ))
}

/// `POST /v1/schedules/{name}/trigger`: a run now; the slot.
pub(crate) async fn trigger(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Slot>, ApiError> {
    let slot = state.engine().trigger_schedule(&name).await?;
    state.wake_runner();
    Ok(Json(slot))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackfillBody {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Slots {
    slots: Vec<Slot>,
}

/// `POST /v1/schedules/{name}/backfill`: every slot from `from` to `to`.
pub(crate) async fn backfill(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<BackfillBody>,
) -> Result<Json<Slots>, ApiError> {
    let slots = state
        .engine()
        .backfill_schedule(&name, body.from, body.to)
        .await?;
    state.wake_runner();
    Ok(Json(Slots { slots }))
}

/// `DELETE /v1/schedules/{name}`: `{"deleted": NAME}`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.engine().delete_schedule(&name).await?;
    Ok(Json(serde_json::json!({ "deleted": name })))
}
