//! Where a run `waiting` for its step's children stands, read from those
//! children: still working, stopped (an operator must continue them), or
//! waiting for a person. `cairn run` follows the first, exits 5 on the
//! second and 4 on the third; `runs show` and the console name each.

use serde::Serialize;

use cairn_core::RunStatus;

use crate::RunView;

/// What a run waiting for the children of its step waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum ChildrenWait {
    /// Some children still work (queued or running): the run goes on by
    /// itself once their join is decided.
    Working { live: usize, total: usize },
    /// None works, and some stopped `interrupted` (a budget spent, a turn
    /// limit): nothing moves until an operator continues them
    /// (`cairn runs continue PARENT`, with `--budget` to raise first).
    Stopped { interrupted: usize, total: usize },
    /// None works or stopped; some wait for a person (or for children of
    /// their own that do).
    Person { waiting: usize, total: usize },
}

impl ChildrenWait {
    /// The status a person reads: `waiting for 3 children (2 running)`.
    pub fn describe(&self) -> String {
        let of = |n: usize| match n {
            1 => "1 child".to_owned(),
            n => format!("{n} children"),
        };
        match *self {
            ChildrenWait::Working { live, total } => {
                format!("waiting for {} ({live} still working)", of(total))
            }
            ChildrenWait::Stopped { interrupted, total } => format!(
                "waiting for {}: {interrupted} interrupted, an operator must continue them",
                of(total)
            ),
            ChildrenWait::Person { waiting, total } => {
                format!("waiting for {}: {waiting} waiting for a person", of(total))
            }
        }
    }
}

impl RunView {
    /// Where the run stands when it is `waiting` at a step that started
    /// children which have not all ended; `None` for any other run (one
    /// waiting for a person at its own step, say).
    pub fn children_wait(&self) -> Option<ChildrenWait> {
        let run = &self.run;
        if run.status != RunStatus::Waiting {
            return None;
        }
        let at = run.crew_definition.agents.get(run.cursor.get() as usize)?;
        if !at.starts_children() {
            return None;
        }
        // Children of this step (a view from a server carries no step:
        // earlier steps' children have all ended by now).
        let here = self
            .children
            .iter()
            .filter(|c| c.step.is_none_or(|s| s == run.cursor));
        let (mut total, mut live, mut stopped, mut waiting) = (0, 0, 0, 0);
        for c in here {
            total += 1;
            match c.status {
                RunStatus::Queued | RunStatus::Running => live += 1,
                RunStatus::Interrupted => stopped += 1,
                RunStatus::Waiting => waiting += 1,
                _ => {}
            }
        }
        // Every child ended but the run still reads `waiting` at a step
        // with no output (a review's would have one): the join was decided
        // between this view's reads, and the run is queued already.
        let step_output = self
            .steps
            .iter()
            .find(|s| s.idx == run.cursor)
            .is_some_and(|s| s.output.is_some());
        match (live, stopped, waiting) {
            (0, 0, 0) if total > 0 && !step_output => Some(ChildrenWait::Working { live, total }),
            (0, 0, 0) => None,
            (0, 0, waiting) => Some(ChildrenWait::Person { waiting, total }),
            (0, interrupted, _) => Some(ChildrenWait::Stopped { interrupted, total }),
            (live, _, _) => Some(ChildrenWait::Working { live, total }),
        }
    }
}
