//! Typed identifiers. Each wraps its primitive so a step index can never be
//! passed where an epoch is expected; serde and `Display`/`FromStr` are the
//! only ways in and out at the edges. And `ChildOf`, the ids that say where
//! a child run hangs, which runs and waits both carry.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A run's id: a UUID v7, so ids sort by creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(Uuid);

/// What every UUID id (`Name(Uuid)`) has: a fresh, time-ordered one as
/// its default, the way to and from a [`Uuid`], and its hyphenated form as
/// its `Display`.
macro_rules! uuid_id {
    ($ty:ident) => {
        impl $ty {
            /// A fresh, time-ordered id.
            pub fn new() -> Self {
                $ty(::uuid::Uuid::now_v7())
            }
            pub fn from_uuid(uuid: ::uuid::Uuid) -> Self {
                $ty(uuid)
            }
            pub fn as_uuid(&self) -> ::uuid::Uuid {
                self.0
            }
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}
pub(crate) use uuid_id;

/// What every text id (`Name(String)`) has: `as_str`, and the text as its
/// `Display`.
macro_rules! text_id {
    ($ty:ident) => {
        impl $ty {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
pub(crate) use text_id;

uuid_id!(RunId);

/// Why a string is not a run id.
#[derive(Debug, thiserror::Error)]
#[error("`{input}` is not a run id (expected a UUID such as 0193a1b2-…): {source}")]
pub struct ParseRunIdError {
    input: String,
    source: uuid::Error,
}

impl FromStr for RunId {
    type Err = ParseRunIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s.trim())
            .map(RunId)
            .map_err(|source| ParseRunIdError {
                input: s.to_owned(),
                source,
            })
    }
}

/// Index of a step within a run: the position of its agent in the crew.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct StepIdx(pub u32);

impl StepIdx {
    pub fn get(self) -> u32 {
        self.0
    }
    pub fn as_usize(self) -> usize {
        self.0 as usize
    }
    pub fn next(self) -> StepIdx {
        StepIdx(self.0 + 1)
    }
}

impl fmt::Display for StepIdx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The fencing token of a run's lease. Every claim increments it; a commit
/// carrying an older epoch is rejected by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseEpoch(pub i64);

impl fmt::Display for LeaseEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What a lease's holder fences every write with: the epoch its claim
/// granted and the owner it was granted to. The store compares both, so an
/// epoch granted twice (a claim lost with an asynchronous failover of the
/// database, then the same number granted to another process) still tells
/// its two holders apart: the first one's writes are refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    pub epoch: LeaseEpoch,
    pub owner: std::sync::Arc<str>,
}

impl Fence {
    pub fn new(epoch: LeaseEpoch, owner: impl Into<std::sync::Arc<str>>) -> Fence {
        Fence {
            epoch,
            owner: owner.into(),
        }
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch {} of `{}`", self.epoch, self.owner)
    }
}

/// Attempt number of a step, counting from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Attempt(pub u32);

impl Attempt {
    pub const FIRST: Attempt = Attempt(1);
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An agent's role: unique within its crew.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Role(String);

impl Role {
    pub fn new(role: impl Into<String>) -> Self {
        Role(role.into())
    }
}

text_id!(Role);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_round_trips_and_rejects_garbage() {
        let id = RunId::new();
        assert_eq!(id.to_string().parse::<RunId>().ok(), Some(id));
        let err = "not-a-uuid".parse::<RunId>().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("`not-a-uuid` is not a run id")));
    }

    #[test]
    fn run_ids_sort_by_creation() {
        let a = RunId::new();
        let b = RunId::new();
        assert!(a < b);
    }
}

/// A run started by another run's step: where it hangs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildOf {
    pub parent_run_id: RunId,
    pub step_idx: StepIdx,
    pub attempt: Attempt,
    pub key: String,
    /// 1 for a child of a top-level run.
    pub depth: u32,
}
