//! Client mode (`--server URL [--token T]`): the same commands over the
//! HTTP API instead of the database. The server's workers execute runs, so
//! where a local command would execute a run to its next stop, this one
//! waits (polling the run) until the server's workers have; `--enqueue`
//! returns at once. What only makes sense next to the database (`resume`,
//! `serve`, `worker`, `demo`, `waits expire`) is refused with the reason.

use std::time::Duration;

use anyhow::Context;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use cairn::{
    CompactPolicy, Compacted, ErrorClass, EventRecord, OnBusy, RunRecord, RunStatus, RunView,
    StepJournalEntry, ThreadSummary, ThreadView, WaitRecord,
};

use crate::{
    exit, output, parse_input, parse_run_id, parse_thread, status_exit, usage, ActionArgs, Cli,
    Command, RunsCommand, ThreadsCommand, WaitsCommand,
};

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
    /// The class of the failure, read back from its HTTP status through the
    /// table that gave the status (`cairn::ErrorClass`), so its exit code
    /// is the one the same failure has locally. The status says all the
    /// `code` would: every code has one status, the run-state refusals are
    /// all `wrong_state` (409, `Conflict`) and every 500 is `internal`.
    pub fn class(&self) -> ErrorClass {
        ErrorClass::from_http_status(self.status)
    }
}

struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Client {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.trim_end_matches('/'))
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> anyhow::Result<T> {
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
        let text = resp
            .text()
            .await
            .map_err(reqwest::Error::without_url)
            .context("reading the server's answer")?;
        if !status.is_success() {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Err(ApiError {
                status: status.as_u16(),
                code: v["error"]["code"]
                    .as_str()
                    .unwrap_or("http_error")
                    .to_owned(),
                message: v["error"]["message"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| text.chars().take(300).collect()),
            }
            .into());
        }
        serde_json::from_str(&text).context("the server's answer is not the expected JSON")
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.get(self.url(path))).await
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> anyhow::Result<T> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    async fn show(&self, id: &str) -> anyhow::Result<RunView> {
        self.get(&format!("/v1/runs/{id}")).await
    }

    /// The waits of run `id` (any status).
    async fn run_waits(&self, id: &str) -> anyhow::Result<Vec<WaitRecord>> {
        let page: Value = self.get(&format!("/v1/waits?run={id}")).await?;
        serde_json::from_value(page["waits"].clone())
            .context("the server's wait list is not the expected JSON")
    }

    /// Prints a run as `runs show` does (its waits with it).
    async fn print_view(&self, view: &RunView, json: bool, outputs: bool) -> anyhow::Result<()> {
        let waits = if json {
            vec![]
        } else {
            self.run_waits(&view.run.id.to_string()).await?
        };
        let text = output::RunText {
            waits: &waits,
            outputs,
            extra: None,
            no_table: false,
        };
        output::print_run(view, json, &text)
    }

    /// Waits until the server's workers stop the run (it is neither
    /// `queued` nor `running`), unless `enqueue`; prints it; its exit code.
    async fn settle(&self, id: &str, enqueue: bool, json: bool) -> anyhow::Result<u8> {
        let mut view = self.show(id).await?;
        while !enqueue && matches!(view.run.status, RunStatus::Queued | RunStatus::Running) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            view = self.show(id).await?;
        }
        self.print_view(&view, json, false).await?;
        Ok(match view.run.status {
            RunStatus::Queued | RunStatus::Running if enqueue => exit::OK,
            status => status_exit(status),
        })
    }

    async fn action(
        &self,
        id: &str,
        what: &str,
        body: Value,
        a: &ActionArgs,
        json: bool,
    ) -> anyhow::Result<u8> {
        let mut body = body;
        body["by"] = json!(a.actor().by);
        if let Some(reason) = &a.reason {
            body["reason"] = json!(reason);
        }
        let run: RunView = self.post(&format!("/v1/runs/{id}/{what}"), &body).await?;
        self.settle(&run.run.id.to_string(), a.enqueue, json).await
    }
}

/// The crew a `run`/`submit` names: the `name` in a crew file, or the
/// argument itself as the name of a crew the server loaded. The server
/// runs its own crew of that name, so a local file that differs from it
/// (another fingerprint) is refused rather than silently not run.
async fn crew_name(client: &Client, arg: &std::path::Path) -> anyhow::Result<String> {
    if !arg.is_file() {
        return Ok(arg.to_string_lossy().into_owned());
    }
    let crew = crate::load_crew(&arg.to_path_buf())?;
    let name = crew.def().name.clone();
    let crews: Vec<Value> = client.get("/v1/crews").await?;
    let theirs = crews
        .iter()
        .find(|c| c["name"] == name.as_str())
        .and_then(|c| c["fingerprint"].as_str());
    if let Some(theirs) = theirs {
        let ours = crew.fingerprint().to_string();
        if theirs != ours {
            return Err(usage(format!(
                "{} is crew `{name}` with fingerprint {ours}, but the server's crew `{name}` is \
                 {theirs}: the server runs its own crew files, not this one. Update the file in \
                 the server's --crews directory and restart it, or run without --server",
                arg.display()
            )));
        }
    }
    Ok(name)
}

fn submit_body(
    crew: String,
    input: Value,
    key: Option<String>,
    thread: Option<String>,
    on_busy: OnBusy,
) -> Value {
    let mut body = json!({"crew": crew, "input": input});
    if on_busy != OnBusy::default() {
        body["on_busy"] = json!(on_busy.as_str());
    }
    if let Some(k) = key {
        body["idempotency_key"] = json!(k);
    }
    if let Some(t) = thread {
        body["thread_id"] = json!(t);
    }
    body
}

/// `text` as one URL path segment: every byte but the unreserved ones
/// percent-encoded (a thread id may hold `/`, `?`, `%` or spaces).
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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

fn local_only(what: &str, why: &str) -> anyhow::Error {
    usage(format!("`{what}` does not work with --server: {why}"))
}

/// Runs `cli.command` against the server at `base`.
pub async fn main(cli: Cli, base: String, token: Option<String>) -> anyhow::Result<u8> {
    let json = cli.json;
    let client = Client {
        base,
        token,
        http: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .build()?,
    };
    match cli.command {
        Command::Run {
            crew,
            input,
            idempotency_key,
            thread,
            on_busy,
            ..
        } => {
            let body = submit_body(
                crew_name(&client, &crew).await?,
                parse_input(&input)?,
                idempotency_key,
                parse_thread(thread)?,
                on_busy,
            );
            let run: RunView = client.post("/v1/runs", &body).await?;
            client.settle(&run.run.id.to_string(), false, json).await
        }
        Command::Submit {
            crew,
            input,
            idempotency_key,
            thread,
            on_busy,
        } => {
            let body = submit_body(
                crew_name(&client, &crew).await?,
                parse_input(&input)?,
                idempotency_key,
                parse_thread(thread)?,
                on_busy,
            );
            let run: RunView = client.post("/v1/runs", &body).await?;
            if json {
                output::print_run(&run, true, &output::RunText::default())?;
            } else {
                use std::io::Write;
                writeln!(std::io::stdout(), "{}", run.run.id)?;
            }
            Ok(exit::OK)
        }
        Command::Runs { command } => runs(&client, command, json).await,
        Command::Waits { command } => waits(&client, command, json).await,
        Command::Compact { policy, thread } => {
            let mut policy = policy.policy()?;
            policy.thread = parse_thread(thread)?;
            let body = compact_body(&policy);
            let removed: Compacted = client.post("/v1/compact", &body).await?;
            output::print_compacted(&removed, policy.dry_run, json)?;
            Ok(exit::OK)
        }
        Command::Threads { command } => {
            match command {
                ThreadsCommand::List => {
                    let threads: Vec<ThreadSummary> = client.get("/v1/threads").await?;
                    output::print_threads(&threads, json)?;
                }
                ThreadsCommand::Show { thread_id } => {
                    let id = parse_thread(Some(thread_id))?.unwrap_or_default();
                    let path = format!("/v1/threads/{}", path_segment(&id));
                    let view: ThreadView = client.get(&path).await?;
                    let mut finals = vec![];
                    for r in view.runs.iter().filter(|_| !json) {
                        finals.push(output::final_output(&client.show(&r.id.to_string()).await?));
                    }
                    output::print_thread(&view, json, &finals)?;
                }
            }
            Ok(exit::OK)
        }
        Command::Resume { .. } => Err(local_only(
            "resume",
            "the server's workers execute and take over runs; use `runs continue` or `runs retry`",
        )),
        Command::Doctor => Err(local_only("doctor", "it reads the database itself (--db)")),
        Command::Serve { .. } | Command::Worker { .. } | Command::Demo { .. } => Err(local_only(
            "serve, worker and demo",
            "they run next to the database (--db)",
        )),
    }
}

async fn runs(client: &Client, command: RunsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        RunsCommand::List {
            status,
            limit,
            oldest,
        } => {
            let status = status
                .map(|s| s.parse::<RunStatus>().map_err(usage))
                .transpose()?;
            // Pages of the API, oldest first, until `limit` or the end.
            let mut runs: Vec<RunRecord> = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut path = String::from("/v1/runs?limit=100");
                if let Some(s) = status {
                    path.push_str(&format!("&status={s}"));
                }
                if let Some(c) = &cursor {
                    path.push_str(&format!("&cursor={c}"));
                }
                let page: Value = client.get(&path).await?;
                let batch: Vec<RunRecord> = serde_json::from_value(page["runs"].clone())
                    .context("the server's run page is not the expected JSON")?;
                runs.extend(batch);
                cursor = page["next_cursor"].as_str().map(str::to_owned);
                let full = !(!json && !oldest) && limit.is_some_and(|l| runs.len() >= l as usize);
                if cursor.is_none() || full {
                    break;
                }
            }
            // Text: the newest first (all pages are read for that), as
            // locally; the JSON array oldest first.
            let newest_first = !json && !oldest;
            if newest_first {
                runs.reverse();
            }
            if let Some(l) = limit {
                runs.truncate(l as usize);
            }
            output::print_list(&runs, json)?;
            Ok(exit::OK)
        }
        RunsCommand::Show {
            run_id,
            outputs,
            step,
        } => {
            let id = parse_run_id(&run_id)?.to_string();
            let view = client.show(&id).await?;
            match step {
                Some(n) => {
                    let waits = client.run_waits(&id).await?;
                    output::print_step(&view, n, json, &waits)?;
                }
                None => client.print_view(&view, json, outputs).await?,
            }
            Ok(exit::OK)
        }
        RunsCommand::Watch { run_id } => {
            let id = parse_run_id(&run_id)?.to_string();
            Ok(status_exit(watch(client, &id, json).await?))
        }
        RunsCommand::Events { run_id } => {
            let id = parse_run_id(&run_id)?;
            let events = follow_events(client, &id.to_string(), !json).await?;
            if json {
                output::print_events(&events, json)?;
            }
            Ok(exit::OK)
        }
        RunsCommand::Journal { run_id, step } => {
            let id = parse_run_id(&run_id)?;
            let path = match step {
                Some(s) => format!("/v1/runs/{id}/journal?step={s}"),
                None => format!("/v1/runs/{id}/journal"),
            };
            let page: Value = client.get(&path).await?;
            let items: Vec<StepJournalEntry> = serde_json::from_value(page["items"].clone())
                .context("the server's journal is not the expected JSON")?;
            output::print_journal(&items, json)?;
            Ok(exit::OK)
        }
        RunsCommand::Retry { crew: Some(_), .. } | RunsCommand::Fork { crew: Some(_), .. } => {
            Err(local_only(
                "runs retry --crew and runs fork --crew",
                "the server runs the crews it loaded; run them next to the database (--db)",
            ))
        }
        RunsCommand::Retry { run_id, action, .. } => {
            let id = parse_run_id(&run_id)?.to_string();
            client.action(&id, "retry", json!({}), &action, json).await
        }
        RunsCommand::Continue { run_id, action } => {
            let id = parse_run_id(&run_id)?.to_string();
            client
                .action(&id, "continue", json!({}), &action, json)
                .await
        }
        RunsCommand::Cancel { run_id, action } => {
            let id = parse_run_id(&run_id)?.to_string();
            // A cancel never queues the run: print it as the server left it.
            let enqueue = ActionArgs {
                enqueue: true,
                ..action
            };
            client
                .action(&id, "cancel", json!({}), &enqueue, json)
                .await?;
            Ok(exit::OK)
        }
        RunsCommand::Fork {
            run_id,
            from_step,
            input,
            thread,
            action,
            ..
        } => {
            let id = parse_run_id(&run_id)?.to_string();
            let mut body = json!({"from_step": from_step});
            if let Some(input) = input.as_deref().map(parse_input).transpose()? {
                body["input"] = input;
            }
            if let Some(thread) = parse_thread(thread)? {
                body["thread_id"] = json!(thread);
            }
            client.action(&id, "fork", body, &action, json).await
        }
    }
}

/// The run's events, following its event stream until the server ends it
/// (the run is succeeded, failed or cancelled). With `print`, each is
/// printed as it arrives (as `curl` shows the stream) and none is kept.
/// `runs watch` over the server's event stream (its `output_delta` pieces
/// come from whichever process runs the step, on PostgreSQL).
async fn watch(client: &Client, id: &str, json: bool) -> anyhow::Result<RunStatus> {
    use crate::watch::{Heard, Watch};
    let view = client.show(id).await?;
    let mut watch = Watch::new(&view.run, json);
    let mut stream = event_stream(client, id).await?;
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
            let page: anyhow::Result<Value> = client
                .get(&format!("/v1/runs/{id}/journal?step={idx}"))
                .await;
            page.ok()
                .and_then(|p| serde_json::from_value(p["items"].clone()).ok())
                .unwrap_or_default()
        };
        watch.hear(heard, journal).await;
    }
    // The stream ends with the run (or the server): what is stored now.
    let view = client.show(id).await?;
    let waits = client.run_waits(id).await?;
    watch.finish(&view, &waits);
    Ok(view.run.status)
}

/// The run's event stream, opened (an error document refused as such).
async fn event_stream(
    client: &Client,
    id: &str,
) -> anyhow::Result<
    impl futures_util::Stream<
        Item = Result<
            eventsource_stream::Event,
            eventsource_stream::EventStreamError<reqwest::Error>,
        >,
    >,
> {
    let req = client.auth(
        client
            .http
            .get(client.url(&format!("/v1/runs/{id}/events"))),
    );
    let resp = req
        .send()
        .await
        .map_err(reqwest::Error::without_url)
        .with_context(|| {
            format!(
                "cannot reach the server at {}",
                cairn::text::redact_url(&client.base)
            )
        })?;
    if !resp.status().is_success() {
        // The same error document as every route.
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        return Err(ApiError {
            status,
            code: v["error"]["code"]
                .as_str()
                .unwrap_or("http_error")
                .to_owned(),
            message: v["error"]["message"].as_str().unwrap_or("").to_owned(),
        }
        .into());
    }
    Ok(resp.bytes_stream().eventsource())
}

async fn follow_events(client: &Client, id: &str, print: bool) -> anyhow::Result<Vec<EventRecord>> {
    let mut stream = event_stream(client, id).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.map_err(|e| anyhow::anyhow!("the event stream broke: {e}"))?;
        // Live text is not an event of the log.
        if event.data.is_empty() || event.event == "output_delta" {
            continue;
        }
        let event: EventRecord = serde_json::from_str(&event.data)
            .context("an event from the server is not the expected JSON")?;
        if print {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            output::write_event(&mut out, &event)?;
            out.flush()?;
        } else {
            events.push(event);
        }
    }
    Ok(events)
}

async fn waits(client: &Client, command: WaitsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        WaitsCommand::List { run, status, all } => {
            let mut query = Vec::new();
            if let Some(run) = run {
                query.push(format!("run={}", parse_run_id(&run)?));
            }
            if let Some(s) = crate::wait_status(status, all)? {
                query.push(format!("status={s}"));
            }
            let page: Value = client
                .get(&format!("/v1/waits?{}", query.join("&")))
                .await?;
            let waits: Vec<WaitRecord> = serde_json::from_value(page["waits"].clone())
                .context("the server's wait list is not the expected JSON")?;
            output::print_waits(&waits, json)?;
            Ok(exit::OK)
        }
        WaitsCommand::Answer {
            wait_id,
            approve,
            edit,
            reject,
            answer,
            by,
            reason,
            enqueue,
        } => {
            let id = wait_id.parse::<cairn::WaitId>().map_err(usage)?;
            let answer = crate::parse_answer(approve, edit, reject, answer)?;
            let mut body = serde_json::to_value(&answer)?;
            body["by"] = json!(crate::answered_by(by));
            if let Some(reason) = reason {
                body["reason"] = json!(reason);
            }
            let wait: WaitRecord = match client.post(&format!("/v1/waits/{id}/answer"), &body).await
            {
                Ok(wait) => wait,
                Err(e) => return Err(point_to_open_wait(client, id, e).await),
            };
            client.settle(&wait.run_id.to_string(), enqueue, json).await
        }
        WaitsCommand::Expire => Err(local_only(
            "waits expire",
            "the server's workers apply wait deadlines themselves",
        )),
    }
}

/// An answer the server refused because the wait is closed, with the open
/// wait of the same run (if any) and the command that answers it.
async fn point_to_open_wait(
    client: &Client,
    id: cairn::WaitId,
    err: anyhow::Error,
) -> anyhow::Error {
    let closed = err
        .downcast_ref::<ApiError>()
        .is_some_and(|e| e.code == "wait_closed");
    if !closed {
        return err;
    }
    let Ok(page) = client.get::<Value>("/v1/waits").await else {
        return err;
    };
    let Ok(waits) = serde_json::from_value::<Vec<WaitRecord>>(page["waits"].clone()) else {
        return err;
    };
    let Some(run) = waits.iter().find(|w| w.id == id).map(|w| w.run_id) else {
        return err;
    };
    let open = waits
        .iter()
        .find(|w| w.run_id == run && w.status == cairn::WaitStatus::Open);
    let hint = match open {
        Some(open) => format!(
            "run {run} waits on wait {} ({} of step {}): {}",
            open.id,
            open.kind.as_str(),
            open.step_idx,
            output::answer_hint(open.id, open.kind)
        ),
        None => format!("run {run} has no open wait"),
    };
    let text = format!("{err}; {hint}");
    err.context(text)
}
