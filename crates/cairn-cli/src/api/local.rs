//! [`Api`] over the database: the `cairn` library's `Engine`, executing
//! runs in this process.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};

use cairn::{
    Actor, CompactPolicy, Compacted, Engine, ExecutorConfig, KeyState, OpenOptions, RunFilter,
    RunId, RunRecord, RunStatus, RunView, Started, StepJournalEntry, SubmitOptions, Submitted,
    ThreadPage, ThreadSummary, ThreadView, WaitFilter, WaitId, WaitRecord,
};
use cairn::{CrewDiff, ThreadBudget, UpgradeVerdict};

use super::{
    Act, Answering, Api, BudgetChange, CrewRef, EachEvent, Interruptible, Submission, Upgrade,
    VersionArg,
};
use crate::{input, output, progress, watch};

/// The database, opened by this process.
pub struct Local {
    pub engine: Engine,
}

impl Local {
    /// `key` after a change by `actor`, audited as `action` (the server
    /// audits the same changes made through it).
    async fn key_audited(&self, actor: &Actor, action: &str, key: KeyState) -> Result<KeyState> {
        let detail = cairn::people::key_detail(&key);
        self.engine.audit_change(actor, action, detail).await;
        Ok(key)
    }

    /// Opens `db` for a one-shot command (creating it only for `run` and
    /// `submit`: a typo'd path must not leave an empty database behind).
    pub async fn open(db: &str, create: bool) -> Result<Local> {
        let opts = OpenOptions {
            create,
            connect_timeout: Duration::from_secs(3),
            max_connections: 4,
            ..OpenOptions::default()
        };
        let config = ExecutorConfig {
            owner: cairn::holder::owner("cairn-cli"),
            prices: crate::config::prices()?,
            key_limits: crate::config::key_limits()?,
            ..ExecutorConfig::default()
        };
        let engine = crate::traces::traced(Engine::open_with(db, &opts, config).await?)?;
        Ok(Local { engine })
    }
}

/// Runs `work` (executing run `id`) until it ends or Ctrl-C: then says
/// where the run stands and the command that resumes it, and gives `None`
/// (exit [`crate::report::exit::INTERRUPTED`]). Dropping `work` stops its
/// step (a `command` step's process group is killed); the run stays
/// `running` under this process's lease until it expires, so the printed
/// command takes it over (this process is gone by then, which `resume`
/// sees: no `--takeover` needed, see `cairn::holder`).
pub async fn until_interrupted<T>(
    id: RunId,
    work: impl std::future::Future<Output = cairn::Result<T>>,
) -> Interruptible {
    tokio::select! {
        result = work => result.map(|_| Some(())).map_err(Into::into),
        _ = tokio::signal::ctrl_c() => {
            eprintln!(
                "\ninterrupted: run {id} stopped where it was and keeps its finished steps; resume it with:\n  {} resume {id}",
                output::cairn_command()
            );
            Ok(None)
        }
    }
}

/// `--db URL`: connecting opens the database.
pub struct Db(pub String);

impl super::Connect for Db {
    type Api = Local;

    fn read_crew(&self, arg: &Path) -> Result<CrewRef> {
        Ok(CrewRef::File(
            Box::new(input::load_crew(arg)?),
            arg.to_owned(),
        ))
    }

    async fn connect(&self, create: bool) -> Result<Local> {
        Local::open(&self.0, create).await
    }
}

impl Api for Local {
    fn engine(&self) -> Option<&Engine> {
        Some(&self.engine)
    }

    async fn submit(&self, crew: CrewRef, input: Value, opts: SubmitOptions) -> Result<Submission> {
        let (crew, opts) = local_submit(crew, opts)?;
        let submitted = self.engine.submit(&crew, input, opts).await?;
        let started = Started {
            submitted,
            claimed: None,
        };
        Ok(submission(crew, started))
    }

    async fn start(&self, crew: CrewRef, input: Value, opts: SubmitOptions) -> Result<Submission> {
        let (crew, opts) = local_submit(crew, opts)?;
        let started = self.engine.start(&crew, input, opts).await?;
        Ok(submission(crew, started))
    }

    async fn drive(&self, submitted: Submission, lines: bool) -> Interruptible {
        let Submission {
            run,
            created,
            crew,
            claimed,
        } = submitted;
        let Some(crew) = crew else {
            return self.advance(run.id).await;
        };
        let id = run.id;
        let first = run.clone();
        // Drives the run from the claim its start made; a run submitted
        // without one is claimed here, or followed to its next stop if a
        // worker claimed it first (a repeated key returns a parked run as
        // it is).
        let started = Started {
            submitted: Submitted { run, created },
            claimed,
        };
        let drive = self.engine.drive_started(&crew, started);
        if lines {
            until_interrupted(id, progress::follow(&self.engine, &first, drive)).await
        } else {
            until_interrupted(id, drive).await
        }
    }

    async fn advance(&self, id: RunId) -> Interruptible {
        let status = self.engine.get_run(id).await?.status;
        // A parent waiting for children that are queued again (a continue
        // carried them on) is driven with them, as `cairn run` drives them.
        let children_to_drive = status == RunStatus::Waiting
            && self
                .engine
                .show(id)
                .await?
                .children
                .iter()
                .any(|c| !c.held && matches!(c.status, RunStatus::Queued | RunStatus::Running));
        if !children_to_drive && !matches!(status, RunStatus::Queued | RunStatus::Running) {
            return Ok(Some(()));
        }
        // Executes it, or follows it where a worker took it first.
        until_interrupted(id, self.engine.execute(id)).await
    }

    async fn show(&self, id: RunId) -> Result<RunView> {
        Ok(self.engine.show(id).await?)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        Ok(self.engine.list(filter).await?)
    }

    async fn waits(&self, filter: &WaitFilter) -> Result<Vec<WaitRecord>> {
        Ok(self.engine.waits(filter).await?)
    }

    async fn answer(&self, id: WaitId, answering: &Answering) -> Result<WaitRecord> {
        let actor = local(&answering.actor);
        let digest = answering.digest.as_deref();
        Ok(self
            .engine
            .answer_quoting(id, &answering.answer, &actor, digest)
            .await?)
    }

    async fn events(&self, id: RunId, _follow: bool, each: EachEvent<'_>) -> Result<()> {
        self.engine.events(id).await?.into_iter().try_for_each(each)
    }

    async fn journal(&self, id: RunId, step: Option<u32>) -> Result<Vec<StepJournalEntry>> {
        Ok(self.engine.journal(id, step).await?)
    }

    async fn watch(&self, id: RunId, json: bool) -> Result<RunStatus> {
        watch::local(&self.engine, id, json).await
    }

    async fn act(&self, id: RunId, act: Act<'_>, actor: &Actor) -> Result<RunRecord> {
        let actor = &local(actor);
        let e = &self.engine;
        Ok(match act {
            Act::Retry {
                rerun_children: false,
            } => e.retry(id, actor).await?,
            Act::Retry {
                rerun_children: true,
            } => e.retry_rerunning_children(id, actor).await?,
            Act::Continue { raise: None } => e.continue_run(id, actor).await?,
            Act::Continue { raise: Some(by) } => e.continue_with_budget(id, &by, actor).await?,
            Act::Cancel => e.cancel(id, actor).await?,
            Act::Fork(req) => e.fork(id, req, actor).await?,
        })
    }

    async fn threads(&self, page: &ThreadPage) -> Result<Vec<ThreadSummary>> {
        Ok(self.engine.threads_page(page).await?)
    }

    async fn thread(&self, id: &str) -> Result<ThreadView> {
        Ok(self.engine.thread(id).await?)
    }

    async fn set_thread_budget(&self, id: &str, change: &BudgetChange) -> Result<ThreadBudget> {
        let actor = local(&change.actor);
        let set = self
            .engine
            .set_thread_budget(id, &change.budget, change.raise, &actor)
            .await?;
        let action = if change.raise {
            "thread_budget_raised"
        } else {
            "thread_budget_set"
        };
        let detail = json!({"thread": id, "budget": set.budget, "reason": actor.reason});
        self.engine.audit_change(&actor, action, detail).await;
        Ok(set)
    }

    async fn compact(&self, policy: &CompactPolicy) -> Result<Compacted> {
        let removed = self.engine.compact(policy).await?;
        if !policy.dry_run {
            let detail = json!({"policy": format!("{policy:?}"), "removed": removed});
            let actor = cairn::local_actor(None, None);
            self.engine.audit_change(&actor, "compacted", detail).await;
        }
        Ok(removed)
    }

    async fn workers(&self) -> Result<Vec<cairn::ProcessRecord>> {
        Ok(self.engine.workers().await?)
    }

    async fn crew_versions(&self) -> Result<Vec<cairn::CrewVersion>> {
        Ok(self.engine.crews().await?)
    }

    async fn crew_definition(&self, name: &str, version: Option<&str>) -> Result<cairn::CrewDef> {
        Ok(self.engine.crew_show(name, version).await?.def().clone())
    }

    async fn crew_diff(&self, name: &str, from: &VersionArg, to: &VersionArg) -> Result<CrewDiff> {
        let from = self.version(name, from).await?;
        let to = self.version(name, to).await?;
        Ok(self.engine.crew_diff(&from, &to).await?)
    }

    async fn upgrade(&self, name: &str, how: &Upgrade) -> Result<Vec<UpgradeVerdict>> {
        let to = self.version(name, &how.to).await?;
        Ok(self
            .engine
            .upgrade_runs(&to, how.run, how.dry_run, how.force, &local(&how.actor))
            .await?)
    }

    async fn keys(&self) -> Result<Vec<KeyState>> {
        Ok(self.engine.keys().await?)
    }

    async fn pause_key(&self, key: &str, wait: Duration, actor: &Actor) -> Result<KeyState> {
        let actor = local(actor);
        let key = self.engine.pause_key(key, wait, &actor).await?;
        self.key_audited(&actor, "key_paused", key).await
    }

    async fn resume_key(&self, key: &str) -> Result<KeyState> {
        let key = self.engine.resume_key(key).await?;
        let actor = cairn::local_actor(None, None);
        self.key_audited(&actor, "key_resumed", key).await
    }

    async fn reset_limits(&self, key: &str) -> Result<KeyState> {
        let key = self.engine.reset_limits(key).await?;
        let actor = cairn::local_actor(None, None);
        self.key_audited(&actor, "key_limits_reset", key).await
    }

    async fn set_limits(&self, key: &str, limits: &cairn::KeyLimits) -> Result<KeyState> {
        let key = self.engine.set_limits(key, limits).await?;
        let actor = cairn::local_actor(None, None);
        self.key_audited(&actor, "key_limits_set", key).await
    }

    async fn schedules(
        &self,
        act: super::schedules::ScheduleAct,
    ) -> Result<super::schedules::ScheduleOut> {
        super::schedules::local(&self.engine, act).await
    }

    async fn signals(&self, act: super::signals::SignalAct) -> Result<super::signals::SignalOut> {
        super::signals::local(&self.engine, act).await
    }

    async fn create_schedule(
        &self,
        crew: CrewRef,
        spec: super::schedules::ScheduleSpec,
    ) -> Result<cairn::Schedule> {
        super::schedules::local_create(&self.engine, crew, spec).await
    }

    async fn principals(&self) -> Result<Vec<cairn::Principal>> {
        Ok(self.engine.principals().await?)
    }

    async fn add_principal(&self, new: &cairn::NewPrincipal) -> Result<cairn::Issued> {
        let by = cairn::local_actor(None, None);
        Ok(self.engine.add_principal(new.clone(), &by).await?)
    }

    async fn disable_principal(&self, name: &str) -> Result<cairn::Principal> {
        let by = cairn::local_actor(None, None);
        Ok(self.engine.disable_principal(name, &by).await?)
    }

    async fn rotate_token(&self, name: &str) -> Result<cairn::Issued> {
        let by = cairn::local_actor(None, None);
        Ok(self.engine.rotate_token(name, &by).await?)
    }

    async fn audit(&self, filter: &cairn::AuditFilter) -> Result<Vec<cairn::AuditEntry>> {
        Ok(self.engine.audit(filter).await?)
    }
}

impl Local {
    /// The crew a [`VersionArg`] names: a crew file (of crew `name`), or a
    /// stored version.
    async fn version(&self, name: &str, v: &VersionArg) -> Result<cairn::Crew> {
        match v {
            VersionArg::File(crew, path) if crew.def().name != name => Err(input::usage(format!(
                "{} is crew `{}`, not `{name}`",
                path.display(),
                crew.def().name
            ))),
            VersionArg::File(crew, _) => Ok((**crew).clone()),
            VersionArg::Named(v) => Ok(self.engine.crew_version(name, v).await?),
        }
    }
}

/// A crew file's crew: a crew by name needs a server.
fn file_crew(crew: CrewRef) -> Result<cairn::Crew> {
    match crew {
        CrewRef::File(crew, _) => Ok(*crew),
        CrewRef::Named(name, _) => Err(input::usage(format!("no crew file {name}"))),
    }
}

/// What a local submit or start sends: the file crew `crew` names, and
/// `opts` submitted by the local actor.
fn local_submit(crew: CrewRef, opts: SubmitOptions) -> Result<(cairn::Crew, SubmitOptions)> {
    let opts = SubmitOptions {
        by: Some(cairn::local_actor(None, None)),
        ..opts
    };
    Ok((file_crew(crew)?, opts))
}

/// What `run` goes on with after a local submit or start.
fn submission(crew: cairn::Crew, started: Started) -> Submission {
    Submission {
        run: started.submitted.run,
        created: started.submitted.created,
        crew: Some(crew),
        claimed: started.claimed,
    }
}

/// An action's actor in local mode: direct database access passes every
/// policy, so the operating system's user is recorded (`via: local`), and
/// what `--by` said is kept as a note (`cairn::local_actor`).
fn local(actor: &Actor) -> Actor {
    cairn::local_actor(Some(actor.by.clone()), actor.reason.clone())
}
