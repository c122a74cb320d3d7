//! Child runs: a `children` step's definition (the crew it starts, how its
//! children are listed, its join rule), the request a step makes to spawn
//! them, the rule that decides when the join is met, and what the step sees
//! of its children once they have settled. Pure: storage counts and spawns,
//! the scheduler dispatches; both ask this module what the counts mean.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::checkpoint::ErrorInfo;
use crate::crew::CrewDef;
use crate::ids::{Attempt, RunId, StepIdx};
use crate::status::RunStatus;

/// Children one step may start, unless its definition says otherwise.
pub const DEFAULT_MAX_CHILDREN: u32 = 1_000;
/// How deep runs may nest (a top-level run is depth 0), unless the step
/// says otherwise.
pub const DEFAULT_MAX_DEPTH: u32 = 3;

/// A `children` agent: starts one run of `crew` per child and waits,
/// holding nothing, until its join rule is met.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildrenDef {
    /// The crew file as the crew names it (relative to the crew's file).
    pub crew: String,
    /// The child crew, resolved when the parent crew was loaded and stored
    /// with it (so a resume needs no file, and the parent's fingerprint
    /// covers the child's definition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crew_def: Option<Box<CrewDef>>,
    /// Map: a path into the context (`input.x`, `outputs.ROLE.x`) to a JSON
    /// array; one child per element, with input `{"item", "index"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    /// A fixed list of children, each with its key and input (and maybe a
    /// crew file of its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<FixedChild>,
    /// The crews the fixed list names by file, loaded with the parent crew
    /// (as `crew_def`), by the file as written.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub child_crews: std::collections::BTreeMap<String, CrewDef>,
    #[serde(default, skip_serializing_if = "JoinRule::is_default")]
    pub join: JoinRule,
    /// With `join = "quorum"`: how many children must succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    /// Children in flight at once; the rest wait their turn (`held`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_children: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<u32>,
    /// What becomes of unfinished children when the parent is cancelled.
    #[serde(default, skip_serializing_if = "OnParentClose::is_default")]
    pub on_parent_close: OnParentClose,
    /// A template that reduces the outcomes to the step's output (its
    /// variables are a template step's plus `children`, the outcomes);
    /// the text it renders, as JSON when it is JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

impl ChildrenDef {
    pub fn max_children(&self) -> u32 {
        self.max_children.unwrap_or(DEFAULT_MAX_CHILDREN)
    }

    pub fn max_depth(&self) -> u32 {
        self.max_depth.unwrap_or(DEFAULT_MAX_DEPTH)
    }

    /// The first rule this definition breaks, if any (the child crew's own
    /// rules are checked when it is resolved).
    pub fn problem(&self) -> Option<String> {
        if self.crew.trim().is_empty() {
            return Some("has an empty `crew`".into());
        }
        match (&self.over, self.children.is_empty()) {
            (Some(_), false) => {
                return Some("has both `over` and `children`; give one".into());
            }
            (None, true) => {
                return Some(
                    "needs `over = \"outputs.ROLE.items\"` (one child per element) or a \
                     `children` list"
                        .into(),
                )
            }
            _ => {}
        }
        let mut keys = std::collections::HashSet::new();
        if let Some(c) = self.children.iter().find(|c| !keys.insert(c.key.as_str())) {
            return Some(format!("lists child key `{}` twice", c.key));
        }
        if self.children.iter().any(|c| c.key.is_empty()) {
            return Some("has a child with an empty `key`".into());
        }
        if self.children.len() > self.max_children() as usize {
            return Some(format!(
                "lists {} children, over its `max_children` of {}",
                self.children.len(),
                self.max_children()
            ));
        }
        match (self.join, self.quorum) {
            (JoinRule::Quorum, None | Some(0)) => {
                return Some("has `join = \"quorum\"` and needs `quorum = N` (N ≥ 1)".into())
            }
            (JoinRule::Quorum, Some(n))
                if !self.children.is_empty() && n as usize > self.children.len() =>
            {
                return Some(format!(
                    "has `quorum = {n}`, more than its {} children",
                    self.children.len()
                ))
            }
            (JoinRule::Quorum, _) | (_, None) => {}
            (_, Some(_)) => {
                return Some("has `quorum`, which only `join = \"quorum\"` takes".into())
            }
        }
        if self.concurrency == Some(0) || self.max_children == Some(0) {
            return Some("has `concurrency` or `max_children` of 0".into());
        }
        None
    }
}

/// One child of a fixed list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedChild {
    pub key: String,
    pub input: Value,
    /// A crew file of its own (relative to the parent's crew file), instead
    /// of the step's `crew`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crew: Option<String>,
}

/// When the children's step may go on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinRule {
    /// Every child settled, whatever its outcome (the default).
    #[default]
    All,
    /// Every child succeeded; the first failure fails the step and cancels
    /// the rest.
    AllOk,
    /// One child succeeded (the rest are cancelled); fails once none can.
    FirstOk,
    /// `quorum` children succeeded (the rest are cancelled); fails once
    /// that can no longer happen.
    Quorum,
}

impl JoinRule {
    fn is_default(&self) -> bool {
        *self == JoinRule::All
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JoinRule::All => "all",
            JoinRule::AllOk => "all_ok",
            JoinRule::FirstOk => "first_ok",
            JoinRule::Quorum => "quorum",
        }
    }

    pub fn parse(s: &str) -> Option<JoinRule> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }
}

/// What a parent's cancel does to a child still unfinished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnParentClose {
    /// Cancelled with the parent (the default).
    #[default]
    Cancel,
    /// Left to finish on its own.
    Detach,
}

impl OnParentClose {
    fn is_default(&self) -> bool {
        *self == OnParentClose::Cancel
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnParentClose::Cancel => "cancel",
            OnParentClose::Detach => "detach",
        }
    }
}

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
        let c = |rule, quorum, total, settled, ok| {
            JoinCounts {
                rule,
                quorum,
                total,
                settled,
                ok,
            }
            .state()
        };
        assert_eq!(c(All, 0, 3, 2, 2), Open);
        assert_eq!(c(All, 0, 3, 3, 0), Met);
        assert_eq!(c(AllOk, 0, 3, 2, 2), Open);
        assert_eq!(c(AllOk, 0, 3, 1, 0), Failed);
        assert_eq!(c(AllOk, 0, 3, 3, 3), Met);
        assert_eq!(c(FirstOk, 0, 3, 2, 0), Open);
        assert_eq!(c(FirstOk, 0, 3, 1, 1), Met);
        assert_eq!(c(FirstOk, 0, 3, 3, 0), Failed);
        assert_eq!(c(Quorum, 2, 4, 2, 1), Open);
        assert_eq!(c(Quorum, 2, 4, 2, 2), Met);
        assert_eq!(c(Quorum, 2, 4, 3, 0), Failed);
        assert_eq!(c(Quorum, 2, 4, 3, 1), Open);
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
