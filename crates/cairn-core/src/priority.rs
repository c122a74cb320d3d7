//! A run's priority: the order claims take queued runs in. Higher goes
//! first, with ageing: each point is [`Priority::AGEING_SECS`] of head
//! start over a run submitted at the same moment, so a run of priority 0
//! waits behind newer runs of priority 10 for at most ten minutes, and is
//! never starved. The store keeps the order as one time per run
//! (`claim_at` = submitted − head start), so a claim reads one index.

use serde::{Deserialize, Serialize};

/// A run's priority, [`Priority::MIN`] to [`Priority::MAX`]; 0 by default.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Priority(i32);

/// A priority out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("priority {0} is out of range: use {min} to {max} (higher runs first)", min = Priority::MIN, max = Priority::MAX)]
pub struct BadPriority(pub i64);

impl Priority {
    pub const MIN: i32 = -1000;
    pub const MAX: i32 = 1000;
    /// The head start one point of priority gives, in seconds.
    pub const AGEING_SECS: i64 = 60;

    pub fn new(p: i64) -> Result<Priority, BadPriority> {
        match i32::try_from(p) {
            Ok(p) if (Self::MIN..=Self::MAX).contains(&p) => Ok(Priority(p)),
            _ => Err(BadPriority(p)),
        }
    }

    pub fn get(self) -> i32 {
        self.0
    }

    /// Seconds this run goes ahead of one of priority 0 submitted with it
    /// (negative: behind).
    pub fn head_start_secs(self) -> i64 {
        i64::from(self.0) * Self::AGEING_SECS
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_is_in_range_or_refused_naming_the_range() {
        for ok in [-1000, -1, 0, 7, 1000] {
            assert_eq!(Priority::new(ok).map(Priority::get), Ok(ok as i32));
        }
        for bad in [-1001, 1001, i64::from(i32::MAX) + 1, i64::MIN] {
            let e = Priority::new(bad).unwrap_err();
            assert!(e.to_string().contains("-1000 to 1000"), "{e}");
        }
        assert_eq!(Priority::new(10).map(Priority::head_start_secs), Ok(600));
        assert_eq!(Priority::default().get(), 0);
    }
}
