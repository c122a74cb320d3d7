//! OpenAI-compatible Chat Completions, streamed (`POST {base_url}/chat/completions`
//! with `stream: true`). The base URL includes the version
//! (`https://api.openai.com/v1`, `http://127.0.0.1:8080/v1` for vLLM or
//! llama.cpp), so any compatible server works.
//!
//! Wire mapping: `Request::system` is a leading `system` message; `User`
//! items are `user` messages; consecutive `Assistant`/`ToolCall` items are
//! one `assistant` message (`content` the joined text, `tool_calls` with
//! the raw argument text); each `ToolResult` is a `tool` message (an error
//! result's content is prefixed with `error: `, since the protocol has no
//! error flag).

use std::collections::BTreeMap;

use cairn_core::sse::Event;
use reqwest::RequestBuilder;
use serde_json::{json, Value};

use crate::http::{self, Decoder, HttpTimeouts};
use crate::{
    EventStream, Item, LlmError, LlmErrorKind, Provider, Request, StopReason, StreamEvent,
    TokenUsage,
};

const NAME: &str = "openai";

/// Where an OpenAI-compatible server is.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// With the version: `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set (local servers may need none).
    pub api_key: Option<String>,
    pub timeouts: HttpTimeouts,
    /// Send the token cap as `max_completion_tokens` (what OpenAI itself
    /// wants, and its reasoning models require) instead of `max_tokens`
    /// (what compatible servers such as vLLM and llama.cpp read).
    pub completion_tokens_field: bool,
}

impl OpenAiConfig {
    /// The field OpenAI's own API wants for `base_url`: `max_completion_tokens`
    /// on `api.openai.com`, `max_tokens` elsewhere.
    pub fn completion_tokens_field_for(base_url: &str) -> bool {
        base_url.contains("://api.openai.com")
    }
}

/// The OpenAI Chat Completions adapter.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
}

impl OpenAiProvider {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        Ok(OpenAiProvider {
            client: http::client(NAME, config.timeouts)?,
            config,
        })
    }
}

/// The request body for `request` (`max_tokens` as the token cap).
pub fn body(request: &Request) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    let mut i = 0;
    let items = &request.items;
    while i < items.len() {
        match &items[i] {
            Item::User { text } => {
                messages.push(json!({"role": "user", "content": text}));
                i += 1;
            }
            Item::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                let content = if *is_error {
                    format!("error: {content}")
                } else {
                    content.clone()
                };
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": content}));
                i += 1;
            }
            Item::Assistant { .. } | Item::ToolCall { .. } => {
                let mut texts = Vec::new();
                let mut calls = Vec::new();
                while let Some(item) = items.get(i) {
                    match item {
                        Item::Assistant { text } => texts.push(text.as_str()),
                        Item::ToolCall {
                            id,
                            name,
                            arguments,
                        } => calls.push(json!({"id": id, "type": "function",
                            "function": {"name": name, "arguments": arguments}})),
                        _ => break,
                    }
                    i += 1;
                }
                let mut m = json!({"role": "assistant",
                    "content": if texts.is_empty() { Value::Null } else { json!(texts.join("\n")) }});
                if !calls.is_empty() {
                    m["tool_calls"] = json!(calls);
                }
                messages.push(m);
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    http::add_tools_and_temperature(&mut body, request, |t| {
        json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}})
    });
    body
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        NAME
    }

    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError> {
        http::refuse_invalid(NAME, crate::pairing::check_openai, &request.items)?;
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let mut body = body(request);
        if self.config.completion_tokens_field {
            if let Some(cap) = body.as_object_mut().and_then(|b| b.remove("max_tokens")) {
                body["max_completion_tokens"] = cap;
            }
        }
        let req = self.client.post(url).json(&body);
        let key = self.config.api_key.as_ref();
        let auth = |req: RequestBuilder, key: &str| req.bearer_auth(key);
        http::stream_keyed(NAME, req, key, auth, OpenAiDecoder::default()).await
    }
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Chat Completions chunks → stream events.
#[derive(Default)]
struct OpenAiDecoder {
    text: String,
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    done: bool,
}

impl OpenAiDecoder {
    fn close_text(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.text.is_empty() {
            out.push(StreamEvent::TextDone(std::mem::take(&mut self.text)));
        }
    }

    fn close(&mut self) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        self.close_text(&mut out);
        for call in std::mem::take(&mut self.calls).into_values() {
            if !call.started {
                out.push(StreamEvent::ToolCallStarted {
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
            }
            out.push(http::tool_call_done(call.id, call.name, call.arguments));
        }
        let stop_reason = match self.finish_reason.as_deref() {
            Some("stop") | None => StopReason::EndTurn,
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        out.push(StreamEvent::Finished {
            stop_reason,
            usage: self.usage.unwrap_or_default(),
        });
        self.done = true;
        out
    }
}

impl Decoder for OpenAiDecoder {
    fn feed(&mut self, event: &Event) -> Result<Vec<StreamEvent>, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(self.close());
        }
        if data.is_empty() {
            return Ok(vec![]);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|_| http::malformed(NAME, "a chunk", data))?;
        if let Some(message) = chunk["error"]["message"].as_str() {
            return Err(LlmError::new(NAME, LlmErrorKind::Server, message));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(TokenUsage {
                input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
                cache_read_tokens: u["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0),
                cache_write_tokens: 0,
            });
        }
        let mut out = Vec::new();
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            if chunk.get("usage").is_some() {
                return Ok(out);
            }
            return Err(http::malformed(NAME, "a chunk without `choices`", data));
        };
        for choice in choices
            .iter()
            .filter(|c| c["index"].as_u64().unwrap_or(0) == 0)
        {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                self.text.push_str(text);
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = tc["index"]
                    .as_u64()
                    .ok_or_else(|| http::malformed(NAME, "a tool call without `index`", data))?;
                self.close_text(&mut out);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = tc["id"].as_str() {
                    call.id = id.to_owned();
                }
                if let Some(name) = tc["function"]["name"].as_str() {
                    call.name.push_str(name);
                }
                if !call.started && !call.id.is_empty() && !call.name.is_empty() {
                    call.started = true;
                    out.push(StreamEvent::ToolCallStarted {
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                }
                if let Some(fragment) = tc["function"]["arguments"].as_str() {
                    if !fragment.is_empty() {
                        call.arguments.push_str(fragment);
                        out.push(StreamEvent::ToolInputDelta {
                            id: call.id.clone(),
                            fragment: fragment.to_owned(),
                        });
                    }
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(out)
    }

    fn finished(&self) -> bool {
        self.done
    }

    fn eof(&mut self) -> Result<Vec<StreamEvent>, LlmError> {
        // Some compatible servers end without `[DONE]` once the choice has
        // finished; without a finish reason the response was cut.
        if self.finish_reason.is_some() {
            return Ok(self.close());
        }
        Err(http::cut_short(
            NAME,
            "the stream ended before the response finished",
        ))
    }
}
