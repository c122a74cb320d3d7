//! The accumulated context of a step, and its rebuild from checkpoint rows.
//! `rebuild` is the one place that decides where a run stands; it refuses
//! rows that disagree with the cursor instead of guessing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoint::{RunRecord, StepRecord};
use crate::error::Corruption;
use crate::ids::{Attempt, Role, RunId, StepIdx};
use crate::journal::JournalHandle;
use crate::meter::StepMeter;
use crate::status::{RunStatus, StepStatus};

/// Which step is executing: the `step` object of the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRef {
    pub idx: StepIdx,
    pub role: Role,
    pub attempt: Attempt,
}

/// One earlier step's output as later steps see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviousOutput {
    pub idx: StepIdx,
    pub role: Role,
    pub output: Value,
}

/// An earlier finished run of the step's thread, as the conversation so far:
/// its input (the user's turn) and its final output (the assistant's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadTurn {
    pub run_id: RunId,
    pub input: Value,
    pub output: Value,
}

/// The newest whole turns of `turns` (oldest first) whose inputs and
/// outputs, as compact JSON, fit in `max_bytes` together; oldest first.
pub fn newest_within(mut turns: Vec<ThreadTurn>, max_bytes: usize) -> Vec<ThreadTurn> {
    let mut used = 0usize;
    let mut keep = turns.len();
    for turn in turns.iter().rev() {
        let size = turn.input.to_string().len() + turn.output.to_string().len();
        if used + size > max_bytes {
            break;
        }
        used += size;
        keep -= 1;
    }
    turns.split_off(keep)
}

/// Everything a step may see. Its JSON form is what a `command` step reads
/// on stdin and what a template renders from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepContext {
    pub run_id: RunId,
    pub input: Value,
    pub step: StepRef,
    /// Shared, not copied: step N of a long run would otherwise copy N
    /// outputs (a 1,000-step run, half a million copies in all).
    pub previous: std::sync::Arc<Vec<PreviousOutput>>,
    /// The earlier succeeded runs of the run's thread, oldest first (empty
    /// when the run belongs to no thread).
    #[serde(default)]
    pub thread: Vec<ThreadTurn>,
    /// Reviewers' feedback on earlier attempts of this step, oldest first.
    #[serde(default)]
    pub feedback: Vec<String>,
    /// Answers to questions this attempt asked, by question id.
    #[serde(default)]
    pub answers: std::collections::BTreeMap<String, Value>,
    /// A `children` step's decided join (absent until its children settle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<crate::children::Joined>,
    /// What the executor gives the step besides what it reads: its
    /// journal and its meter. Never serialized.
    #[serde(skip)]
    pub services: StepServices,
}

/// The services the executor hands a step, bound to its run, attempt and
/// lease; absent (the default) in a context built by hand.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepServices {
    /// This step's journal (agent steps write their turn to it as it
    /// happens).
    pub journal: Option<JournalHandle>,
    /// What the step's model calls answer to: budgets, prices, key limits.
    pub meter: StepMeter,
    /// The run's W3C `traceparent` (its trace, under the run's span) when
    /// it is traced: a `command` step's `TRACEPARENT`.
    pub traceparent: Option<String>,
}

impl StepContext {
    /// The context of step `step` of run `run_id` with `input`, and
    /// nothing else: no earlier outputs, thread, feedback, answers or
    /// children, and none of the services the executor sets (journal,
    /// budget, prices, limits, trace). A test of an agent starts from it
    /// and sets what it needs.
    pub fn new(run_id: RunId, input: Value, step: StepRef) -> StepContext {
        StepContext {
            run_id,
            input,
            step,
            previous: Default::default(),
            thread: vec![],
            feedback: vec![],
            answers: Default::default(),
            children: None,
            services: StepServices::default(),
        }
    }

    /// The same context without its services: what a step reads, alone.
    pub fn data(&self) -> StepContext {
        StepContext {
            services: StepServices::default(),
            ..self.clone()
        }
    }

    /// The answer to question `id`, or the [`crate::Stop::Ask`] that makes
    /// the executor ask it: the step waits, and once a person answers, the step runs again
    /// from its start with the answer here. Use with `?`:
    /// `let budget = cx.ask("budget", "What is the budget?")?;`
    pub fn ask(&self, id: &str, prompt: &str) -> Result<Value, crate::Stop> {
        match self.answers.get(id) {
            Some(answer) => Ok(answer.clone()),
            None => Err(crate::Stop::ask(id, prompt)),
        }
    }

    /// Publishes `value` under `key` for the run's callers
    /// (`crate::published`): recorded at once in the run's events, fenced
    /// by this attempt's lease.
    pub async fn publish(
        &self,
        key: &str,
        value: Value,
    ) -> Result<(), crate::published::PublishError> {
        crate::published::check(key, &value)?;
        let journal = self.services.journal.as_ref();
        let journal = journal.ok_or(crate::published::PublishError::NoJournal)?;
        let event = crate::event::payload::ValuePublished {
            key: key.to_owned(),
            value,
            idx: self.step.idx,
            attempt: self.step.attempt,
        };
        let event = crate::NewEvent::typed(crate::EventData::ValuePublished(event));
        Ok(journal.event(event).await?)
    }

    /// The output of the earlier step with this role, if any.
    pub fn output_of(&self, role: &str) -> Option<&Value> {
        self.previous
            .iter()
            .find(|p| p.role.as_str() == role)
            .map(|p| &p.output)
    }
}

/// Where a run stands, rebuilt from its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Rebuilt {
    /// Outputs of steps `0..cursor`, in order.
    pub previous: Vec<PreviousOutput>,
    /// The row at the cursor, if one exists (an in-flight or failed step).
    pub at_cursor: Option<StepRecord>,
}

/// Rebuilds the accumulated context of `run` from its checkpoint rows
/// (sorted by `idx`), checking that they agree with the cursor: rows
/// `0..cursor` exist, succeeded and carry an output; no row lies past the
/// cursor; a succeeded run's cursor is at the end.
pub fn rebuild(run: &RunRecord, steps: &[StepRecord]) -> Result<Rebuilt, Corruption> {
    rebuild_owned(run, steps.to_vec())
}

/// [`rebuild`] of rows the caller no longer needs: their outputs are moved
/// into the context, not copied (a resume of 1,000 steps).
pub fn rebuild_owned(run: &RunRecord, steps: Vec<StepRecord>) -> Result<Rebuilt, Corruption> {
    let corrupt = |detail: String| Corruption::new(run.id, detail);
    let cursor = run.cursor.get();
    let count = run.crew_definition.step_count();
    if run.step_count != count {
        return Err(corrupt(format!(
            "run says {} steps but its crew has {count}",
            run.step_count
        )));
    }
    if cursor > count {
        return Err(corrupt(format!(
            "cursor {cursor} is past the last step ({count} steps)"
        )));
    }
    if run.status == RunStatus::Succeeded && cursor != count {
        return Err(corrupt(format!(
            "run is succeeded but its cursor is {cursor} of {count}"
        )));
    }
    let mut previous = Vec::with_capacity(cursor as usize);
    let mut at_cursor = None;
    let mut expected = 0u32;
    for row in steps {
        let idx = row.idx.get();
        if idx != expected {
            if idx < expected {
                return Err(corrupt(format!("step {idx} appears twice")));
            }
            return Err(corrupt(format!(
                "checkpoint of step {expected} is missing (found step {idx}, cursor {cursor})"
            )));
        }
        expected += 1;
        let agent = run.crew_definition.agents.get(row.idx.as_usize());
        if agent.map(|a| &a.role) != Some(&row.role) {
            return Err(corrupt(format!(
                "step {idx} has role `{}` but the crew's agent {idx} is `{}`",
                row.role,
                agent.map(|a| a.role.as_str()).unwrap_or("(none)")
            )));
        }
        if idx < cursor {
            match (row.status, row.output) {
                (StepStatus::Succeeded, Some(output)) => previous.push(PreviousOutput {
                    idx: row.idx,
                    role: row.role,
                    output,
                }),
                (StepStatus::Succeeded, None) => {
                    return Err(corrupt(format!("step {idx} succeeded but has no output")))
                }
                (status, _) => {
                    return Err(corrupt(format!(
                        "step {idx} is `{status}` but the cursor ({cursor}) says it succeeded"
                    )))
                }
            }
        } else if idx == cursor {
            if row.status == StepStatus::Succeeded {
                return Err(corrupt(format!(
                    "step {idx} succeeded but the cursor still points at it"
                )));
            }
            at_cursor = Some(row);
        } else {
            return Err(corrupt(format!(
                "step {idx} has a checkpoint past the cursor ({cursor})"
            )));
        }
    }
    if expected < cursor {
        return Err(corrupt(format!(
            "checkpoint of step {expected} is missing (cursor {cursor})"
        )));
    }
    Ok(Rebuilt {
        previous,
        at_cursor,
    })
}

#[cfg(test)]
mod window_tests {
    use super::*;

    fn turn(n: usize) -> ThreadTurn {
        ThreadTurn {
            run_id: RunId::new(),
            input: Value::String("i".repeat(n)),
            output: Value::Null,
        }
    }

    #[test]
    fn the_newest_whole_turns_that_fit_are_kept_oldest_first() {
        // Each turn is n + 2 (quotes) + 4 ("null") bytes.
        let turns: Vec<ThreadTurn> = [10, 20, 30].into_iter().map(turn).collect();
        let ids: Vec<RunId> = turns.iter().map(|t| t.run_id).collect();
        let kept = |max| -> Vec<RunId> {
            newest_within(turns.clone(), max)
                .iter()
                .map(|t| t.run_id)
                .collect()
        };
        assert_eq!(kept(1000), ids);
        assert_eq!(kept(36 + 26), ids[1..].to_vec());
        assert_eq!(
            kept(36 + 25),
            ids[2..].to_vec(),
            "a turn is kept whole or not at all"
        );
        assert_eq!(kept(35), Vec::<RunId>::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Attempt, Role, StepIdx};
    use crate::meter::budget::Budget;

    #[test]
    fn a_steps_services_never_reach_its_json() {
        let step = StepRef {
            idx: StepIdx(2),
            role: Role::new("writer"),
            attempt: Attempt(1),
        };
        let bare = StepContext::new(RunId::new(), serde_json::json!({"topic": "rust"}), step);
        let served = StepContext {
            services: StepServices {
                meter: StepMeter {
                    budget: Some(Budget {
                        tokens: Some(10),
                        ..Budget::default()
                    }),
                    rolls_up: true,
                    thread_id: Some("t".into()),
                    ..StepMeter::default()
                },
                traceparent: Some("00-01-02-01".into()),
                ..StepServices::default()
            },
            ..bare.clone()
        };
        let json = |cx: &StepContext| serde_json::to_string(cx).unwrap_or_default();
        assert_eq!(json(&served), json(&bare));
        assert_eq!(served.data().services, StepServices::default());
        let keys: Vec<String> = match serde_json::to_value(&served) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            other => panic!("{other:?}"),
        };
        let expected = [
            "answers", "feedback", "input", "previous", "run_id", "step", "thread",
        ];
        assert_eq!(keys, expected);
    }
}
