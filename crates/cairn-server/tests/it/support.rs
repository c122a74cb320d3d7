//! Shared fixtures: crew files in a temp directory, an engine on a test
//! database, and a `call` helper that sends one request through the router.

use std::path::Path;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use cairn::{Engine, ResumeOptions, RunId};
use cairn_server::{AppState, Crews};
use cairn_testkit::{Kind, TestDb};
use serde_json::Value;
use tower::ServiceExt;

/// A crew file's text: `name`, version 1, then `agents` (TOML blocks).
pub fn crew(name: &str, agents: &[String]) -> String {
    let mut toml = format!("name = {name:?}\nversion = \"1\"\n");
    for a in agents {
        toml.push('\n');
        toml.push_str(a);
    }
    toml
}

/// An `[[agents]]` block: `role` of `kind`, then `more` (TOML lines).
pub fn agent(role: &str, kind: &str, more: &str) -> String {
    format!("[[agents]]\nrole = {role:?}\nkind = {kind:?}\n{more}")
}

/// A `command` agent running `sh -c SCRIPT`, then `more`.
pub fn sh(role: &str, script: &str, more: &str) -> String {
    agent(
        role,
        "command",
        &format!("command = [\"sh\", \"-c\", {script:?}]\n{more}"),
    )
}

/// A `template` agent, then `more`.
pub fn template(role: &str, template: &str, more: &str) -> String {
    agent(
        role,
        "template",
        &format!("template = {template:?}\n{more}"),
    )
}

/// A template crew: one step.
pub fn greet() -> String {
    crew(
        "greet",
        &[template("greeter", "Hello {{ input.name }}", "")],
    )
}

/// The crews every test server offers, by file name (plus the scripted
/// model of `agent`):
/// - `pipeline`: a command step, then a template step reading its output;
/// - `broken`: a command that fails permanently (the run ends `failed`);
/// - `slow`: a command that takes a while, for concurrency tests;
/// - `flaky`: fails permanently on its first attempt, succeeds on later
///   ones (a failed run that an operator's retry brings through);
/// - `review`: a template step a person reviews, then one that uses the
///   reviewed output (the run waits after step 0);
/// - `deadline`: a review whose wait is approved by its deadline (100 ms)
///   if nobody answers;
/// - `agent`: an `llm` agent on the scripted provider (its script in
///   `scripts/`).
fn crews() -> Vec<(&'static str, String)> {
    let permanent = "permanent_exit_codes = [2]\n";
    let counter = sh("counter", r#"cat > /dev/null; echo "{\"n\": 1}""#, "");
    let writer = template(
        "writer",
        "n={{ outputs.counter.n }} for {{ input.name }}",
        "",
    );
    let shaky = r#"cat > /dev/null; [ "$CAIRN_ATTEMPT" -ge 2 ] || { echo "attempt 1 fails" >&2; exit 2; }; echo "{\"attempt\": $CAIRN_ATTEMPT}""#;
    let draft = "Draft on {{ input.topic }}{% for f in feedback %} [{{ f }}]{% endfor %}";
    let deadline = "review = true\nwait_deadline_ms = 100\non_deadline = \"approve\"\n";
    let clerk = "provider = \"scripted\"\nscript = \"scripts/clerk.toml\"\n\n\
                 [[agents.tools]]\nname = \"echo\"\nparameters = { type = \"object\" }\n\
                 command = [\"sh\", \"-c\", \"cat\"]\n";
    vec![
        ("greet.toml", greet()),
        ("pipeline.toml", crew("pipeline", &[counter, writer])),
        (
            "broken.toml",
            crew(
                "broken",
                &[sh(
                    "fails",
                    "cat > /dev/null; echo nope >&2; exit 2",
                    permanent,
                )],
            ),
        ),
        (
            "slow.toml",
            crew(
                "slow",
                &[sh("sleeper", "cat > /dev/null; sleep 0.4; echo done", "")],
            ),
        ),
        (
            "flaky.toml",
            crew(
                "flaky",
                &[
                    template("first", "first for {{ input.name }}", ""),
                    sh("shaky", shaky, permanent),
                ],
            ),
        ),
        (
            "review.toml",
            crew(
                "review",
                &[
                    template("writer", draft, "review = true\n"),
                    template("publisher", "PUBLISHED {{ outputs.writer }}", ""),
                ],
            ),
        ),
        (
            "deadline.toml",
            crew(
                "deadline",
                &[template("writer", "Draft on {{ input.topic }}", deadline)],
            ),
        ),
        ("agent.toml", crew("agent", &[agent("clerk", "llm", clerk)])),
        (
            "scripts/clerk.toml",
            "[[responses]]\ntext = \"Echoing.\"\n\
             tool_calls = [{ id = \"e1\", name = \"echo\", arguments = { word = \"hi\" } }]\n\n\
             [[responses]]\ntext = \"Done.\"\n"
                .to_owned(),
        ),
    ]
}

/// Writes the test crews into `dir` (plus a file that is not a crew).
pub fn write_crews(dir: &Path) {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    for (file, text) in crews() {
        std::fs::write(dir.join(file), text).unwrap();
    }
    std::fs::write(dir.join("README.md"), "not a crew").unwrap();
}

/// A router on a fresh database with the test crews.
pub struct Api {
    pub app: Router,
    pub engine: Engine,
    pub db: TestDb,
    pub _crews_dir: tempfile::TempDir,
}

impl Api {
    pub async fn sqlite() -> Api {
        Api::with(Kind::Sqlite, |s| s).await
    }

    pub async fn with(kind: Kind, configure: impl FnOnce(AppState) -> AppState) -> Api {
        Api::on(TestDb::of(kind).await, configure).await
    }

    /// The API over `db` (a throwaway cluster's, say).
    pub async fn on(db: TestDb, configure: impl FnOnce(AppState) -> AppState) -> Api {
        let engine = Engine::open(&db.url).await.unwrap();
        Api::with_engine(db, engine, configure)
    }

    /// [`Api::on`] with an engine the test opened itself (other options).
    pub fn with_engine(
        db: TestDb,
        engine: Engine,
        configure: impl FnOnce(AppState) -> AppState,
    ) -> Api {
        let crews_dir = tempfile::tempdir().unwrap();
        write_crews(crews_dir.path());
        let crews = Crews::load_dir(crews_dir.path()).unwrap();
        let state = configure(AppState::new(engine.clone(), crews));
        Api {
            app: cairn_server::router(state),
            engine,
            db,
            _crews_dir: crews_dir,
        }
    }

    pub async fn get(&self, uri: &str) -> Reply {
        self.call(Method::GET, uri, &[], None).await
    }

    /// `GET uri`, which must answer the error `code` with `status`: its
    /// message (see [`Reply::assert_error`]).
    pub async fn get_error(&self, uri: &str, status: StatusCode, code: &str) -> String {
        self.get(uri).await.assert_error(status, code)
    }

    pub async fn post_json(&self, uri: &str, body: &Value) -> Reply {
        self.post_raw(uri, "application/json", body.to_string().into_bytes())
            .await
    }

    /// `POST uri` with `body` as it is, of the `content_type` given.
    pub async fn post_raw(&self, uri: &str, content_type: &str, body: Vec<u8>) -> Reply {
        self.call(
            Method::POST,
            uri,
            &[("content-type", content_type)],
            Some(body),
        )
        .await
    }

    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(body.map(Body::from).unwrap_or_else(Body::empty))
            .unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Reply {
            status,
            headers,
            text: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    /// Submits a run of `crew` and returns its id.
    pub async fn submit(&self, crew: &str, input: Value) -> RunId {
        let reply = self
            .post_json(
                "/v1/runs",
                &serde_json::json!({"crew": crew, "input": input}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.json()["id"].as_str().unwrap().parse().unwrap()
    }

    /// [`Api::submit`] with a bearer token.
    pub async fn submit_as(&self, token: &str, crew: &str, input: Value) -> RunId {
        let auth = format!("Bearer {token}");
        let body = serde_json::json!({"crew": crew, "input": input});
        let reply = self
            .call(
                Method::POST,
                "/v1/runs",
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
                Some(body.to_string().into_bytes()),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.json()["id"].as_str().unwrap().parse().unwrap()
    }

    /// Every wait, of any run.
    pub async fn waits(&self) -> Vec<cairn::WaitRecord> {
        self.engine.waits(&Default::default()).await.unwrap()
    }

    /// `POST /v1/waits/{wait}/answer` with `body`.
    pub async fn answer(&self, wait: impl std::fmt::Display, body: &Value) -> Reply {
        self.post_json(&format!("/v1/waits/{wait}/answer"), body)
            .await
    }

    /// Approves the first wait (of any run) as `by`.
    pub async fn approve_first_wait(&self, by: &str) {
        let wait = self.waits().await[0].id;
        self.engine
            .answer(wait, &cairn::Answer::Approve, by)
            .await
            .unwrap();
    }

    /// Submits a run of `crew` through the engine (not the API): its id.
    pub async fn submit_crew(&self, crew: &cairn::Crew, input: Value) -> RunId {
        let opts = Default::default();
        self.engine.submit(crew, input, opts).await.unwrap().run.id
    }

    /// Every run.
    pub async fn runs(&self) -> Vec<cairn::RunRecord> {
        self.engine.list(&Default::default()).await.unwrap()
    }

    /// Executes a run to its end, as the runner would.
    pub async fn drive(&self, id: RunId) {
        self.engine
            .resume(id, ResumeOptions::default())
            .await
            .unwrap();
    }
}

/// The string `field` of each element of the JSON array `v`.
pub fn strs<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    let each = v.as_array().unwrap().iter();
    each.map(|e| e[field].as_str().unwrap()).collect()
}

/// Asserts that `text` contains `part`, printing `text` if not.
/// Asserts each of `lines` is a whole line of `text` (a metrics page).
#[track_caller]
pub fn assert_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "missing `{line}` in:\n{text}"
        );
    }
}

#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{}", text);
}

/// A response, its body read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }

    /// Asserts a 200 response.
    #[track_caller]
    pub fn assert_ok(&self) {
        assert_eq!(self.status, StatusCode::OK, "{}", self.text);
    }

    /// Asserts a 200 response: its JSON body.
    #[track_caller]
    pub fn ok_json(&self) -> Value {
        self.assert_ok();
        self.json()
    }

    /// Asserts an error response: status, JSON content type and code.
    #[track_caller]
    pub fn assert_error(&self, status: StatusCode, code: &str) -> String {
        assert_eq!(self.status, status, "body: {}", self.text);
        assert!(
            self.content_type().starts_with("application/json"),
            "content type {:?}, body {}",
            self.content_type(),
            self.text
        );
        let body = self.json();
        assert_eq!(body["error"]["code"], code, "body: {}", self.text);
        let message = body["error"]["message"].as_str().unwrap().to_owned();
        assert!(!message.is_empty());
        message
    }
}

/// A real server on 127.0.0.1:0 over the test's database and crews (with
/// the options `configure` sets on top), running until [`Running::stop`].
pub struct Running {
    pub addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<Result<(), cairn_server::Error>>,
    pub db: TestDb,
    pub crews: tempfile::TempDir,
}

pub async fn serve_socket(
    db: TestDb,
    configure: impl FnOnce(cairn_server::ServeOptions) -> cairn_server::ServeOptions,
) -> Running {
    let crews = tempfile::tempdir().unwrap();
    write_crews(crews.path());
    let server = cairn_server::Server::bind(configure(cairn_server::ServeOptions {
        db_url: db.url.clone(),
        crews_dir: crews.path().to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        shutdown_grace: std::time::Duration::from_secs(5),
        ..cairn_server::ServeOptions::default()
    }))
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop,
        done,
        db,
        crews,
    }
}

/// A server on 127.0.0.1:0 (SQLite, no runner) with these options.
pub async fn start(
    configure: impl FnOnce(cairn_server::ServeOptions) -> cairn_server::ServeOptions,
) -> Running {
    serve_socket(TestDb::sqlite(), |o| {
        configure(cairn_server::ServeOptions {
            concurrency: 0,
            ..o
        })
    })
    .await
}

impl Running {
    pub async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(15), self.done)
            .await
            .expect("the server stops within its grace period")
            .unwrap()
            .unwrap();
    }
}
