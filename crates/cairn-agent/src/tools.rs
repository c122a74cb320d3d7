//! Tools an `llm` agent may call: the [`Tool`] trait (Rust tools implement
//! it), [`CommandTool`] (a program, as `[[agents.tools]]` in a crew file),
//! and [`Toolbox`], which checks a call before anything runs: an unknown
//! tool, arguments that are not JSON or do not match the schema become an
//! error result the model sees.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_core::ToolDef;
use cairn_llm::ToolSpec;
use serde_json::Value;

/// A tool's answer the model sees: `Err` is an error result (`is_error`).
pub type ToolResult = Result<String, String>;

/// Something the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// Safe to run again with the same idempotency key after a crash left
    /// its call without a result. A tool that is not is never re-run: the
    /// model is told the call was interrupted instead.
    fn idempotent(&self) -> bool;

    /// Runs the call. `key` is stable across retries and resumes of this
    /// call (derived from run, step and call id): pass it to external
    /// systems so they can deduplicate.
    async fn execute(&self, arguments: Value, key: &str) -> ToolResult;
}

/// A program as a tool: the arguments as JSON on stdin, the idempotency key
/// in `CAIRN_IDEMPOTENCY_KEY`, stdout as the result; a non-zero exit is an
/// error result carrying the tail of stderr. It runs in its own process
/// group, killed when the step stops.
#[derive(Debug, Clone)]
pub struct CommandTool {
    spec: ToolSpec,
    argv: Vec<String>,
    idempotent: bool,
    timeout: Option<Duration>,
    env: cairn_steps::ProgramEnv,
}

impl CommandTool {
    /// The tool `def` describes; its program sees the variables `env`
    /// selects (its agent's `env` / `inherit_env`).
    pub fn from_def(def: &ToolDef, env: cairn_steps::ProgramEnv) -> Self {
        CommandTool {
            spec: ToolSpec {
                name: def.name.clone(),
                description: def.description.clone(),
                parameters: def.parameters.clone(),
            },
            argv: def.command.clone(),
            idempotent: def.idempotent,
            timeout: def.timeout_ms.map(Duration::from_millis),
            env,
        }
    }
}

#[async_trait]
impl Tool for CommandTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    async fn execute(&self, arguments: Value, key: &str) -> ToolResult {
        let stdin = arguments.to_string().into_bytes();
        let env = [("CAIRN_IDEMPOTENCY_KEY", key.to_owned())];
        let run = cairn_steps::run_program(&self.argv, stdin, &self.env, &env);
        let out = match self.timeout {
            Some(t) => match tokio::time::timeout(t, run).await {
                Ok(out) => out,
                Err(_) => {
                    return Err(format!(
                        "tool `{}` ran past its timeout of {} ms and was stopped",
                        self.spec.name,
                        t.as_millis()
                    ))
                }
            },
            None => run.await,
        }
        .map_err(|e| e.message)?;
        let program = self.argv.first().map_or("", String::as_str);
        match cairn_steps::failure_message(program, &out) {
            Some(message) => Err(message),
            None => Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned()),
        }
    }
}

/// Why a tool set cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSchema {
    pub tool: String,
    pub reason: String,
}

struct Entry {
    tool: Arc<dyn Tool>,
    schema: jsonschema::Validator,
}

/// An agent's tools by name, each with its compiled argument schema.
#[derive(Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

/// What checking a call found.
pub enum Checked<'a> {
    /// Run this tool with these arguments.
    Run(&'a Arc<dyn Tool>, Value),
    /// Do not run anything; this is the error result the model sees.
    Refused(String),
}

impl Toolbox {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Self, BadSchema> {
        let mut map = BTreeMap::new();
        for tool in tools {
            let spec = tool.spec();
            let schema = jsonschema::validator_for(&spec.parameters).map_err(|e| BadSchema {
                tool: spec.name.clone(),
                reason: e.to_string(),
            })?;
            map.insert(spec.name.clone(), Entry { tool, schema });
        }
        Ok(Toolbox { tools: map })
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|e| e.tool.spec().clone()).collect()
    }

    /// Whether `name` may be re-run after a crash (unknown tools: no).
    pub fn idempotent(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|e| e.tool.idempotent())
    }

    /// Checks a call's tool name and arguments (raw JSON text).
    pub fn check(&self, name: &str, arguments: &str) -> Checked<'_> {
        let Some(entry) = self.tools.get(name) else {
            let known: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            return Checked::Refused(format!(
                "unknown tool `{name}`; the tools are: {}",
                if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        let args: Value = match serde_json::from_str(arguments) {
            Ok(v) => v,
            Err(e) => {
                return Checked::Refused(format!(
                    "the arguments of `{name}` are not valid JSON ({e}); the tool did not run"
                ))
            }
        };
        let problems: Vec<String> = entry
            .schema
            .iter_errors(&args)
            .take(5)
            .map(|e| {
                let at = e.instance_path.to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Checked::Refused(format!(
                "the arguments of `{name}` do not match its schema: {}; the tool did not run",
                problems.join("; ")
            ));
        }
        Checked::Run(&entry.tool, args)
    }
}
