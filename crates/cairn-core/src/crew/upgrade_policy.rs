//! A crew file's top-level `upgrade`: whether a run moves to a newer
//! version of its crew. The compatibility rule and the moves themselves
//! are `crate::upgrade`.

use serde::{Deserialize, Serialize};

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
