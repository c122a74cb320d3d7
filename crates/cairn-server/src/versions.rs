//! Crew versions over HTTP, the documents of `cairn crews …` and `cairn
//! runs upgrade`: `GET /v1/crews` (the versions this server loaded),
//! `GET /v1/crews/stored` (every version a run was stored with),
//! `GET /v1/crews/{name}/versions/{version}` (one definition),
//! `GET /v1/crews/{name}/diff?from=&to=` and `POST
//! /v1/crews/{name}/upgrade`. A move goes only to a version this server
//! loaded: it executes only its own crew files.

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};

use cairn::{Crew, CrewDef, CrewDiff, CrewVersion, Fingerprint, UpgradeVerdict};

use crate::extract::{ApiJson, ApiQuery};
use crate::{ApiError, AppState};

/// An entry of `GET /v1/crews`.
#[derive(Debug, Serialize)]
pub(crate) struct CrewSummary<'a> {
    name: &'a str,
    version: &'a str,
    fingerprint: &'a Fingerprint,
    agents: Vec<AgentSummary<'a>>,
    /// The version a submit that names none takes.
    newest: bool,
    /// Its runs that have not ended, on this database.
    unfinished: u64,
}

#[derive(Debug, Serialize)]
struct AgentSummary<'a> {
    role: &'a str,
    kind: &'static str,
}

/// `GET /v1/crews`: every crew version this server loaded, by name then
/// version, with its unfinished runs.
pub(crate) async fn loaded(
    State(state): State<AppState>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let stored = state.engine().crews().await?;
    let unfinished = |f: &Fingerprint| {
        stored
            .iter()
            .find(|c| &c.fingerprint == f)
            .map_or(0, |c| c.unfinished)
    };
    let crews: Vec<CrewSummary<'_>> = state
        .crews()
        .iter()
        .map(|crew| CrewSummary {
            name: &crew.def().name,
            version: &crew.def().version,
            fingerprint: crew.fingerprint(),
            agents: crew
                .def()
                .agents
                .iter()
                .map(|a| AgentSummary {
                    role: a.role.as_str(),
                    kind: a.kind.name(),
                })
                .collect(),
            newest: state
                .crews()
                .get(&crew.def().name)
                .is_some_and(|n| n.fingerprint() == crew.fingerprint()),
            unfinished: unfinished(crew.fingerprint()),
        })
        .collect();
    Ok(Json(crews).into_response())
}

/// `GET /v1/crews/stored`: the array of `cairn crews list --json`.
pub(crate) async fn stored(
    State(state): State<AppState>,
) -> Result<Json<Vec<CrewVersion>>, ApiError> {
    Ok(Json(state.engine().crews().await?))
}

/// `GET /v1/workers`: the process registry.
pub(crate) async fn workers(
    State(state): State<AppState>,
) -> Result<Json<Vec<cairn::ProcessRecord>>, ApiError> {
    Ok(Json(state.engine().workers().await?))
}

/// `GET /v1/crews/{name}/versions/{version}`: a stored definition
/// (`version`: a version, or the start of a fingerprint; `newest`: the
/// newest stored).
pub(crate) async fn show(
    State(state): State<AppState>,
    Path((name, version)): Path<(String, String)>,
) -> Result<Json<CrewDef>, ApiError> {
    let version = (version != "newest").then_some(version.as_str());
    let crew = state.engine().crew_show(&name, version).await?;
    Ok(Json(crew.def().clone()))
}

/// The query of a diff.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiffQuery {
    from: String,
    to: String,
}

/// `GET /v1/crews/{name}/diff?from=&to=`: the document of `cairn crews
/// diff --json`. Each side is a version this server loaded or one stored.
pub(crate) async fn diff(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(q): ApiQuery<DiffQuery>,
) -> Result<Json<CrewDiff>, ApiError> {
    let from = version(&state, &name, &q.from).await?;
    let to = version(&state, &name, &q.to).await?;
    Ok(Json(state.engine().crew_diff(&from, &to).await?))
}

/// A version this server loaded, else one stored.
pub(crate) async fn version(state: &AppState, name: &str, version: &str) -> Result<Crew, ApiError> {
    match state.crews().get_version(name, version) {
        Some(crew) => Ok(crew.clone()),
        None => Ok(state.engine().crew_version(name, version).await?),
    }
}

/// The body of an upgrade.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpgradeBody {
    /// A version this server loaded.
    to: String,
    #[serde(default)]
    run: Option<cairn::RunId>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/crews/{name}/upgrade`: the array of `cairn runs upgrade
/// --json`. Moved runs are woken for the runner.
pub(crate) async fn upgrade(
    State(state): State<AppState>,
    caller: crate::people::Caller,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<UpgradeBody>,
) -> Result<Json<Vec<UpgradeVerdict>>, ApiError> {
    let to = state
        .crews()
        .get_version(&name, &body.to)
        .cloned()
        .ok_or_else(|| ApiError::UnknownCrewVersion {
            crew: name.clone(),
            version: body.to.clone(),
            loaded: state
                .crews()
                .iter()
                .filter(|c| c.def().name == name)
                .map(|c| c.def().version.clone())
                .collect(),
        })?;
    let actor = caller.actor(body.by, body.reason);
    let verdicts = state
        .engine()
        .upgrade_runs(&to, body.run, body.dry_run, body.force, &actor)
        .await?;
    let moved = verdicts.iter().filter(|v| v.moved).count();
    if moved > 0 {
        tracing::info!(crew = %name, to = %body.to, moved, by = %actor.by, "runs moved to another crew version");
        state.wake_runner();
    }
    Ok(Json(verdicts))
}
