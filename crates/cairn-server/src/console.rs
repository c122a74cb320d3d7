//! The web console's routes (pages rendered by `cairn-console`) and its
//! sign-in. With API tokens or principals configured, `GET /login` asks
//! for a token; a valid one (a principal's, or one of `CAIRN_API_TOKENS`,
//! whose holder is `api`) gets a session cookie (`HttpOnly`,
//! `SameSite=Strict`, random, kept only as a digest in the database, so
//! several servers share sessions), and every page needs it; the forms
//! record the signed-in principal as the actor (`sessions.rs`). The
//! token itself never reaches a URL, a cookie or a page. Every
//! state-changing form (actions, answers, sign-out) carries a CSRF token
//! besides the cookie: the session's, or without tokens (development,
//! loopback only, no sign-in) the server's own, so that a page of another
//! site cannot drive a local console either.
//!
//! The API under `/v1` takes bearer tokens only, never the cookie, so a
//! cross-site page cannot drive it through a signed-in browser.
//!
//! Expired sessions are dropped at each sign-in; disabling a principal or
//! rotating its token ends its sessions. The cookie is `Secure` when the configured public URL is
//! `https` (the server itself speaks plain HTTP, and `X-Forwarded-Proto`
//! is not trusted: the server has no notion of a trusted proxy, and any
//! client could send it). Wrong tokens at sign-in count against the
//! client address's budget as wrong bearer tokens do (`throttle.rs`):
//! past it, sign-in is 429 with `Retry-After`.

mod crews;
mod form;
mod links;
mod sessions;
mod waits;

use std::str::FromStr;

use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use cairn::{RunFilter, RunId, RunStatus, Via};
use cairn_console::{RunsQuery, Viewer};

use crate::throttle::ClientIp;
use crate::{ApiError, AppState};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "cairn_session";
/// How long a session lasts without signing in again.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Runs per page of the runs table.
const PAGE: u32 = 50;

/// The console's routes, the one list of its paths: the token check sends
/// each of them to the session gate instead of asking for a bearer token
/// ([`PATHS`]), so a page a link reaches never answers a signed-in
/// browser with the API's JSON 401.
fn table() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/", get(runs)),
        ("/runs/{id}", get(run)),
        ("/runs/{id}/events", get(crate::sse::console_events)),
        ("/runs/{id}/{action}", post(act)),
        ("/runs/{id}/fork", post(fork)),
        ("/waits", get(waits::page)),
        ("/threads", get(threads)),
        ("/threads/{id}", get(thread)),
        ("/crews", get(crews::page)),
        ("/crews/{name}/{version}/upgrade", post(crews::upgrade)),
        ("/crews/{name}/diff", get(crews::diff)),
        ("/workers", get(crews::workers)),
        ("/schedules", get(crews::schedules)),
        ("/limits", get(limits)),
        ("/waits/{id}/answer", post(waits::answer)),
        ("/links/{token}", get(links::confirm).post(links::answer)),
        ("/login", get(login_form).post(login)),
        ("/logout", post(logout)),
        (cairn_console::CSS_PATH, get(css)),
        (cairn_console::JS_PATH, get(js)),
    ]
}

/// The console's paths (those of [`table`]).
pub(crate) static PATHS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| table().into_iter().map(|(path, _)| path).collect());

/// Of those, the ones reachable without a session.
/// (A notice's link is its own credential: `links.rs`.)
const OPEN: &[&str] = &[
    "/login",
    "/links/{token}",
    cairn_console::CSS_PATH,
    cairn_console::JS_PATH,
];

pub(crate) fn routes() -> Router<AppState> {
    table()
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            router.route(path, route)
        })
}

use form::ConsoleForm;
pub(crate) use sessions::{gate, Seat, Sessions};

/// The session cookie's value, if the request carries one.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// A run id from a path, or why it is not one.
fn run_id(id: &str) -> Result<RunId, ApiError> {
    RunId::from_str(id).map_err(|_| ApiError::BadQuery(format!("`{id}` is not a run id")))
}

fn html(status: StatusCode, markup: maud::Markup) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        markup.into_string(),
    )
        .into_response()
}

/// An error as a page: the API's status and public message.
fn error_page(viewer: &Viewer, e: ApiError) -> Response {
    let (status, code, message) = e.public();
    let body = maud::html! {
        h1 { "Error" }
        p.error { (message) }
        p { code { (code) } }
        p { a href="/" { "All runs" } }
    };
    html(status, cairn_console::page("Error", viewer, body))
}

/// A page, or the error page for what kept it from being built.
fn shown(viewer: &Viewer, page: Result<Response, ApiError>) -> Response {
    page.unwrap_or_else(|e| error_page(viewer, e))
}

#[derive(serde::Deserialize, Default)]
pub(crate) struct RunsParams {
    status: Option<String>,
    crew: Option<String>,
    thread: Option<String>,
    after: Option<String>,
}

/// `GET /`: the runs table, newest first.
async fn runs(
    State(state): State<AppState>,
    seat: Seat,
    Query(params): Query<RunsParams>,
) -> Response {
    shown(&seat.viewer, runs_page(&state, &seat.viewer, params).await)
}

/// The runs table of `GET /`, or what keeps it from being shown.
async fn runs_page(
    state: &AppState,
    viewer: &Viewer,
    params: RunsParams,
) -> Result<Response, ApiError> {
    let given = |p: Option<String>| p.filter(|v| !v.is_empty());
    let query = RunsQuery {
        status: given(params.status),
        crew: given(params.crew),
        thread: given(params.thread),
    };
    let status = (query.status.as_deref().map(RunStatus::from_str).transpose())
        .map_err(|e| ApiError::BadQuery(format!("status: {e}")))?;
    let after = (given(params.after).map(|a| RunId::from_str(&a)).transpose())
        .map_err(|_| ApiError::BadCursor)?;
    let filter = RunFilter {
        status,
        crew: query.crew.clone(),
        thread: query.thread.clone(),
        after,
        limit: Some(PAGE + 1),
        newest_first: true,
        parent: None,
        tenant: None,
    };
    let mut listed = state.engine().list(&filter).await?;
    let more = listed.len() > PAGE as usize;
    listed.truncate(PAGE as usize);
    let next = more
        .then(|| listed.last().map(|r| r.id.to_string()))
        .flatten();
    // Their waits, whose time a run's duration leaves out, and where the
    // ones waiting for children stand.
    let mut waits = vec![];
    for run in &listed {
        waits.extend(run_waits(state, run.id).await?);
    }
    let standing = standing(state, &listed).await?;
    let body = cairn_console::runs_page(
        &listed,
        &waits,
        &standing,
        &query,
        next.as_deref(),
        after.is_none(),
        chrono::Utc::now(),
    );
    Ok(html(
        StatusCode::OK,
        cairn_console::page("Runs", viewer, body),
    ))
}

/// Where each of `runs` that waits at a step that starts children stands
/// (one read of each such run's children).
async fn standing(
    state: &AppState,
    runs: &[cairn::RunRecord],
) -> Result<cairn_console::Standing, cairn::Error> {
    let mut standing = cairn_console::Standing::new();
    for run in runs.iter().filter(|r| r.status == RunStatus::Waiting) {
        let at = run.crew_definition.agents.get(run.cursor.get() as usize);
        if at.is_some_and(|a| a.starts_children()) {
            if let Some(wait) = state.engine().show(run.id).await?.children_wait() {
                standing.insert(run.id, wait);
            }
        }
    }
    Ok(standing)
}

/// A page's query after a form (`?done=…`, and `&wait=ID` for an
/// answer): what the form that led here did.
#[derive(serde::Deserialize, Default)]
pub(crate) struct DoneParams {
    done: Option<String>,
    wait: Option<String>,
}

impl DoneParams {
    /// What was done, for the line that confirms it.
    pub(crate) fn done(&self) -> Option<cairn_console::Done> {
        cairn_console::Done::parse(self.done.as_deref(), self.wait.as_deref())
    }
}

/// `GET /runs/{id}`: one run (`?done=…`: with a line confirming what the
/// form that led here did).
async fn run(
    State(state): State<AppState>,
    seat: Seat,
    Path(id): Path<String>,
    Query(params): Query<DoneParams>,
) -> Response {
    shown(&seat.viewer, run_page(&state, &seat, &id, params).await)
}

/// Run `id`'s page, or what keeps it from being shown.
async fn run_page(
    state: &AppState,
    seat: &Seat,
    id: &str,
    params: DoneParams,
) -> Result<Response, ApiError> {
    let viewer = &seat.viewer;
    let id = run_id(id)?;
    let view = state.engine().show(id).await?;
    let events = state.engine().events(id).await?;
    let journals = llm_journals(state, &view).await?;
    let waits = run_waits(state, id).await?;
    // The other versions of its crew this server offers, for the fork form.
    let versions: Vec<String> = state
        .crews()
        .iter()
        .map(|c| c.def())
        .filter(|d| d.name == view.run.crew && d.version != view.run.crew_version)
        .map(|d| d.version.clone())
        .collect();
    let foreign = !state.foreign_runs() && !state.crews().offers(&view.run.crew_fingerprint);
    let mut not_theirs = vec![];
    for w in waits.iter().filter(|w| w.status == cairn::WaitStatus::Open) {
        let policy = state
            .engine()
            .ballot(w.id)
            .await
            .ok()
            .and_then(|b| b.approvers);
        if !seat.caller.may_answer(policy.as_ref()) {
            not_theirs.push(w.id);
        }
    }
    let body = cairn_console::run_page(&cairn_console::RunPage {
        view: &view,
        events: &events,
        journals: &journals,
        waits: &waits,
        not_theirs: &not_theirs,
        offer: cairn_console::Offer {
            versions: &versions,
            foreign,
        },
        csrf: viewer.form_csrf(),
        done: params.done(),
        now: chrono::Utc::now(),
    });
    Ok(html(
        StatusCode::OK,
        cairn_console::page(&format!("Run {id}"), viewer, body),
    ))
}

/// A run's waits, any status.
async fn run_waits(state: &AppState, id: RunId) -> Result<Vec<cairn::WaitRecord>, cairn::Error> {
    let filter = cairn::WaitFilter {
        run: Some(id),
        step: None,
        status: None,
    };
    state.engine().waits(&filter).await
}

/// The journals of the run's `llm` steps that have started (one read each;
/// other steps have none).
async fn llm_journals(
    state: &AppState,
    view: &cairn::RunView,
) -> Result<cairn_console::Journals, cairn::Error> {
    let agents = &view.run.crew_definition.agents;
    let mut journals = cairn_console::Journals::new();
    for step in &view.steps {
        let llm = agents
            .get(step.idx.get() as usize)
            .is_some_and(|a| matches!(a.kind, cairn::AgentKind::Llm(_)));
        if llm {
            let journal = state
                .engine()
                .store()
                .journal(view.run.id, step.idx, None)
                .await?;
            journals.insert(step.idx.get(), journal);
        }
    }
    Ok(journals)
}

/// `GET /login`.
async fn login_form(State(state): State<AppState>) -> Response {
    if !state.requires_token() {
        return Redirect::to("/").into_response();
    }
    html(StatusCode::OK, cairn_console::login_page(None))
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /login`: a valid token opens a session; a wrong one shows an
/// error and sets nothing; a client address out of tries is 429.
async fn login(
    State(state): State<AppState>,
    ClientIp(client): ClientIp,
    ConsoleForm(form): ConsoleForm<LoginForm>,
) -> Response {
    if !state.requires_token() {
        return Redirect::to("/").into_response();
    }
    let now = Instant::now();
    if let Some(wait) = state.throttle().wait(client, now) {
        return throttled(wait);
    }
    let caller =
        match crate::people::principal(&state, form.token.trim(), Via::Console, client).await {
            Ok(Some(caller)) => caller,
            Ok(None) => {
                state.throttle().failed(client, now);
                return html(
                    StatusCode::UNAUTHORIZED,
                    cairn_console::login_page(Some("That token is not one this server accepts.")),
                );
            }
            Err(e) => {
                return error_page(
                    &Viewer::Development {
                        csrf: String::new(),
                    },
                    e,
                )
            }
        };
    let opened = match state
        .engine()
        .open_session(&caller.name, caller.token.as_deref(), SESSION_TTL)
        .await
    {
        Ok(opened) => opened,
        Err(e) => {
            return error_page(
                &Viewer::Development {
                    csrf: String::new(),
                },
                e.into(),
            )
        }
    };
    tracing::info!(principal = ?caller.name, "signed in to the console");
    let cookie = session_cookie(
        &opened.cookie,
        SESSION_TTL.as_secs(),
        state.secure_cookies(),
    );
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The sign-in page saying to wait, 429 with `Retry-After`.
fn throttled(wait: Duration) -> Response {
    let error = ApiError::TooManyAttempts { retry_after: wait };
    let (status, _, message) = error.public();
    let mut response = html(status, cairn_console::login_page(Some(&message)));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, crate::error::retry_after_header(wait));
    response
}

/// A `Set-Cookie` value for the session cookie (an empty `id` and age 0
/// end it).
fn session_cookie(id: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

#[derive(serde::Deserialize)]
struct LogoutForm {
    csrf: String,
}

/// `POST /logout`: ends the session, if the form carries its CSRF token.
async fn logout(
    State(state): State<AppState>,
    seat: Seat,
    ConsoleForm(form): ConsoleForm<LogoutForm>,
) -> Response {
    let Some(id) = seat.cookie.as_deref() else {
        return Redirect::to("/login").into_response();
    };
    // The gate found the session the cookie names, or there is no cookie.
    if !seat.csrf_ok(&form.csrf) {
        return forbidden();
    }
    if let Err(e) = state.engine().close_session(id).await {
        return error_page(&seat.viewer, e.into());
    }
    let mut response = Redirect::to("/login").into_response();
    if let Ok(value) = HeaderValue::from_str(&session_cookie("", 0, state.secure_cookies())) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// One of the embedded assets, cached for an hour.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=3600"),
            ),
        ],
        body,
    )
        .into_response()
}

/// `GET /console.css`.
async fn css() -> Response {
    asset("text/css; charset=utf-8", cairn_console::CSS)
}

/// `GET /console.js`: the pages' one script (live updates).
async fn js() -> Response {
    asset("text/javascript; charset=utf-8", cairn_console::JS)
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "the form's CSRF token does not match: reload the page and try again",
    )
        .into_response()
}

/// An operator action's form: its CSRF token, why, and for a fork, where
/// from and with what input.
#[derive(serde::Deserialize)]
struct ActionForm {
    csrf: String,
    #[serde(default)]
    reason: String,
    from_step: Option<String>,
    input: Option<String>,
    /// A fork's version of the run's crew (empty: its own).
    crew_version: Option<String>,
    /// A budget raise: `tokens=+50000 cost_usd=+1` (spaces or commas).
    raise: Option<String>,
    /// A signal sent by hand: its name and payload (JSON).
    signal: Option<String>,
    payload: Option<String>,
}

/// A run form's checks, in order: its CSRF token, then the run id in its
/// path. The viewer and the run, or the page that refuses it.
fn run_form(seat: &Seat, csrf: &str, id: &str) -> Result<(Viewer, RunId), Box<Response>> {
    if !seat.csrf_ok(csrf) {
        return Err(Box::new(forbidden()));
    }
    let viewer = seat.viewer.clone();
    match run_id(id) {
        Ok(id) => Ok((viewer, id)),
        Err(e) => Err(Box::new(error_page(&viewer, e))),
    }
}

/// `POST /runs/{id}/retry`, `/continue`, `/cancel`, `/budget`, `/signal`: back to
/// the run's page, with `?done=…` (a line confirming it).
async fn act(
    State(state): State<AppState>,
    seat: Seat,
    Path((id, action)): Path<(String, String)>,
    ConsoleForm(form): ConsoleForm<ActionForm>,
) -> Response {
    use crate::actions::RunAction;
    let (viewer, id) = match run_form(&seat, &form.csrf, &id) {
        Ok(checked) => checked,
        Err(refused) => return *refused,
    };
    use cairn_console::Done;
    // Back to the run's page, with a line saying what was done.
    let done = |done: Done| Redirect::to(&format!("/runs/{id}?{}", done.query())).into_response();
    let (action, did) = match action.as_str() {
        "retry" => (RunAction::Retry, Done::Retry),
        "continue" => (RunAction::Continue, Done::Continue),
        "cancel" => (RunAction::Cancel, Done::Cancel),
        "budget" => {
            return match raise(&state, &seat, id, &form).await {
                Ok(()) => done(Done::Budget),
                Err(e) => error_page(&viewer, e),
            }
        }
        "signal" => {
            return match signal(&state, &seat, id, &form).await {
                Ok(()) => done(Done::Signal),
                Err(e) => error_page(&viewer, e),
            }
        }
        other => return error_page(&viewer, ApiError::NoRoute(format!("/runs/{id}/{other}"))),
    };
    match crate::actions::run_action(&state, id, action, &seat.actor(&form.reason)).await {
        Ok(_) => done(did),
        Err(e) => error_page(&viewer, e),
    }
}

/// `POST /runs/{id}/signal`: sends the form's signal to the run, by the
/// signed-in operator (`via: console`, with the form's reason).
async fn signal(
    state: &AppState,
    seat: &Seat,
    id: RunId,
    form: &ActionForm,
) -> Result<(), ApiError> {
    let payload = match form.payload.as_deref().map(str::trim) {
        None | Some("") => serde_json::Value::Null,
        Some(text) => serde_json::from_str(text)
            .map_err(|e| ApiError::InvalidBody(format!("the payload is not JSON: {e}")))?,
    };
    let req = cairn::SignalRequest {
        target: id.to_string(),
        name: form.signal.clone().unwrap_or_default(),
        payload,
        id: None,
        start: None,
        traceparent: None,
    };
    let by = seat.actor(&form.reason);
    let sent = state
        .engine()
        .send_signal_as(&req, None, &by, &seat.caller.tenants)
        .await?;
    if sent.woke {
        state.wake_runner();
    }
    Ok(())
}

/// `POST /runs/{id}/budget`: raises the run's budget (recorded with the
/// form's reason) and carries on what the budget stopped, in one
/// transaction: the run, if it is interrupted, or a waiting parent's
/// interrupted children (as `cairn runs continue RUN --budget` does). A
/// continue this server refuses (a crew it does not offer) is refused
/// before anything is written; a run with nothing to carry on only takes
/// the raise.
async fn raise(
    state: &AppState,
    seat: &Seat,
    id: RunId,
    form: &ActionForm,
) -> Result<(), ApiError> {
    let text = form.raise.as_deref().unwrap_or_default();
    let flags = text.split([' ', ',']).filter(|f| !f.is_empty());
    let by =
        cairn::Budget::parse(flags, true).map_err(|e| ApiError::BadQuery(format!("raise: {e}")))?;
    if by.is_empty() {
        return Err(ApiError::BadQuery(
            "raise: name a limit and its raise, such as tokens=+50000".into(),
        ));
    }
    let actor = seat.actor(&form.reason);
    let view = state.engine().show(id).await?;
    let carry_on = match view.run.status {
        RunStatus::Interrupted => true,
        RunStatus::Waiting => view
            .children
            .iter()
            .any(|c| c.status == RunStatus::Interrupted),
        _ => false,
    };
    if carry_on {
        crate::actions::continue_with_budget(state, id, &by, &actor).await?;
    } else {
        state.engine().raise_budget(id, &by, &actor).await?;
    }
    Ok(())
}

/// `POST /runs/{id}/fork`: to the new run's page (`?done=fork`).
async fn fork(
    State(state): State<AppState>,
    seat: Seat,
    Path(id): Path<String>,
    ConsoleForm(form): ConsoleForm<ActionForm>,
) -> Response {
    let (viewer, id) = match run_form(&seat, &form.csrf, &id) {
        Ok(checked) => checked,
        Err(refused) => return *refused,
    };
    let from = form.from_step.as_deref().unwrap_or("").trim();
    let Ok(from_step) = from.parse::<u32>() else {
        return error_page(
            &viewer,
            ApiError::BadQuery(format!("from step: `{from}` is not a step number")),
        );
    };
    let input = match form
        .input
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        None => None,
        Some(text) => match serde_json::from_str(text) {
            Ok(v) => Some(v),
            Err(e) => {
                return error_page(
                    &viewer,
                    ApiError::BadQuery(format!("new input: not JSON ({e})")),
                )
            }
        },
    };
    let crew = match form.crew_version.as_deref().map(str::trim) {
        Some(version) if !version.is_empty() => {
            let found = async {
                let name = state.engine().get_run(id).await?.crew;
                crate::versions::version(&state, &name, version).await
            };
            match found.await {
                Ok(crew) => Some(crew.def().clone()),
                Err(e) => return error_page(&viewer, e),
            }
        }
        _ => None,
    };
    let request = cairn::ForkRequest {
        from_step: cairn::StepIdx(from_step),
        input,
        thread_id: None,
        crew,
        rerun_children: false,
    };
    match crate::actions::fork_run(&state, id, &request, &seat.actor(&form.reason)).await {
        Ok(child) => {
            let done = cairn_console::Done::Fork.query();
            Redirect::to(&format!("/runs/{}?{done}", child.id)).into_response()
        }
        Err(e) => error_page(&viewer, e),
    }
}

/// Runs of a thread shown on its page (the newest).
const THREAD_TURNS: usize = 50;

/// `GET /threads`: every thread, the one with the newest run first.
async fn threads(State(state): State<AppState>, seat: Seat) -> Response {
    let viewer = seat.viewer.clone();
    let mut threads = match state.engine().threads().await {
        Ok(threads) => threads,
        Err(e) => return error_page(&viewer, e.into()),
    };
    // The engine lists the thread whose newest run is oldest first.
    threads.reverse();
    html(
        StatusCode::OK,
        cairn_console::page("Threads", &viewer, cairn_console::threads_page(&threads)),
    )
}

/// `GET /limits`: the provider keys and their pauses.
async fn limits(State(state): State<AppState>, seat: Seat) -> Response {
    let viewer = seat.viewer.clone();
    match state.engine().keys().await {
        Ok(keys) => html(
            StatusCode::OK,
            cairn_console::page("Limits", &viewer, cairn_console::limits_page(&keys)),
        ),
        Err(e) => error_page(&viewer, e.into()),
    }
}

/// `GET /threads/{id}`: the thread as a conversation.
async fn thread(State(state): State<AppState>, seat: Seat, Path(id): Path<String>) -> Response {
    shown(&seat.viewer, thread_page(&state, &seat.viewer, &id).await)
}

/// Thread `id`'s page, or what keeps it from being shown.
async fn thread_page(state: &AppState, viewer: &Viewer, id: &str) -> Result<Response, ApiError> {
    let view = state.engine().thread(id).await?;
    let skip = view.runs.len().saturating_sub(THREAD_TURNS);
    let mut turns = Vec::with_capacity(view.runs.len() - skip);
    for run in &view.runs[skip..] {
        // The final output: the last step's, once the run succeeded.
        let output = match run.status {
            RunStatus::Succeeded => {
                let shown = state.engine().show(run.id).await?;
                shown.steps.last().and_then(|s| s.output.clone())
            }
            _ => None,
        };
        turns.push((run.clone(), output));
    }
    let body = cairn_console::thread_page(&view, &turns);
    Ok(html(
        StatusCode::OK,
        cairn_console::page(&format!("Thread {id}"), viewer, body),
    ))
}
