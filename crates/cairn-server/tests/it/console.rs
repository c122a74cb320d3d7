//! The web console through the router: pages rendered from stored runs,
//! sign-in with a token (a strict, HTTP-only session cookie; a wrong token
//! gets nothing), sign-out guarded by the session's CSRF token, and the
//! API never taking the cookie. (The browser tests are in
//! `crates/cairn-cli/tests/it/browser.rs`.)

mod answers;
mod fanout;
mod signals;

use axum::http::{header, Method, StatusCode};
use serde_json::json;

use crate::support::{Api, Reply};

const TOKEN: &str = "tok-0123456789abcdef";

pub(crate) fn form(body: &str) -> (Vec<(&'static str, &'static str)>, Option<Vec<u8>>) {
    (
        vec![("content-type", "application/x-www-form-urlencoded")],
        Some(body.as_bytes().to_vec()),
    )
}

fn location(reply: &Reply) -> &str {
    reply
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn development_mode_renders_runs_and_a_run_with_its_timeline() {
    let api = Api::sqlite().await;
    let done = api.submit("pipeline", json!({"name": "<b>net</b>"})).await;
    api.drive(done).await;
    let queued = api.submit("greet", json!({"name": "later"})).await;

    let page = api.get("/").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.content_type().starts_with("text/html"), "{page:?}");
    assert!(page.text.contains("Development mode"), "{}", page.text);
    // Newest first: the queued run above the finished one.
    let (q, d) = (queued.to_string(), done.to_string());
    let (at_q, at_d) = (
        page.text.find(&q[..13]).unwrap(),
        page.text.find(&d[..13]).unwrap(),
    );
    assert!(at_q < at_d, "newest first");
    assert!(
        page.text.contains("2 of 2") && page.text.contains("0 of 1"),
        "{}",
        page.text
    );

    let only = api.get("/?status=succeeded").await;
    assert!(
        only.text.contains(&d[..13]) && !only.text.contains(&q[..13]),
        "{}",
        only.text
    );
    let older = api.get(&format!("/?after={q}")).await;
    assert!(
        older.text.contains(&d[..13]) && !older.text.contains(&q[..13]),
        "{}",
        older.text
    );

    let run = api.get(&format!("/runs/{done}")).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.text);
    assert!(run.text.contains("<svg"), "the timeline: {}", run.text);
    assert!(run.text.contains("counter") && run.text.contains("writer"));
    assert!(run.text.contains("step_succeeded"), "the events");
    // The input's markup is shown as text, never as markup.
    assert!(run.text.contains("&lt;b&gt;net&lt;/b&gt;") && !run.text.contains("<b>net</b>"));
    // The timeline has its legend; the header counts read as English.
    assert!(run.text.contains(r#"<ul class="legend""#), "{}", run.text);
    assert!(run.text.contains("lost to a crash"), "{}", run.text);
    assert!(run.text.contains("2 attempts over 2 steps"), "{}", run.text);
    // Fork defaults to re-running the last step, not to copying them all.
    assert!(
        fork_default(&run.text) == "1",
        "fork from {:?}: {}",
        fork_default(&run.text),
        run.text
    );
    // The navigation links every page, threads too.
    for href in [r#"href="/waits""#, r#"href="/threads""#, r#"href="/crews""#] {
        assert!(run.text.contains(href), "{href}: {}", run.text);
    }

    let bad = api.get("/runs/not-a-run").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.content_type().starts_with("text/html"));
    let missing = api.get(&format!("/runs/{}", cairn::RunId::new())).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
    assert!(missing.text.contains("not found"), "{}", missing.text);
    let css = api.get("/console.css").await;
    assert!(css.content_type().starts_with("text/css"), "{css:?}");
    let js = api.get("/console.js").await;
    assert!(js.content_type().starts_with("text/javascript"), "{js:?}");
    assert!(js.text.contains("EventSource"));

    // Live: a run that can still change follows its events; a finished
    // one does not; the first page of runs refreshes itself.
    let queued_page = api.get(&format!("/runs/{queued}")).await;
    assert!(
        queued_page
            .text
            .contains(&format!(r#"data-live="/runs/{queued}/events""#)),
        "{}",
        queued_page.text
    );
    assert!(!run.text.contains("data-live"), "{}", run.text);
    assert!(page.text.contains(r#"data-poll="3000""#));
    assert!(
        !older.text.contains("data-poll"),
        "only the first page refreshes"
    );
    // The console's stream: the run's events, unnamed (one `onmessage`).
    let stream = api.get(&format!("/runs/{done}/events")).await;
    assert!(
        stream.content_type().starts_with("text/event-stream"),
        "{stream:?}"
    );
    assert!(stream.text.contains("data: ") && stream.text.contains("step_succeeded"));
    assert!(
        !stream.text.contains("\nevent:") && !stream.text.starts_with("event:"),
        "{}",
        stream.text
    );
    // No sign-in without tokens.
    assert_eq!(location(&api.get("/login").await), "/");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_takes_a_token_once_and_keeps_only_a_strict_cookie() {
    let api = Api::with(cairn_testkit::Kind::Sqlite, |s| s.with_tokens([TOKEN])).await;
    // Pages need a session; the sign-in page and the stylesheet do not.
    let page = api.get("/").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&page), "/login");
    assert_eq!(api.get("/login").await.status, StatusCode::OK);
    assert_eq!(api.get("/console.css").await.status, StatusCode::OK);

    // A wrong token: an error and nothing else.
    let (h, b) = form("token=not-the-token-at-all");
    let wrong = api.call(Method::POST, "/login", &h, b).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.headers.get(header::SET_COOKIE).is_none());
    crate::support::assert_contains(&wrong.text, "not one this server accepts");
    assert!(!wrong.text.contains("not-the-token-at-all"));

    let (h, b) = form(&format!("token={TOKEN}"));
    let signed = api.call(Method::POST, "/login", &h, b).await;
    assert_eq!(redirected(&signed), "/");
    let set = signed.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(!set.contains(TOKEN), "the token is not the cookie: {set}");
    let cookie = set.split(';').next().unwrap().to_owned();

    let id = api.submit_as(TOKEN, "greet", json!({"name": "x"})).await;
    let page = api
        .call(Method::GET, "/", &[("cookie", &cookie)], None)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(&id.to_string()[..13]), "{}", page.text);
    assert!(!page.text.contains(TOKEN) && !page.text.contains("Development mode"));
    let run = api
        .call(
            Method::GET,
            &format!("/runs/{id}"),
            &[("cookie", &cookie)],
            None,
        )
        .await;
    assert_eq!(run.status, StatusCode::OK);
    // Its event stream needs the session too.
    let stream = format!("/runs/{id}/events");
    assert_eq!(api.get(&stream).await.status, StatusCode::SEE_OTHER);

    // The API does not take the cookie.
    let api_call = api
        .call(Method::GET, "/v1/runs", &[("cookie", &cookie)], None)
        .await;
    assert_eq!(api_call.status, StatusCode::UNAUTHORIZED);

    // Sign-out needs the session's CSRF token.
    let (h, b) = form("csrf=guessed");
    let mut with_cookie = h.clone();
    with_cookie.push(("cookie", &cookie));
    let forged = api.call(Method::POST, "/logout", &with_cookie, b).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let csrf = page
        .text
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the sign-out form's CSRF token")
        .to_owned();
    let (_, b) = form(&format!("csrf={csrf}"));
    let out = api.call(Method::POST, "/logout", &with_cookie, b).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    // The session is over.
    let after = api
        .call(Method::GET, "/", &[("cookie", &cookie)], None)
        .await;
    assert_eq!(after.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&after), "/login");
}

/// The value the fork form's step field starts with.
fn fork_default(page: &str) -> String {
    page.split(r#"name="from_step""#)
        .nth(1)
        .and_then(|rest| rest.split(r#"value=""#).nth(1))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_owned()
}

/// The `<button>` tag of the form posting to `action` (its first one).
fn button_of<'a>(page: &'a str, action: &str) -> &'a str {
    let form = page
        .split(&format!(r#"action="{action}""#))
        .nth(1)
        .unwrap_or_else(|| panic!("no form posts to {action}: {page}"));
    let at = form.find("<button").expect("the form's button");
    &form[at..at + form[at..].find('>').unwrap_or(0)]
}

/// The CSRF token of a page's forms.
pub(crate) fn csrf_of(page: &str) -> String {
    page.split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a form's CSRF token")
        .to_owned()
}

fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Asserts `reply` is a redirect (303): where it sends.
#[track_caller]
pub(crate) fn redirected(reply: &Reply) -> String {
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    location(reply).to_owned()
}

/// Posts a form of `page` (its CSRF token first, then `fields`).
pub(crate) async fn post_page_form(
    api: &Api,
    page: &str,
    uri: &str,
    fields: &[(&str, &str)],
) -> Reply {
    let csrf = csrf_of(page);
    let mut all = vec![("csrf", csrf.as_str())];
    all.extend_from_slice(fields);
    post_form(api, uri, &all).await
}

/// Posts a form; `fields` are encoded.
pub(crate) async fn post_form(api: &Api, uri: &str, fields: &[(&str, &str)]) -> Reply {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    let (h, b) = form(&body.join("&"));
    api.call(Method::POST, uri, &h, b).await
}

/// Steering from the pages (development mode, whose forms carry the
/// server's own CSRF token): a review rejected with feedback re-runs the
/// step, approved it finishes the run; a failed run is retried; a fork
/// from step 1 copies step 0; a cancel; each action recorded with its
/// reason as `console`'s; a form without the token changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_and_actions_steer_runs_from_the_pages() {
    let api = Api::sqlite().await;
    let review = api.submit("review", json!({"topic": "cairns"})).await;
    api.drive(review).await;
    let waits = api.get("/waits").await;
    assert_eq!(waits.status, StatusCode::OK, "{}", waits.text);
    assert!(waits.text.contains("Draft on cairns"), "{}", waits.text);
    let csrf = csrf_of(&waits.text);
    let wait = api.waits().await[0].id;
    let target = format!("/waits/{wait}/answer");
    // The card names the crew, the step's role and how long it has waited.
    let card = &waits.text[waits.text.find(&format!(r#"id="wait-{wait}""#)).unwrap()..];
    let card = &card[..card.find("</section>").unwrap()];
    assert!(card.contains("review v1"), "the crew: {card}");
    assert!(
        card.contains(r#"<dd class="role">writer</dd>"#),
        "the role: {card}"
    );
    assert!(
        card.contains("<dt>Waiting</dt>") && card.contains(", since "),
        "{card}"
    );
    // Reject is destructive, and looks it; approve does not.
    let reject = &card[card.find(r#"value="reject""#).unwrap()..];
    let reject = &reject[reject.find("<button").unwrap()..];
    assert!(
        reject.starts_with(r#"<button type="submit" class="danger""#),
        "{reject}"
    );
    let approve = &card[card.find(r#"value="approve""#).unwrap()..];
    let approve = &approve[approve.find("<button").unwrap()..];
    assert!(
        !approve[..approve.find('>').unwrap()].contains("danger"),
        "{approve}"
    );

    // Without the token: refused, nothing changes.
    let forged = post_form(&api, &target, &[("csrf", "nope"), ("decision", "approve")]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        api.engine.get_run(review).await.unwrap().status,
        cairn::RunStatus::Waiting
    );

    let rejected = post_form(
        &api,
        &target,
        &[
            ("csrf", &csrf),
            ("decision", "reject"),
            ("feedback", "shorter"),
            ("reason", "too long for the page"),
        ],
    )
    .await;
    assert_eq!(rejected.status, StatusCode::SEE_OTHER, "{}", rejected.text);
    // The answer's reason is recorded with it, by `console`.
    let answered = api.engine.events(review).await.unwrap();
    let answered = answered
        .iter()
        .find(|e| e.kind == cairn::EventKind::WaitAnswered)
        .unwrap();
    assert_eq!(answered.data["by"], "console");
    assert_eq!(answered.data["reason"], "too long for the page");
    api.drive(review).await;
    let waits = api.get("/waits").await;
    crate::support::assert_contains(&waits.text, "Draft on cairns [shorter]");
    let wait = api
        .waits()
        .await
        .into_iter()
        .find(|w| w.status == cairn::WaitStatus::Open)
        .unwrap()
        .id;
    let approved = post_form(
        &api,
        &format!("/waits/{wait}/answer"),
        &[("csrf", &csrf), ("decision", "approve")],
    )
    .await;
    assert_eq!(approved.status, StatusCode::SEE_OTHER);
    api.drive(review).await;
    let done = api.engine.show(review).await.unwrap();
    assert_eq!(done.run.status, cairn::RunStatus::Succeeded);
    assert_eq!(
        done.steps[1].output,
        Some(json!("PUBLISHED Draft on cairns [shorter]"))
    );
    let answered = api.waits().await;
    assert!(
        answered
            .iter()
            .all(|w| w.answered_by.as_deref() == Some("console")),
        "{answered:?}"
    );

    // A failed run, retried from its page.
    let flaky = api.submit("flaky", json!({"name": "n"})).await;
    api.drive(flaky).await;
    let page = api.get(&format!("/runs/{flaky}")).await;
    // Fork defaults to the failed step.
    assert_eq!(fork_default(&page.text), "1", "{}", page.text);
    assert!(
        page.text
            .contains(&format!(r#"action="/runs/{flaky}/retry""#)),
        "{}",
        page.text
    );
    let retried = post_form(
        &api,
        &format!("/runs/{flaky}/retry"),
        &[
            ("csrf", &csrf_of(&page.text)),
            ("reason", "fixed the flake"),
        ],
    )
    .await;
    assert_eq!(redirected(&retried), format!("/runs/{flaky}?done=retry"));
    api.drive(flaky).await;
    assert_eq!(
        api.engine.get_run(flaky).await.unwrap().status,
        cairn::RunStatus::Succeeded
    );
    let events = api.engine.events(flaky).await.unwrap();
    let why = events
        .iter()
        .find(|e| e.kind == cairn::EventKind::RunRetried)
        .expect("run_retried");
    assert_eq!(why.data["by"], "console");
    assert_eq!(why.data["reason"], "fixed the flake");
    // Retrying it again is refused with the engine's message.
    let again = post_form(
        &api,
        &format!("/runs/{flaky}/retry"),
        &[("csrf", &csrf), ("reason", "again")],
    )
    .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    crate::support::assert_contains(&again.text, "only a failed run can be retried");

    // A fork from step 1 copies step 0 and runs step 1 only.
    let forked = post_form(
        &api,
        &format!("/runs/{flaky}/fork"),
        &[
            ("csrf", &csrf),
            ("reason", "try the rest again"),
            ("from_step", "1"),
            ("input", ""),
        ],
    )
    .await;
    assert_eq!(forked.status, StatusCode::SEE_OTHER, "{}", forked.text);
    let child: cairn::RunId = location(&forked)
        .trim_start_matches("/runs/")
        .trim_end_matches("?done=fork")
        .parse()
        .unwrap();
    assert_ne!(child, flaky);
    let view = api.engine.show(child).await.unwrap();
    assert_eq!(view.run.parent_run_id, Some(flaky));
    assert_eq!(view.steps.len(), 1, "step 0 copied");
    let bad_fork = post_form(
        &api,
        &format!("/runs/{flaky}/fork"),
        &[
            ("csrf", &csrf),
            ("reason", "r"),
            ("from_step", "1"),
            ("input", "{not json"),
        ],
    )
    .await;
    assert_eq!(
        bad_fork.status,
        StatusCode::BAD_REQUEST,
        "{}",
        bad_fork.text
    );

    // A queued run cancelled, with the destructive button.
    let queued = api.submit("greet", json!({"name": "x"})).await;
    let page = api.get(&format!("/runs/{queued}")).await;
    let cancel = button_of(&page.text, &format!("/runs/{queued}/cancel"));
    assert!(cancel.contains(r#"class="danger""#), "{cancel}");
    let fork = button_of(&page.text, &format!("/runs/{queued}/fork"));
    assert!(!fork.contains("danger"), "{fork}");
    assert_eq!(fork_default(&page.text), "0", "nothing ran yet");
    let cancelled = post_form(
        &api,
        &format!("/runs/{queued}/cancel"),
        &[("csrf", &csrf), ("reason", "not needed")],
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::SEE_OTHER);
    assert_eq!(
        api.engine.get_run(queued).await.unwrap().status,
        cairn::RunStatus::Cancelled
    );
}

/// A thread's page: its runs as a conversation (input, final output),
/// linked from the runs table; an unknown thread is a 404 page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_reads_as_a_conversation() {
    let api = Api::sqlite().await;
    let mut ids = vec![];
    for name in ["Ada", "Grace"] {
        let body = json!({"crew": "greet", "input": {"name": name}, "thread_id": "chat 1"});
        let reply = api.post_json("/v1/runs", &body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        let id: cairn::RunId = reply.json()["id"].as_str().unwrap().parse().unwrap();
        api.drive(id).await;
        ids.push(id);
    }
    let runs = api.get("/").await;
    crate::support::assert_contains(&runs.text, r#"href="/threads/chat%201""#);
    let page = api.get("/threads/chat%201").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let (ada, grace) = (
        page.text.find("Hello Ada").unwrap(),
        page.text.find("Hello Grace").unwrap(),
    );
    assert!(ada < grace, "oldest first");
    assert!(page.text.contains("2 runs"), "{}", page.text);
    for id in ids {
        assert!(page.text.contains(&format!("/runs/{id}")));
    }
    let missing = api.get("/threads/nobody").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
}

/// `/threads` lists every thread, the newest first, each linked to its
/// page with its runs, tokens and last run; a run's page links its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_page_lists_the_threads_and_a_run_links_its_own() {
    let api = Api::sqlite().await;
    let empty = api.get("/threads").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.text);
    assert!(empty.text.contains("No threads"), "{}", empty.text);
    let mut last = None;
    for (thread, name) in [("chat <1>", "Ada"), ("chat <1>", "Grace"), ("later", "Lin")] {
        let body = json!({"crew": "greet", "input": {"name": name}, "thread_id": thread});
        let reply = api.post_json("/v1/runs", &body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        let id: cairn::RunId = reply.json()["id"].as_str().unwrap().parse().unwrap();
        api.drive(id).await;
        last = Some(id);
    }
    let page = api.get("/threads").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text.contains(r#"href="/threads""#),
        "in the navigation"
    );
    let table = &page.text[page.text.find("<table").unwrap()..];
    let (later, chat) = (
        table
            .find(r#"href="/threads/later""#)
            .expect("the later thread"),
        table
            .find(r#"href="/threads/chat%20%3C1%3E">chat &lt;1&gt;</a>"#)
            .expect("the chat thread, escaped"),
    );
    assert!(later < chat, "newest first: {table}");
    let row = &table[chat..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<td>2</td>"), "two runs: {row}");
    assert!(row.contains("<time datetime="), "the last run: {row}");
    assert!(!page.text.contains("chat <1>"), "escaped");
    // The thread's link opens its page.
    assert_eq!(
        api.get("/threads/chat%20%3C1%3E").await.status,
        StatusCode::OK
    );
    // A run's page links its thread.
    let run = api.get(&format!("/runs/{}", last.unwrap())).await;
    assert!(
        run.text
            .contains(r#"<dd><a href="/threads/later">later</a></dd>"#),
        "{}",
        run.text
    );
}

/// A run waiting for a person: its duration leaves the wait out ("ran …,
/// waited …", on its page and in the runs table), and once answered, its
/// step's duration too, with the wait in a column of its own (as `cairn
/// runs show` does); the header counts read right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_runs_duration_leaves_its_wait_out() {
    let api = Api::sqlite().await;
    let review = api.submit("review", json!({"topic": "cairns"})).await;
    api.drive(review).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let duration_of = |page: &str| {
        page.split("<dt>Duration</dt><dd>")
            .nth(1)
            .and_then(|d| d.split("</dd>").next())
            .unwrap_or_default()
            .to_owned()
    };
    let page = api.get(&format!("/runs/{review}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let duration = duration_of(&page.text);
    assert!(
        duration.starts_with("ran ") && duration.contains(" ms, waited 1."),
        "{duration}: {}",
        page.text
    );
    crate::support::assert_contains(&page.text, "1 attempt over 1 step<");
    // The runs table says the same.
    let runs = api.get("/").await;
    assert!(runs.text.contains(", waited 1."), "{}", runs.text);

    api.approve_first_wait("ann").await;
    api.drive(review).await;
    let page = api.get(&format!("/runs/{review}")).await;
    let duration = duration_of(&page.text);
    assert!(
        duration.starts_with("ran ") && duration.contains(" ms, waited 1."),
        "{duration}: {}",
        page.text
    );
    crate::support::assert_contains(&page.text, "2 attempts over 2 steps<");
    // The steps table: the writer's own time, then its wait.
    let steps = &page.text[page.text.find(r#"<table class="steps">"#).unwrap()..];
    let steps = &steps[..steps.find("</table>").unwrap()];
    assert!(steps.contains("<th>Waited</th>"), "{steps}");
    let cells: Vec<&str> = steps
        .split("<td>")
        .skip(1)
        .map(|c| c.split("</td>").next().unwrap_or_default())
        .collect();
    assert!(cells[4].ends_with(" ms"), "ran: {cells:?}");
    assert!(
        cells[5].starts_with("1.") && cells[5].ends_with(" s"),
        "waited: {cells:?}"
    );
    assert_eq!(cells[12], "–", "the publisher did not wait: {cells:?}");
}

/// The crews page: every offered crew with its roles, and what its recent
/// runs' steps cost per role as a chart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crews_page_charts_each_role_from_stored_steps() {
    let api = Api::sqlite().await;
    for name in ["a", "b"] {
        let id = api.submit("pipeline", json!({"name": name})).await;
        api.drive(id).await;
    }
    let page = api.get("/crews").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let at = page.text.find("pipeline v1").expect("the pipeline crew");
    let section = &page.text[at..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains("2 most recent runs"), "{section}");
    assert!(
        section.contains("Newest version. 0 unfinished runs."),
        "{section}"
    );
    assert!(
        section.contains("counter (command)") && section.contains("writer (template)"),
        "{section}"
    );
    assert!(section.matches("2 steps").count() == 2, "{section}");
    assert!(!section.contains("1 steps"), "{section}");
    assert!(section.contains("<svg"), "{section}");
    // A crew nobody ran yet says so.
    let greet = &page.text[page.text.find("greet v1").unwrap()..];
    assert!(greet[..greet.find("</section>").unwrap()].contains("no steps yet"));
}

/// An `llm` step's journal reads as a conversation on its run's page: the
/// text, the tool call with its arguments, the result, where each response
/// ended; HTML in the text is shown as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_steps_journal_reads_as_a_conversation() {
    let api = Api::sqlite().await;
    let id = api.submit("agent", json!({"word": "<i>hi</i>"})).await;
    api.drive(id).await;
    let page = api.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let text = &page.text;
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} is not on the page:\n{text}"))
    };
    // In journal order: text, tool call (name, arguments), the end of the
    // first response, the tool's result, then the answer.
    let order = [
        at("<pre>Echoing.</pre>"),
        at(r#"<code>echo</code>"#),
        at("&quot;word&quot;"),
        at("end of response: tool_use"),
        at("<strong>Result</strong>"),
        at("<pre>Done.</pre>"),
        at("end of response: end_turn"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}\n{text}");
    // A finished run has no live box.
    assert!(!text.contains("live-text"), "{text}");
}

/// A form that does not parse (a field missing) gets a console page that
/// says what is wrong, not the framework's plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_that_does_not_parse_gets_a_console_page() {
    let api = Api::sqlite().await;
    let id = api.submit("greet", json!({"name": "x"})).await;
    let (h, b) = form("reason=no+csrf+field");
    let reply = api
        .call(Method::POST, &format!("/runs/{id}/cancel"), &h, b)
        .await;
    assert!(reply.status.is_client_error(), "{reply:?}");
    assert!(reply.content_type().starts_with("text/html"), "{reply:?}");
    crate::support::assert_contains(&reply.text, "The form was not accepted");
    assert!(
        reply.text.contains("csrf"),
        "the reason names the field: {}",
        reply.text
    );
}

/// A child's review on the waits page names its parent chain; the parent's
/// page lists its children; answering the child from the page and running
/// it on finishes the parent too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_wait_names_its_parent_and_its_answer_continues_the_parent() {
    let api = Api::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("child.toml"),
        "name = \"child\"\nversion = \"1\"\n[[agents]]\nrole = \"draft\"\nkind = \"template\"\n\
         template = \"draft {{ input.item }}\"\nreview = true\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("parent.toml"),
        "name = \"parent\"\nversion = \"1\"\n[[agents]]\nrole = \"fan\"\nkind = \"children\"\n\
         crew = \"child.toml\"\nover = \"input.items\"\n",
    )
    .unwrap();
    let crew = cairn::Crew::from_file(dir.path().join("parent.toml")).unwrap();
    let parent = api
        .engine
        .run(&crew, json!({"items": ["x"]}), Default::default())
        .await
        .unwrap()
        .run;
    assert_eq!(parent.status, cairn::RunStatus::Waiting);
    let wait = api.waits().await[0].clone();
    let waits = api.get("/waits").await;
    let card = &waits.text[waits
        .text
        .find(&format!(r#"id="wait-{}""#, wait.id))
        .unwrap()..];
    let card = &card[..card.find("</section>").unwrap()];
    assert!(card.contains("<dt>Child of</dt>"), "{card}");
    assert!(
        card.contains(&format!(r#"href="/runs/{}""#, parent.id)),
        "the card links the parent: {card}"
    );
    let page = api.get(&format!("/runs/{}", parent.id)).await;
    assert!(page.text.contains("<h2>Children</h2>"), "{}", page.text);
    assert!(
        page.text
            .contains(&format!(r#"href="/runs/{}""#, wait.run_id)),
        "the parent's page links the child"
    );
    let csrf = csrf_of(&waits.text);
    let answered = post_form(
        &api,
        &format!("/waits/{}/answer", wait.id),
        &[("csrf", &csrf), ("decision", "approve"), ("reason", "fine")],
    )
    .await;
    assert!(answered.status.is_redirection(), "{}", answered.text);
    api.engine.execute(wait.run_id).await.unwrap();
    let parent = api.engine.get_run(parent.id).await.unwrap();
    assert_eq!(
        parent.status,
        cairn::RunStatus::Succeeded,
        "{:?}",
        parent.error
    );
}

/// `/limits` lists the provider keys: none at first, then a paused one with
/// its end, its reason and who paused it, escaped; then its limits and
/// permits in use once they are set (a limit of 0 refused, `bad_limit`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_page_lists_paused_provider_keys() {
    let api = Api::sqlite().await;
    let empty = api.get("/limits").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.text);
    assert!(empty.text.contains("No provider key"), "{}", empty.text);
    assert!(
        empty.text.contains(r#"href="/limits""#),
        "in the navigation"
    );
    let body = json!({"key": "provider=openai,url=http://x/v1,key=K", "for": "10m",
                      "by": "ops", "reason": "incident <42>"});
    let reply = api.post_json("/v1/limits/pause", &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let page = api.get("/limits").await;
    let table = &page.text[page.text.find("<table").unwrap()..];
    assert!(
        table.contains("<code>provider=openai,url=http://x/v1,key=K</code>"),
        "{table}"
    );
    assert!(table.contains("<time datetime="), "paused until: {table}");
    assert!(table.contains("incident &lt;42&gt; (api)"), "{table}");
    assert!(table.contains("<td>none</td>"), "no limits yet: {table}");

    // Limits set through the API show on the page, with the permits in use.
    let body = json!({"key": "provider=openai,url=http://x/v1,key=K", "in_flight": 8,
                      "rpm": 500});
    let reply = api.post_json("/v1/limits/set", &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let page = api.get("/limits").await;
    let table = &page.text[page.text.find("<table").unwrap()..];
    assert!(table.contains("<td>in flight 8, 500 rpm</td>"), "{table}");
    assert!(table.contains("<td>0 of 8</td>"), "{table}");
    let bad = api
        .post_json("/v1/limits/set", &json!({"key": "k", "tpm": 0}))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    assert!(bad.text.contains("bad_limit"), "{}", bad.text);
}

/// A run with a budget shows on its page what it spent of each limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_page_shows_what_it_spent_of_its_budget() {
    let api = Api::sqlite().await;
    let body = json!({"crew": "pipeline", "input": {"name": "budgeted"},
                      "budget": {"model_calls": 5, "cost_usd": 2.5}});
    let reply = api.post_json("/v1/runs", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let id: cairn::RunId = reply.json()["id"].as_str().unwrap().parse().unwrap();
    api.drive(id).await;
    let page = api.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text
            .contains("model calls 0 of 5, cost $0.000000 of $2.500000"),
        "{}",
        page.text
    );
    // A run without one has no budget line.
    let free = api.submit("pipeline", json!({"name": "free"})).await;
    let page = api.get(&format!("/runs/{free}")).await;
    assert!(!page.text.contains("model calls"), "{}", page.text);
}

/// A run whose model calls were priced shows each step's cost on its page,
/// and the crews page what its crew's recent runs cost (here, the run's
/// one priced step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_crews_pages_show_what_priced_calls_cost() {
    let api = Api::sqlite().await;
    let prices = "version = \"t\"\n[[prices]]\nprovider = \"scripted\"\nmodel = \"scripted\"\n\
                  input = 2.0\noutput = 10.0\n";
    let config = cairn::ExecutorConfig {
        prices: Some(std::sync::Arc::new(
            cairn::PriceTable::parse(prices).unwrap(),
        )),
        ..cairn::ExecutorConfig::default()
    };
    let opts = cairn::OpenOptions::default();
    let priced = cairn::Engine::open_with(&api.db.url, &opts, config)
        .await
        .unwrap();
    let crew = cairn::Crew::from_file(api._crews_dir.path().join("agent.toml")).unwrap();
    let run = priced
        .run(&crew, json!({"word": "hi"}), Default::default())
        .await
        .unwrap()
        .run;
    let steps = priced.show(run.id).await.unwrap().steps;
    let cost = steps[0].cost_usd.expect("the step's calls were priced");
    assert!(!cost.is_zero());
    let page = api.get(&format!("/runs/{}", run.id)).await;
    assert!(page.text.contains(&format!(" · {cost}")), "{}", page.text);
    let crews = api.get("/crews").await;
    assert_eq!(crews.status, StatusCode::OK, "{}", crews.text);
    crate::support::assert_contains(&crews.text, &format!("which cost {cost}"));
}

/// An agent stopped at its budget (one model call) is raised and carried
/// on from its page: the raise is recorded with the console's reason, the
/// run continues and finishes; a raise that does not read is refused with
/// nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_page_raises_its_budget_and_carries_it_on() {
    let api = Api::sqlite().await;
    let body = json!({"crew": "agent", "input": {"word": "hi"}, "budget": {"model_calls": 1}});
    let reply = api.post_json("/v1/runs", &body).await;
    let id: cairn::RunId = reply.json()["id"].as_str().unwrap().parse().unwrap();
    api.drive(id).await;
    let run = api.engine.get_run(id).await.unwrap();
    assert_eq!(run.status, cairn::RunStatus::Interrupted, "{:?}", run.error);
    let page = api.get(&format!("/runs/{id}")).await;
    let target = format!("/runs/{id}/budget");
    crate::support::assert_contains(&page.text, "Raise the budget and continue");
    let csrf = csrf_of(&page.text);
    let wrong = [
        ("csrf", csrf.as_str()),
        ("raise", "model_calls=2"),
        ("reason", "r"),
    ];
    let bad = post_form(&api, &target, &wrong).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    assert!(bad.text.contains("a raise is written +N"), "{}", bad.text);
    assert_eq!(
        api.engine.get_run(id).await.unwrap().budget,
        run.budget,
        "nothing raised"
    );
    let fields = [
        ("csrf", csrf.as_str()),
        ("raise", "model_calls=+1"),
        ("reason", "worth it"),
    ];
    let raised = post_form(&api, &target, &fields).await;
    assert_eq!(redirected(&raised), format!("/runs/{id}?done=budget"));
    api.drive(id).await;
    let done = api.engine.get_run(id).await.unwrap();
    assert_eq!(done.status, cairn::RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!(done.budget.and_then(|b| b.model_calls), Some(2));
    let events = api.engine.events(id).await.unwrap();
    let why = events
        .iter()
        .find(|e| e.kind == cairn::EventKind::BudgetRaised)
        .expect("budget_raised");
    assert_eq!(
        (&why.data["by"], &why.data["reason"]),
        (&json!("console"), &json!("worth it"))
    );
}
