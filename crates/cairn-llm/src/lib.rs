//! Model providers for Cairn's LLM agents.
//!
//! The agent loop speaks one provider-neutral transcript ([`Item`]s in a
//! [`Request`]); each adapter turns it into its wire format and turns the
//! provider's stream back into [`StreamEvent`]s. This crate knows nothing of
//! storage or journals: it only talks to models.
//!
//! **Invariant:** a request that breaks a provider's pairing rules
//! ([`pairing`]) is never sent; the adapter refuses it with
//! [`LlmErrorKind::InvalidRequest`] (a bug in the caller, caught by tests).

pub mod anthropic;
mod http;
pub mod openai;
pub mod pairing;
pub mod scripted;

use std::time::Duration;

use futures_util::stream::BoxStream;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use http::HttpTimeouts;
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use scripted::ScriptedProvider;
use serde::{Deserialize, Serialize};

/// One entry of a provider-neutral transcript.
///
/// Consecutive `Assistant`/`ToolCall` items form one assistant message;
/// consecutive `ToolResult` items answer the calls of the assistant message
/// right before them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    /// A user/context message: the run input, earlier steps' outputs,
    /// feedback, answers. Always a clean turn boundary.
    User { text: String },
    /// Text the model produced.
    Assistant { text: String },
    /// A finished tool call. `arguments` is the raw JSON text the model
    /// produced (it may not be valid JSON: the agent answers such a call
    /// with an error result, and it is still sent back verbatim).
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// The result of the call `call_id`.
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Where a request comes from. Real providers ignore it; the scripted
/// provider picks its response by `turn` and decides cuts by `attempt`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMeta {
    pub run_id: String,
    pub step_idx: u32,
    pub attempt: u32,
    /// How many model responses this step's journal already holds (its
    /// current generation): 0 for the first call of a step.
    pub turn: u32,
}

/// One model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub model: String,
    /// System instructions (OpenAI: a leading `system` message; Anthropic:
    /// the top-level `system` field).
    pub system: Option<String>,
    pub items: Vec<Item>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub meta: RequestMeta,
}

/// Tokens one model call spent, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (OpenAI's
    /// `cached_tokens`, Anthropic's `cache_read_input_tokens`); 0 when not
    /// reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`); 0 when not reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a response ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered (no more tool calls wanted).
    EndTurn,
    /// The model wants its tool calls executed.
    ToolUse,
    /// `max_tokens` was reached.
    MaxTokens,
    /// Anything else, as the provider named it.
    Other(String),
}

/// What a streamed response yields, in order. Deltas may be buffered by the
/// caller but are never complete items; only `TextDone` and `ToolCallDone`
/// are. Every stream that ends without an error ends with exactly one
/// `Finished`.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of assistant text.
    TextDelta(String),
    /// A text block is complete: the whole text of the block.
    TextDone(String),
    /// The model began a tool call; its input is streaming.
    ToolCallStarted { id: String, name: String },
    /// A piece of a tool call's input (raw JSON text).
    ToolInputDelta { id: String, fragment: String },
    /// A tool call is complete: its whole raw argument text
    /// (an empty input is reported as `{}`).
    ToolCallDone {
        id: String,
        name: String,
        arguments: String,
    },
    /// The response is complete.
    Finished {
        stop_reason: StopReason,
        usage: TokenUsage,
    },
}

/// A stream of one response.
pub type EventStream = BoxStream<'static, Result<StreamEvent, LlmError>>;

/// A model provider. Implementations must not retry on their own: the
/// caller decides (a step's retry policy), so a failure is reported once,
/// classified by [`LlmError::retryable`].
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// A short name for events and errors (`openai`, `anthropic`, `scripted`).
    fn name(&self) -> &str;

    /// Starts one model call. Errors before the first event (connection,
    /// HTTP status) come from here; errors mid-stream come from the stream.
    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError>;
}

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{provider}: {message}")]
pub struct LlmError {
    pub provider: String,
    pub kind: LlmErrorKind,
    pub message: String,
    /// From a `retry-after` header (429/503), when present.
    pub retry_after: Option<Duration>,
}

/// The class of a failed model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LlmErrorKind {
    /// HTTP 429.
    RateLimited,
    /// HTTP 5xx (and Anthropic's `overloaded_error` event).
    Server,
    /// No answer, or the stream stalled / ran past its duration cap.
    Timeout,
    /// The connection dropped or the stream ended without finishing.
    StreamDropped,
    /// The server could not be reached: refused connection, DNS failure,
    /// TLS handshake. Retryable (it may come back), and the message names
    /// the URL and the reason.
    Unreachable,
    /// A chunk that does not parse as the wire protocol says.
    Malformed,
    /// HTTP 4xx other than 429 (bad request, auth, not found, …).
    Client,
    /// Missing API key, bad base URL, unreadable script.
    Config,
    /// The request broke the provider's pairing rules; never sent.
    InvalidRequest,
}

/// A rough token count of a request (4 bytes of JSON a token), for
/// providers that report none.
pub fn estimate_request_tokens(request: &Request) -> u64 {
    let bytes: usize = request
        .items
        .iter()
        .map(|i| serde_json::to_string(i).map_or(0, |s| s.len()))
        .sum::<usize>()
        + request.system.as_ref().map_or(0, String::len);
    bytes.div_ceil(4) as u64
}

impl LlmError {
    pub fn new(
        provider: impl Into<String>,
        kind: LlmErrorKind,
        message: impl Into<String>,
    ) -> Self {
        LlmError {
            provider: provider.into(),
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The error with every occurrence of `secret` (an API key) replaced by
    /// `[redacted]`: a provider that echoes the key in its error body must
    /// not have it stored in the step's error and events.
    pub fn redacted(mut self, secret: Option<&str>) -> Self {
        if let Some(secret) = secret.map(str::trim).filter(|s| s.len() >= 4) {
            self.message = self.message.replace(secret, "[redacted]");
        }
        self
    }

    /// How long the provider asked every caller of this key to stay away:
    /// a rate limit (429) or a server error (Anthropic's 529 "overloaded",
    /// a 503) that said how long (`retry-after`). The step pauses its
    /// provider key for everyone and waits, spending no retry.
    pub fn pause(&self) -> Option<Duration> {
        match self.kind {
            LlmErrorKind::RateLimited | LlmErrorKind::Server => self.retry_after,
            _ => None,
        }
    }

    /// Worth trying again (rate limits, server errors, timeouts, dropped or
    /// malformed streams); client errors, configuration and invalid
    /// requests are not.
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            LlmErrorKind::RateLimited
                | LlmErrorKind::Server
                | LlmErrorKind::Timeout
                | LlmErrorKind::StreamDropped
                | LlmErrorKind::Unreachable
                | LlmErrorKind::Malformed
        )
    }
}
