//! A `children` step's definition, part of the crew file: the crew it
//! starts, how its children are listed, its join rule, what becomes of its
//! children when the parent ends. What a spawn and a join are at run time
//! is `crate::children`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crew::CrewDef;

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
