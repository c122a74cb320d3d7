//! Cairn's built-in agents: [`CommandAgent`] runs a program with the step's
//! context on stdin, [`TemplateAgent`] renders a minijinja template. Neither
//! knows about storage: they turn a `StepContext` into a `StepOutput`.

mod children;
mod command;
#[cfg(test)]
mod fixtures;
mod group;
mod permit;
pub mod procfs;
mod program;
mod signal;
mod template;

use std::sync::Arc;

use cairn_core::{Agent, AgentDef, AgentKind, CrewError};

pub use children::{ChildrenAgent, SPAWN_KEY};
pub use command::{parse_output, CommandAgent, ProgramEnv, NEVER_PASSED, USAGE_PREFIX};
pub use group::{reap, ProgramGroup, RUN_ID_VAR};
pub use program::{failure_message, run_program, Finished};
pub use signal::SignalAgent;
pub use template::{TemplateAgent, TemplateError, FUEL, RENDER_CAP, VARIABLES};

/// The built-in agent for `def`, or `None` for kinds the caller must supply
/// (Rust agents). Templates are compiled here, so a syntax error is a crew
/// error before anything runs.
pub fn builtin(
    crew: &str,
    dir: Option<&str>,
    def: &AgentDef,
) -> Result<Option<Arc<dyn Agent>>, CrewError> {
    Ok(match &def.kind {
        AgentKind::Command {
            command,
            permanent_exit_codes,
            delegate,
            limit_key,
            limits,
            ..
        } => Some(Arc::new(
            CommandAgent::new(command.clone())
                .permanent_exit_codes(permanent_exit_codes.clone())
                .env(ProgramEnv::of(def).in_dir(dir))
                .spawns(!delegate.is_empty())
                .limited_by((!limit_key.is_empty()).then(|| limit_key.join(",")))
                .declaring(*limits),
        )),
        AgentKind::Template { template } => Some(Arc::new(
            TemplateAgent::new(template.clone()).map_err(|e| CrewError::Invalid {
                crew: crew.to_owned(),
                detail: format!("template of agent `{}` {e}", def.role),
            })?,
        )),
        AgentKind::Children(c) => Some(Arc::new(ChildrenAgent::new((**c).clone()).map_err(
            |e| CrewError::Invalid {
                crew: crew.to_owned(),
                detail: format!("template of agent `{}` {e}", def.role),
            },
        )?)),
        AgentKind::Signal(s) => Some(Arc::new(SignalAgent::new(s, def.timeout_ms))),
        AgentKind::Rust { .. } | AgentKind::Llm(_) => None,
    })
}
