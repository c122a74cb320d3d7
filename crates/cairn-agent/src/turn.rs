//! The turn loop of an `llm` step. Each pass reads the step's journal,
//! repairs its tail by the transcript rules (durably, before anything
//! else), and then either returns the final answer or calls the model once
//! and runs the tools it asked for. Every finished item is journaled the
//! moment it exists; tool calls before the tool runs, results after.
//!
//! **Invariant:** the loop keeps no state a crash could lose: what it knows
//! comes from the journal, so a fresh process continues exactly here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::json;

use cairn_core::event::payload::{ModelCalled, ToolExecuted};
use cairn_core::Stop;
use cairn_core::{
    Agent, ErrorInfo, ErrorKind, EventData, JournalEntry, JournalError, JournalHandle, JournalKind,
    LlmDef, NewEvent, NewJournalItem, Spent, StepContext, StepOutput, Usage,
};
use cairn_llm::{Item, LlmError, Provider, Request, RequestMeta, StopReason, StreamEvent};

use crate::ask::{question, ASK_TOOL};
use crate::failure::journal_failure;
use crate::meter::{tool_refuses, CallGuard};
use crate::tools::{Checked, Toolbox};
use crate::transcript::{self, Call, Next, Repair, Window};

/// The longest piece of one model text in one journal item: a text over
/// it is journaled in pieces. An eighth of the default 1 MiB item cap, so
/// even a piece of control characters (six bytes each in JSON) fits.
const TEXT_PIECE_BYTES: usize = 128 * 1024;

/// Empty responses in a row (no text, no tool call) before the step fails
/// `no_progress` instead of asking again.
const MAX_EMPTY_RESPONSES: u32 = 3;

/// An `llm` agent: a provider, a model and its settings, and tools.
pub struct LlmAgent {
    pub(crate) def: LlmDef,
    provider: Arc<dyn Provider>,
    pub(crate) tools: Toolbox,
    /// The provider key its calls share with every run ([`crate::limit_key`]).
    key: String,
}

impl std::fmt::Debug for LlmAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmAgent")
            .field("provider", &self.provider.name())
            .field("model", &self.def.model)
            .field("tools", &self.tools)
            .finish()
    }
}

impl LlmAgent {
    pub fn new(def: LlmDef, provider: Arc<dyn Provider>, tools: Toolbox) -> Self {
        LlmAgent {
            key: crate::limit_key(&def),
            def,
            provider,
            tools,
        }
    }

    /// The provider key of this step's calls: the agent's own, narrowed by
    /// the run's tenant, thread or crew when its `limit_key` names them.
    fn key_of(&self, cx: &StepContext) -> std::borrow::Cow<'_, str> {
        if !self.def.key_varies() {
            return self.key.as_str().into();
        }
        let meter = &cx.services.meter;
        let vars = cairn_core::KeyVars {
            tenant: meter.tenant.as_ref().map(|t| t.as_str()),
            thread: meter.thread_id.as_deref(),
            crew: meter.crew.as_deref(),
        };
        crate::limit_key_for(&self.def, vars).into()
    }
}

/// The idempotency key of a tool call: the same for every retry, resume and
/// takeover of this call (DESIGN.md invariant 9).
pub fn idempotency_key(cx: &StepContext, call_id: &str) -> String {
    format!("{}/{}/{}", cx.run_id, cx.step.idx, call_id)
}

/// The user message a step starts from: its accumulated context.
pub fn context_message(cx: &StepContext) -> String {
    let mut text = format!(
        "Run input:\n{}\n",
        serde_json::to_string_pretty(&cx.input).unwrap_or_default()
    );
    for p in cx.previous.iter() {
        text.push_str(&format!(
            "\nOutput of step {} ({}):\n{}\n",
            p.idx,
            p.role,
            serde_json::to_string_pretty(&p.output).unwrap_or_default()
        ));
    }
    if !cx.feedback.is_empty() {
        text.push_str("\nA reviewer rejected earlier attempts of this step with this feedback (oldest first):\n");
        for f in &cx.feedback {
            text.push_str(&format!("- {f}\n"));
        }
    }
    text
}

fn provider_failure(e: &LlmError) -> ErrorInfo {
    ErrorInfo {
        retry_after: e.retry_after,
        ..ErrorInfo::new(ErrorKind::Provider, e.to_string(), e.retryable())
    }
}

/// Tokens and cost of every finished response of this journal.
fn usage_of(entries: &[JournalEntry]) -> Usage {
    let mut u = Usage::default();
    for e in entries.iter().filter(|e| e.kind == JournalKind::TurnEnd) {
        u.input_tokens += e.payload["input_tokens"].as_u64().unwrap_or(0);
        u.output_tokens += e.payload["output_tokens"].as_u64().unwrap_or(0);
        let cost = cairn_core::Usd(e.payload["cost_nanos"].as_u64().unwrap_or(0));
        u.cost_usd = u.cost_usd.saturating_add(cost);
    }
    u
}

fn stop_word(s: &StopReason) -> String {
    match s {
        StopReason::EndTurn => "end_turn".into(),
        StopReason::ToolUse => "tool_use".into(),
        StopReason::MaxTokens => "max_tokens".into(),
        StopReason::Other(o) => o.clone(),
    }
}

/// One streamed response, as far as it got.
#[derive(Default)]
struct Response {
    texts: usize,
    calls: Vec<Call>,
    /// Tokens the provider reported for the call (0 until it finished),
    /// and of them the input and the output.
    used: u64,
    input: u64,
    output: u64,
    /// Bytes of text and tool input received so far (a cut response's
    /// output is estimated from them: the provider bills what it sent).
    received: usize,
    /// What the finished call cost (0 where the process prices nothing).
    cost: cairn_core::Usd,
    /// The call as recorded sent (a run with a budget): each of its
    /// `model_called` events says so, which resolves it.
    sent: Option<cairn_core::SentCall>,
}

impl Response {
    /// The event of `called`, tagged as the result of the call recorded
    /// sent, if it was.
    fn resolving(&self, mut called: ModelCalled) -> NewEvent {
        if let Some(sent) = &self.sent {
            sent.tag(&mut called);
        }
        NewEvent::typed(EventData::ModelCalled(Box::new(called)))
    }

    /// What the call spent, as the run's budget counts it.
    fn spent(&self) -> Spent {
        Spent {
            tokens: self.used,
            input_tokens: self.input,
            output_tokens: self.output,
            model_calls: 1,
            cost_usd: self.cost,
            ..Spent::default()
        }
    }
}

impl LlmAgent {
    /// The thread's earlier runs as conversation, unless the agent turned
    /// them off (`thread_history = false`).
    fn history(&self, cx: &StepContext) -> Vec<Item> {
        if self.def.thread_history() {
            transcript::thread_items(&cx.thread)
        } else {
            vec![]
        }
    }

    fn window(&self) -> Window {
        Window {
            max_items: self.def.window_items,
            max_tokens: self.def.window_tokens,
        }
    }

    /// Runs `call` (or refuses it) and journals its result with an event.
    pub(crate) async fn run_call(
        &self,
        journal: &JournalHandle,
        cx: &StepContext,
        call: &Call,
    ) -> Result<(), Stop> {
        if let Some(why) = tool_refuses(journal, cx).await? {
            // The model reads on a continue why its call was not executed.
            journal
                .append(NewJournalItem::new(
                    JournalKind::ToolResult,
                    json!({"call_id": call.call_id, "content": format!("not executed: {why}"),
                           "is_error": true, "refused": "budget"}),
                ))
                .await
                .map_err(journal_failure)?;
            return Err(Stop::from(ErrorInfo::new(
                ErrorKind::BudgetExceeded,
                why,
                false,
            )));
        }
        let started = Instant::now();
        let key = call
            .idempotency_key
            .clone()
            .unwrap_or_else(|| idempotency_key(cx, &call.call_id));
        let outcome = match self.tools.check(&call.name, &call.arguments) {
            Checked::Refused(why) => Err(why),
            Checked::Run(tool, args) => tool.execute(args, &key).await,
        };
        let is_error = outcome.is_err();
        let content = outcome.unwrap_or_else(|e| e);
        let event = NewEvent::typed(EventData::ToolExecuted(ToolExecuted {
            idx: cx.step.idx,
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            ms: started.elapsed().as_millis() as u64,
            is_error,
            idempotency_key: key,
        }));
        let item = |content: String, is_error: bool| {
            NewJournalItem::new(
                JournalKind::ToolResult,
                json!({"call_id": call.call_id, "content": content, "is_error": is_error}),
            )
            .with_event(event.clone())
        };
        match journal.append(item(content, is_error)).await {
            Err(JournalError::TooLarge(big)) => {
                // The model learns the result was too big instead of the
                // step failing over it.
                let note = format!("the tool's result was too large to keep: {big}");
                journal
                    .append(item(note, true))
                    .await
                    .map(drop)
                    .map_err(|e| Stop::from(journal_failure(e)))
            }
            other => other.map(drop).map_err(|e| Stop::from(journal_failure(e))),
        }
    }

    /// Applies one repair: journal it, and for a re-execution run the tool
    /// again with the same key.
    async fn repair(
        &self,
        journal: &JournalHandle,
        cx: &StepContext,
        repair: &Repair,
    ) -> Result<(), Stop> {
        if let Repair::Synthesize(call) | Repair::ReExecute(call) = repair {
            if call.name == ASK_TOOL && self.def.ask_human {
                return self.answer(journal, cx, call).await;
            }
        }
        tracing::info!(run = %cx.run_id, step = %cx.step.idx, ?repair, "repairing the transcript");
        for item in repair.journal_items(cx.step.idx) {
            journal.append(item).await.map_err(journal_failure)?;
        }
        if let Repair::ReExecute(call) = repair {
            self.run_call(journal, cx, call).await?;
        }
        Ok(())
    }

    /// Calls the model once and journals what it produced as it arrives.
    async fn call_model(
        &self,
        journal: &JournalHandle,
        cx: &StepContext,
        entries: &[JournalEntry],
        turn: u32,
    ) -> Result<Response, Stop> {
        let request = Request {
            model: self.def.model.clone(),
            system: self.def.instructions.clone(),
            items: transcript::request_items(
                &self.history(cx),
                context_message(cx),
                entries,
                &self.window(),
            ),
            tools: self.tools.specs(),
            max_tokens: self.def.max_tokens(),
            temperature: self.def.temperature,
            meta: RequestMeta {
                run_id: cx.run_id.to_string(),
                step_idx: cx.step.idx.get(),
                attempt: cx.step.attempt.get(),
                turn,
            },
        };
        let key = self.key_of(cx);
        let provider = self.provider.name();
        let guard = CallGuard::new(cx, journal, provider, key, self.def.limits.as_ref());
        let admitted = guard.before(&request).await?;
        let mut response = Response {
            sent: admitted.sent,
            ..Response::default()
        };
        let started = Instant::now();
        let cap = Duration::from_millis(self.def.stream_timeout_ms());
        let streamed = tokio::time::timeout(
            cap,
            self.stream_into(&guard, journal, cx, &request, &mut response, started),
        )
        .await;
        let finished = matches!(streamed, Ok(Ok(())));
        guard.after(&admitted, response.spent(), finished).await;
        let failure = match streamed {
            Ok(Ok(())) => return Ok(response),
            Ok(Err(Failure::Journal(e))) => return Err(Stop::from(e)),
            Ok(Err(Failure::Provider(e))) => e,
            Err(_) => LlmError::new(
                provider,
                cairn_llm::LlmErrorKind::Timeout,
                format!(
                    "the response ran past the stream cap of {} ms",
                    cap.as_millis()
                ),
            ),
        };
        // The journal keeps whatever finished; the unfinished rest is
        // dropped by the next pass's repair. Best effort: the failure is
        // what matters.
        let mut called = ModelCalled {
            error: Some(failure.to_string()),
            retryable: Some(failure.retryable()),
            ..self.called(cx, turn, started.elapsed().as_millis() as u64)
        };
        if response.received > 0 {
            // Cut mid-way: the input was sent and part of the output came
            // back, so the run's token budget counts them (estimated, 4
            // bytes a token); a response refused before it began costs none.
            let (input, output) = (
                cairn_llm::estimate_request_tokens(&request),
                (response.received as u64).div_ceil(4),
            );
            called.cut_tokens = Some(input + output);
            (called.cut_input_tokens, called.cut_output_tokens) = (Some(input), Some(output));
            let cost = guard.cut_cost(&self.def.model, input, output);
            called.cut_cost_nanos = cost.map(|c| c.0);
        }
        let _ = journal.event(response.resolving(called)).await;
        match failure.pause() {
            Some(wait) => Err(guard.paused(&failure, wait).await),
            None => Err(Stop::from(provider_failure(&failure))),
        }
    }

    /// The `model_called` event of a call: which, and how long it took.
    fn called(&self, cx: &StepContext, turn: u32, ms: u64) -> ModelCalled {
        ModelCalled {
            idx: cx.step.idx,
            turn,
            provider: self.provider.name().to_owned(),
            model: self.def.model.clone(),
            ms,
            ..ModelCalled::default()
        }
    }

    /// The `model_called` event of a finished response.
    fn model_called(
        &self,
        cx: &StepContext,
        turn: u32,
        ms: u64,
        usage: cairn_llm::TokenUsage,
        stop: &str,
    ) -> ModelCalled {
        // Prompt caching, when the provider reported it.
        let cached = |n: u64| (n > 0).then_some(n);
        ModelCalled {
            input_tokens: Some(usage.input_tokens),
            output_tokens: Some(usage.output_tokens),
            stop_reason: Some(stop.to_owned()),
            cache_read_tokens: cached(usage.cache_read_tokens),
            cache_write_tokens: cached(usage.cache_write_tokens),
            ..self.called(cx, turn, ms)
        }
    }

    async fn stream_into(
        &self,
        guard: &CallGuard<'_>,
        journal: &JournalHandle,
        cx: &StepContext,
        request: &Request,
        response: &mut Response,
        started: Instant,
    ) -> Result<(), Failure> {
        let mut stream = self
            .provider
            .stream(request)
            .await
            .map_err(Failure::Provider)?;
        let append = |item: NewJournalItem| async move {
            journal
                .append(item)
                .await
                .map_err(|e| Failure::Journal(journal_failure(e)))
        };
        // When the response began: its first piece of any kind.
        let mut first_chunk_ms = None;
        while let Some(event) = stream.next().await {
            let event = event.map_err(Failure::Provider)?;
            first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
            match event {
                StreamEvent::TextDelta(text) => {
                    response.received += text.len();
                    journal.live(&text)
                }
                StreamEvent::ToolInputDelta { fragment, .. } => response.received += fragment.len(),
                StreamEvent::TextDone(text) => {
                    if !text.is_empty() {
                        response.texts += 1;
                        // A long text in pieces, each well under the item
                        // cap; all but the last say the next continues it.
                        let pieces = transcript::pieces(&text, TEXT_PIECE_BYTES);
                        let last = pieces.len() - 1;
                        for (i, piece) in pieces.into_iter().enumerate() {
                            let payload = match i < last {
                                true => json!({"text": piece, "continues": true}),
                                false => json!({"text": piece}),
                            };
                            append(NewJournalItem::new(JournalKind::AssistantText, payload))
                                .await?;
                        }
                    }
                }
                StreamEvent::ToolCallStarted { id, name } => {
                    append(NewJournalItem::new(
                        JournalKind::ToolCallStarted,
                        json!({"call_id": id, "name": name}),
                    ))
                    .await?;
                }
                StreamEvent::ToolCallDone {
                    id,
                    name,
                    arguments,
                } => {
                    let key = idempotency_key(cx, &id);
                    let entry = append(NewJournalItem::new(
                        JournalKind::ToolCall,
                        json!({"call_id": id, "name": name, "arguments": arguments,
                               "idempotency_key": key}),
                    ))
                    .await?;
                    response.calls.push(Call {
                        call_id: id,
                        name,
                        arguments,
                        idempotency_key: Some(key),
                        seq: entry.seq,
                    });
                }
                StreamEvent::Finished { stop_reason, usage } => {
                    response.used = usage.input_tokens + usage.output_tokens;
                    (response.input, response.output) = (usage.input_tokens, usage.output_tokens);
                    let ms = started.elapsed().as_millis() as u64;
                    let stop = stop_word(&stop_reason);
                    let mut called = ModelCalled {
                        first_chunk_ms,
                        ..self.model_called(cx, request.meta.turn, ms, usage, &stop)
                    };
                    if response.texts == 0 && response.calls.is_empty() {
                        // Nothing to keep: no turn_end, so this response
                        // does not count as the step's (empty) answer.
                        called.empty = true;
                        let _ = journal.event(response.resolving(called)).await;
                        return Ok(());
                    }
                    let mut end = json!({"stop_reason": stop, "input_tokens": usage.input_tokens,
                                         "output_tokens": usage.output_tokens, "ms": ms});
                    called.tool_calls = Some(response.calls.len() as u64);
                    // Priced once, here, with the table's version: the
                    // journal's sum is the run's cost whatever prices later.
                    if let Some((cost, version)) = guard.cost(&self.def.model, usage) {
                        (end["cost_nanos"], end["prices"]) = (json!(cost.0), json!(version));
                        (called.cost_usd, called.prices) = (Some(cost), Some(version));
                        response.cost = cost;
                    }
                    let event = response.resolving(called);
                    append(NewJournalItem::new(JournalKind::TurnEnd, end).with_event(event))
                        .await?;
                    return Ok(());
                }
            }
        }
        Err(Failure::Provider(LlmError::new(
            self.provider.name(),
            cairn_llm::LlmErrorKind::StreamDropped,
            "the stream ended before the response finished",
        )))
    }
}

enum Failure {
    Provider(LlmError),
    Journal(ErrorInfo),
}

#[async_trait]
impl Agent for LlmAgent {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        let journal = cx.services.journal.as_ref().ok_or_else(|| {
            ErrorInfo::new(
                ErrorKind::Crew,
                "an `llm` agent needs a journal; run it through the engine",
                false,
            )
        })?;
        let max_turns = self.def.max_turns();
        let (mut calls, mut empty) = (0u32, 0u32);
        loop {
            let entries = journal.items().await.map_err(journal_failure)?;
            let analysis = transcript::analyze(&entries);
            let repairs = transcript::plan_repairs(&analysis, |name| self.tools.idempotent(name));
            if !repairs.is_empty() {
                let (delegations, repairs) = self.delegations(&repairs);
                for repair in repairs {
                    self.repair(journal, cx, repair).await?;
                }
                self.delegate(journal, cx, &delegations).await?;
                continue;
            }
            if let Next::Final { text } = analysis.next {
                let usage = crate::delegate::with_children(usage_of(&entries), cx);
                return Ok(
                    StepOutput::new(cairn_steps::parse_output(text.as_bytes())).with_usage(usage)
                );
            }
            if calls >= max_turns {
                return Err(Stop::from(
                    ErrorInfo::new(
                        ErrorKind::Interrupted,
                        format!(
                            "reached max_turns ({max_turns} model calls) without a final answer; \
                         `continue` carries on from the journal"
                        ),
                        false,
                    )
                    .with_usage(usage_of(&entries)),
                ));
            }
            calls += 1;
            let response = self
                .call_model(journal, cx, &entries, analysis.turns)
                .await
                .map_err(|e| e.with_usage(usage_of(&entries)))?;
            if response.texts == 0 && response.calls.is_empty() {
                empty += 1;
                if empty >= MAX_EMPTY_RESPONSES {
                    return Err(Stop::from(ErrorInfo::new(
                        ErrorKind::NoProgress,
                        format!("the model answered {empty} times in a row with nothing; stopped instead of asking again"),
                        false,
                    )
                    .with_usage(usage_of(&entries))));
                }
                continue;
            }
            empty = 0;
            // Tools first; a question last, since the step waits on it.
            let asks = |c: &&Call| c.name == ASK_TOOL && self.def.ask_human;
            let delegates = |c: &&Call| self.delegates(c);
            for call in response.calls.iter().filter(|c| !asks(c) && !delegates(c)) {
                self.run_call(journal, cx, call).await?;
            }
            let delegations: Vec<&Call> = response.calls.iter().filter(delegates).collect();
            self.delegate(journal, cx, &delegations).await?;
            for call in response.calls.iter().filter(asks) {
                match self.tools.check(&call.name, &call.arguments) {
                    Checked::Run(..) => return Err(question(call)),
                    Checked::Refused(_) => self.run_call(journal, cx, call).await?,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_item_with_a_nul_fails_the_step_as_unstorable_not_retried() {
        let e = journal_failure(JournalError::Unstorable(cairn_core::Unstorable {
            what: "a journal item".into(),
        }));
        assert_eq!(e.kind, ErrorKind::Unstorable);
        assert!(!e.retryable);
        assert!(e.message.contains("NUL"), "{}", e.message);
    }
}
