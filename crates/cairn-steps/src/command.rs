//! The `command` agent. The program runs in its own process group, reads the
//! step context as one JSON object on stdin and writes its output to stdout.
//! When the step ends for any reason (exit, timeout, cancel: the future is
//! dropped) the whole group is killed, so no orphan outlives its step. If
//! this process dies instead, the program dies with it (Linux), and the
//! group, recorded before the program reads its context (`program_started`),
//! is ended by the process that takes the run over (`crate::group`).

use async_trait::async_trait;
use serde_json::Value;

use cairn_core::event::payload::UsageReported;
use cairn_core::Stop;
use cairn_core::{
    Agent, AgentDef, ErrorInfo, ErrorKind, EventData, NewEvent, StepContext, StepOutput, Usage,
    BASE_ENV,
};

use crate::group::RUN_ID_VAR;
use crate::program::{failure_message, Finished, Program};

/// A stderr line starting with this, followed by
/// `{"input_tokens":N,"output_tokens":M}`, reports the step's token usage.
pub const USAGE_PREFIX: &str = "cairn-usage:";

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

impl CommandAgent {
    /// Starts the program with its context (whole from the start: see
    /// `program::Input`) and records its process group in the run's events
    /// (`program_started`), so a takeover on this machine can end what it
    /// forked if this process dies (`crate::reap`); then waits. The record
    /// is best effort, like usage: a run whose lease is gone is stopped
    /// anyway.
    async fn execute(
        &self,
        cx: &StepContext,
        payload: Vec<u8>,
        env: &[(&str, String)],
    ) -> Result<Finished, ErrorInfo> {
        let program = Program::spawn(&self.argv, payload, &self.env, env)?;
        if let (Some(group), Some(journal)) = (program.group(), &cx.services.journal) {
            let event = group.event(cx.step.idx, cx.step.attempt);
            if let Err(e) = journal.event(event).await {
                tracing::warn!(run = %cx.run_id, step = %cx.step.idx, error = %e,
                    "could not record the program's process group");
            }
        }
        // `cairn-publish:` lines are recorded as they are read, in order.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watch = program.finish_watching(move |line| {
            if let Some(found) = cairn_core::published::parse_line(line) {
                let _ = tx.send(found);
            }
        });
        let record = async {
            while let Some(found) = rx.recv().await {
                let stored = match found {
                    Ok((key, value)) => cx.publish(&key, value).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = stored {
                    tracing::warn!(run = %cx.run_id, step = %cx.step.idx, error = %e,
                        "a value the program published was not recorded");
                }
            }
        };
        let (finished, ()) = tokio::join!(watch, record);
        finished
    }
}

#[async_trait]
impl Agent for CommandAgent {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        if let (true, Some(joined)) = (self.spawns, &cx.children) {
            return crate::children::outcomes(joined);
        }
        let payload = serde_json::to_vec(cx)
            .map_err(|e| ErrorInfo::new(ErrorKind::Spawn, format!("context: {e}"), false))?;
        let mut env = vec![
            (RUN_ID_VAR, cx.run_id.to_string()),
            ("CAIRN_STEP_IDX", cx.step.idx.to_string()),
            ("CAIRN_STEP_ROLE", cx.step.role.to_string()),
            ("CAIRN_ATTEMPT", cx.step.attempt.to_string()),
        ];
        if let Some(tp) = &cx.services.traceparent {
            env.push(("TRACEPARENT", tp.clone()));
        }
        let meter = &cx.services.meter;
        let permit = match (&self.key, &meter.port) {
            (Some(key), Some(port)) => {
                let declared = meter.declared(self.limits.as_ref(), key);
                crate::permit::take(port, key, declared).await?
            }
            _ => None,
        };
        let out = self.execute(cx, payload, &env).await;
        if let (Some(permit), Some(port)) = (permit, &meter.port) {
            // Best effort: a permit not given back counts until the end of
            // the run's lease.
            let _ = port.release(&permit, 0).await;
        }
        let out = out?;
        let usage = parse_usage(&out.stderr);
        if let (Some(u), Some(journal)) = (usage, &cx.services.journal) {
            // What the program spent counts in the run's budget whether it
            // succeeded or not. Best effort: a run whose lease is gone
            // fails at its commit anyway.
            let event = NewEvent::typed(EventData::UsageReported(UsageReported {
                idx: cx.step.idx,
                attempt: cx.step.attempt,
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
            }));
            let _ = journal.event(event).await;
        }
        let program = self.argv.first().map_or("", String::as_str);
        if let Some(message) = failure_message(program, &out) {
            let permanent = out
                .status
                .code()
                .is_some_and(|c| self.permanent_exit_codes.contains(&c));
            return Err(ErrorInfo::new(ErrorKind::ExitStatus, message, !permanent).into());
        }
        let output = parse_output(&out.stdout);
        if self.spawns {
            if let Some(spawn) = crate::children::requested(&output)? {
                if spawn.children.is_empty() {
                    let none = crate::children::none_listed(cairn_core::JoinRule::All, None);
                    return crate::children::outcomes(&none);
                }
                return Err(spawn.into_stop());
            }
        }
        Ok(StepOutput { output, usage })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cx() -> StepContext {
        crate::fixtures::writer_after_researcher(json!("notes"))
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
        let err = crate::fixtures::failure(&sh("echo 'it broke' >&2; exit 3"), &cx()).await;
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
        let err = crate::fixtures::failure(&agent, &cx()).await;
        assert!(!err.retryable);
        let other = sh("exit 65").permanent_exit_codes(vec![64]);
        let err = crate::fixtures::failure(&other, &cx()).await;
        assert!(err.retryable);
    }

    #[tokio::test]
    async fn missing_program_is_permanent() {
        let agent = CommandAgent::new(vec!["/nonexistent/cairn-test-program".into()]);
        let err = crate::fixtures::failure(&agent, &cx()).await;
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
