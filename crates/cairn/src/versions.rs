//! Crew versions from the operator's side: the versions stored
//! ([`Engine::crews`], [`Engine::crew_version`]), which unfinished runs of
//! one can move to another ([`Engine::upgrade_plan`], by
//! `cairn_core::upgrade::check`), moving them ([`Engine::upgrade_runs`]),
//! and the `compatible` policy at a claim ([`Engine::upgraded`]).

use cairn_checkpoint::{Claimed, CrewUpgrade, CrewVersion, RunFilter};
use cairn_core::upgrade::{check, check_forced, diff, version_order, StepDiff, UpgradePolicy};
use cairn_core::{Actor, CrewDef, RunId, RunRecord, RunStatus};
use serde::{Deserialize, Serialize};

use super::Engine;
use crate::{Crew, Error, Result};

/// Whether one unfinished run can move to a version, and, after
/// [`Engine::upgrade_runs`], whether it did. The JSON of an entry of
/// `cairn runs upgrade --json` and of `crews diff --json`'s `runs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeVerdict {
    pub run_id: RunId,
    pub status: RunStatus,
    /// The version the run is on.
    pub version: String,
    pub cursor: u32,
    pub movable: bool,
    /// Why it cannot move (or, forced, what was overridden).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The step the difference is at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idx: Option<u32>,
    /// It moved (false on a dry run).
    pub moved: bool,
    /// It was already on the version when its move came: another upgrade
    /// moved it first, and this one wrote nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already: bool,
    /// For a run that cannot move: the step a fork onto the version would
    /// run from (`runs fork RUN --from-step N`), copying the steps before
    /// it, which the version keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_from: Option<u32>,
}

/// Why a forced move is refused all the same.
const NOT_FORCIBLE: &str = "--force overrides only the kind of a step the run has finished; \
    this move would leave a run that no resume can read";

/// A version as a diff names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRef {
    pub version: String,
    pub fingerprint: cairn_core::Fingerprint,
}

/// How version `to` of a crew differs from `from`, and which unfinished
/// runs of `from` can move to it. The JSON of `cairn crews diff --json`
/// and of `GET /v1/crews/{name}/diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrewDiff {
    pub from: VersionRef,
    pub to: VersionRef,
    pub steps: Vec<StepDiff>,
    pub runs: Vec<UpgradeVerdict>,
}

/// The unfinished statuses, in the order runs are listed.
const UNFINISHED: [RunStatus; 5] = [
    RunStatus::Waiting,
    RunStatus::Interrupted,
    RunStatus::Failed,
    RunStatus::Queued,
    RunStatus::Running,
];

impl Engine {
    /// Every stored crew version with its unfinished runs.
    pub async fn crews(&self) -> Result<Vec<CrewVersion>> {
        Ok(self.store().crews().await?)
    }

    /// The stored version of crew `name` that `version` names (its version
    /// text, or the start of its fingerprint), ready to run: the one this
    /// process registered with that fingerprint, or one built from the
    /// stored definition (built-in kinds only).
    pub async fn crew_version(&self, name: &str, version: &str) -> Result<Crew> {
        let of_name: Vec<CrewVersion> = self
            .crews()
            .await?
            .into_iter()
            .filter(|c| c.name == name)
            .collect();
        let exact: Vec<&CrewVersion> = of_name.iter().filter(|c| c.version == version).collect();
        let found: Vec<&CrewVersion> = match exact.is_empty() && version.len() >= 6 {
            true => of_name
                .iter()
                .filter(|c| {
                    let hex = |f: &str| f.trim_start_matches("sha256:").to_owned();
                    hex(c.fingerprint.as_str()).starts_with(&hex(version))
                })
                .collect(),
            false => exact,
        };
        if found.len() > 1 {
            return Err(Error::AmbiguousCrewVersion {
                crew: name.to_owned(),
                version: version.to_owned(),
                fingerprints: found
                    .iter()
                    .map(|c| {
                        let seen = c.first_seen.format("%Y-%m-%d %H:%M:%S");
                        format!("{} (first seen {seen})", c.fingerprint)
                    })
                    .collect(),
            });
        }
        let [one] = found.as_slice() else {
            return Err(Error::UnknownCrewVersion {
                crew: name.to_owned(),
                version: version.to_owned(),
                known: of_name
                    .iter()
                    .map(|c| format!("{} ({})", c.version, c.fingerprint))
                    .collect(),
            });
        };
        self.stored(name, &one.fingerprint).await
    }

    /// The stored version `fingerprint` of crew `name`, ready to run: the
    /// crew this process registered with it, or one built from the stored
    /// definition (built-in kinds only).
    async fn stored(&self, name: &str, fingerprint: &cairn_core::Fingerprint) -> Result<Crew> {
        let registered = self
            .crews
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(fingerprint)
            .cloned();
        if let Some(crew) = registered {
            return Ok(crew);
        }
        let def = self.store().crew_version(fingerprint).await?;
        let def = def.ok_or_else(|| Error::UnknownCrewVersion {
            crew: name.to_owned(),
            version: fingerprint.to_string(),
            known: vec![],
        })?;
        Crew::from_def(def, |_, _| None)
    }

    /// Crew `name` as `version` names it ([`Engine::crew_version`]), or its
    /// newest stored version.
    pub async fn crew_show(&self, name: &str, version: Option<&str>) -> Result<Crew> {
        if let Some(v) = version {
            return self.crew_version(name, v).await;
        }
        let newest = self
            .crews()
            .await?
            .into_iter()
            .filter(|c| c.name == name)
            .max_by(|a, b| version_order(&a.version, &b.version));
        match newest {
            Some(c) => self.stored(name, &c.fingerprint).await,
            None => Err(Error::UnknownCrewVersion {
                crew: name.to_owned(),
                version: "(any)".into(),
                known: vec![],
            }),
        }
    }

    /// How `to` differs from `from` (two versions of one crew), and which
    /// unfinished runs of `from` could move to `to` now.
    pub async fn crew_diff(&self, from: &Crew, to: &Crew) -> Result<CrewDiff> {
        let (a, b) = (from.def(), to.def());
        let runs = self
            .upgrade_plan(&a.name, b, None)
            .await?
            .into_iter()
            .filter(|v| v.version == a.version)
            .collect();
        let named = |c: &Crew| VersionRef {
            version: c.def().version.clone(),
            fingerprint: c.fingerprint().clone(),
        };
        Ok(CrewDiff {
            from: named(from),
            to: named(to),
            steps: diff(a, b),
            runs,
        })
    }

    /// For each unfinished run of crew `name` (or only `run`) not already
    /// on `to`: whether it can move there now.
    pub async fn upgrade_plan(
        &self,
        name: &str,
        to: &CrewDef,
        run: Option<RunId>,
    ) -> Result<Vec<UpgradeVerdict>> {
        let runs = self.runs_to_move(name, to, run).await?;
        Ok(runs.iter().map(|r| verdict(r, to)).collect())
    }

    /// The unfinished runs of crew `name` (or only `run`) not already on `to`.
    async fn runs_to_move(
        &self,
        name: &str,
        to: &CrewDef,
        run: Option<RunId>,
    ) -> Result<Vec<RunRecord>> {
        let runs = match run {
            Some(id) => vec![self.store().get_run(id).await?],
            None => self.unfinished_runs(name).await?,
        };
        let to_fingerprint = to.fingerprint();
        Ok(runs
            .into_iter()
            .filter(|r| r.crew_fingerprint != to_fingerprint)
            .collect())
    }

    async fn unfinished_runs(&self, name: &str) -> Result<Vec<RunRecord>> {
        let mut out = Vec::new();
        for status in UNFINISHED {
            let mut after = None;
            loop {
                let filter = RunFilter {
                    status: Some(status),
                    crew: Some(name.to_owned()),
                    after,
                    limit: Some(500),
                    ..RunFilter::default()
                };
                let page = self.store().list_runs(&filter).await?;
                after = page.last().map(|r| r.id);
                let full = page.len() == 500;
                out.extend(page);
                if !full {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Moves every run [`Engine::upgrade_plan`] finds movable to `to` (with
    /// `force`, also those whose only differences leave them readable:
    /// `check_forced`; never a running or ended one), one `crew_upgraded`
    /// event each by `actor`; with `dry_run` nothing. A run that changed in
    /// the meantime is reported, not moved; one another upgrade moved
    /// first is reported `already` there.
    pub async fn upgrade_runs(
        &self,
        to: &Crew,
        run: Option<RunId>,
        dry_run: bool,
        force: bool,
        actor: &Actor,
    ) -> Result<Vec<UpgradeVerdict>> {
        let def = to.def();
        let runs = self.runs_to_move(&def.name, def, run).await?;
        let mut verdicts: Vec<UpgradeVerdict> = runs.iter().map(|r| verdict(r, def)).collect();
        if dry_run {
            return Ok(verdicts);
        }
        self.register(to);
        for (run, v) in runs.iter().zip(&mut verdicts) {
            if v.status == RunStatus::Running || !(v.movable || force) {
                continue;
            }
            if !v.movable {
                // Forced: only what leaves the run readable is overridden.
                if let Err(refused) = check_forced(run, def) {
                    if refused.idx().is_some() {
                        v.reason = Some(format!("{refused}; {NOT_FORCIBLE}"));
                        v.idx = refused.idx();
                    }
                    continue;
                }
            }
            self.move_one(def, force, actor, v).await;
        }
        Ok(verdicts)
    }

    /// One run's move for [`Engine::upgrade_runs`], told in its verdict.
    async fn move_one(&self, to: &CrewDef, force: bool, actor: &Actor, v: &mut UpgradeVerdict) {
        let req = CrewUpgrade {
            to: to.clone(),
            force,
            held: None,
            actor: actor.clone(),
        };
        match self.store().upgrade_crew(v.run_id, &req).await {
            Ok(m) if m.moved => v.moved = true,
            Ok(_) => {
                v.already = true;
                v.fork_from = None;
                v.reason = Some(format!(
                    "already on version {}: another upgrade moved it first",
                    to.version
                ));
            }
            Err(e) => v.reason = Some(e.to_string()),
        }
    }

    /// A run claimed at a step boundary whose policy is `compatible`,
    /// moved to the newest version of its crew this process offers, if it
    /// is newer and [`check`] allows it; otherwise the claim as it was.
    /// The crew to drive it with.
    pub(crate) async fn upgraded(&self, mut claimed: Claimed) -> Result<(Claimed, Crew)> {
        let run = &claimed.run;
        let policy = run.upgrade.or(run.crew_definition.upgrade);
        let current = self.crew_for(run)?;
        if policy.unwrap_or_default() != UpgradePolicy::Compatible
            || claimed.took_over
            || !claimed.first_run
        {
            return Ok((claimed, current));
        }
        let Some(newest) = self.newest_offered(&run.crew) else {
            return Ok((claimed, current));
        };
        let newer = version_order(&newest.def().version, &run.crew_version).is_gt();
        if !newer || check(run, newest.def()).is_err() {
            return Ok((claimed, current));
        }
        let req = CrewUpgrade {
            to: newest.def().clone(),
            force: false,
            held: Some(claimed.fence.clone()),
            actor: Actor::new(self.executor.config().owner.clone())
                .because("upgrade policy `compatible`"),
        };
        match self.store().upgrade_crew(run.id, &req).await {
            Ok(moved) => {
                claimed.run = moved.run;
                Ok((claimed, newest))
            }
            // The run goes on where it is; the next claim tries again.
            Err(e) => {
                tracing::warn!(run = %claimed.run.id, error = %crate::ErrorChain(&e), "the run could not move to the newest crew version");
                Ok((claimed, current))
            }
        }
    }

    /// The newest version of crew `name` registered in this process.
    fn newest_offered(&self, name: &str) -> Option<Crew> {
        let crews = self.crews.read().unwrap_or_else(|p| p.into_inner());
        crews
            .values()
            .filter(|c| c.def().name == name)
            .max_by(|a, b| version_order(&a.def().version, &b.def().version))
            .cloned()
    }
}

fn verdict(run: &RunRecord, to: &CrewDef) -> UpgradeVerdict {
    let judged = match run.status {
        RunStatus::Running => Err((
            "running: it can move once it stops at a step boundary".to_owned(),
            None,
        )),
        _ => check(run, to).map_err(|e| (e.to_string(), e.idx())),
    };
    let (reason, idx) = match judged {
        Ok(()) => (None, None),
        Err((reason, idx)) => (Some(reason), idx),
    };
    UpgradeVerdict {
        run_id: run.id,
        status: run.status,
        version: run.crew_version.clone(),
        cursor: run.cursor.get(),
        movable: reason.is_none(),
        reason,
        idx,
        moved: false,
        already: false,
        // The steps before the first difference are the version's too.
        fork_from: idx.map(|i| i.min(to.step_count())),
    }
}
