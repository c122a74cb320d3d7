//! The `children` agent: lists the children its step starts (a fixed list,
//! or one per element of an array in the context) and, once storage has
//! decided the join, turns the children's outcomes into the step's output
//! (reduced by its `template`, when it has one).
//! It spawns nothing itself: it returns a [`Spawn`] request, which the
//! executor commits with the step (as a question opens a wait).

use async_trait::async_trait;
use serde_json::Value;

use cairn_core::{
    Agent, ChildrenDef, ErrorInfo, ErrorKind, JoinRule, Spawn, StepContext, StepOutput,
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
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, ErrorInfo> {
        let Some(joined) = &cx.children else {
            return Err(Spawn {
                children: self.listed(cx)?,
                crews: vec![],
            }
            .into_error());
        };
        let usage = joined
            .children
            .iter()
            .fold(cairn_core::Usage::default(), |u, c| cairn_core::Usage {
                input_tokens: u.input_tokens + c.usage.input_tokens,
                output_tokens: u.output_tokens + c.usage.output_tokens,
            });
        if !joined.met {
            let settled: Vec<String> = joined
                .children
                .iter()
                .filter(|c| !c.status.is_live())
                .map(|c| format!("`{}` {}", c.key, c.status.as_str()))
                .collect();
            let error = ErrorInfo::new(
                ErrorKind::Children,
                format!(
                    "the join rule `{}` cannot be met: {}",
                    joined.rule.as_str(),
                    settled.join(", ")
                ),
                false,
            );
            return Err(error.with_usage(usage));
        }
        let output = match &self.template {
            None => serde_json::to_value(&joined.children).unwrap_or(Value::Null),
            Some(t) => match t.run(cx).await?.output {
                Value::String(text) => crate::parse_output(text.as_bytes()),
                other => other,
            },
        };
        Ok(StepOutput {
            output,
            usage: (usage != cairn_core::Usage::default()).then_some(usage),
        })
    }
}
