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

/// A template crew: one step.
pub const GREET: &str = r#"
name = "greet"
version = "1"

[[agents]]
role = "greeter"
kind = "template"
template = "Hello {{ input.name }}"
"#;

/// A command step, then a template step reading its output.
pub const PIPELINE: &str = r#"
name = "pipeline"
version = "1"

[[agents]]
role = "counter"
kind = "command"
command = ["sh", "-c", 'cat > /dev/null; echo "{\"n\": 1}"']

[[agents]]
role = "writer"
kind = "template"
template = "n={{ outputs.counter.n }} for {{ input.name }}"
"#;

/// A command that fails permanently: the run ends `failed`.
pub const BROKEN: &str = r#"
name = "broken"
version = "1"

[[agents]]
role = "fails"
kind = "command"
command = ["sh", "-c", "cat > /dev/null; echo nope >&2; exit 2"]
permanent_exit_codes = [2]
"#;

/// A command that takes a while: for concurrency tests.
pub const SLOW: &str = r#"
name = "slow"
version = "1"

[[agents]]
role = "sleeper"
kind = "command"
command = ["sh", "-c", "cat > /dev/null; sleep 0.4; echo done"]
"#;

/// Fails permanently on its first attempt, succeeds on later ones: a
/// failed run that an operator's retry brings through.
pub const FLAKY: &str = r#"
name = "flaky"
version = "1"

[[agents]]
role = "first"
kind = "template"
template = "first for {{ input.name }}"

[[agents]]
role = "shaky"
kind = "command"
command = ["sh", "-c", 'cat > /dev/null; [ "$CAIRN_ATTEMPT" -ge 2 ] || { echo "attempt 1 fails" >&2; exit 2; }; echo "{\"attempt\": $CAIRN_ATTEMPT}"']
permanent_exit_codes = [2]
"#;

/// A template step a person reviews, then one that uses the reviewed
/// output: the run waits after step 0.
pub const REVIEW: &str = r#"
name = "review"
version = "1"

[[agents]]
role = "writer"
kind = "template"
template = "Draft on {{ input.topic }}{% for f in feedback %} [{{ f }}]{% endfor %}"
review = true

[[agents]]
role = "publisher"
kind = "template"
template = "PUBLISHED {{ outputs.writer }}"
"#;

/// A review whose wait is approved by its deadline (100 ms) if nobody answers.
pub const DEADLINE: &str = r#"
name = "deadline"
version = "1"

[[agents]]
role = "writer"
kind = "template"
template = "Draft on {{ input.topic }}"
review = true
wait_deadline_ms = 100
on_deadline = "approve"
"#;

/// An `llm` agent on the scripted provider (its script in `scripts/`).
pub const AGENT: &str = r#"
name = "agent"
version = "1"

[[agents]]
role = "clerk"
kind = "llm"
provider = "scripted"
script = "scripts/clerk.toml"

[[agents.tools]]
name = "echo"
parameters = { type = "object" }
command = ["sh", "-c", "cat"]
"#;

const CLERK_SCRIPT: &str = r#"
[[responses]]
text = "Echoing."
tool_calls = [{ id = "e1", name = "echo", arguments = { word = "hi" } }]

[[responses]]
text = "Done."
"#;

/// Writes the test crews into `dir` (plus a file that is not a crew).
pub fn write_crews(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("greet.toml"), GREET).unwrap();
    std::fs::write(dir.join("pipeline.toml"), PIPELINE).unwrap();
    std::fs::write(dir.join("broken.toml"), BROKEN).unwrap();
    std::fs::write(dir.join("slow.toml"), SLOW).unwrap();
    std::fs::write(dir.join("flaky.toml"), FLAKY).unwrap();
    std::fs::write(dir.join("review.toml"), REVIEW).unwrap();
    std::fs::write(dir.join("deadline.toml"), DEADLINE).unwrap();
    std::fs::write(dir.join("agent.toml"), AGENT).unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/clerk.toml"), CLERK_SCRIPT).unwrap();
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
        let db = TestDb::of(kind).await;
        let crews_dir = tempfile::tempdir().unwrap();
        write_crews(crews_dir.path());
        let engine = Engine::open(&db.url).await.unwrap();
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

    pub async fn post_json(&self, uri: &str, body: &Value) -> Reply {
        self.call(
            Method::POST,
            uri,
            &[("content-type", "application/json")],
            Some(body.to_string().into_bytes()),
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

    /// Executes a run to its end, as the runner would.
    pub async fn drive(&self, id: RunId) {
        self.engine
            .resume(id, ResumeOptions::default())
            .await
            .unwrap();
    }
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
