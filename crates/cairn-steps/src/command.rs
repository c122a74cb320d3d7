//! The `command` agent. The program runs in its own process group, reads the
//! step context as one JSON object on stdin and writes its output to stdout.
//! When the step ends for any reason (exit, timeout, cancel: the future is
//! dropped) the whole group is killed, so no orphan outlives its step.

use std::process::Stdio;

use async_trait::async_trait;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use cairn_core::{
    Agent, AgentDef, ErrorInfo, ErrorKind, EventKind, NewEvent, StepContext, StepOutput, Usage,
    BASE_ENV,
};

/// A stderr line starting with this, followed by
/// `{"input_tokens":N,"output_tokens":M}`, reports the step's token usage.
pub const USAGE_PREFIX: &str = "cairn-usage:";

/// How much of stderr a failure keeps.
const STDERR_TAIL: usize = 2000;

/// Which of Cairn's own environment variables a program sees. A program
/// starts from an empty environment: a step that prints its environment
/// must not store the server's API tokens or provider keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramEnv {
    /// Variables passed on beyond [`BASE_ENV`] (the crew's `env`).
    pub pass: Vec<String>,
    /// Pass everything except [`NEVER_PASSED`] (the crew's `inherit_env`).
    pub inherit: bool,
    /// The working directory, against which a relative program path (one
    /// with a `/`, such as `./tools/x.sh`) resolves too: the crew file's
    /// directory ([`cairn_core::CrewDef::dir`]); `None`, this process's.
    pub dir: Option<std::path::PathBuf>,
}

/// Never handed to a program, even with `inherit_env`: no step needs the
/// server's own credentials.
pub const NEVER_PASSED: &[&str] = &["CAIRN_API_TOKENS"];

impl ProgramEnv {
    pub fn of(def: &AgentDef) -> Self {
        ProgramEnv {
            pass: def.env.clone(),
            inherit: def.inherit_env,
            dir: None,
        }
    }

    /// The same, run in `dir` (the crew's directory, if it has one).
    pub fn in_dir(mut self, dir: Option<&str>) -> Self {
        self.dir = dir.map(std::path::PathBuf::from);
        self
    }

    /// The variables taken from `parent` (Cairn's environment), in order.
    pub fn select(
        &self,
        parent: impl IntoIterator<Item = (String, String)>,
    ) -> Vec<(String, String)> {
        parent
            .into_iter()
            .filter(|(k, _)| {
                !NEVER_PASSED.contains(&k.as_str())
                    && (self.inherit
                        || BASE_ENV.contains(&k.as_str())
                        || self.pass.iter().any(|p| p == k))
            })
            .collect()
    }
}

/// Runs a program as a step.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    argv: Vec<String>,
    permanent_exit_codes: Vec<i32>,
    env: ProgramEnv,
    /// Its output may ask for children (`delegate`).
    spawns: bool,
    /// The key whose limits it runs under (`limit_key`), if any.
    key: Option<String>,
    /// The limits its crew declares for that key (`limits`).
    limits: Option<cairn_core::KeyLimits>,
}

impl CommandAgent {
    pub fn new(argv: Vec<String>) -> Self {
        CommandAgent {
            argv,
            permanent_exit_codes: vec![],
            env: ProgramEnv::default(),
            spawns: false,
            key: None,
            limits: None,
        }
    }

    /// Runs under the limits of key `key` (`cairn limits set`): a permit
    /// before the program starts, given back when it ends.
    pub fn limited_by(mut self, key: Option<String>) -> Self {
        self.key = key;
        self
    }

    /// Declares `limits` for its key (a crew's `limits`), applied unless
    /// an operator set the key's own.
    pub fn declaring(mut self, limits: Option<cairn_core::KeyLimits>) -> Self {
        self.limits = limits;
        self
    }

    /// Which of Cairn's variables the program sees besides the base.
    pub fn env(mut self, env: ProgramEnv) -> Self {
        self.env = env;
        self
    }

    /// Whether its output may ask for child runs ([`crate::SPAWN_KEY`]): a
    /// step with `delegate`. After the children settled the program does
    /// not run again; the step's output is their outcomes.
    pub fn spawns(mut self, spawns: bool) -> Self {
        self.spawns = spawns;
        self
    }

    /// Exit codes that mean "retrying will not help".
    pub fn permanent_exit_codes(mut self, codes: Vec<i32>) -> Self {
        self.permanent_exit_codes = codes;
        self
    }
}

/// Asks the kernel to SIGKILL the program when the process that started it
/// dies (Linux `PR_SET_PDEATHSIG`). The group kill below covers every normal
/// end of a step; this covers the one it cannot: our own process being
/// SIGKILLed, which would otherwise leave the program running beside its
/// re-run. It reaches the program itself, not processes it forked.
///
/// A parent that dies between the fork and the `prctl` sends no signal: the
/// child would run its side effect as an orphan while a takeover runs it
/// again. So after setting the signal the child checks that its parent is
/// still the process that spawned it, and does not exec if not.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    let spawner = nix::unistd::getpid();
    let pause = pause_before_pdeathsig();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2), getppid(2) and (in tests) nanosleep(2), which are
    // async-signal-safe; the errors are made from an errno, without
    // allocating.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != spawner {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Test-only: `pause_before_pdeathsig:MS` in `CAIRN_FAILPOINTS` holds the
/// forked program that long before it asks for its parent-death signal, so
/// a test can kill Cairn inside the window the parent check closes.
#[cfg(all(target_os = "linux", feature = "failpoints"))]
fn pause_before_pdeathsig() -> Option<std::time::Duration> {
    let spec = std::env::var("CAIRN_FAILPOINTS").ok()?;
    spec.split(',')
        .find_map(|p| {
            p.trim()
                .strip_prefix("pause_before_pdeathsig:")?
                .parse()
                .ok()
        })
        .map(std::time::Duration::from_millis)
}

#[cfg(all(target_os = "linux", not(feature = "failpoints")))]
fn pause_before_pdeathsig() -> Option<std::time::Duration> {
    None
}

/// Kills a process group when dropped.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // ESRCH (already gone) is the normal case after a clean exit.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.len() <= STDERR_TAIL {
        return text.to_owned();
    }
    let mut start = text.len() - STDERR_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// The output a program printed: JSON if it parses, else the trimmed text.
pub fn parse_output(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => v,
        Err(_) => Value::String(text.trim().to_owned()),
    }
}

fn parse_usage(stderr: &[u8]) -> Option<Usage> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter_map(|l| l.trim().strip_prefix(USAGE_PREFIX))
        .filter_map(|json| serde_json::from_str::<Usage>(json.trim()).ok())
        .reduce(|a, b| a + b)
}

/// What a finished program left behind.
#[derive(Debug)]
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `argv` in its own process group with `stdin`, the variables `base`
/// selects from Cairn's environment and the `extra` ones, and waits for it. The group is killed when the returned future is dropped
/// (a timeout, a cancel), and the program dies with this process (Linux).
/// Shared by `command` steps and `llm` agents' command tools.
pub async fn run_program(
    argv: &[String],
    stdin: Vec<u8>,
    base: &ProgramEnv,
    extra: &[(&str, String)],
) -> Result<Finished, ErrorInfo> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| ErrorInfo::new(ErrorKind::Crew, "the `command` is empty", false))?;
    let mut cmd = match &base.dir {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(ErrorInfo::new(
                    ErrorKind::Spawn,
                    format!(
                        "cannot start `{program}`: the crew's directory {} does not exist here \
                         (commands run in the directory of the crew file they were loaded from)",
                        dir.display()
                    ),
                    false,
                ));
            }
            let path = std::path::Path::new(program);
            let mut cmd = match path.is_relative() && program.contains('/') {
                true => Command::new(dir.join(path)),
                false => Command::new(program),
            };
            cmd.current_dir(dir);
            cmd
        }
        None => Command::new(program),
    };
    die_with_parent(&mut cmd);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd.env_clear().envs(base.select(std::env::vars()));
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| {
        let retryable = e.kind() != std::io::ErrorKind::NotFound
            && e.kind() != std::io::ErrorKind::PermissionDenied;
        ErrorInfo::new(
            ErrorKind::Spawn,
            format!("cannot start `{program}`: {e}"),
            retryable,
        )
    })?;
    let _group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
    let pipe = child.stdin.take();
    let write = async move {
        if let Some(mut pipe) = pipe {
            // A program that ignores stdin may exit first: EPIPE is fine.
            let _ = pipe.write_all(&stdin).await;
            let _ = pipe.shutdown().await;
        }
    };
    let ((), out) = tokio::join!(write, child.wait_with_output());
    let out = out.map_err(|e| {
        ErrorInfo::new(
            ErrorKind::Spawn,
            format!("waiting for `{program}`: {e}"),
            true,
        )
    })?;
    Ok(Finished {
        status: out.status,
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

/// How a program failed, with the tail of its stderr: `None` if it succeeded.
pub fn failure_message(program: &str, out: &Finished) -> Option<String> {
    if out.status.success() {
        return None;
    }
    let how = match out.status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was killed by a signal".to_owned(),
    };
    let stderr = tail(&out.stderr);
    Some(if stderr.is_empty() {
        format!("`{program}` {how}")
    } else {
        format!("`{program}` {how}: {stderr}")
    })
}

#[async_trait]
impl Agent for CommandAgent {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, ErrorInfo> {
        if let (true, Some(joined)) = (self.spawns, &cx.children) {
            return crate::children::outcomes(joined);
        }
        let payload = serde_json::to_vec(cx)
            .map_err(|e| ErrorInfo::new(ErrorKind::Spawn, format!("context: {e}"), false))?;
        let mut env = vec![
            ("CAIRN_RUN_ID", cx.run_id.to_string()),
            ("CAIRN_STEP_IDX", cx.step.idx.to_string()),
            ("CAIRN_STEP_ROLE", cx.step.role.to_string()),
            ("CAIRN_ATTEMPT", cx.step.attempt.to_string()),
        ];
        if let Some(tp) = &cx.traceparent {
            env.push(("TRACEPARENT", tp.clone()));
        }
        let permit = match (&self.key, &cx.journal) {
            (Some(key), Some(journal)) => {
                let declared =
                    cairn_core::Declared::of(self.limits.as_ref(), cx.key_limits.as_deref(), key);
                crate::permit::take(journal, key, declared).await?
            }
            _ => None,
        };
        let out = run_program(&self.argv, payload, &self.env, &env).await;
        if let (Some(permit), Some(journal)) = (permit, &cx.journal) {
            // Best effort: a permit not given back counts until the end of
            // the run's lease.
            let _ = journal.release(&permit, 0).await;
        }
        let out = out?;
        let usage = parse_usage(&out.stderr);
        if let (Some(u), Some(journal)) = (usage, &cx.journal) {
            // What the program spent counts in the run's budget whether it
            // succeeded or not. Best effort: a run whose lease is gone
            // fails at its commit anyway.
            let event = NewEvent::new(
                EventKind::UsageReported,
                serde_json::json!({"idx": cx.step.idx, "attempt": cx.step.attempt,
                                   "input_tokens": u.input_tokens,
                                   "output_tokens": u.output_tokens}),
            );
            let _ = journal.event(event).await;
        }
        let program = self.argv.first().map_or("", String::as_str);
        if let Some(message) = failure_message(program, &out) {
            let permanent = out
                .status
                .code()
                .is_some_and(|c| self.permanent_exit_codes.contains(&c));
            return Err(ErrorInfo::new(ErrorKind::ExitStatus, message, !permanent));
        }
        let output = parse_output(&out.stdout);
        if self.spawns {
            if let Some(spawn) = crate::children::requested(&output)? {
                if spawn.children.is_empty() {
                    let none = crate::children::none_listed(cairn_core::JoinRule::All, None);
                    return crate::children::outcomes(&none);
                }
                return Err(spawn.into_error());
            }
        }
        Ok(StepOutput { output, usage })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{Attempt, PreviousOutput, Role, RunId, StepIdx, StepRef};
    use serde_json::json;

    fn cx() -> StepContext {
        StepContext {
            journal: None,
            budget: None,
            prices: None,
            rolls_up: false,
            thread_budget: None,
            tenant: None,
            thread_id: None,
            crew: None,
            key_limits: None,
            traceparent: None,
            run_id: RunId::new(),
            input: json!({"topic": "rust"}),
            step: StepRef {
                idx: StepIdx(1),
                role: Role::new("writer"),
                attempt: Attempt(1),
            },
            thread: vec![],
            previous: vec![PreviousOutput {
                idx: StepIdx(0),
                role: Role::new("researcher"),
                output: json!("notes"),
            }]
            .into(),
            feedback: vec![],
            answers: Default::default(),
            children: None,
        }
    }

    fn sh(script: &str) -> CommandAgent {
        CommandAgent::new(vec!["sh".into(), "-c".into(), script.into()])
    }

    #[tokio::test]
    async fn program_reads_context_on_stdin_and_json_output_is_kept() {
        let out = sh("cat")
            .run(&cx())
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(out.output["input"]["topic"], "rust");
        assert_eq!(
            out.output["step"],
            json!({"idx": 1, "role": "writer", "attempt": 1})
        );
        assert_eq!(out.output["previous"][0]["output"], "notes");
    }

    #[tokio::test]
    async fn text_output_is_trimmed_and_usage_reported() {
        let agent = sh(
            "echo '  hello  '; echo 'cairn-usage: {\"input_tokens\": 7, \"output_tokens\": 3}' >&2",
        );
        let out = agent.run(&cx()).await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(out.output, json!("hello"));
        assert_eq!(
            out.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 3,
                cost_usd: Default::default(),
            })
        );
    }

    #[tokio::test]
    async fn non_zero_exit_is_a_retryable_failure_with_stderr_tail() {
        let err = sh("echo 'it broke' >&2; exit 3").run(&cx()).await.err();
        let err = err.unwrap_or_else(|| panic!("expected failure"));
        assert_eq!(err.kind, ErrorKind::ExitStatus);
        assert!(err.retryable);
        assert!(
            err.message.contains("exited with status 3: it broke"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn listed_exit_codes_are_permanent() {
        let agent = sh("exit 64").permanent_exit_codes(vec![64]);
        let err = agent
            .run(&cx())
            .await
            .err()
            .unwrap_or_else(|| panic!("expected failure"));
        assert!(!err.retryable);
        let other = sh("exit 65").permanent_exit_codes(vec![64]);
        let err = other
            .run(&cx())
            .await
            .err()
            .unwrap_or_else(|| panic!("expected failure"));
        assert!(err.retryable);
    }

    #[tokio::test]
    async fn missing_program_is_permanent() {
        let agent = CommandAgent::new(vec!["/nonexistent/cairn-test-program".into()]);
        let err = agent
            .run(&cx())
            .await
            .err()
            .unwrap_or_else(|| panic!("expected failure"));
        assert_eq!(err.kind, ErrorKind::Spawn);
        assert!(!err.retryable);
    }

    #[tokio::test]
    async fn dropping_the_step_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let pidfile = dir.path().join("grandchild.pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let agent = sh(&script);
        let cx = cx();
        let run = agent.run(&cx);
        // Cut the step off (as a timeout or cancel does) once the grandchild exists.
        let cut = async {
            while !pidfile.exists() {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        tokio::select! {
            _ = run => panic!("the step should not finish"),
            _ = cut => {}
        }
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        // The grandchild must be gone (or a zombie awaiting its reaper) shortly.
        let mut gone = false;
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(gone, "grandchild {pid} survived its step");
    }

    /// The names a program sees, run as a step with `env`.
    async fn visible_names(env: ProgramEnv) -> Vec<String> {
        let agent = CommandAgent::new(vec!["sh".into(), "-c".into(), "cat >/dev/null; env".into()])
            .env(env);
        let out = agent.run(&cx()).await.unwrap_or_else(|e| panic!("{e:?}"));
        let text = out.output.as_str().unwrap_or_default().to_owned();
        text.lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn a_program_gets_a_clean_environment_unless_its_crew_names_more() {
        // Cargo sets these for every test process: they stand for the
        // server's tokens and keys, which a step must not see by default.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let names = visible_names(ProgramEnv::default()).await;
        assert!(names.iter().any(|n| n == "PATH"), "{names:?}");
        assert!(names.iter().any(|n| n == "CAIRN_STEP_ROLE"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("CARGO_")), "{names:?}");

        let named = ProgramEnv {
            pass: vec!["CARGO_MANIFEST_DIR".into()],
            inherit: false,
            dir: None,
        };
        let names = visible_names(named).await;
        assert!(names.iter().any(|n| n == "CARGO_MANIFEST_DIR"), "{names:?}");
        assert!(!names.iter().any(|n| n == "CARGO_PKG_NAME"), "{names:?}");

        let all = ProgramEnv {
            pass: vec![],
            inherit: true,
            dir: None,
        };
        let names = visible_names(all).await;
        assert!(names.iter().any(|n| n == "CARGO_PKG_NAME"), "{names:?}");
    }

    #[test]
    fn the_api_tokens_are_never_passed_even_with_inherit_env() {
        let parent = || {
            vec![
                ("CAIRN_API_TOKENS".to_owned(), "secret".to_owned()),
                ("PATH".to_owned(), "/bin".to_owned()),
                ("OPENAI_API_KEY".to_owned(), "sk".to_owned()),
            ]
        };
        let all = ProgramEnv {
            pass: vec!["CAIRN_API_TOKENS".into()],
            inherit: true,
            dir: None,
        };
        let got: Vec<String> = all.select(parent()).into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, ["PATH", "OPENAI_API_KEY"]);
        let clean: Vec<String> = ProgramEnv::default()
            .select(parent())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(clean, ["PATH"]);
    }
}
