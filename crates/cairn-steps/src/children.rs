//! The `children` agent: lists the children its step starts (a fixed list,
//! or one per element of an array in the context) and, once storage has
//! decided the join, turns the children's outcomes into the step's output
//! (reduced by its `template`, when it has one).
//! It spawns nothing itself: it returns a [`Spawn`] request, which the
//! executor commits with the step (as a question opens a wait).

use async_trait::async_trait;
use serde_json::Value;

use cairn_core::Stop;
use cairn_core::{
    Agent, ChildrenDef, ErrorInfo, ErrorKind, FixedChild, JoinRule, Joined, Spawn, StepContext,
    StepOutput,
};

use crate::TemplateAgent;

/// A `children` step.
#[derive(Debug, Clone)]
pub struct ChildrenAgent {
    def: ChildrenDef,
    template: Option<TemplateAgent>,
}

impl ChildrenAgent {
    /// Refused when its `template` does not compile.
    pub fn new(def: ChildrenDef) -> Result<Self, crate::TemplateError> {
        let template = def.template.clone().map(TemplateAgent::new).transpose()?;
        Ok(ChildrenAgent { def, template })
    }

    /// The children this step starts, within its `max_children`.
    fn listed(&self, cx: &StepContext) -> Result<Vec<cairn_core::FixedChild>, ErrorInfo> {
        let fail = |message: String| ErrorInfo::new(ErrorKind::Children, message, false);
        let children = match &self.def.over {
            Some(path) => cairn_core::children::map_children(&TemplateAgent::variables(cx), path)
                .map_err(fail)?,
            None => self.def.children.clone(),
        };
        let max = self.def.max_children();
        if children.len() > max as usize {
            return Err(fail(format!(
                "`over` lists {} children, over the step's `max_children` of {max}",
                children.len()
            )));
        }
        if let (JoinRule::Quorum, Some(n)) = (self.def.join, self.def.quorum) {
            if n as usize > children.len() {
                return Err(fail(format!(
                    "`quorum = {n}` but `over` lists {} children",
                    children.len()
                )));
            }
        }
        Ok(children)
    }
}

#[async_trait]
impl Agent for ChildrenAgent {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        if cx.children.is_some() {
            return self.joined(cx).await;
        }
        let children = self.listed(cx)?;
        if children.is_empty() {
            // A join over no child is decided at once: the step goes on as
            // if its children had returned, with none.
            let cx = StepContext {
                children: Some(none_listed(self.def.join, self.def.quorum)),
                ..cx.clone()
            };
            return self.joined(&cx).await;
        }
        Err(Spawn {
            children,
            crews: vec![],
        }
        .into_stop())
    }
}

impl ChildrenAgent {
    /// The step's output once its join is decided (`cx.children`).
    async fn joined(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        let Some(joined) = &cx.children else {
            return Err(ErrorInfo::new(
                ErrorKind::Children,
                "the step's join is not decided",
                false,
            )
            .into());
        };
        let joined = outcomes(joined)?;
        let output = match &self.template {
            None => joined.output,
            Some(t) => match t.run(cx).await?.output {
                Value::String(text) => crate::parse_output(text.as_bytes()),
                other => other,
            },
        };
        Ok(StepOutput {
            output,
            usage: joined.usage,
        })
    }
}

/// The join of a step that lists no child, decided at once: `all` and
/// `all_ok` are met (the output is `[]`), `first_ok` and `quorum` are not
/// (the step fails, kind `children`).
pub(crate) fn none_listed(rule: JoinRule, quorum: Option<u32>) -> Joined {
    let counts = cairn_core::JoinCounts {
        rule,
        quorum: quorum.unwrap_or(1),
        total: 0,
        settled: 0,
        ok: 0,
    };
    Joined {
        rule,
        met: counts.state() == cairn_core::JoinState::Met,
        children: vec![],
    }
}

/// A decided join as a step's output: the children's outcomes in listing
/// order, their tokens as the step's; an error if its rule was not met.
pub(crate) fn outcomes(joined: &Joined) -> Result<StepOutput, Stop> {
    let usage = joined
        .children
        .iter()
        .fold(cairn_core::Usage::default(), |u, c| u + c.usage);
    if !joined.met {
        let settled: Vec<String> = joined
            .children
            .iter()
            .filter(|c| !c.status.is_live())
            .map(|c| format!("`{}` {}", c.key, c.status.as_str()))
            .collect();
        let why = match settled.is_empty() {
            true => "the step listed no child".to_owned(),
            false => settled.join(", "),
        };
        let error = ErrorInfo::new(
            ErrorKind::Children,
            format!(
                "the join rule `{}` cannot be met: {why}",
                joined.rule.as_str()
            ),
            false,
        );
        return Err(error.with_usage(usage).into());
    }
    Ok(StepOutput {
        output: serde_json::to_value(&joined.children).unwrap_or(Value::Null),
        usage: (usage != cairn_core::Usage::default()).then_some(usage),
    })
}

/// The key of a command's output that asks for child runs:
/// `{"cairn_spawn": {"children": [{"key", "crew", "input"}, …]}}`, `crew`
/// the name of one of the step's `delegate` crews.
pub const SPAWN_KEY: &str = "cairn_spawn";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnRequest {
    children: Vec<RequestedChild>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestedChild {
    key: String,
    crew: String,
    #[serde(default)]
    input: Value,
}

/// The spawn a command's output asks for, if it asks for one; a request
/// that does not parse or repeats a key fails the step (kind `children`,
/// not retried: the program would ask the same). A request that lists no
/// child asks for an empty spawn, whose join the caller decides at once
/// ([`none_listed`]), as a `children` step's.
pub(crate) fn requested(output: &Value) -> Result<Option<Spawn>, ErrorInfo> {
    let Some(request) = output.get(SPAWN_KEY) else {
        return Ok(None);
    };
    let fail = |m: String| ErrorInfo::new(ErrorKind::Children, m, false);
    let request: SpawnRequest = serde_json::from_value(request.clone())
        .map_err(|e| fail(format!("the program's `{SPAWN_KEY}` does not parse: {e}")))?;
    let mut keys = std::collections::HashSet::new();
    if let Some(c) = request
        .children
        .iter()
        .find(|c| c.key.is_empty() || !keys.insert(&c.key))
    {
        return Err(fail(format!(
            "the program's `{SPAWN_KEY}` has an empty or repeated key `{}`",
            c.key
        )));
    }
    let (children, crews) = request
        .children
        .into_iter()
        .map(|c| {
            let child = FixedChild {
                key: c.key,
                input: c.input,
                crew: None,
            };
            (child, c.crew)
        })
        .unzip();
    Ok(Some(Spawn { children, crews }))
}
