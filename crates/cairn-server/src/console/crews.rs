//! The console's crews page: every crew version this server loaded, which
//! is the newest, its unfinished runs, and what the steps of its recent
//! runs (of that exact definition) cost per role (their mean durations by
//! the run page's rule); its upgrade form, which
//! moves the compatible unfinished runs of older versions to the newest
//! (`POST /crews/{name}/{version}/upgrade`); a diff of two versions with
//! which runs can move (`GET /crews/{name}/diff`); and the workers page
//! (`GET /workers`: the process registry and the blocked runs); the
//! schedules page (`GET /schedules`).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use cairn::RunFilter;

use super::form::ConsoleForm;
use super::{error_page, forbidden, html, Seat};
use crate::AppState;

/// Runs per crew whose steps the crews page sums (the newest).
const CREW_SAMPLE: u32 = 20;

/// `GET /crews`: the crews this server offers, each with what the steps of
/// its recent runs (of this exact definition) cost per role.
pub(super) async fn page(State(state): State<AppState>, seat: Seat) -> Response {
    let viewer = seat.viewer.clone();
    let stored = match state.engine().crews().await {
        Ok(stored) => stored,
        Err(e) => return error_page(&viewer, e.into()),
    };
    let mut out = vec![];
    for crew in state.crews().iter() {
        let def = crew.def();
        let mut roles: Vec<cairn_console::RoleStats> = def
            .agents
            .iter()
            .map(|a| cairn_console::RoleStats {
                role: a.role.as_str().to_owned(),
                kind: serde_json::to_value(&a.kind)
                    .ok()
                    .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_owned)))
                    .unwrap_or_default(),
                ..Default::default()
            })
            .collect();
        let filter = RunFilter {
            crew: Some(def.name.clone()),
            limit: Some(CREW_SAMPLE),
            newest_first: true,
            ..RunFilter::default()
        };
        let runs = match state.engine().list(&filter).await {
            Ok(runs) => runs,
            Err(e) => return error_page(&viewer, e.into()),
        };
        let mine = runs
            .iter()
            .filter(|r| &r.crew_fingerprint == crew.fingerprint());
        let sampled = match sum_steps(&state, mine, &mut roles).await {
            Ok(sampled) => sampled,
            Err(e) => return error_page(&viewer, e.into()),
        };
        out.push(cairn_console::CrewStats {
            name: def.name.clone(),
            version: def.version.clone(),
            fingerprint: crew.fingerprint().to_string(),
            runs: sampled,
            roles,
            newest: state
                .crews()
                .get(&def.name)
                .is_some_and(|n| n.fingerprint() == crew.fingerprint()),
            newest_version: state
                .crews()
                .get(&def.name)
                .map_or_else(|| def.version.clone(), |n| n.def().version.clone()),
            unfinished: stored
                .iter()
                .find(|c| &c.fingerprint == crew.fingerprint())
                .map_or(0, |c| c.unfinished),
            older_unfinished: stored
                .iter()
                .filter(|c| c.name == def.name && &c.fingerprint != crew.fingerprint())
                .map(|c| c.unfinished)
                .sum(),
        });
    }
    html(
        StatusCode::OK,
        cairn_console::page(
            "Crews",
            &viewer,
            cairn_console::crews_page(&out, viewer.admin_csrf()),
        ),
    )
}

/// Adds the finished steps of `runs` to their roles (count, tokens, cost)
/// and sets each role's mean duration, by the run page's rule
/// ([`cairn_console::StepTime`]: a children step's time runs from its
/// spawn to its join, time waiting for a person is left out). How many
/// runs it read.
async fn sum_steps(
    state: &AppState,
    runs: impl Iterator<Item = &cairn::RunRecord>,
    roles: &mut [cairn_console::RoleStats],
) -> Result<usize, cairn::Error> {
    let now = chrono::Utc::now();
    let mut sampled = 0;
    let mut total_ms = vec![0f64; roles.len()];
    for run in runs {
        sampled += 1;
        let shown = state.engine().show(run.id).await?;
        // Only a crew that starts children needs the events.
        let events = match run.crew_definition.starts_children() {
            true => state.engine().events(run.id).await?,
            false => vec![],
        };
        let waits = super::run_waits(state, run.id).await?;
        for step in shown.steps.iter().filter(|s| s.finished_at.is_some()) {
            let Some(role) = roles.get_mut(step.idx.get() as usize) else {
                continue;
            };
            let ms = cairn_console::StepTime::of(step, &events, &waits, now).ran_ms();
            role.steps += 1;
            role.input_tokens += step.input_tokens.unwrap_or(0);
            role.output_tokens += step.output_tokens.unwrap_or(0);
            role.cost_usd = role
                .cost_usd
                .saturating_add(step.cost_usd.unwrap_or_default());
            total_ms[step.idx.get() as usize] += ms as f64;
        }
    }
    for (role, total) in roles.iter_mut().zip(total_ms) {
        role.mean_ms = if role.steps == 0 {
            0.0
        } else {
            total / f64::from(role.steps)
        };
    }
    Ok(sampled)
}

/// The upgrade form: its CSRF token and why.
#[derive(serde::Deserialize)]
pub(super) struct UpgradeForm {
    csrf: String,
    #[serde(default)]
    reason: String,
}

/// `POST /crews/{name}/{version}/upgrade`: moves every unfinished run of
/// the crew that can move to that loaded version; a page of what moved.
pub(super) async fn upgrade(
    State(state): State<AppState>,
    seat: Seat,
    Path((name, version)): Path<(String, String)>,
    ConsoleForm(form): ConsoleForm<UpgradeForm>,
) -> Response {
    if !seat.csrf_ok(&form.csrf) {
        return forbidden();
    }
    let viewer = seat.viewer.clone();
    let Some(to) = state.crews().get_version(&name, &version).cloned() else {
        let e = crate::ApiError::UnknownCrewVersion {
            crew: name,
            version,
            loaded: vec![],
        };
        return error_page(&viewer, e);
    };
    let actor = seat.actor(&form.reason);
    match state
        .engine()
        .upgrade_runs(&to, None, false, false, &actor)
        .await
    {
        Ok(verdicts) => {
            if verdicts.iter().any(|v| v.moved) {
                state.wake_runner();
            }
            let body = cairn_console::upgrade_page(&name, &version, &verdicts);
            html(
                StatusCode::OK,
                cairn_console::page("Crew upgrade", &viewer, body),
            )
        }
        Err(e) => error_page(&viewer, e.into()),
    }
}

/// The two versions of a diff page.
#[derive(serde::Deserialize)]
pub(super) struct DiffQuery {
    from: Option<String>,
    to: Option<String>,
}

/// `GET /crews/{name}/diff?from=&to=`: how `to` differs from `from`, and
/// which unfinished runs of `from` can move (as `cairn crews diff`).
pub(super) async fn diff(
    State(state): State<AppState>,
    seat: Seat,
    Path(name): Path<String>,
    Query(q): Query<DiffQuery>,
) -> Response {
    let viewer = seat.viewer.clone();
    let versions = async {
        // A page, not axum's plain-text 400, when a version is not named.
        let (Some(from), Some(to)) = (&q.from, &q.to) else {
            return Err(crate::ApiError::BadQuery(
                "name the two versions to compare: /crews/NAME/diff?from=V&to=V".into(),
            ));
        };
        let from = crate::versions::version(&state, &name, from).await?;
        let to = crate::versions::version(&state, &name, to).await?;
        Ok::<_, crate::ApiError>(state.engine().crew_diff(&from, &to).await?)
    };
    match versions.await {
        Ok(diff) => html(
            StatusCode::OK,
            cairn_console::page("Crew diff", &viewer, cairn_console::diff_page(&name, &diff)),
        ),
        Err(e) => error_page(&viewer, e),
    }
}

/// `GET /workers`: the processes in the registry and the blocked runs.
pub(super) async fn workers(State(state): State<AppState>, seat: Seat) -> Response {
    let viewer = seat.viewer.clone();
    let found = async {
        let workers = state.engine().workers().await?;
        let blocked = state.engine().blocked().await?;
        Ok::<_, cairn::Error>((workers, blocked))
    };
    match found.await {
        Ok((workers, blocked)) => html(
            StatusCode::OK,
            cairn_console::page(
                "Workers",
                &viewer,
                cairn_console::workers_page(&workers, &blocked),
            ),
        ),
        Err(e) => error_page(&viewer, e.into()),
    }
}

/// Slots the schedules page shows per schedule (the newest).
const SHOWN_SLOTS: u32 = 10;

/// `GET /schedules`: every schedule with its next fire times and newest
/// slots.
pub(super) async fn schedules(State(state): State<AppState>, seat: Seat) -> Response {
    let viewer = seat.viewer.clone();
    let found = async {
        let mut out = vec![];
        for s in state.engine().schedules().await? {
            out.push(state.engine().schedule(&s.name, SHOWN_SLOTS).await?);
        }
        Ok::<_, cairn::Error>(out)
    };
    match found.await {
        Ok(schedules) => html(
            StatusCode::OK,
            cairn_console::page(
                "Schedules",
                &viewer,
                cairn_console::schedules_page(&schedules),
            ),
        ),
        Err(e) => error_page(&viewer, e.into()),
    }
}
