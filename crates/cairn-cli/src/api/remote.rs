//! [`Api`] over the HTTP API of a `cairn serve` (`--server URL [--token
//! T]`). The server's workers execute runs, so where a local command would
//! execute a run to its next stop, this one waits (polling the run) until
//! they have; `--enqueue` returns at once. What only makes sense next to
//! the database (`resume`, `serve`, `worker`, `demo`, `doctor`, `waits
//! expire`, `--crew` files) is refused by the command with the reason.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use cairn::{
    Actor, CompactPolicy, Compacted, ErrorClass, KeyState, RunFilter, RunId, RunRecord, RunStatus,
    RunView, StepJournalEntry, SubmitOptions, ThreadPage, ThreadSummary, ThreadView, WaitFilter,
    WaitId, WaitRecord,
};
use cairn::{Cadence, CrewDiff, Schedule, Slot, ThreadBudget, UpgradeVerdict};

use super::schedules::{ScheduleAct, ScheduleOut, ScheduleSpec};
use super::{
    Act, Answering, Api, BudgetChange, CrewRef, EachEvent, Interruptible, Submission, Upgrade,
    VersionArg,
};
use crate::input::usage;

mod signals;

/// An error the server answered with: `{"error": {"code", "message"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "server: {} ({}, HTTP {})",
            self.message, self.code, self.status
        )
    }
}
impl std::error::Error for ApiError {}

impl ApiError {
    /// The error document `{"error": {"code", "message"}}` of an answer
    /// with HTTP `status` (its first 300 characters if it is not one).
    fn read(status: u16, text: &str) -> ApiError {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        ApiError {
            status,
            code: v["error"]["code"]
                .as_str()
                .unwrap_or("http_error")
                .to_owned(),
            message: v["error"]["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| text.chars().take(300).collect()),
        }
    }

    /// The class of the failure, read back from its HTTP status through the
    /// table that gave the status (`cairn::ErrorClass`), so its exit code
    /// is the one the same failure has locally. The status says all the
    /// `code` would: every code has one status, the run-state refusals are
    /// all `wrong_state` (409, `Conflict`) and every 500 is `internal`.
    pub fn class(&self) -> ErrorClass {
        ErrorClass::from_http_status(self.status)
    }
}

/// A `cairn serve`, reached over HTTP.
pub struct Remote {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Remote {
    pub fn new(base: String, token: Option<String>) -> Result<Remote> {
        // The server records `via: cli` for this agent (audit only).
        let http = reqwest::Client::builder()
            .user_agent(concat!("cairn-cli/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(3))
            .build()?;
        Ok(Remote { base, token, http })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.trim_end_matches('/'))
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Sends `req` with the token; a success, or the server's error
    /// document as an [`ApiError`].
    async fn respond(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = self
            .auth(req)
            .send()
            .await
            // reqwest's error names the URL, password included.
            .map_err(reqwest::Error::without_url)
            .with_context(|| {
                format!(
                    "cannot reach the server at {}",
                    cairn::text::redact_url(&self.base)
                )
            })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.unwrap_or_default();
        Err(ApiError::read(status.as_u16(), &text).into())
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        let text = self
            .respond(req)
            .await?
            .text()
            .await
            .map_err(reqwest::Error::without_url)
            .context("reading the server's answer")?;
        serde_json::from_str(&text).context("the server's answer is not the expected JSON")
    }

    pub(super) async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send(self.http.delete(self.url(path))).await
    }

    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send(self.http.get(self.url(path))).await
    }

    pub(super) async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }
}

/// The crew a `run`/`submit` names, and its version: the `name` and
/// `version` in a crew file, or the argument itself as the name of a crew
/// the server loaded. The server runs its own crew files, so a local file
/// that is none of the versions it loaded (another fingerprint) is refused
/// rather than silently not run.
pub(super) async fn crew_name(client: &Remote, crew: CrewRef) -> Result<(String, Option<String>)> {
    let (crew, file) = match crew {
        CrewRef::Named(name, version) => return Ok((name, version)),
        CrewRef::File(crew, file) => (crew, file),
    };
    let name = crew.def().name.clone();
    let crews: Vec<Value> = client.get("/v1/crews").await?;
    let theirs: Vec<&str> = crews
        .iter()
        .filter(|c| c["name"] == name.as_str())
        .filter_map(|c| c["fingerprint"].as_str())
        .collect();
    let ours = crew.fingerprint().to_string();
    if !theirs.is_empty() && !theirs.contains(&ours.as_str()) {
        return Err(usage(format!(
            "{} is crew `{name}` with fingerprint {ours}, but the server's crew `{name}` is \
             {}: the server runs its own crew files, not this one. Add the file to the \
             server's --crews directory and restart it, or run without --server",
            file.display(),
            theirs.join(", ")
        )));
    }
    Ok((name, Some(crew.def().version.clone())))
}

fn submit_body(
    (crew, version): (String, Option<String>),
    input: Value,
    opts: SubmitOptions,
) -> Value {
    let mut body = json!({"crew": crew, "input": input});
    if let Some(v) = version {
        body["crew_version"] = json!(v);
    }
    if let Some(budget) = &opts.budget {
        body["budget"] = json!(budget);
    }
    if opts.priority != cairn::Priority::default() {
        body["priority"] = json!(opts.priority.get());
    }
    if opts.on_busy != cairn::OnBusy::default() {
        body["on_busy"] = json!(opts.on_busy.as_str());
    }
    if let Some(t) = opts.tenant {
        body["tenant"] = json!(t);
    }
    if let Some(k) = opts.idempotency_key {
        body["idempotency_key"] = json!(k);
    }
    if let Some(t) = opts.thread_id {
        body["thread_id"] = json!(t);
    }
    if let Some(policy) = opts.upgrade {
        body["upgrade"] = json!(policy.as_str());
    }
    if let (Some(cx), Some(span)) = (opts.traceparent, opts.traceparent.and_then(|c| c.parent)) {
        body["traceparent"] = json!(cx.traceparent(span));
    }
    body
}

/// A version a server knows by name; a crew file is refused: the server
/// runs only its own crew files.
fn named(v: &VersionArg) -> Result<&str> {
    match v {
        VersionArg::Named(v) => Ok(v),
        VersionArg::File(_, path) => Err(usage(format!(
            "{}: a server moves runs only to versions it loaded; add the file to its --crews \
             directory and restart it, then name the version",
            path.display()
        ))),
    }
}

/// `POST /v1/compact`'s body: ages in seconds, as the API takes them.
fn compact_body(p: &CompactPolicy) -> Value {
    let secs = |d: Option<std::time::Duration>| d.map(|d| format!("{}ms", d.as_millis()));
    json!({
        "events_older_than": secs(p.events_older_than),
        "journals": p.journals,
        "finished_older_than": secs(p.finished_older_than),
        "failed_older_than": secs(p.failed_older_than),
        "keep_per_thread": p.keep_per_thread,
        "thread": p.thread,
        "dry_run": p.dry_run,
    })
}

/// The run's event stream, opened (an error document refused as such).
async fn event_stream(
    client: &Remote,
    id: RunId,
    follow: bool,
) -> Result<
    impl futures_util::Stream<Item = Result<cairn::sse::Event, cairn::sse::StreamError<reqwest::Error>>>,
> {
    let events = client
        .http
        .get(client.url(&format!("/v1/runs/{id}/events?follow={follow}")));
    let resp = client.respond(events).await?;
    Ok(cairn::sse::events(
        resp.bytes_stream(),
        cairn::sse::Decoder::new(),
    ))
}

/// `runs watch` over the server's event stream (its `output_delta` pieces
/// come from whichever process runs the step, on PostgreSQL).
async fn watch(client: &Remote, id: RunId, json: bool) -> Result<RunStatus> {
    use crate::watch::{Heard, Watch};
    let view: RunView = client.get(&format!("/v1/runs/{id}")).await?;
    let mut watch = Watch::new(&view.run, json);
    let mut stream = std::pin::pin!(event_stream(client, id, true).await?);
    while let Some(event) = stream.next().await {
        let event = event.map_err(|e| anyhow::anyhow!("the event stream broke: {e}"))?;
        if event.data.is_empty() {
            continue;
        }
        let heard = if event.event == "output_delta" {
            Heard::Delta(
                serde_json::from_str(&event.data)
                    .context("a piece of live text from the server is not the expected JSON")?,
            )
        } else {
            Heard::Event(
                serde_json::from_str(&event.data)
                    .context("an event from the server is not the expected JSON")?,
            )
        };
        let journal = |idx: u32| async move {
            let page: Result<Value> = client
                .get(&format!("/v1/runs/{id}/journal?step={idx}"))
                .await;
            page.ok()
                .and_then(|p| serde_json::from_value(p["items"].clone()).ok())
                .unwrap_or_default()
        };
        watch.hear(heard, journal).await;
    }
    // The stream ends with the run (or the server): what is stored now.
    let view: RunView = client.get(&format!("/v1/runs/{id}")).await?;
    let waits = super::run_waits(client, id).await?;
    watch.finish(&view, &waits);
    Ok(view.run.status)
}

/// The query of `GET /v1/runs` for `filter` (the API pages by cursor, the
/// last run id of a page, as `RunFilter::after` does).
fn list_query(filter: &RunFilter) -> Result<String> {
    if filter.thread.is_some() {
        // `GET /v1/threads/{id}` lists a thread's runs.
        anyhow::bail!("listing a thread's runs through `GET /v1/runs` is not supported");
    }
    let mut query = vec![format!(
        "limit={}",
        filter.limit.unwrap_or(100).clamp(1, 1000)
    )];
    if let Some(s) = filter.status {
        query.push(format!("status={s}"));
    }
    if let Some(crew) = &filter.crew {
        query.push(format!("crew={}", cairn::text::path_segment(crew)));
    }
    if let Some(after) = filter.after {
        query.push(format!("cursor={after}"));
    }
    if let Some(parent) = filter.parent {
        query.push(format!("parent={parent}"));
    }
    if let Some(tenant) = &filter.tenant {
        query.push(format!("tenant={}", cairn::text::path_segment(tenant)));
    }
    if filter.newest_first {
        query.push("order=newest".to_owned());
    }
    Ok(format!("/v1/runs?{}", query.join("&")))
}

/// Whether `e` is the server refusing query parameter `name`.
fn is_bad_query(e: &anyhow::Error, name: &str) -> bool {
    e.downcast_ref::<ApiError>()
        .is_some_and(|a| a.code == "bad_query" && a.message.contains(name))
}

/// An action's body: who and why, and a fork's request.
fn act_body(act: &Act<'_>, actor: &Actor) -> Value {
    let mut body = json!({"by": actor.by});
    if let Some(reason) = &actor.reason {
        body["reason"] = json!(reason);
    }
    if let Act::Retry {
        rerun_children: true,
    } = act
    {
        body["rerun_children"] = json!(true);
    }
    if let Act::Continue { raise: Some(raise) } = act {
        body["raise"] = json!(raise);
    }
    if let Act::Fork(req) = act {
        body["from_step"] = json!(req.from_step.0);
        if let Some(input) = &req.input {
            body["input"] = input.clone();
        }
        if let Some(thread) = &req.thread_id {
            body["thread_id"] = json!(thread);
        }
        if let Some(crew) = &req.crew {
            body["crew_version"] = json!(crew.version);
        }
        if req.rerun_children {
            body["rerun_children"] = json!(true);
        }
    }
    body
}

/// `--server URL [--token T]`: connecting is only building a client.
pub struct Server {
    pub base: String,
    pub token: Option<String>,
}

impl super::Connect for Server {
    type Api = Remote;

    /// A crew file, or else the name of a crew the server loaded.
    fn read_crew(&self, arg: &Path) -> Result<CrewRef> {
        if !arg.is_file() {
            return Ok(CrewRef::Named(arg.to_string_lossy().into_owned(), None));
        }
        Ok(CrewRef::File(
            Box::new(crate::input::load_crew(arg)?),
            arg.to_owned(),
        ))
    }

    async fn connect(&self, _create: bool) -> Result<Remote> {
        Remote::new(self.base.clone(), self.token.clone())
    }
}

impl Api for Remote {
    fn engine(&self) -> Option<&cairn::Engine> {
        None
    }

    async fn submit(&self, crew: CrewRef, input: Value, opts: SubmitOptions) -> Result<Submission> {
        let body = submit_body(crew_name(self, crew).await?, input, opts);
        let view: RunView = self.post("/v1/runs", &body).await?;
        Ok(Submission {
            run: view.run,
            created: false,
            crew: None,
            claimed: None,
        })
    }

    async fn drive(&self, submitted: Submission, _lines: bool) -> Interruptible {
        self.advance(submitted.run.id).await
    }

    /// Waits until the server's workers stop the run: it is neither
    /// `queued` nor `running`, nor waiting for children that still work
    /// (a line on stderr for each child that ends or stops meanwhile).
    async fn advance(&self, id: RunId) -> Interruptible {
        // Children as first seen are not reported: only what changes.
        let mut seen: Option<HashMap<RunId, RunStatus>> = None;
        loop {
            let view = self.show(id).await?;
            let first = seen.is_none();
            let seen = seen.get_or_insert_with(HashMap::new);
            for c in &view.children {
                let changed = seen.insert(c.run_id, c.status) != Some(c.status);
                let moving = matches!(c.status, RunStatus::Queued | RunStatus::Running);
                if changed && !moving && !first {
                    eprintln!("{}", crate::output::child_line(c));
                }
            }
            let working = matches!(
                view.children_wait(),
                Some(cairn::ChildrenWait::Working { .. })
            );
            if !working && !matches!(view.run.status, RunStatus::Queued | RunStatus::Running) {
                return Ok(Some(()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn show(&self, id: RunId) -> Result<RunView> {
        self.get(&format!("/v1/runs/{id}")).await
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let page: Value = match self.get(&list_query(filter)?).await {
            Ok(page) => page,
            // A server older than this CLI knows no `order`.
            Err(e) if filter.newest_first && is_bad_query(&e, "order") => {
                return Err(e.context(
                    "the server does not list runs newest first (it is older than this cairn): \
                     upgrade it, or add --oldest (text) or --json (oldest first)",
                ))
            }
            Err(e) => return Err(e),
        };
        serde_json::from_value(page["runs"].clone())
            .context("the server's run page is not the expected JSON")
    }

    async fn waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        let mut query = Vec::new();
        if let Some(run) = filter.run {
            query.push(format!("run={run}"));
        }
        if let Some(s) = filter.status {
            query.push(format!("status={s}"));
        }
        let page: Value = self.get(&format!("/v1/waits?{}", query.join("&"))).await?;
        let waits: Vec<WaitRecord> = serde_json::from_value(page["waits"].clone())
            .context("the server's wait list is not the expected JSON")?;
        Ok(match filter.step {
            Some(step) => waits.into_iter().filter(|w| w.step_idx == step).collect(),
            None => waits,
        })
    }

    async fn answer(&self, id: WaitId, answering: &Answering) -> Result<WaitRecord> {
        let mut body = serde_json::to_value(&answering.answer)?;
        body["by"] = json!(answering.actor.by);
        if let Some(reason) = &answering.actor.reason {
            body["reason"] = json!(reason);
        }
        if let Some(digest) = &answering.digest {
            body["digest"] = json!(digest);
        }
        self.post(&format!("/v1/waits/{id}/answer"), &body).await
    }

    async fn events(&self, id: RunId, follow: bool, each: EachEvent<'_>) -> Result<()> {
        let mut stream = std::pin::pin!(event_stream(self, id, follow).await?);
        while let Some(event) = stream.next().await {
            let event = event.map_err(|e| anyhow::anyhow!("the event stream broke: {e}"))?;
            // Live text is not an event of the log.
            if event.data.is_empty() || event.event == "output_delta" {
                continue;
            }
            each(
                serde_json::from_str(&event.data)
                    .context("an event from the server is not the expected JSON")?,
            )?;
        }
        Ok(())
    }

    async fn journal(&self, id: RunId, step: Option<u32>) -> Result<Vec<StepJournalEntry>> {
        let path = match step {
            Some(s) => format!("/v1/runs/{id}/journal?step={s}"),
            None => format!("/v1/runs/{id}/journal"),
        };
        let page: Value = self.get(&path).await?;
        serde_json::from_value(page["items"].clone())
            .context("the server's journal is not the expected JSON")
    }

    async fn watch(&self, id: RunId, json: bool) -> Result<RunStatus> {
        watch(self, id, json).await
    }

    async fn act(&self, id: RunId, act: Act<'_>, actor: &Actor) -> Result<RunRecord> {
        let body = act_body(&act, actor);
        let view: RunView = self
            .post(&format!("/v1/runs/{id}/{}", act.name()), &body)
            .await?;
        Ok(view.run)
    }

    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>> {
        let mut query = vec![];
        if let Some(limit) = page.limit {
            query.push(format!("limit={}", limit.min(1000)));
        }
        if let Some(after) = &page.after {
            query.push(format!("cursor={}", cairn::text::path_segment(after)));
        }
        self.get(&format!("/v1/threads?{}", query.join("&"))).await
    }

    async fn thread(&self, id: &str) -> Result<ThreadView> {
        self.get(&format!("/v1/threads/{}", cairn::text::path_segment(id)))
            .await
    }

    async fn set_thread_budget(&self, id: &str, change: &BudgetChange) -> Result<ThreadBudget> {
        let how = if change.raise { "raise" } else { "set" };
        let (by, reason) = (&change.actor.by, &change.actor.reason);
        let body = json!({how: change.budget, "by": by, "reason": reason});
        let path = format!("/v1/threads/{}/budget", cairn::text::path_segment(id));
        self.post(&path, &body).await
    }

    async fn compact(&self, policy: &CompactPolicy) -> Result<Compacted> {
        self.post("/v1/compact", &compact_body(policy)).await
    }

    async fn workers(&self) -> Result<Vec<cairn::ProcessRecord>> {
        self.get("/v1/workers").await
    }

    async fn crew_versions(&self) -> Result<Vec<cairn::CrewVersion>> {
        self.get("/v1/crews/stored").await
    }

    async fn crew_definition(&self, name: &str, version: Option<&str>) -> Result<cairn::CrewDef> {
        let path = format!(
            "/v1/crews/{}/versions/{}",
            cairn::text::path_segment(name),
            cairn::text::path_segment(version.unwrap_or("newest"))
        );
        self.get(&path).await
    }

    async fn crew_diff(&self, name: &str, from: &VersionArg, to: &VersionArg) -> Result<CrewDiff> {
        let path = format!(
            "/v1/crews/{}/diff?from={}&to={}",
            cairn::text::path_segment(name),
            cairn::text::path_segment(named(from)?),
            cairn::text::path_segment(named(to)?)
        );
        self.get(&path).await
    }

    async fn upgrade(&self, name: &str, how: &Upgrade) -> Result<Vec<UpgradeVerdict>> {
        let body = json!({"to": named(&how.to)?, "run": how.run, "dry_run": how.dry_run,
                          "force": how.force, "by": how.actor.by, "reason": how.actor.reason});
        let path = format!("/v1/crews/{}/upgrade", cairn::text::path_segment(name));
        self.post(&path, &body).await
    }

    async fn keys(&self) -> Result<Vec<KeyState>> {
        self.get("/v1/limits").await
    }

    async fn pause_key(&self, key: &str, wait: Duration, actor: &Actor) -> Result<KeyState> {
        let body = json!({"key": key, "for": format!("{}ms", wait.as_millis()),
                          "by": actor.by, "reason": actor.reason});
        self.post("/v1/limits/pause", &body).await
    }

    async fn resume_key(&self, key: &str) -> Result<KeyState> {
        self.post("/v1/limits/resume", &json!({"key": key})).await
    }

    async fn reset_limits(&self, key: &str) -> Result<KeyState> {
        self.post("/v1/limits/reset", &json!({"key": key})).await
    }

    async fn set_limits(&self, key: &str, limits: &cairn::KeyLimits) -> Result<KeyState> {
        let mut body = json!({"key": key, "in_flight": limits.in_flight, "rpm": limits.rpm,
                              "tpm": limits.tpm});
        // Sent only when set: a server older than `max_pause_ms` refuses
        // fields it does not know.
        if let Some(ms) = limits.max_pause_ms {
            body["max_pause_ms"] = json!(ms);
        }
        self.post("/v1/limits/set", &body).await
    }

    async fn schedules(
        &self,
        act: super::schedules::ScheduleAct,
    ) -> Result<super::schedules::ScheduleOut> {
        schedules_remote(self, act).await
    }

    async fn signals(&self, act: super::signals::SignalAct) -> Result<super::signals::SignalOut> {
        signals::remote(self, act).await
    }

    async fn create_schedule(
        &self,
        crew: CrewRef,
        spec: super::schedules::ScheduleSpec,
    ) -> Result<cairn::Schedule> {
        schedules_remote_create(self, crew, spec).await
    }

    async fn principals(&self) -> Result<Vec<cairn::Principal>> {
        self.get("/v1/principals").await
    }

    async fn add_principal(&self, new: &cairn::NewPrincipal) -> Result<cairn::Issued> {
        self.post("/v1/principals", &json!(new)).await
    }

    async fn disable_principal(&self, name: &str) -> Result<cairn::Principal> {
        let path = format!("/v1/principals/{}/disable", cairn::text::path_segment(name));
        self.post(&path, &json!({})).await
    }

    async fn rotate_token(&self, name: &str) -> Result<cairn::Issued> {
        let path = format!("/v1/principals/{}/rotate", cairn::text::path_segment(name));
        self.post(&path, &json!({})).await
    }

    async fn audit(&self, filter: &cairn::AuditFilter) -> Result<Vec<cairn::AuditEntry>> {
        let mut query = Vec::new();
        if let Some(p) = &filter.principal {
            query.push(format!("principal={}", cairn::text::path_segment(p)));
        }
        if let Some(t) = filter.since {
            let t = t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            query.push(format!("since={t}"));
        }
        if let Some(n) = filter.limit {
            query.push(format!("limit={n}"));
        }
        self.get(&format!("/v1/audit?{}", query.join("&"))).await
    }
}

// ------------------------------------------------------------ schedules

/// A schedule's view from the server: the schedule and its slots.
fn schedule_view(view: Value) -> Result<ScheduleOut> {
    let slots: Vec<Slot> = serde_json::from_value(view["slots"].clone())?;
    Ok(ScheduleOut::One(
        Box::new(serde_json::from_value(view)?),
        slots,
    ))
}

fn schedule_path(name: &str, action: &str) -> String {
    format!("/v1/schedules/{}{action}", cairn::text::path_segment(name))
}

async fn schedules_remote(client: &Remote, act: ScheduleAct) -> Result<ScheduleOut> {
    let none = json!({});
    Ok(match act {
        ScheduleAct::List => {
            let list: Value = client.get("/v1/schedules").await?;
            ScheduleOut::List(serde_json::from_value(list["schedules"].clone())?)
        }
        ScheduleAct::Show(name) => schedule_view(client.get(&schedule_path(&name, "")).await?)?,
        ScheduleAct::Pause(name) => {
            schedule_view(client.post(&schedule_path(&name, "/pause"), &none).await?)?
        }
        ScheduleAct::Resume(name) => {
            schedule_view(client.post(&schedule_path(&name, "/resume"), &none).await?)?
        }
        ScheduleAct::Trigger(name) => ScheduleOut::Slots(vec![
            client
                .post(&schedule_path(&name, "/trigger"), &none)
                .await?,
        ]),
        ScheduleAct::Backfill(name, from, to) => {
            let body = json!({"from": from, "to": to});
            let slots: Value = client
                .post(&schedule_path(&name, "/backfill"), &body)
                .await?;
            ScheduleOut::Slots(serde_json::from_value(slots["slots"].clone())?)
        }
        ScheduleAct::Delete(name) => {
            let _: Value = client.delete(&schedule_path(&name, "")).await?;
            ScheduleOut::Deleted(name)
        }
    })
}

async fn schedules_remote_create(
    client: &Remote,
    crew: CrewRef,
    spec: ScheduleSpec,
) -> Result<Schedule> {
    let (crew, version) = crew_name(client, crew).await?;
    let mut body = json!({
        "name": spec.name, "crew": crew, "crew_version": version, "input": spec.input,
        "overlap": spec.overlap.as_str(), "catch_up": spec.catch_up.to_string(),
        "thread": spec.thread, "priority": spec.priority.get(),
        "tenant": spec.tenant.as_ref().map(cairn::Tenant::as_str),
    });
    match spec.cadence {
        Cadence::Every { secs } => body["every"] = json!(format!("{secs}s")),
        Cadence::Cron { expr, tz } => {
            body["cron"] = json!(expr);
            body["tz"] = json!(tz);
        }
    }
    let view: Value = client.post("/v1/schedules", &body).await?;
    Ok(serde_json::from_value(view)?)
}
