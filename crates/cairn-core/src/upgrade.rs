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
//! Nor may a move leave the cursor past the new version's last step.
//!
//! An operator's `--force` ([`check_forced`]) overrides only what leaves
//! the run readable: the kind of a step it has finished.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::checkpoint::Blocked;
use crate::checkpoint::RunRecord;
pub use crate::crew::upgrade_policy::UpgradePolicy;
use crate::crew::{AgentDef, CrewDef};
use crate::status::RunStatus;

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
    /// The run is at a step boundary the new version does not have: its
    /// cursor would be past the last step.
    #[error("the run is at step {cursor}, past the new version's last step ({steps} steps)")]
    CursorPast { cursor: u32, steps: u32 },
}

impl Incompatible {
    /// The step the difference is at, if it is at one.
    pub fn idx(&self) -> Option<u32> {
        match self {
            Incompatible::RoleDiffers { idx, .. }
            | Incompatible::KindDiffers { idx, .. }
            | Incompatible::StepRemoved { idx, .. }
            | Incompatible::CursorPast { cursor: idx, .. } => Some(*idx),
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
    match differences(run, offered)?.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

/// [`check`] as an operator's `--force` applies it: the first difference
/// it overrides (to be recorded), if any, or the one it must not override.
/// Only a difference that leaves the run readable is overridden: the kind
/// of a step the run has finished (its output stays what it was). A started
/// step renamed (its rows carry the role), the kind of the step the run is
/// inside (its journal, wait or children belong to that kind), a started
/// step removed, or a cursor past the new version's last step would leave
/// a run every resume refuses as corrupt: refused, forced or not.
pub fn check_forced(
    run: &RunRecord,
    offered: &CrewDef,
) -> Result<Option<Incompatible>, Incompatible> {
    let all = differences(run, offered)?;
    match all.iter().find(|e| !e.forcible(run)) {
        Some(refused) => Err(refused.clone()),
        None => Ok(all.into_iter().next()),
    }
}

impl Incompatible {
    /// Whether `--force` may override it for `run` ([`check_forced`]).
    pub fn forcible(&self, run: &RunRecord) -> bool {
        matches!(self, Incompatible::KindDiffers { idx, .. } if *idx < run.cursor.get())
    }
}

/// Every way `offered` breaks the rule for `run`, by step: `Err` when the
/// run cannot move to it at all (another crew, an ended run).
fn differences(run: &RunRecord, offered: &CrewDef) -> Result<Vec<Incompatible>, Incompatible> {
    if run.crew != offered.name {
        return Err(Incompatible::OtherCrew {
            run: run.crew.clone(),
            offered: offered.name.clone(),
        });
    }
    if run.status.is_finished() {
        return Err(Incompatible::Ended { status: run.status });
    }
    let mut found = Vec::new();
    let old = &run.crew_definition.agents;
    for idx in 0..started(run) {
        let Some(was) = old.get(idx as usize) else {
            break;
        };
        let Some(now) = offered.agents.get(idx as usize) else {
            found.push(Incompatible::StepRemoved {
                idx,
                role: was.role.as_str().to_owned(),
                steps: offered.step_count(),
            });
            return Ok(found);
        };
        if was.role != now.role {
            found.push(Incompatible::RoleDiffers {
                idx,
                run: was.role.as_str().to_owned(),
                offered: now.role.as_str().to_owned(),
            });
        } else if was.kind.name() != now.kind.name() {
            found.push(Incompatible::KindDiffers {
                idx,
                role: was.role.as_str().to_owned(),
                run: was.kind.name(),
                offered: now.kind.name(),
            });
        }
    }
    if run.cursor.get() >= offered.step_count() {
        found.push(Incompatible::CursorPast {
            cursor: run.cursor.get(),
            steps: offered.step_count(),
        });
    }
    Ok(found)
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
    /// For a `changed` step: what differs, as paths into the agent's
    /// stored JSON (`template`, `timeout_ms`, `crew_def.agents.0.template`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// Step by step, how `b` differs from `a`. Directories are no part of a
/// version ([`CrewDef::without_dirs`]), so a child crew's file that lies
/// elsewhere is no change.
pub fn diff(a: &CrewDef, b: &CrewDef) -> Vec<StepDiff> {
    let (a, b) = (a.without_dirs(), b.without_dirs());
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
            let mut fields = Vec::new();
            if let (StepChange::Changed, Some(x), Some(y)) = (change, x, y) {
                let json = |d: &AgentDef| serde_json::to_value(d).unwrap_or_default();
                differing("", &json(x), &json(y), &mut fields);
            }
            let name = |d: &AgentDef| format!("{} ({})", d.role.as_str(), d.kind.name());
            StepDiff {
                idx: i as u32,
                change,
                from: x.map(name),
                to: y.map(name),
                fields,
            }
        })
        .collect()
}

/// The paths (dotted; array elements by index) at which `a` and `b`
/// differ, into `out`: objects and arrays of one length are followed
/// down, anything else that differs is named where it is.
fn differing(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    let at = |key: &str| match path {
        "" => key.to_owned(),
        _ => format!("{path}.{key}"),
    };
    match (a, b) {
        _ if a == b => {}
        (Value::Object(x), Value::Object(y)) => {
            let added = y.keys().filter(|k| !x.contains_key(*k));
            for key in x.keys().chain(added) {
                let (v, w) = (x.get(key), y.get(key));
                let null = Value::Null;
                differing(&at(key), v.unwrap_or(&null), w.unwrap_or(&null), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                differing(&at(&i.to_string()), v, w, out);
            }
        }
        _ => out.push(path.to_owned()),
    }
}

#[cfg(test)]
mod tests;

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
