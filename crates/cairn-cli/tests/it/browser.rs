//! The console in a real browser: Debian's headless Chromium, driven over
//! WebDriver (`cairn_testkit::Browser`), against a real `cairn serve`
//! process. Needs `chromium` and `chromium-driver` (`.ci/run` installs
//! them). With `CAIRN_SCREENSHOTS=DIR` the tests also save the README's
//! screenshots there.
//!
//! What a person does and sees: signing in; a run's steps and an `llm`
//! step's text appearing while it runs, without a reload; a review rejected
//! with feedback and then approved from `/waits`; a fork from step N from
//! the run's page; the threads page and its links; a child run's review,
//! naming its parent, approved from `/waits`, after which the parent goes
//! on; and a reload after the
//! run's worker was SIGKILLed and the run finished elsewhere, showing the
//! stored progress and the time lost to the crash. `answers.rs`: a waiting
//! run's page answering its wait, each answer confirmed by a line, text
//! under review read as text; `fanout.rs`: a fan-out's badge while its
//! children work, and its timeline from spawn to join.

mod answers;
mod approvals;
mod fanout;
mod mail;
mod signals;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_testkit::browser::Browser;
use cairn_testkit::SlowModel;

use crate::support::{llm_crew, serve, step, wait_until, Case, Kind, Served, Spawned};

const WAIT: Duration = Duration::from_secs(30);
const TOKEN: &str = "browser-token-0123456789abcdef";

/// An `llm` step on the slow model, then a template step that quotes it.
fn slow_crew(base_url: &str) -> String {
    llm_crew(
        base_url,
        "[[agents]]\nrole = \"editor\"\nkind = \"template\"\n\
         template = \"edited: {{ outputs.writer }}\"\n",
    )
}

/// Three command steps; the second waits for a gate file to exist.
fn gated_crew(gate: &Path) -> String {
    let step = |role: &str, wait: bool| {
        let gate = if wait {
            format!("while [ ! -f '{}' ]; do sleep 0.05; done; ", gate.display())
        } else {
            String::new()
        };
        format!(
            "[[agents]]\nrole = \"{role}\"\nkind = \"command\"\ncommand = [\"sh\", \"-c\", '''cat > /dev/null; {gate}echo '{{\"done\": \"{role}\"}}' ''']\n"
        )
    };
    format!(
        "name = \"gated\"\nversion = \"1\"\n{}{}{}",
        step("first", false),
        step("second", true),
        step("third", false)
    )
}

/// A `cairn serve` of the test's crews, killed (by pid) with the fixture.
struct Console {
    url: String,
    _served: Served,
}

impl Console {
    /// Serves `crews` from `case`'s database; `concurrency` runs at once
    /// (0: the API only, a worker executes); `tokens`: sign-in required.
    fn start(case: &Case, crews: &[(&str, String)], concurrency: &str, tokens: bool) -> Console {
        let dir = case.path("crews");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in crews {
            std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
        }
        let env: &[(&str, &str)] = match tokens {
            true => &[("CAIRN_API_TOKENS", TOKEN)],
            false => &[],
        };
        let served = serve(
            case,
            &[
                "--crews",
                dir.to_str().unwrap(),
                "--concurrency",
                concurrency,
            ],
            env,
        );
        Console {
            url: served.url.clone(),
            _served: served,
        }
    }

    fn page(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Submits `crew` with `input` through the CLI against this server.
    fn submit(&self, case: &Case, crew: &str, input: &str, token: bool) -> String {
        self.submit_with(case, crew, input, token, &[])
    }

    /// [`Console::submit`] with more arguments (`--thread ID`).
    fn submit_with(
        &self,
        case: &Case,
        crew: &str,
        input: &str,
        token: bool,
        more: &[&str],
    ) -> String {
        let mut args = vec![
            "submit", crew, "--input", input, "--json", "--server", &self.url,
        ];
        if token {
            args.extend(["--token", TOKEN]);
        }
        args.extend(more);
        let out = case.raw(&args, &[]).expect_code(0).json();
        out["id"].as_str().unwrap().to_owned()
    }
}

async fn browser() -> Browser {
    Browser::start()
        .await
        .unwrap_or_else(|e| panic!("the browser tests need Chromium: {e}"))
}

/// Saves a screenshot for the README when `CAIRN_SCREENSHOTS` names a folder.
async fn screenshot(browser: &Browser, name: &str) {
    if let Some(dir) = std::env::var_os("CAIRN_SCREENSHOTS") {
        let path = PathBuf::from(dir).join(format!("{name}.png"));
        browser.screenshot_png(&path).await.unwrap();
    }
}

/// Reloads the page (the waits page does not follow events) until the text
/// of its main part satisfies `done`; that text.
async fn reload_until(b: &Browser, what: &str, done: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    for _ in 0..150 {
        text = b.text("main").await.unwrap_or_default();
        if done(&text) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.reload().await.unwrap();
    }
    panic!("{what}: the page never showed it:\n{text}");
}

/// The value a run page's header gives for `name`.
async fn header_value(b: &Browser, name: &str) -> String {
    let js = "for (const dt of document.querySelectorAll('dl.header dt')) \
              { if (dt.textContent === arguments[0]) return dt.nextElementSibling.textContent; } \
              return null;";
    let v = b.execute(js, vec![name.into()]).await.unwrap();
    v.as_str().unwrap_or_default().to_owned()
}

/// The page, at each of a phone's and a wide screen's widths, needs no
/// sideways scrolling (wide tables and SVGs scroll inside their own box).
async fn assert_fits(b: &Browser, what: &str) {
    for width in [390, 1920] {
        b.set_size(width, 900).await.unwrap();
        let fits = b
            .execute(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]",
                vec![],
            )
            .await
            .unwrap();
        let (scroll, client) = (fits[0].as_i64().unwrap(), fits[1].as_i64().unwrap());
        assert!(
            scroll <= client,
            "{what} at {width} px: {scroll} px wide in {client} px"
        );
    }
    b.set_size(1280, 900).await.unwrap();
}

/// Clicks a form's button and waits until its answer landed (its redirect
/// loaded a new page): on a loaded machine a navigation begun while the
/// form's request is pending takes its place.
async fn click_and_land(b: &Browser, button: &str, what: &str) {
    b.execute("window.cairnBeforeAnswer = true; return null;", vec![])
        .await
        .unwrap();
    b.click(button).await.unwrap();
    for _ in 0..150 {
        let gone = b
            .execute("return window.cairnBeforeAnswer === undefined;", vec![])
            .await
            .unwrap_or_default();
        if gone == serde_json::Value::Bool(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what} never answered");
}

/// Signs out (the form posts, then lands on the sign-in page).
async fn sign_out(b: &Browser) {
    b.click("form.signout button").await.unwrap();
    b.wait_for("input#token", WAIT).await.unwrap();
}

/// Waits until the run page's header says each of `texts`, in turn.
async fn header_says(b: &Browser, texts: &[&str]) {
    for text in texts {
        b.wait_for_text("dl.header", text, WAIT).await.unwrap();
    }
}

/// Where the link `selector` names goes (empty without one).
async fn href(b: &Browser, selector: &str) -> String {
    let href = b.attr(selector, "href").await.unwrap();
    href.unwrap_or_default()
}

/// The case a browser test runs in, or `None` (the test passes, having
/// said what is missing) where the browser or its driver is absent.
fn browser_case(test: &str, kind: Kind) -> Option<Case> {
    cairn_testkit::browser::present(test).then(|| Case::new(kind))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn sign_in_refuses_a_wrong_token_and_opens_a_session_for_a_right_one() {
    let Some(case) = browser_case(
        "sign_in_refuses_a_wrong_token_and_opens_a_session_for_a_right_one",
        Kind::Sqlite,
    ) else {
        return;
    };
    let console = Console::start(&case, &[], "1", true);
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page("/")).await.unwrap();
        b.wait_for("input#token", WAIT).await.unwrap();
        assert!(b.current_url().await.unwrap().ends_with("/login"));
        b.fill("input#token", "not-the-token").await.unwrap();
        b.click("main.login button").await.unwrap();
        let error = b
            .wait_for_text("p.error", "not one this server accepts", WAIT)
            .await
            .unwrap();
        assert!(!error.contains(TOKEN));
        // Still signed out: the runs page sends us back.
        b.goto(&console.page("/")).await.unwrap();
        b.wait_for("input#token", WAIT).await.unwrap();

        b.fill("input#token", TOKEN).await.unwrap();
        b.click("main.login button").await.unwrap();
        b.wait_for_text("h1", "Runs", WAIT).await.unwrap();
        // The token is nowhere in the page, and the session survives a reload.
        let html = b
            .execute("return document.documentElement.outerHTML", vec![])
            .await
            .unwrap();
        assert!(!html.to_string().contains(TOKEN));
        let cookie = b.execute("return document.cookie", vec![]).await.unwrap();
        assert_eq!(cookie, "", "the session cookie is HttpOnly");
        b.reload().await.unwrap();
        b.wait_for_text("h1", "Runs", WAIT).await.unwrap();
        // Signing out ends it.
        sign_out(&b).await;
        b.goto(&console.page("/")).await.unwrap();
        b.wait_for("input#token", WAIT).await.unwrap();
    });
}

#[test]
fn an_llm_steps_text_and_the_next_steps_appear_live_without_a_reload() {
    let Some(case) = browser_case(
        "an_llm_steps_text_and_the_next_steps_appear_live_without_a_reload",
        Kind::Sqlite,
    ) else {
        return;
    };
    let model = SlowModel::start(
        &["Durable", " agents", " never", " lose", " a step"],
        Duration::from_millis(80),
    )
    .unwrap();
    let console = Console::start(&case, &[("slow", slow_crew(&model.base_url))], "2", false);
    let id = console.submit(&case, "slow", "{}", false);
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page(&format!("/runs/{id}"))).await.unwrap();
        // A mark that a reload would wipe.
        b.execute("window.cairnTestMark = 7", vec![]).await.unwrap();
        wait_until("the model call", WAIT, || model.requests() == 1);
        b.wait_for("pre.live-text", WAIT).await.unwrap();
        model.begin();
        // Every piece, while the model still holds its response open.
        let text = b
            .wait_for_text("pre.live-text", "Durable agents never lose a step", WAIT)
            .await
            .unwrap();
        assert_eq!(text.trim(), "Durable agents never lose a step");
        let step = b.text("table.steps tbody tr:first-child").await.unwrap();
        assert!(step.contains("running"), "{step}");
        screenshot(&b, "console-live").await;
        model.release();
        // The step ends and the next one runs and ends: the page follows.
        header_says(&b, &["succeeded", "2 of 2 steps"]).await;
        let steps = b.text("table.steps tbody").await.unwrap();
        assert_eq!(steps.matches("succeeded").count(), 2, "{steps}");
        // The streamed text is now the journaled conversation, once (in
        // the step's collapsed details: read its text, not what shows).
        let conversation = b
            .execute(
                "return document.querySelector('ol.conversation').textContent",
                vec![],
            )
            .await
            .unwrap();
        let conversation = conversation.as_str().unwrap_or_default();
        assert_eq!(
            conversation
                .matches("Durable agents never lose a step")
                .count(),
            1,
            "{conversation}"
        );
        assert!(!b.exists("pre.live-text").await.unwrap());
        let mark = b
            .execute("return window.cairnTestMark", vec![])
            .await
            .unwrap();
        assert_eq!(mark, 7, "the page was not reloaded");
        screenshot(&b, "console-run").await;
        assert_fits(&b, "a run's page").await;
        b.goto(&console.page("/")).await.unwrap();
        b.wait_for_text("table", "slow", WAIT).await.unwrap();
        screenshot(&b, "console-runs").await;
        assert_fits(&b, "the runs page").await;
    });
}

#[test]
fn a_review_is_rejected_then_approved_from_the_waits_page_and_a_run_forked_from_its_page() {
    let Some(case) = browser_case(
        "a_review_is_rejected_then_approved_from_the_waits_page_and_a_run_forked_from_its_page",
        Kind::Sqlite,
    ) else {
        return;
    };
    let review = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/review.toml"),
    )
    .unwrap();
    let console = Console::start(&case, &[("review", review)], "2", false);
    let id = console.submit(&case, "review", r#"{"topic": "cairns"}"#, false);
    let reject = "form:has(input[name=decision][value=reject])";
    let approve = "form:has(input[name=decision][value=approve])";
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page("/waits")).await.unwrap();
        // The runner reaches the review shortly: look again until it shows.
        let first = reload_until(&b, "the first review", |t| t.contains("long-winded")).await;
        assert!(first.contains("review for step 0"), "{first}");
        // The card names the crew, the role and how long it has waited.
        let facts = b.text("section.wait dl.wait-facts").await.unwrap();
        assert!(
            facts.contains("review v1") && facts.contains("writer") && facts.contains("since"),
            "{facts}"
        );
        // Reject is destructive and looks it: not the colours of approve.
        let look = "const s = getComputedStyle(document.querySelector(arguments[0])); \
                    return [s.backgroundColor, s.color, s.borderTopColor].join(' ');";
        let rejects = b
            .execute(look, vec![format!("{reject} button").into()])
            .await
            .unwrap();
        let approves = b
            .execute(look, vec![format!("{approve} button").into()])
            .await
            .unwrap();
        assert_ne!(rejects, approves, "reject looks like approve");
        assert!(
            rejects.as_str().unwrap_or_default().contains("rgb(179, 55, 47)"),
            "reject is red: {rejects}"
        );
        screenshot(&b, "console-waits").await;
        assert_fits(&b, "the waits page").await;
        b.fill(&format!("{reject} input[name=feedback]"), "shorter")
            .await
            .unwrap();
        b.fill(&format!("{reject} input[name=reason]"), "too long to read")
            .await
            .unwrap();
        b.click(&format!("{reject} button")).await.unwrap();
        // The writer runs again with the feedback: a new review, of a new draft.
        // (The line confirming the rejection names the feedback too: wait
        // for the new draft's card.)
        reload_until(&b, "the review of the new draft", |t| {
            t.contains("rewritten after review")
        })
        .await;
        b.fill(&format!("{approve} input[name=reason]"), "good now")
            .await
            .unwrap();
        b.click(&format!("{approve} button")).await.unwrap();
        // Then the publisher's approval.
        reload_until(&b, "the publisher's approval", |t| {
            t.contains("approval for step 1")
        })
        .await;
        b.fill(&format!("{approve} input[name=reason]"), "ship it")
            .await
            .unwrap();
        click_and_land(&b, &format!("{approve} button"), "the approval's form").await;

        b.goto(&console.page(&format!("/runs/{id}"))).await.unwrap();
        b.wait_for_text("dl.header", "succeeded", WAIT)
            .await
            .unwrap();
        let events = b.text("ol.events").await.unwrap();
        for reason in ["too long to read", "good now", "ship it"] {
            assert!(events.contains(reason), "{reason}: {events}");
        }
        assert_eq!(
            header_value(&b, "Attempts").await,
            "3 attempts over 2 steps",
            "the writer twice and the publisher once"
        );
        let attempt = b
            .text("table.steps tbody tr:first-child td:nth-child(4)")
            .await
            .unwrap();
        assert_eq!(attempt, "2", "the writer ran twice");

        // Fork from step 1: a new run that copies step 0 and runs from 1,
        // which is what the form offers (re-run the last step).
        let offered = b
            .execute(
                "return document.querySelector(\"form[action$='/fork'] input[name=from_step]\").value",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(offered, "1", "fork re-runs the last step by default");
        b.fill("form[action$='/fork'] input[name=from_step]", "1")
            .await
            .unwrap();
        b.fill("form[action$='/fork'] input[name=reason]", "publish again")
            .await
            .unwrap();
        b.click("form[action$='/fork'] button").await.unwrap();
        b.wait_for_text("dl.header", "Forked from", WAIT)
            .await
            .unwrap();
        let url = b.current_url().await.unwrap();
        assert!(!url.ends_with(&id), "a new run's page: {url}");
        let header = b.text("dl.header").await.unwrap();
        assert!(header.contains("at step 1"), "{header}");
        let source = href(&b, "dl.header a").await;
        assert!(source.ends_with(&id), "the fork links to its source");
    });
}

/// On PostgreSQL, a worker runs the run; it is SIGKILLed mid-step; another
/// process takes the run over and finishes it; the page, reloaded, shows
/// what is stored: every step done, one takeover, and on the taken-over
/// step's row the time lost to the crash, from the dead worker's last
/// event to the takeover, which the legend names.
#[test]
fn a_reload_after_the_worker_was_killed_and_the_run_resumed_elsewhere_shows_the_stored_progress() {
    let Some(case) = browser_case("a_reload_after_the_worker_was_killed_and_the_run_resumed_elsewhere_shows_the_stored_progress", Kind::Postgres) else {
        return;
    };
    let gate = case.path("gate");
    let console = Console::start(&case, &[("gated", gated_crew(&gate))], "0", false);
    let id = console.submit(&case, "gated", "{}", false);
    let mut worker = Spawned(
        case.command()
            .args(["worker", "--poll-ms", "100", "--db", case.url()])
            .stdout(std::fs::File::create(case.path("worker.out")).unwrap())
            .stderr(std::fs::File::create(case.path("worker.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page(&format!("/runs/{id}"))).await.unwrap();
        b.wait_for_text("dl.header", "1 of 3 steps", WAIT)
            .await
            .unwrap();
        let steps = b.text("table.steps tbody").await.unwrap();
        assert!(
            steps.contains("second") && steps.contains("running"),
            "{steps}"
        );

        nix::sys::signal::kill(worker.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
        let _ = worker.wait("the killed worker");
        std::fs::write(&gate, "open").unwrap();
        case.cairn(&["resume", &id, "--takeover"]).expect_code(0);

        b.reload().await.unwrap();
        let header = b
            .wait_for_text("dl.header", "3 of 3 steps", WAIT)
            .await
            .unwrap();
        assert!(header.contains("succeeded"), "{header}");
        assert_eq!(header_value(&b, "Takeovers").await, "1", "{header}");
        let steps = b.text("table.steps tbody").await.unwrap();
        assert_eq!(steps.matches("succeeded").count(), 3, "{steps}");
        assert!(
            b.exists("svg.timeline g.takeover").await.unwrap(),
            "the takeover is marked"
        );
        // The lost time: a band on the second step's row (its second row
        // from the top) that ends where the takeover is marked.
        assert!(
            b.exists("svg.timeline g.bar.lost").await.unwrap(),
            "the time lost to the crash is drawn"
        );
        let geometry = b
            .execute(
                "const r = document.querySelector('svg.timeline g.bar.lost rect'); \
                 const l = document.querySelector('svg.timeline g.takeover line'); \
                 const t = document.querySelector('svg.timeline g.bar.lost title'); \
                 return [r.x.baseVal.value, r.width.baseVal.value, r.y.baseVal.value, \
                         l.x1.baseVal.value, t.textContent];",
                vec![],
            )
            .await
            .unwrap();
        let num = |i: usize| geometry[i].as_f64().unwrap_or(f64::NAN);
        let (x, width, y, takeover) = (num(0), num(1), num(2), num(3));
        assert!(
            (x + width - takeover).abs() < 0.5 || width <= 2.0,
            "the band ends at the takeover: {geometry}"
        );
        assert!(
            x < takeover,
            "the band comes before the takeover: {geometry}"
        );
        assert_eq!(y, 26.0, "on the second step's row: {geometry}");
        let title = geometry[4].as_str().unwrap_or_default();
        assert!(title.contains("lost to a crash"), "{title}");
        let legend = b.text("ul.legend").await.unwrap();
        for meaning in [
            "attempt that succeeded",
            "failed attempt",
            "back-off",
            "waiting for a person",
            "takeover",
            "lost to a crash",
        ] {
            assert!(legend.contains(meaning), "{meaning}: {legend}");
        }
        assert!(
            b.exists("ul.legend li.legend-lost svg.swatch g.bar.lost")
                .await
                .unwrap(),
            "the legend shows the band as the timeline draws it"
        );
        screenshot(&b, "console-takeover").await;
    });
}

/// Runs submitted in threads: the navigation's Threads link opens the
/// threads page, which lists each thread with its runs; a thread's link
/// opens its page; a run's page links its thread.
#[test]
fn the_threads_page_lists_a_thread_and_its_link_opens_the_threads_page() {
    let Some(case) = browser_case(
        "the_threads_page_lists_a_thread_and_its_link_opens_the_threads_page",
        Kind::Sqlite,
    ) else {
        return;
    };
    let hello = "name = \"hello\"\nversion = \"1\"\n[[agents]]\nrole = \"greeter\"\n\
                 kind = \"template\"\ntemplate = \"Hello {{ input.name }}\"\n";
    let console = Console::start(&case, &[("hello", hello.to_owned())], "1", false);
    let thread = "support chat/42";
    let mut runs = vec![];
    for name in ["Ada", "Grace"] {
        let input = format!(r#"{{"name": "{name}"}}"#);
        runs.push(console.submit_with(&case, "hello", &input, false, &["--thread", thread]));
    }
    console.submit_with(
        &case,
        "hello",
        r#"{"name": "Lin"}"#,
        false,
        &["--thread", "other"],
    );
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page("/")).await.unwrap();
        b.wait_for_text("h1", "Runs", WAIT).await.unwrap();
        b.click("header nav a[href='/threads']").await.unwrap();
        b.wait_for_text("h1", "Threads", WAIT).await.unwrap();
        let table = b.text("table.threads").await.unwrap();
        assert!(table.contains(thread) && table.contains("other"), "{table}");
        let row = b
            .execute(
                "for (const a of document.querySelectorAll('table.threads a')) \
                 { if (a.textContent === arguments[0]) return a.closest('tr').innerText; } \
                 return null;",
                vec![thread.into()],
            )
            .await
            .unwrap();
        let row = row.as_str().unwrap_or_default();
        assert!(row.contains("\t2\t"), "two runs: {row:?}");
        assert_fits(&b, "the threads page").await;
        b.execute(
            "for (const a of document.querySelectorAll('table.threads a')) \
             { if (a.textContent === arguments[0]) a.click(); }",
            vec![thread.into()],
        )
        .await
        .unwrap();
        // (The threads page's heading says "Threads": wait for the thread's.)
        b.wait_for_text("h1", thread, WAIT).await.unwrap();
        assert!(
            b.current_url()
                .await
                .unwrap()
                .ends_with("/threads/support%20chat%2F42"),
            "the thread's own page"
        );
        let main = reload_until(&b, "both runs' outputs", |t| {
            t.contains("Hello Ada") && t.contains("Hello Grace")
        })
        .await;
        assert!(!main.contains("Hello Lin"), "{main}");

        // A run's page links its thread.
        b.goto(&console.page(&format!("/runs/{}", runs[0])))
            .await
            .unwrap();
        b.wait_for_text("dl.header", thread, WAIT).await.unwrap();
        b.click("dl.header a[href^='/threads/']").await.unwrap();
        b.wait_for_text("h1", thread, WAIT).await.unwrap();
    });
}

#[test]
fn a_childs_review_names_its_parent_and_its_approval_from_the_waits_page_lets_the_parent_go_on() {
    let Some(case) = browser_case("a_childs_review_names_its_parent_and_its_approval_from_the_waits_page_lets_the_parent_go_on", Kind::Sqlite) else {
        return;
    };
    let note = "name = \"note\"\nversion = \"1\"\n[[agents]]\nrole = \"draft\"\n\
                kind = \"template\"\ntemplate = \"a note on {{ input.topic }}\"\nreview = true\n";
    let brief = "name = \"brief\"\nversion = \"1\"\n[[agents]]\nrole = \"notes\"\n\
                 kind = \"children\"\ncrew = \"note.toml\"\n\
                 children = [{ key = \"tide\", input = { topic = \"tides\" } }]\n\
                 [[agents]]\nrole = \"edit\"\nkind = \"template\"\n\
                 template = \"brief: {{ outputs.notes[0].output }}\"\n";
    let crews = [("note", note.to_owned()), ("brief", brief.to_owned())];
    let console = Console::start(&case, &crews, "2", false);
    let parent = console.submit(&case, "brief", "{}", false);
    let approve = "form:has(input[name=decision][value=approve])";
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page("/waits")).await.unwrap();
        let card = reload_until(&b, "the child's review", |t| t.contains("a note on tides")).await;
        assert!(card.contains("note v1"), "the child's crew: {card}");
        // The card names the parent chain, and links the parent.
        let chain = b.text("section.wait dd.parents").await.unwrap();
        assert!(chain.contains("key tide of run"), "{chain}");
        assert!(chain.contains(&parent[..8]), "{chain}");
        b.fill(&format!("{approve} input[name=reason]"), "reads well")
            .await
            .unwrap();
        click_and_land(&b, &format!("{approve} button"), "the review's form").await;
        // The child finishes, its join wakes the parent, the parent ends.
        b.goto(&console.page(&format!("/runs/{parent}")))
            .await
            .unwrap();
        b.wait_for_text("dl.header", "succeeded", WAIT)
            .await
            .unwrap();
        let steps = b.text("table.steps").await.unwrap();
        assert!(steps.contains("edit"), "{steps}");
    });
    let run = case.show(&parent);
    assert_eq!(step(&run, 1)["output"], "brief: a note on tides", "{run:#}");
}
