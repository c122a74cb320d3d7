//! Carrying on under a fixed crew: an operator retry or fork that runs the
//! remaining steps with another crew definition, keeping every finished
//! step (`cairn runs retry RUN --crew FILE`, `runs fork … --crew FILE`).
//! The change is recorded like a forced resume: a `crew_forced` event in
//! the claim's transaction, whose `by` names the operator, after the
//! `run_retried` / `run_forked` event that carries who and why.

use cairn_checkpoint::{Action, ForkRequest};
use cairn_core::{Actor, RunId, RunRecord, StepRecord};
use cairn_scheduler::{DriveOptions, Driven, Executor, ExecutorConfig};

use super::Engine;
use crate::{Crew, Error, Result};

/// Refuses `crew` for a run whose kept rows (`rows`) it does not fit: each
/// row's role must be the new crew's role at that index, and the crew must
/// have a step after them. Nothing is written.
fn check_fits(run: RunId, crew: &Crew, rows: &[StepRecord]) -> Result<()> {
    let agents = &crew.def().agents;
    for row in rows {
        let idx = row.idx.get() as usize;
        match agents.get(idx) {
            Some(a) if a.role == row.role => {}
            Some(a) => {
                return Err(Error::CrewDoesNotFit {
                    run,
                    reason: format!(
                        "step {idx} is `{}` in the run but `{}` in the new crew; a crew may change \
                         agents, not the roles of steps the run already has",
                        row.role, a.role
                    ),
                })
            }
            None => {
                return Err(Error::CrewDoesNotFit {
                    run,
                    reason: format!(
                        "the new crew has {} steps; the run already has a step {idx}",
                        agents.len()
                    ),
                })
            }
        }
    }
    Ok(())
}

impl Engine {
    /// `failed → queued` with `crew` instead of the run's own: the failed
    /// step runs again (attempt + 1) and the rest follow, all with the new
    /// definition; finished steps are kept. Refused before anything is
    /// written if `crew` changes the role of a step the run has. With the
    /// run's own crew this is [`Engine::retry`] and [`Engine::execute`].
    pub async fn retry_with_crew(&self, id: RunId, crew: &Crew, actor: &Actor) -> Result<Driven> {
        let (run, steps) = self.store().load(id).await?;
        check_fits(id, crew, &steps)?;
        self.store().act(id, Action::Retry, actor).await?;
        self.execute_with_crew(run.id, crew, actor).await
    }

    /// A fork of `id` that will run with `crew` (see [`Engine::fork`]);
    /// refused before anything is written if `crew` changes the role of a
    /// copied step. Drive it with [`Engine::execute_with_crew`].
    pub async fn fork_with_crew(
        &self,
        id: RunId,
        req: &ForkRequest,
        crew: &Crew,
        actor: &Actor,
    ) -> Result<RunRecord> {
        let (_, steps) = self.store().load(id).await?;
        let copied: Vec<StepRecord> = steps
            .into_iter()
            .filter(|s| s.idx < req.from_step)
            .collect();
        check_fits(id, crew, &copied)?;
        self.fork(id, req, actor).await
    }

    /// Executes a queued run to its next stop with `crew`. A crew other
    /// than the run's is stored on it at the claim, recorded as a
    /// `crew_forced` event by `actor` (as `cairn resume --force` does).
    pub async fn execute_with_crew(&self, id: RunId, crew: &Crew, actor: &Actor) -> Result<Driven> {
        self.register(crew);
        let config = ExecutorConfig {
            owner: format!("{} via {}", actor.by, self.executor.config().owner),
            ..self.executor.config().clone()
        };
        let executor = Executor::new(self.store().clone(), config);
        let opts = DriveOptions {
            takeover: cairn_checkpoint::Takeover::Never,
            force_crew: true,
            context: None,
        };
        Ok(executor.drive(id, &crew.0, opts).await?)
    }
}
