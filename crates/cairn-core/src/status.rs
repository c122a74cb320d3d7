//! Run and step statuses and the transitions docs/DESIGN.md allows between them.
//! Every state change in Cairn is checked here first; the store repeats the
//! check in SQL (`WHERE status = …`) so a race cannot slip past it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A state change that the tables below do not allow. It lives beside them
/// so the tables need nothing from the rest of the crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The run is in a state that cannot become `to`.
    #[error("a run that is `{from}` cannot become `{to}`")]
    Run { from: RunStatus, to: RunStatus },
    /// The step is in a state that cannot become `to` (`None`: never ran).
    #[error("a step that is `{}` cannot become `{to}`", from.map(|s| s.as_str()).unwrap_or("not started"))]
    Step {
        from: Option<StepStatus>,
        to: StepStatus,
    },
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Waiting,
    Interrupted,
    Succeeded,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Waiting,
        RunStatus::Interrupted,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Waiting => "waiting",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Finished runs return their stored result on resume and execute nothing.
    pub fn is_finished(self) -> bool {
        matches!(self, RunStatus::Succeeded | RunStatus::Cancelled)
    }

    /// Not ended yet (queued, running, waiting, interrupted): a child in
    /// one of these has not settled its parent's join.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            RunStatus::Queued | RunStatus::Running | RunStatus::Waiting | RunStatus::Interrupted
        )
    }

    /// Whether docs/DESIGN.md's run table allows `self → to`.
    pub fn can_become(self, to: RunStatus) -> bool {
        use RunStatus::*;
        match self {
            Queued => matches!(to, Running | Cancelled),
            Running => true,
            // Succeeded: the approved review was the run's last step.
            Waiting => matches!(to, Queued | Failed | Cancelled | Succeeded),
            Interrupted => matches!(to, Queued | Cancelled),
            Failed => matches!(to, Queued | Cancelled),
            Succeeded | Cancelled => false,
        }
    }

    /// `Ok` if the transition is allowed, else a typed error naming the state.
    pub fn check(self, to: RunStatus) -> Result<(), TransitionError> {
        if self.can_become(to) {
            Ok(())
        } else {
            Err(TransitionError::Run { from: self, to })
        }
    }
}

/// Where a step is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Running,
    Succeeded,
    Failed,
    Waiting,
    Interrupted,
    Cancelled,
}

impl StepStatus {
    pub const ALL: [StepStatus; 6] = [
        StepStatus::Running,
        StepStatus::Succeeded,
        StepStatus::Failed,
        StepStatus::Waiting,
        StepStatus::Interrupted,
        StepStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Running => "running",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
            StepStatus::Waiting => "waiting",
            StepStatus::Interrupted => "interrupted",
            StepStatus::Cancelled => "cancelled",
        }
    }

    /// Whether docs/DESIGN.md's step table allows `self → to`. `None` is a step
    /// with no row yet, which may only be dispatched.
    pub fn can_become(from: Option<StepStatus>, to: StepStatus) -> bool {
        use StepStatus::*;
        match from {
            None => to == Running,
            Some(Running) => to != Running,
            Some(Failed) => to == Running,
            // Failed: an approval rejected, or a wait's deadline with the
            // outcome "fail" (the store does both).
            Some(Waiting) => matches!(to, Succeeded | Running | Failed | Cancelled),
            Some(Interrupted) => matches!(to, Running | Cancelled),
            Some(Succeeded) | Some(Cancelled) => false,
        }
    }

    pub fn check(from: Option<StepStatus>, to: StepStatus) -> Result<(), TransitionError> {
        if Self::can_become(from, to) {
            Ok(())
        } else {
            Err(TransitionError::Step { from, to })
        }
    }
}

/// `Display` and `FromStr` through `as_str`, over the type's `ALL` (whose
/// order the refusal lists).
macro_rules! status_text {
    ($ty:ident, $what:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $ty::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| {
                        let all: Vec<&str> = $ty::ALL.iter().map(|v| v.as_str()).collect();
                        format!("`{s}` is not a {} (one of: {})", $what, all.join(", "))
                    })
            }
        }
    };
}
status_text!(RunStatus, "run status");
status_text!(StepStatus, "step status");

#[cfg(test)]
mod tests {
    use super::*;
    use RunStatus::*;

    /// The run table of docs/DESIGN.md, written out as data: every pair not listed
    /// must be refused.
    const ALLOWED: &[(RunStatus, RunStatus)] = &[
        (Queued, Running),
        (Running, Running),
        (Running, Queued),
        (Running, Succeeded),
        (Running, Failed),
        (Running, Waiting),
        (Running, Interrupted),
        (Running, Cancelled),
        (Waiting, Queued),
        (Waiting, Failed),
        (Waiting, Succeeded),
        (Interrupted, Queued),
        (Failed, Queued),
        (Queued, Cancelled),
        (Waiting, Cancelled),
        (Interrupted, Cancelled),
        (Failed, Cancelled),
    ];

    #[test]
    fn run_transitions_match_design_table() {
        for from in RunStatus::ALL {
            for to in RunStatus::ALL {
                let expected = ALLOWED.contains(&(from, to));
                assert_eq!(from.can_become(to), expected, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn refused_transition_names_current_state() {
        let err = Succeeded.check(Queued).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("a run that is `succeeded` cannot become `queued`")
        );
    }

    #[test]
    fn step_transitions_match_design_table() {
        use StepStatus as S;
        let all = [
            S::Running,
            S::Succeeded,
            S::Failed,
            S::Waiting,
            S::Interrupted,
            S::Cancelled,
        ];
        // Each status, and the ones it may become.
        #[rustfmt::skip]
        let allowed: &[(Option<S>, &[S])] = &[
            (None, &[S::Running]),
            (Some(S::Running), &[S::Succeeded, S::Failed, S::Waiting, S::Interrupted, S::Cancelled]),
            (Some(S::Failed), &[S::Running]),
            (Some(S::Waiting), &[S::Succeeded, S::Running, S::Failed, S::Cancelled]),
            (Some(S::Interrupted), &[S::Running, S::Cancelled]),
        ];
        let may = |from, to| {
            allowed
                .iter()
                .any(|(f, tos)| *f == from && tos.contains(&to))
        };
        let froms = std::iter::once(None).chain(all.iter().copied().map(Some));
        for from in froms {
            for to in all {
                let expected = may(from, to);
                assert_eq!(S::can_become(from, to), expected, "{from:?} -> {to}");
            }
        }
    }

    /// The `from → to` pairs of the table under `heading` in
    /// docs/DESIGN.md: a row's first cell is `a, b → c`; `(no row)` is a
    /// step that never ran.
    fn design_table(heading: &str) -> Vec<(String, String)> {
        let design = include_str!("../../../docs/DESIGN.md");
        let table = design
            .split(heading)
            .nth(1)
            .unwrap_or_else(|| panic!("docs/DESIGN.md has no `{heading}`"));
        let mut pairs = vec![];
        // After the header row and its `| --- |` line.
        let rows = table.lines().skip_while(|l| !l.starts_with('|')).skip(2);
        for line in rows {
            let Some(cell) = line.strip_prefix('|').and_then(|l| l.split('|').next()) else {
                break;
            };
            if let Some((from, to)) = cell.split_once('→') {
                for from in from.split(',') {
                    pairs.push((from.trim().to_owned(), to.trim().to_owned()));
                }
            }
        }
        pairs
    }

    #[test]
    fn the_design_document_has_the_same_tables() {
        let mut run: Vec<_> = ALLOWED
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect();
        let mut documented = design_table("### Run transitions");
        run.sort();
        documented.sort();
        assert_eq!(documented, run, "docs/DESIGN.md's run table");

        let mut step = vec![];
        let froms = std::iter::once(None).chain(StepStatus::ALL.map(Some));
        for from in froms {
            for to in StepStatus::ALL {
                if StepStatus::can_become(from, to) {
                    let from = from.map_or("(no row)".to_owned(), |s| s.to_string());
                    step.push((from, to.to_string()));
                }
            }
        }
        let mut documented = design_table("### Step transitions");
        step.sort();
        documented.sort();
        assert_eq!(documented, step, "docs/DESIGN.md's step table");
    }

    #[test]
    fn status_words_parse_and_print() {
        for s in RunStatus::ALL {
            assert_eq!(s.to_string().parse::<RunStatus>(), Ok(s));
        }
        assert!("done".parse::<RunStatus>().is_err());
    }
}
