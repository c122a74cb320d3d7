//! Shared helpers: a per-test case (database + temp dir), running the real
//! `cairn` binary, writing crew files, and reading the steps' execution log.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

pub use cairn_testkit::{Kind, TestDb};

/// The binary under test (with crash points compiled in).
pub const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

/// A counting step: appends its index to `executions.log` next to the
/// script, reads its context, works briefly and prints JSON naming itself.
/// `sh step.sh fail` fails instead (exit 7 with a recognisable stderr). If
/// `TEST_SLOW_STEP` names this step, it writes its pid (= its process
/// group) to `slow.pid` and sleeps long enough to be killed mid-step.
const STEP_SCRIPT: &str = r#"#!/bin/sh
d=$(dirname "$0")
echo "$CAIRN_STEP_IDX" >> "$d/executions.log"
cat > /dev/null
if [ "${1:-}" = fail ]; then
  echo "some noise first" >&2
  echo "boom: step $CAIRN_STEP_IDX is on fire" >&2
  exit 7
fi
if [ "$CAIRN_STEP_IDX" = "${TEST_SLOW_STEP:-none}" ]; then
  echo $$ > "$d/slow.pid"
  sleep 10
fi
sleep 0.02
printf '{"step": %s, "role": "%s"}\n' "$CAIRN_STEP_IDX" "$CAIRN_STEP_ROLE"
"#;

/// What a `cairn` invocation did.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics (showing both streams) unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(self, code: i32) -> Out {
        assert_eq!(
            self.code(),
            Some(code),
            "expected exit code {code}, got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics unless the process was killed by SIGKILL (a failpoint).
    #[track_caller]
    pub fn expect_sigkill(self) -> Out {
        assert_eq!(
            self.status.signal(),
            Some(9),
            "expected death by SIGKILL, got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Stdout as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts stderr is exactly one line and contains every `needle`.
    #[track_caller]
    pub fn expect_one_line_error(&self, needles: &[&str]) {
        let lines: Vec<&str> = self.stderr.trim_end().lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "expected a one-line message on stderr, got:\n{}",
            self.stderr
        );
        self.expect_stderr(needles);
    }

    /// Asserts stderr contains every `needle`.
    #[track_caller]
    pub fn expect_stderr(&self, needles: &[&str]) {
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr does not mention {n:?}:\n{}",
                self.stderr
            );
        }
    }
}

/// A test's own database and directory.
pub struct Case {
    pub db: TestDb,
    pub dir: tempfile::TempDir,
}

/// A fresh database of `kind` (blocking, so tests stay plain `#[test]`s).
pub fn test_db(kind: Kind) -> TestDb {
    match kind {
        Kind::Sqlite => TestDb::sqlite(),
        Kind::Postgres => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(TestDb::postgres()),
    }
}

/// A database kind and what its commits survive: `process` adds
/// `?durability=process` to the case's URL (DESIGN.md, "Storage").
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub kind: Kind,
    pub process_durability: bool,
}

impl From<Kind> for Setup {
    fn from(kind: Kind) -> Setup {
        Setup {
            kind,
            process_durability: false,
        }
    }
}

impl Case {
    pub fn new(setup: impl Into<Setup>) -> Case {
        let setup = setup.into();
        let mut db = test_db(setup.kind);
        if setup.process_durability {
            let sep = if db.url.contains('?') { '&' } else { '?' };
            db.url = format!("{}{sep}durability=process", db.url);
        }
        Case::with_db(db)
    }

    /// A case on a database the test made itself.
    pub fn with_db(db: TestDb) -> Case {
        let dir = tempfile::tempdir().expect("temp dir");
        let dir_path = dir.path().canonicalize().expect("canonical temp dir");
        std::fs::write(dir_path.join("step.sh"), STEP_SCRIPT).expect("write step.sh");
        Case { db, dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir
            .path()
            .canonicalize()
            .expect("canonical temp dir")
            .join(name)
    }

    pub fn url(&self) -> &str {
        &self.db.url
    }

    /// The `cairn` binary, run in this case's directory with no inherited
    /// Cairn settings.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(CAIRN);
        cmd.current_dir(self.dir.path())
            .env_remove("CAIRN_DATABASE_URL")
            .env_remove("CAIRN_FAILPOINTS")
            .env_remove("CAIRN_LOG")
            .env_remove("TEST_SLOW_STEP")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `cairn ARGS` exactly as given (no `--db` added).
    pub fn raw(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut cmd = self.command();
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("spawn cairn");
        Out {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `cairn ARGS --db URL`.
    pub fn cairn(&self, args: &[&str]) -> Out {
        self.cairn_env(args, &[])
    }

    /// Runs `cairn ARGS --db URL` with extra environment variables.
    pub fn cairn_env(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--db", self.url()]);
        self.raw(&all, env)
    }

    /// Starts `cairn ARGS --db URL` in the background, output to files.
    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut cmd = self.command();
        cmd.args(args).args(["--db", self.url()]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdout(std::fs::File::create(self.path("bg.stdout")).expect("stdout file"))
            .stderr(std::fs::File::create(self.path("bg.stderr")).expect("stderr file"))
            .spawn()
            .expect("spawn cairn")
    }

    /// `cairn runs show ID --json`.
    #[track_caller]
    pub fn show(&self, id: &str) -> Value {
        self.cairn(&["runs", "show", id, "--json"])
            .expect_code(0)
            .json()
    }

    /// `cairn runs events ID --json`.
    #[track_caller]
    pub fn events(&self, id: &str) -> Value {
        self.cairn(&["runs", "events", id, "--json"])
            .expect_code(0)
            .json()
    }

    /// The events of run `id` of this kind.
    pub fn events_of(&self, id: &str, kind: &str) -> Vec<Value> {
        self.events(id)
            .as_array()
            .expect("an array of events")
            .iter()
            .filter(|e| e["kind"] == kind)
            .cloned()
            .collect()
    }

    /// The audit log's entries (`cairn audit --json`) of this action.
    pub fn audit_of(&self, action: &str) -> Vec<Value> {
        let all = self.cairn(&["audit", "--json"]).expect_code(0).json();
        all.as_array()
            .expect("an array of audit entries")
            .iter()
            .filter(|e| e["action"] == action)
            .cloned()
            .collect()
    }

    /// `cairn ARGS` with the failpoint `point`, which kills it.
    #[track_caller]
    pub fn killed_at(&self, args: &[&str], point: &str) {
        self.cairn_env(args, &[("CAIRN_FAILPOINTS", point)])
            .expect_sigkill();
    }

    /// `cairn run CREW --json`, which exits `code`: the run document.
    #[track_caller]
    pub fn run_json(&self, crew: &Path, code: i32) -> Value {
        let crew = crew.to_str().expect("a UTF-8 path");
        self.cairn(&["run", crew, "--json"])
            .expect_code(code)
            .json()
    }

    /// `cairn runs list --json`.
    #[track_caller]
    pub fn list(&self) -> Vec<Value> {
        match self
            .cairn(&["runs", "list", "--json"])
            .expect_code(0)
            .json()
        {
            Value::Array(runs) => runs,
            other => panic!("runs list --json is not an array: {other}"),
        }
    }

    /// `cairn submit CREW`: the new run's id.
    #[track_caller]
    pub fn submit(&self, crew: &std::path::Path) -> String {
        self.cairn(&["submit", crew.to_str().expect("a UTF-8 path")])
            .expect_code(0)
            .stdout
            .trim()
            .to_owned()
    }

    /// The id of the one run in the database.
    #[track_caller]
    pub fn only_run_id(&self) -> String {
        let runs = self.list();
        assert_eq!(runs.len(), 1, "expected exactly one run: {runs:?}");
        runs[0]["id"].as_str().expect("run id").to_owned()
    }

    /// `cairn runs fork ID --from-step STEP EXTRA`.
    pub fn fork(&self, id: &str, step: &str, extra: &[&str]) -> Out {
        let mut args = vec!["runs", "fork", id, "--from-step", step];
        args.extend(extra);
        self.cairn(&args)
    }

    /// `cairn runs continue ID --budget model_calls=+1 --by ops EXTRA`.
    pub fn continue_one_more_call(&self, id: &str, extra: &[&str]) -> Out {
        let mut args = vec![
            "runs",
            "continue",
            id,
            "--budget",
            "model_calls=+1",
            "--by",
            "ops",
        ];
        args.extend(extra);
        self.cairn(&args)
    }

    /// `cairn ARGS`, with `--server URL` or else `--db`.
    pub fn cairn_at(&self, server: Option<&str>, args: &[&str]) -> Out {
        match server {
            Some(url) => {
                let mut all = args.to_vec();
                all.extend(["--server", url]);
                self.raw(&all, &[])
            }
            None => self.cairn(args),
        }
    }

    /// Writes a file in the case's directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// A `command` agent running the counting step script.
    pub fn counting_agent(&self, role: &str) -> String {
        let script = self.path("step.sh");
        // The script reads TEST_SLOW_STEP: programs get only what the crew names.
        agent_command(role, &["sh", &script.display().to_string()]) + "env = [\"TEST_SLOW_STEP\"]\n"
    }

    /// A `command` agent running the counting step script, failing.
    pub fn failing_agent(&self, role: &str) -> String {
        let script = self.path("step.sh");
        agent_command(role, &["sh", &script.display().to_string(), "fail"])
    }

    /// A crew file `crew.toml` of `n` counting steps `step-00`, `step-01`, ….
    pub fn counting_crew(&self, n: u32) -> PathBuf {
        let agents: Vec<String> = (0..n)
            .map(|i| self.counting_agent(&format!("step-{i:02}")))
            .collect();
        self.write("crew.toml", &crew_toml("counting", &agents))
    }

    /// Step indices in the order the steps started.
    pub fn executions(&self) -> Vec<u32> {
        std::fs::read_to_string(self.path("executions.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().expect("step idx in the log"))
            .collect()
    }

    /// How often step `idx` started.
    pub fn executed(&self, idx: u32) -> usize {
        self.executions().iter().filter(|&&i| i == idx).count()
    }

    /// The SQLite file of this case (SQLite cases only).
    pub fn sqlite_file(&self) -> PathBuf {
        sqlite_path(self.url())
    }
}

/// The file a `sqlite://` URL names.
pub fn sqlite_path(url: &str) -> PathBuf {
    let path = url.strip_prefix("sqlite://").expect("a sqlite:// URL");
    PathBuf::from(path.split('?').next().unwrap_or(path))
}

/// A TOML string literal (JSON string escapes are valid TOML).
pub fn q(s: &str) -> String {
    serde_json::to_string(s).expect("string to JSON")
}

/// A crew file's text.
pub fn crew_toml(name: &str, agents: &[String]) -> String {
    let mut toml = format!("name = {}\nversion = \"1\"\n", q(name));
    for a in agents {
        toml.push('\n');
        toml.push_str(a);
    }
    toml
}

/// An `[[agents]]` block of kind `command`.
pub fn agent_command(role: &str, argv: &[&str]) -> String {
    let argv: Vec<String> = argv.iter().map(|a| q(a)).collect();
    format!(
        "[[agents]]\nrole = {}\nkind = \"command\"\ncommand = [{}]\n",
        q(role),
        argv.join(", ")
    )
}

/// An `[[agents]]` block of kind `command` running `sh -c SCRIPT`.
pub fn agent_sh(role: &str, script: &str) -> String {
    agent_command(role, &["sh", "-c", script])
}

/// An `[[agents]]` block of kind `template`.
pub fn agent_template(role: &str, template: &str) -> String {
    format!(
        "[[agents]]\nrole = {}\nkind = \"template\"\ntemplate = {}\n",
        q(role),
        q(template)
    )
}

/// An `[[agents]]` block of kind `llm` on the scripted provider, its
/// script the file at `script`.
pub fn agent_scripted(role: &str, script: &Path, instructions: &str) -> String {
    format!(
        "[[agents]]\nrole = {}\nkind = \"llm\"\nprovider = \"scripted\"\nscript = {}\n\
         instructions = {}\n",
        q(role),
        q(&script.display().to_string()),
        q(instructions)
    )
}

/// A scripted model's script: one tool call (`call`, an inline TOML
/// table) said with `text`, then the answer `answer`.
pub fn one_call_script(text: &str, call: &str, answer: &str) -> String {
    format!(
        "[[responses]]\ntext = {}\ntool_calls = [{call}]\n\n[[responses]]\ntext = {}\n",
        q(text),
        q(answer)
    )
}

/// An `[[agents.tools]]` block: `name` runs `argv`, its parameters any
/// object; `idempotent` or not.
pub fn tool_block(name: &str, argv: &[&str], idempotent: bool) -> String {
    let argv: Vec<String> = argv.iter().map(|a| q(a)).collect();
    format!(
        "\n[[agents.tools]]\nname = {}\nparameters = {{ type = \"object\" }}\n{}command = [{}]\n",
        q(name),
        if idempotent {
            "idempotent = true\n"
        } else {
            ""
        },
        argv.join(", ")
    )
}

/// An `[[agents]]` block of kind `children` running `crew`, with `more`
/// (TOML lines: `over`, `concurrency`, …).
pub fn agent_children(role: &str, crew: &str, more: &str) -> String {
    format!(
        "[[agents]]\nrole = {}\nkind = \"children\"\ncrew = {}\n{more}",
        q(role),
        q(crew)
    )
}

/// Writes `parent.toml`: a step `fan` over `input.items` running
/// `child.toml` (with `more` TOML lines), then a template step `join`.
pub fn fan_join_crew(case: &Case, more: &str, join: &str) -> PathBuf {
    let fan = agent_children(
        "fan",
        "child.toml",
        &format!("over = \"input.items\"\n{more}"),
    );
    let join = agent_template("join", join);
    case.write("parent.toml", &crew_toml("parent", &[fan, join]))
}

/// A worker's quick lease, heartbeat and poll (ms), for tests that kill.
pub const QUICK_LEASE: [&str; 6] = [
    "--lease-ms",
    "800",
    "--heartbeat-ms",
    "200",
    "--poll-ms",
    "50",
];

/// splitmix64, seeded: a soak's decisions (which process is killed, and
/// when).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The string `field` of each element of the JSON array `v`.
pub fn strs<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e[field].as_str().unwrap())
        .collect()
}

/// Asserts that `text` contains `part`, printing `text` if not.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{}", text);
}

/// How many of `events` (a JSON array) are of `kind`.
pub fn count_kind(events: &Value, kind: &str) -> usize {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .count()
}

/// Waits until `cond` holds, panicking with `what` after `limit`.
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// True if the process is gone or a zombie (dead, not yet reaped).
pub fn is_dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Reads a pid written by a step script.
pub fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .trim()
        .parse()
        .expect("a pid")
}

/// A step row's field, for messages.
pub fn step(run: &Value, idx: usize) -> &Value {
    &run["steps"][idx]
}

/// A `cairn` process a test started: SIGKILLed (by its pid) when
/// dropped while still running, so a failing test leaves none behind.
pub struct Spawned(pub Child);

impl Spawned {
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.0.id() as i32)
    }

    /// Its exit, within 60 s (then it is killed and the test fails).
    #[track_caller]
    pub fn wait(&mut self, what: &str) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{what}: the process did not exit within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = kill(self.pid(), Signal::SIGKILL);
            let _ = self.0.wait();
        }
    }
}

/// A `cairn serve` a test started, SIGKILLed (by its pid) when dropped.
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub listen: String,
    _server: Spawned,
}

/// Starts `cairn serve --listen ADDR --db URL ARGS` on a free loopback
/// port with `env`, its output in `CASE/serve.out` and `serve.err`, and
/// waits until it listens.
pub fn serve(case: &Case, args: &[&str], env: &[(&str, &str)]) -> Served {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = case.command();
    cmd.args(["serve", "--listen", &listen, "--db", case.url()])
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(case.path("serve.out")).expect("stdout file"))
        .stderr(std::fs::File::create(case.path("serve.err")).expect("stderr file"));
    let server = Spawned(cmd.spawn().expect("spawn cairn serve"));
    wait_until("the server to listen", Duration::from_secs(30), || {
        std::net::TcpStream::connect(&listen).is_ok()
    });
    Served {
        url: format!("http://{listen}"),
        listen,
        _server: server,
    }
}

/// The model, answering at once, its crew file `crew.toml` (one attempt:
/// a 429 that spent one would fail the run) and its key.
pub fn model_and_crew(case: &Case) -> (cairn_testkit::SlowModel, String, String) {
    let model = cairn_testkit::SlowModel::start(&["fine"], Duration::from_millis(5)).unwrap();
    model.release();
    let crew = llm_crew(&model.base_url, "retry = { max_attempts = 1 }\n");
    let crew = case.write("crew.toml", &crew);
    let key = format!("provider=openai,url={},key=OPENAI_API_KEY", model.base_url);
    (model, crew.to_str().unwrap().to_owned(), key)
}

/// The child crew `researcher` (its step `dig` runs `script`) and the
/// parent: an `llm` lead on the model at `base_url` that may delegate to
/// it, then a template wrapping the lead's answer; the parent's path.
pub fn delegate_crews(case: &Case, base_url: &str, script: &str) -> String {
    case.write(
        "child.toml",
        &crew_toml("researcher", &[agent_sh("dig", script)]),
    );
    let lead = format!(
        "[[agents]]\nrole = \"lead\"\nkind = \"llm\"\nprovider = \"openai\"\nmodel = \"lead-1\"\n\
         base_url = {}\ndelegate = [\"child.toml\"]\n",
        q(base_url)
    );
    let wrap = agent_template("wrap", "done: {{ outputs.lead }}");
    let crew = case.write("parent.toml", &crew_toml("parent", &[lead, wrap]));
    crew.display().to_string()
}

/// Writes each `(file, TOML)` of `files` under `CASE/crews` and returns
/// that directory.
pub fn crews_dir(case: &Case, files: &[(&str, &str)]) -> PathBuf {
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    for (file, text) in files {
        std::fs::write(crews.join(file), text).unwrap();
    }
    crews
}

/// [`serve`] of the crews in `crews` with `token` its one API token.
pub fn serve_crews(case: &Case, crews: &Path, token: &str) -> Served {
    serve(
        case,
        &["--crews", crews.to_str().unwrap()],
        &[("CAIRN_API_TOKENS", token)],
    )
}

/// `cairn ARGS --server URL --token TOKEN` (no --db: it must not be needed).
pub fn remote(case: &Case, served: &Served, token: &str, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--server", &served.url, "--token", token]);
    case.raw(&all, &[])
}

/// The path of `examples/NAME` in the repository.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// The crew `greet`: one template step greeting `input.name`.
pub fn greet_crew() -> String {
    crew_toml(
        "greet",
        &[agent_template("greeter", "Hello {{ input.name }}")],
    )
}

/// The crew `fail`: its only step exits 7 ("broken on purpose"), no retry.
pub fn fail_crew() -> String {
    let breaker = agent_sh(
        "breaker",
        "cat > /dev/null; echo 'broken on purpose' >&2; exit 7",
    );
    crew_toml("fail", &[breaker + "retry = { max_attempts = 1 }\n"])
}

/// A crew whose first step is an `llm` agent (role `writer`) on an
/// OpenAI-speaking server at `base_url`, followed by `more` (TOML).
pub fn llm_crew(base_url: &str, more: &str) -> String {
    format!(
        "name = \"slow\"\nversion = \"1\"\n[[agents]]\nrole = \"writer\"\nkind = \"llm\"\n\
         provider = \"openai\"\nmodel = \"slow-1\"\nbase_url = \"{base_url}\"\n{more}"
    )
}

/// `cairn_store_statements_total` from a server's `/metrics`: the
/// statements that process sent to its database so far.
pub fn store_statements(listen: &str) -> u64 {
    let text = metrics(listen);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("cairn_store_statements_total ")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no cairn_store_statements_total in:\n{text}"))
}

/// `GET PATH` on a server that needs no token, as JSON.
pub fn get(listen: &str, path: &str) -> Value {
    let body = get_text(listen, path);
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// `GET PATH` on a server that needs no token: the body.
pub fn get_text(listen: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(listen).expect("connect to the server");
    write!(s, "GET {path} HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n").expect("send a GET");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    text.split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned())
}

/// `POST PATH` of a URL-encoded form `body` on a server that needs no
/// token (the console's forms): the status line and the body.
pub fn post_form(listen: &str, path: &str, body: &str) -> (String, String) {
    post(listen, path, "application/x-www-form-urlencoded", body)
}

/// `POST PATH` of `body` (of `content_type`) on a server that needs no
/// token: the status line and the body.
pub fn post(listen: &str, path: &str, content_type: &str, body: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(listen).expect("connect to the server");
    write!(
        s,
        "POST {path} HTTP/1.0\r\nhost: 127.0.0.1\r\n\
         content-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send a POST");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, body.to_owned())
}

/// A server's `/metrics` text.
pub fn metrics(listen: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(listen).expect("connect to /metrics");
    s.write_all(b"GET /metrics HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n")
        .expect("ask for /metrics");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read /metrics");
    text
}

/// A number from the environment (a campaign's size), if set and valid.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// An `Engine` on the case's database, in this process, with the runtime
/// that drives it (for tests that submit or read thousands of runs).
pub fn in_process(case: &Case) -> (tokio::runtime::Runtime, cairn::Engine) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let engine = rt
        .block_on(cairn::Engine::open(case.url()))
        .expect("open the database");
    (rt, engine)
}

/// A run's three logged steps (`RUN IDX` lines of `log`), each exactly once.
#[track_caller]
pub fn ran_each_step_once(log: &Path, id: &str) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut steps: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{id} ")))
        .collect();
    steps.sort_unstable();
    assert_eq!(steps, ["0", "1", "2"], "run {id}: its steps ran {steps:?}");
}

/// Tests that load the machine on purpose (several workers, hundreds of
/// processes, kill campaigns) hold this shared; a test that measures time
/// against a bound holds it alone, so its bound is not measured against
/// another test's load (this machine has two cores). Light tests take
/// nothing and run beside either.
static LOAD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held by a test that loads the machine.
pub fn loads_the_machine() -> std::sync::RwLockReadGuard<'static, ()> {
    LOAD.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Held by a test that measures time against a bound: no loading test
/// runs meanwhile.
pub fn timed_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    LOAD.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a soak's summary line says of its losses: `N lost, M repeated`.
pub fn losses(lost: &[String], repeated: &[String]) -> String {
    format!("{} lost, {} repeated", lost.len(), repeated.len())
}

/// A soak's verdict: no run lost, no step repeated.
#[track_caller]
pub fn assert_no_losses(lost: &[String], repeated: &[String]) {
    assert!(lost.is_empty(), "lost: {lost:#?}");
    assert!(repeated.is_empty(), "repeated: {repeated:#?}");
}
