//! Anthropic Messages, streamed (`POST {base_url}/v1/messages` with
//! `stream: true`; the base URL has no version: `https://api.anthropic.com`).
//!
//! Wire mapping: `Request::system` is the top-level `system`; messages
//! alternate strictly: `User` items and `ToolResult`s form user messages
//! (tool results first, then text, consecutive ones merged), consecutive
//! `Assistant`/`ToolCall` items one assistant message of `text` and
//! `tool_use` blocks. A call's `input` is its parsed arguments; arguments
//! that are not a JSON object (the model produced broken JSON, which the
//! agent answered with an error result) are sent as
//! `{"invalid_arguments": "<raw text>"}` so the pairing stays intact.

use std::collections::BTreeMap;

use cairn_core::sse::Event;
use reqwest::RequestBuilder;
use serde_json::{json, Value};

use crate::http::{self, Decoder, HttpTimeouts};
use crate::{
    EventStream, Item, LlmError, LlmErrorKind, Provider, Request, StopReason, StreamEvent,
    TokenUsage,
};

const NAME: &str = "anthropic";
const VERSION: &str = "2023-06-01";

/// Where the Anthropic API is.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Without the version: `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeouts: HttpTimeouts,
}

/// The Anthropic Messages adapter.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
}

impl AnthropicProvider {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        Ok(AnthropicProvider {
            client: http::client(NAME, config.timeouts)?,
            config,
        })
    }
}

fn input_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"invalid_arguments": arguments}),
    }
}

/// The request body for `request`.
pub fn body(request: &Request) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let mut i = 0;
    let items = &request.items;
    while i < items.len() {
        if matches!(items[i], Item::Assistant { .. } | Item::ToolCall { .. }) {
            let mut content = Vec::new();
            while let Some(item) = items.get(i) {
                match item {
                    Item::Assistant { text } => content.push(json!({"type": "text", "text": text})),
                    Item::ToolCall {
                        id,
                        name,
                        arguments,
                    } => content.push(
                        json!({"type": "tool_use", "id": id, "name": name, "input": input_of(arguments)}),
                    ),
                    _ => break,
                }
                i += 1;
            }
            messages.push(json!({"role": "assistant", "content": content}));
        } else {
            let (mut results, mut texts) = (Vec::new(), Vec::new());
            while let Some(item) = items.get(i) {
                match item {
                    Item::ToolResult {
                        call_id,
                        content,
                        is_error,
                    } => {
                        let mut block = json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                        if *is_error {
                            block["is_error"] = json!(true);
                        }
                        results.push(block);
                    }
                    Item::User { text } => texts.push(json!({"type": "text", "text": text})),
                    _ => break,
                }
                i += 1;
            }
            results.extend(texts);
            messages.push(json!({"role": "user", "content": results}));
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    http::add_tools_and_temperature(
        &mut body,
        request,
        |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
    );
    body
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        NAME
    }

    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError> {
        http::refuse_invalid(NAME, crate::pairing::check_anthropic, &request.items)?;
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let req = self.client.post(url).header("anthropic-version", VERSION);
        let key = self.config.api_key.as_ref();
        let auth = |req: RequestBuilder, key: &str| req.header("x-api-key", key);
        let decoder = AnthropicDecoder::default();
        http::stream_keyed(NAME, req.json(&body(request)), key, auth, decoder).await
    }
}

enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        input: String,
    },
    Other,
}

/// Messages stream events → stream events.
#[derive(Default)]
struct AnthropicDecoder {
    blocks: BTreeMap<u64, Block>,
    usage: TokenUsage,
    stop_reason: Option<String>,
    done: bool,
}

impl Decoder for AnthropicDecoder {
    fn feed(&mut self, event: &Event) -> Result<Vec<StreamEvent>, LlmError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(vec![]);
        }
        let v: Value =
            serde_json::from_str(data).map_err(|_| http::malformed(NAME, "an event", data))?;
        let kind = v["type"].as_str().unwrap_or(event.event.as_str());
        let index = v["index"].as_u64().unwrap_or(0);
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let u = &v["message"]["usage"];
                self.usage.input_tokens = u["input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = u["output_tokens"].as_u64().unwrap_or(0);
                self.usage.cache_read_tokens = u["cache_read_input_tokens"].as_u64().unwrap_or(0);
                self.usage.cache_write_tokens =
                    u["cache_creation_input_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let b = &v["content_block"];
                let block = match b["type"].as_str() {
                    Some("text") => Block::Text(b["text"].as_str().unwrap_or("").to_owned()),
                    Some("tool_use") => {
                        let (id, name) = (
                            b["id"].as_str().unwrap_or("").to_owned(),
                            b["name"].as_str().unwrap_or("").to_owned(),
                        );
                        out.push(StreamEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        Block::Tool {
                            id,
                            name,
                            input: String::new(),
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let d = &v["delta"];
                match (self.blocks.get_mut(&index), d["type"].as_str()) {
                    (Some(Block::Text(t)), Some("text_delta")) => {
                        let piece = d["text"].as_str().unwrap_or("");
                        t.push_str(piece);
                        out.push(StreamEvent::TextDelta(piece.to_owned()));
                    }
                    (Some(Block::Tool { id, input, .. }), Some("input_json_delta")) => {
                        let piece = d["partial_json"].as_str().unwrap_or("");
                        input.push_str(piece);
                        out.push(StreamEvent::ToolInputDelta {
                            id: id.clone(),
                            fragment: piece.to_owned(),
                        });
                    }
                    (None, _) => {
                        return Err(http::malformed(NAME, "a delta for an unknown block", data))
                    }
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::Text(t)) if !t.is_empty() => out.push(StreamEvent::TextDone(t)),
                Some(Block::Tool { id, name, input }) => {
                    out.push(http::tool_call_done(id, name, input))
                }
                _ => {}
            },
            "message_delta" => {
                if let Some(r) = v["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(r.to_owned());
                }
                if let Some(n) = v["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(StreamEvent::Finished {
                    stop_reason: match self.stop_reason.as_deref() {
                        Some("end_turn") | Some("stop_sequence") | None => StopReason::EndTurn,
                        Some("tool_use") => StopReason::ToolUse,
                        Some("max_tokens") => StopReason::MaxTokens,
                        Some(other) => StopReason::Other(other.to_owned()),
                    },
                    usage: self.usage,
                });
            }
            "error" => {
                let e = &v["error"];
                let kind = match e["type"].as_str() {
                    Some("rate_limit_error") => LlmErrorKind::RateLimited,
                    Some("invalid_request_error")
                    | Some("authentication_error")
                    | Some("permission_error")
                    | Some("not_found_error") => LlmErrorKind::Client,
                    _ => LlmErrorKind::Server,
                };
                return Err(LlmError::new(
                    NAME,
                    kind,
                    e["message"].as_str().unwrap_or("error event").to_owned(),
                ));
            }
            _ => {} // ping, and events added later
        }
        Ok(out)
    }

    fn finished(&self) -> bool {
        self.done
    }

    fn eof(&mut self) -> Result<Vec<StreamEvent>, LlmError> {
        Err(http::cut_short(
            NAME,
            "the stream ended before message_stop",
        ))
    }
}
