//! The `delegate` tool of an `llm` agent with `delegate = [...]`: each call
//! starts one child run of a crew the agent may start, and the call's
//! result is that child's outcome.
//!
//! Like `ask_human`, it never executes in the turn. The calls of one
//! response become one spawn (`cairn_core::Spawn`, keyed by call id, so a
//! resumed step derives the same child ids and storage starts each child
//! once); the step waits, holding nothing, until every child settled; then
//! it runs again, the same attempt, and each call's result is journaled
//! from the decided join before the model is called again.
//!
//! One spawn per step attempt: a join is keyed by the attempt, so calls the
//! model makes after its children returned get an error result saying so,
//! and the model carries on without them.

use async_trait::async_trait;
use serde_json::{json, Value};

use cairn_core::Stop;
use cairn_core::{
    ChildOutcome, CrewDef, FixedChild, Joined, JournalError, JournalHandle, JournalKind,
    NewJournalItem, RunStatus, Spawn, StepContext, Usage, DELEGATE_TOOL,
};

use crate::tools::Checked;
use crate::transcript::{Call, Repair};

/// The `delegate` tool's spec: a crew (one of those allowed, by name) and
/// the child's input.
pub(crate) struct Delegate(cairn_llm::ToolSpec);

impl Delegate {
    pub(crate) fn new(crews: &[CrewDef]) -> Self {
        let names: Vec<&str> = crews.iter().map(|c| c.name.as_str()).collect();
        let listed: Vec<String> = crews
            .iter()
            .map(|c| {
                let roles: Vec<&str> = c.agents.iter().map(|a| a.role.as_str()).collect();
                format!("`{}` (steps: {})", c.name, roles.join(", "))
            })
            .collect();
        Delegate(cairn_llm::ToolSpec {
            name: DELEGATE_TOOL.into(),
            description: format!(
                "Start a sub-task as a run of another crew and get its result. \
                 Several calls in one response run in parallel. Crews: {}.",
                listed.join("; ")
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "crew": {"type": "string", "enum": names},
                    "input": {"description": "the child run's input (any JSON)"}
                },
                "required": ["crew", "input"]
            }),
        })
    }
}

#[async_trait]
impl crate::Tool for Delegate {
    fn spec(&self) -> &cairn_llm::ToolSpec {
        &self.0
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn execute(&self, _: Value, _: &str) -> crate::ToolResult {
        Err("delegate starts a child run; the executor does, not the tool".into())
    }
}

/// The spawn of `calls` (already checked against the tool's schema): a
/// child per call, keyed by its call id, on the crew it named.
pub(crate) fn spawn(calls: &[&Call]) -> Spawn {
    let (children, crews) = calls
        .iter()
        .map(|call| {
            let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
            let child = FixedChild {
                crew: None,
                key: call.call_id.clone(),
                input: args.get("input").cloned().unwrap_or(Value::Null),
            };
            let crew = args["crew"].as_str().unwrap_or_default().to_owned();
            (child, crew)
        })
        .unzip();
    Spawn { children, crews }
}

/// The result the model reads for `call`, from the decided join: the
/// child's outcome, an error result unless it succeeded; or, for a call
/// made after this attempt's children returned, why nothing started.
pub(crate) fn result(joined: &Joined, call: &Call) -> (String, bool) {
    match joined.children.iter().find(|c| c.key == call.call_id) {
        Some(child) => (
            outcome(child).to_string(),
            child.status != RunStatus::Succeeded,
        ),
        None => (
            "not started: this step's delegated runs have already returned; \
             `delegate` starts children once per step attempt, so carry on with their results"
                .to_owned(),
            true,
        ),
    }
}

fn outcome(child: &ChildOutcome) -> Value {
    let mut v = json!({"run_id": child.run_id, "status": child.status.as_str()});
    if let Some(output) = &child.output {
        v["output"] = output.clone();
    }
    if let Some(error) = &child.error {
        v["error"] = json!({"kind": error.kind, "message": error.message});
    }
    v
}

impl crate::LlmAgent {
    /// Whether `call` is a `delegate` call this agent answers itself.
    pub(crate) fn delegates(&self, call: &Call) -> bool {
        call.name == DELEGATE_TOOL && !self.def.delegate.is_empty()
    }

    /// The `delegate` calls among `repairs` (calls left without a result),
    /// and the other repairs.
    pub(crate) fn delegations<'r>(
        &self,
        repairs: &'r [Repair],
    ) -> (Vec<&'r Call>, Vec<&'r Repair>) {
        let mut calls = Vec::new();
        let mut rest = Vec::new();
        for repair in repairs {
            match repair {
                Repair::Synthesize(call) | Repair::ReExecute(call) if self.delegates(call) => {
                    calls.push(call)
                }
                other => rest.push(other),
            }
        }
        (calls, rest)
    }

    /// A response's `delegate` calls: a call the tool's schema refuses gets
    /// its error result; the others start their children (the step waits)
    /// unless this attempt's children have returned already.
    pub(crate) async fn delegate(
        &self,
        journal: &JournalHandle,
        cx: &StepContext,
        calls: &[&Call],
    ) -> Result<(), Stop> {
        let mut valid = Vec::new();
        for call in calls {
            match self.tools.check(&call.name, &call.arguments) {
                Checked::Run(..) => valid.push(*call),
                Checked::Refused(_) => self.run_call(journal, cx, call).await?,
            }
        }
        self.delegated(journal, cx, &valid).await
    }

    /// Delegations without a result: before the children ran, they start
    /// (one spawn, so the step waits); after, each result is journaled.
    pub(crate) async fn delegated(
        &self,
        journal: &JournalHandle,
        cx: &StepContext,
        calls: &[&Call],
    ) -> Result<(), Stop> {
        if calls.is_empty() {
            return Ok(());
        }
        let Some(joined) = &cx.children else {
            return Err(spawn(calls).into_stop());
        };
        for call in calls {
            let (content, is_error) = result(joined, call);
            let item = |content: String, is_error: bool| {
                NewJournalItem::new(
                    JournalKind::ToolResult,
                    json!({"call_id": call.call_id, "content": content, "is_error": is_error}),
                )
            };
            let appended = match journal.append(item(content, is_error)).await {
                // The model learns the child's result was too big to keep
                // (and where to read it) instead of the step failing.
                Err(JournalError::TooLarge(big)) => {
                    let note = format!(
                        "the child's result was too large to keep ({big}); it is the output \
                         of its run (`cairn runs show`)"
                    );
                    journal.append(item(note, true)).await
                }
                other => other,
            };
            appended.map_err(crate::failure::journal_failure)?;
        }
        Ok(())
    }
}

/// A step's own usage plus its children's, once they returned (a parent's
/// totals include its delegated runs', as a `children` step's do).
pub(crate) fn with_children(own: Usage, cx: &StepContext) -> Usage {
    cx.children
        .iter()
        .flat_map(|j| &j.children)
        .fold(own, |u, c| u + c.usage)
}
