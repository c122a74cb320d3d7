//! Whether a run can move to another version of its crew: the
//! compatibility rule. A run resumes from checkpoints, not by replaying
//! code, so a new version is safe exactly when the steps the run has
//! already started still mean the same thing under it: the same roles in
//! the same order, with the same kinds. Everything after them (later
//! steps, prompts, tools, settings) may change.
//!
//! The started prefix is the steps before the cursor, plus the cursor's
//! own step when the run is inside it (waiting for a person, interrupted,
//! failed, or running): its journal, wait or attempts belong to that role.
//! A queued run at a step boundary has not started its cursor step.

use serde::{Deserialize, Serialize};

use crate::checkpoint::RunRecord;
use crate::crew::CrewDef;
use crate::status::RunStatus;

/// Whether a run moves to a newer version of its crew (a crew file's
/// top-level `upgrade`, overridable per run at submit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpgradePolicy {
    /// The run finishes on the version it started on. The default: a
    /// deploy never changes what an unfinished run means unless someone
    /// asked for it (here, or an operator's `cairn runs upgrade`).
    #[default]
    Pinned,
    /// At its next claim at a step boundary the run moves to the newest
    /// version the claiming process offers, if [`check`] allows it.
    Compatible,
    /// Only an operator moves it; as `pinned` otherwise.
    Manual,
}

impl UpgradePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            UpgradePolicy::Pinned => "pinned",
            UpgradePolicy::Compatible => "compatible",
            UpgradePolicy::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<UpgradePolicy> {
        match s {
            "pinned" => Some(UpgradePolicy::Pinned),
            "compatible" => Some(UpgradePolicy::Compatible),
            "manual" => Some(UpgradePolicy::Manual),
            _ => None,
        }
    }
}

/// Orders crew versions: numbers inside a version compare as numbers
/// (`"2" < "10"`, `"1.9" < "1.10"`), the rest as text.
pub fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            let split =
                i == bytes.len() || bytes[i].is_ascii_digit() != bytes[i - 1].is_ascii_digit();
            if split {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (x, y) = (chunks(a), chunks(b));
    for ((dx, cx), (dy, cy)) in x.iter().zip(y.iter()) {
        let o = match (dx, dy) {
            (true, true) => {
                let (tx, ty) = (cx.trim_start_matches('0'), cy.trim_start_matches('0'));
                tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty))
            }
            _ => cx.cmp(cy),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

/// Why a run cannot move to a crew version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    #[error("the run's crew is `{run}`, not `{offered}`")]
    OtherCrew { run: String, offered: String },
    #[error("the run has ended ({status}); only an unfinished run moves")]
    Ended { status: RunStatus },
    #[error("step {idx} is `{run}` in the run but `{offered}` in the new version")]
    RoleDiffers {
        idx: u32,
        run: String,
        offered: String,
    },
    #[error(
        "step {idx} (`{role}`) is a {run} step in the run but a {offered} step in the new version"
    )]
    KindDiffers {
        idx: u32,
        role: String,
        run: &'static str,
        offered: &'static str,
    },
    #[error("the new version has {steps} steps; the run has started step {idx} (`{role}`)")]
    StepRemoved { idx: u32, role: String, steps: u32 },
}

impl Incompatible {
    /// The step the difference is at, if it is at one.
    pub fn idx(&self) -> Option<u32> {
        match self {
            Incompatible::RoleDiffers { idx, .. }
            | Incompatible::KindDiffers { idx, .. }
            | Incompatible::StepRemoved { idx, .. } => Some(*idx),
            Incompatible::OtherCrew { .. } | Incompatible::Ended { .. } => None,
        }
    }
}

/// How many of the run's steps the new version must keep as they are.
pub fn started(run: &RunRecord) -> u32 {
    let inside = !matches!(run.status, RunStatus::Queued);
    run.cursor.get() + u32::from(inside && run.cursor.get() < run.step_count)
}

/// `Ok` if `run` can move to `offered` (see the module's rule).
pub fn check(run: &RunRecord, offered: &CrewDef) -> Result<(), Incompatible> {
    if run.crew != offered.name {
        return Err(Incompatible::OtherCrew {
            run: run.crew.clone(),
            offered: offered.name.clone(),
        });
    }
    if run.status.is_finished() {
        return Err(Incompatible::Ended { status: run.status });
    }
    let old = &run.crew_definition.agents;
    for idx in 0..started(run) {
        let Some(was) = old.get(idx as usize) else {
            break;
        };
        let Some(now) = offered.agents.get(idx as usize) else {
            return Err(Incompatible::StepRemoved {
                idx,
                role: was.role.as_str().to_owned(),
                steps: offered.step_count(),
            });
        };
        if was.role != now.role {
            return Err(Incompatible::RoleDiffers {
                idx,
                run: was.role.as_str().to_owned(),
                offered: now.role.as_str().to_owned(),
            });
        }
        if was.kind.name() != now.kind.name() {
            return Err(Incompatible::KindDiffers {
                idx,
                role: was.role.as_str().to_owned(),
                run: was.kind.name(),
                offered: now.kind.name(),
            });
        }
    }
    Ok(())
}

/// How one step differs between two versions ([`diff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepChange {
    Same,
    /// Same role and kind, other settings (a prompt, a tool, a timeout).
    Changed,
    /// Another role at this index.
    Renamed,
    /// Same role, another kind.
    Rekinded,
    Added,
    Removed,
}

/// One index of [`diff`]: the step in each version, `role (kind)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDiff {
    pub idx: u32,
    pub change: StepChange,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// Step by step, how `b` differs from `a`.
pub fn diff(a: &CrewDef, b: &CrewDef) -> Vec<StepDiff> {
    let n = a.agents.len().max(b.agents.len());
    (0..n)
        .map(|i| {
            let (x, y) = (a.agents.get(i), b.agents.get(i));
            let change = match (x, y) {
                (Some(x), Some(y)) if x.role != y.role => StepChange::Renamed,
                (Some(x), Some(y)) if x.kind.name() != y.kind.name() => StepChange::Rekinded,
                (Some(x), Some(y)) if x != y => StepChange::Changed,
                (Some(_), Some(_)) => StepChange::Same,
                (None, _) => StepChange::Added,
                (_, None) => StepChange::Removed,
            };
            let name =
                |d: &crate::crew::AgentDef| format!("{} ({})", d.role.as_str(), d.kind.name());
            StepDiff {
                idx: i as u32,
                change,
                from: x.map(name),
                to: y.map(name),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;

/// Why a runnable run waits: its crew version has Rust agents (code), and
/// no live process registered that version (`cairn workers`). Shown on the
/// run (`RunRecord::blocked`) and evented once (`run_blocked`); it clears
/// itself when a process offering the version starts and claims the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// The crew and version no live process offers.
    pub crew: String,
    pub version: String,
    pub fingerprint: crate::crew::Fingerprint,
    /// The handlers of its Rust agents: what a process must register.
    pub handlers: Vec<String>,
}

impl Blocked {
    /// What a run of `def` waits for, when no live process offers it.
    pub fn of(def: &CrewDef, fingerprint: crate::crew::Fingerprint) -> Blocked {
        let handlers = def
            .agents
            .iter()
            .filter_map(|a| match &a.kind {
                crate::crew::AgentKind::Rust { handler } => Some(handler.clone()),
                _ => None,
            })
            .collect();
        Blocked {
            crew: def.name.clone(),
            version: def.version.clone(),
            fingerprint,
            handlers,
        }
    }
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no live process offers crew `{}` version `{}` ({}) with Rust agents `{}`",
            self.crew,
            self.version,
            self.fingerprint.as_str(),
            self.handlers.join("`, `")
        )
    }
}

/// Whether a crew version has Rust agents, which only a process that
/// registered it can execute (every other version runs anywhere from its
/// stored definition).
pub fn needs_code(def: &CrewDef) -> bool {
    def.agents
        .iter()
        .any(|a| matches!(a.kind, crate::crew::AgentKind::Rust { .. }))
}
