//! Child runs: a `children` step's definition (the crew it starts, how its
//! children are listed, its join rule), the request a step makes to spawn
//! them, the rule that decides when the join is met, and what the step sees
//! of its children once they have settled. Pure: storage counts and spawns,
//! the scheduler dispatches; both ask this module what the counts mean.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::checkpoint::ErrorInfo;
use crate::ids::{Attempt, RunId, StepIdx};
use crate::status::RunStatus;

pub use crate::crew::children::{
    ChildrenDef, FixedChild, JoinRule, OnParentClose, DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH,
};
pub use crate::ids::ChildOf;

/// A step's request to start children (returned as [`crate::Stop::Spawn`],
/// as a question is): the executor commits it as the
/// step's spawn, and the step runs again once the join is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawn {
    pub children: Vec<FixedChild>,
    /// The crew of each child by name, in `children`'s order, when the
    /// step picks them (an `llm` agent's `delegate` calls); empty when
    /// every child runs the step's own crew (a `children` step).
    pub crews: Vec<String>,
}

impl Spawn {
    /// The [`crate::Stop`] that carries this request to the executor.
    pub fn into_stop(self) -> crate::Stop {
        crate::Stop::Spawn(self)
    }
}

/// Where a join stands, from its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinState {
    /// Not decided: children are still running.
    Open,
    /// The rule is met: the step succeeds with the children's outcomes.
    Met,
    /// The rule can no longer be met: the step fails.
    Failed,
}

/// The counts of one join, as storage keeps them (each child counted once,
/// when it first settles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinCounts {
    pub rule: JoinRule,
    pub quorum: u32,
    pub total: u32,
    pub settled: u32,
    pub ok: u32,
}

impl JoinCounts {
    /// What the counts mean under the rule. Decided once: storage acts on
    /// the first answer that is not `Open`.
    pub fn state(&self) -> JoinState {
        let failed = self.settled.saturating_sub(self.ok);
        let pending = self.total.saturating_sub(self.settled);
        match self.rule {
            JoinRule::All if pending == 0 => JoinState::Met,
            JoinRule::All => JoinState::Open,
            JoinRule::AllOk if failed > 0 => JoinState::Failed,
            JoinRule::AllOk if self.ok == self.total => JoinState::Met,
            JoinRule::AllOk => JoinState::Open,
            JoinRule::FirstOk if self.ok >= 1 => JoinState::Met,
            JoinRule::FirstOk if pending == 0 => JoinState::Failed,
            JoinRule::FirstOk => JoinState::Open,
            JoinRule::Quorum if self.ok >= self.quorum => JoinState::Met,
            JoinRule::Quorum if self.ok + pending < self.quorum => JoinState::Failed,
            JoinRule::Quorum => JoinState::Open,
        }
    }
}

/// One child as its parent's step sees it once the join is decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildOutcome {
    pub key: String,
    pub run_id: RunId,
    pub status: RunStatus,
    /// The child's final output (its last step's), when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// Input and output tokens of every step of the child.
    pub tokens: u64,
    /// The same tokens split, summed into the parent step's row.
    #[serde(skip)]
    pub usage: crate::checkpoint::Usage,
    /// Queued beyond the step's `concurrency`, not claimable yet.
    #[serde(skip)]
    pub held: bool,
    /// The parent's step that started it.
    #[serde(skip)]
    pub step: Option<crate::StepIdx>,
    /// When it was started (its spawn) and when it ended: the console
    /// draws it on its parent's timeline. Not in the JSON (a step's output
    /// of its children stays as it was).
    #[serde(skip)]
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip)]
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A decided join, as the step that spawned it sees it when it runs again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Joined {
    pub rule: JoinRule,
    pub met: bool,
    /// Every child, in the order they were listed.
    pub children: Vec<ChildOutcome>,
}

/// A child's id: derived from (parent, step, attempt, key), so a spawn
/// written again after a crash names the same runs. A UUID of version 8
/// (custom), from the first 16 bytes of a SHA-256.
pub fn child_id(parent: RunId, idx: StepIdx, attempt: Attempt, key: &str) -> RunId {
    let mut h = Sha256::new();
    h.update(b"cairn-child\0");
    h.update(parent.as_uuid().as_bytes());
    h.update(idx.get().to_be_bytes());
    h.update(attempt.get().to_be_bytes());
    h.update(key.as_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    RunId::from_uuid(uuid::Uuid::from_bytes(bytes))
}

/// The children a map step starts: one per element of the array at `path`
/// in `vars` (a step's template variables: `input`, `outputs`, …), keyed by
/// index. An error names what was missing or not an array.
pub fn map_children(vars: &Value, path: &str) -> Result<Vec<FixedChild>, String> {
    let mut at = vars;
    for part in path.split('.') {
        at = match at {
            Value::Object(m) => m.get(part),
            Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }
        .ok_or_else(|| format!("`over = \"{path}\"`: the context has nothing at `{part}`"))?;
    }
    let items = at
        .as_array()
        .ok_or_else(|| format!("`over = \"{path}\"` is not a JSON array"))?;
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| FixedChild {
            crew: None,
            key: i.to_string(),
            input: serde_json::json!({"item": item, "index": i}),
        })
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every rule against counts on each side of its edge.
    #[test]
    fn join_rules_decide_from_counts() {
        use JoinRule::*;
        use JoinState::*;
        // Per rule (with its quorum and total): (settled, ok, the state).
        type Sides = &'static [(u32, u32, JoinState)];
        let cases: [(JoinRule, u32, u32, Sides); 4] = [
            (All, 0, 3, &[(2, 2, Open), (3, 0, Met)]),
            (AllOk, 0, 3, &[(2, 2, Open), (1, 0, Failed), (3, 3, Met)]),
            (FirstOk, 0, 3, &[(2, 0, Open), (1, 1, Met), (3, 0, Failed)]),
            (
                Quorum,
                2,
                4,
                &[(2, 1, Open), (2, 2, Met), (3, 0, Failed), (3, 1, Open)],
            ),
        ];
        for (rule, quorum, total, sides) in cases {
            for &(settled, ok, want) in sides {
                let counts = JoinCounts {
                    rule,
                    quorum,
                    total,
                    settled,
                    ok,
                };
                let case = format!("{rule:?} {quorum} of {total}, {settled} settled, {ok} ok");
                assert_eq!(counts.state(), want, "case {case}");
            }
        }
    }

    #[test]
    fn child_ids_are_stable_and_distinct() {
        let parent = RunId::new();
        let a = child_id(parent, StepIdx(1), Attempt(1), "a");
        assert_eq!(a, child_id(parent, StepIdx(1), Attempt(1), "a"));
        assert_ne!(a, child_id(parent, StepIdx(1), Attempt(2), "a"));
        assert_ne!(a, child_id(parent, StepIdx(1), Attempt(1), "b"));
        assert_eq!(a.as_uuid().get_version_num(), 8);
    }

    #[test]
    fn a_map_lists_one_child_per_element() {
        let vars = serde_json::json!({"outputs": {"plan": {"items": ["x", "y"]}}});
        let kids = map_children(&vars, "outputs.plan.items").unwrap();
        assert_eq!(kids.len(), 2);
        assert_eq!(kids[1].key, "1");
        assert_eq!(kids[1].input, serde_json::json!({"item": "y", "index": 1}));
        let missing = map_children(&vars, "outputs.nope").unwrap_err();
        assert!(missing.contains("nothing at `nope`"), "{missing}");
        let scalar = map_children(&serde_json::json!({"input": 3}), "input").unwrap_err();
        assert!(scalar.contains("not a JSON array"), "{scalar}");
    }
}
