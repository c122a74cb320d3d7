//! The `template` agent: renders a minijinja template from the step context.
//! Deterministic; undefined variables are errors, not empty strings, so a
//! typo in a template fails loudly instead of producing a blank step.

use async_trait::async_trait;
use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};

use cairn_core::{Agent, ErrorInfo, ErrorKind, StepContext, StepOutput};

/// Renders a template; the output is the rendered string.
#[derive(Debug, Clone)]
pub struct TemplateAgent {
    source: String,
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
}

impl TemplateAgent {
    /// Compiles `source` once to reject syntax errors up front.
    pub fn new(source: String) -> Result<Self, minijinja::Error> {
        env().template_from_str(&source)?;
        Ok(TemplateAgent { source })
    }

    /// The variables a template sees: the context's JSON (`run_id`, `input`,
    /// `step`, `previous`) plus `outputs`, a map from role to output.
    pub fn variables(cx: &StepContext) -> Value {
        let mut vars = match serde_json::to_value(cx) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let outputs: Map<String, Value> = cx
            .previous
            .iter()
            .map(|p| (p.role.to_string(), p.output.clone()))
            .collect();
        vars.insert("outputs".into(), Value::Object(outputs));
        Value::Object(vars)
    }
}

#[async_trait]
impl Agent for TemplateAgent {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, ErrorInfo> {
        let rendered = env()
            .render_str(&self.source, Self::variables(cx))
            .map_err(|e| ErrorInfo::new(ErrorKind::Template, e.to_string(), false))?;
        Ok(StepOutput::new(rendered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{Attempt, PreviousOutput, Role, RunId, StepIdx, StepRef};
    use serde_json::json;

    fn cx() -> StepContext {
        StepContext {
            journal: None,
            run_id: RunId::new(),
            input: json!({"topic": "rust"}),
            step: StepRef {
                idx: StepIdx(1),
                role: Role::new("writer"),
                attempt: Attempt(1),
            },
            thread: vec![],
            previous: vec![PreviousOutput {
                idx: StepIdx(0),
                role: Role::new("researcher"),
                output: json!({"facts": ["a", "b"]}),
            }],
            feedback: vec![],
            answers: Default::default(),
        }
    }

    #[tokio::test]
    async fn renders_input_outputs_and_previous() {
        let t = TemplateAgent::new(
            "{{ input.topic }}: {{ outputs.researcher.facts | join(', ') }} ({{ previous | length }} before step {{ step.idx }})".into(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let out = t.run(&cx()).await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(out.output, json!("rust: a, b (1 before step 1)"));
    }

    #[test]
    fn syntax_errors_are_caught_at_build() {
        assert!(TemplateAgent::new("{{ input.topic ".into()).is_err());
    }

    #[tokio::test]
    async fn undefined_variables_fail_the_step_permanently() {
        let t = TemplateAgent::new("{{ outputs.nobody.text }}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        let err = t
            .run(&cx())
            .await
            .err()
            .unwrap_or_else(|| panic!("expected failure"));
        assert_eq!(err.kind, ErrorKind::Template);
        assert!(!err.retryable);
    }
}
