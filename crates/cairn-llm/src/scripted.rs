//! The scripted provider: a deterministic script of model responses in a
//! TOML file, for demos and tests (kill tests need a model that says the
//! same thing every time, and can be slowed or cut at a chosen point).
//!
//! The response for a call is `responses[turn]`, where `turn` is
//! `RequestMeta::turn` (how many responses the step's journal already
//! holds), so a step resumed in a fresh process gets the response it would
//! have got. The format:
//!
//! ```toml
//! [[responses]]
//! text = "Let me search."                  # optional
//! tool_calls = [                           # optional
//!   { id = "call_1", name = "search", arguments = { q = "rust" } },
//!   { name = "note", arguments = '{"broken": ' },  # a raw string is sent as is
//! ]                                        # `id` defaults to "call_{turn}_{i}"
//! usage = { input_tokens = 100, output_tokens = 20 }  # default: bytes / 4
//! chunk_bytes = 8          # split text and arguments into pieces this big (default 16)
//! chunk_delay_ms = 0       # sleep before each piece (slows the stream)
//! cut_mid_tool_input = false  # drop the stream half-way through the first
//! cut_on_attempts = [1]       # call's input, only on these attempts (default: all)
//! fail = { kind = "server", message = "boom", on_attempts = [1], retry_after_ms = 500 }
//!                          # fail before streaming; kind: server | rate_limited |
//!                          # client | timeout; retry_after_ms: its `retry-after`;
//!                          # calls = N: only the first N calls of this turn
//!                          # (counted in this process), on any attempt
//! ```
//!
//! A turn past the last response is a `config` error ("script exhausted").
//! With `CAIRN_SCRIPTED_LOG=PATH` in the environment, every request is
//! appended to PATH as one JSON line (`{"meta", "items"}`), so tests can
//! see exactly what a provider would have been sent.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    EventStream, LlmError, LlmErrorKind, Provider, Request, StopReason, StreamEvent, TokenUsage,
};

const NAME: &str = "scripted";

/// A script of responses.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    responses: Vec<Response>,
    /// Calls made so far, per response (for `fail.calls`).
    made: std::sync::Arc<Vec<std::sync::atomic::AtomicU32>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default)]
    responses: Vec<Response>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
    usage: Option<TokenUsage>,
    chunk_bytes: Option<usize>,
    #[serde(default)]
    chunk_delay_ms: u64,
    #[serde(default)]
    cut_mid_tool_input: bool,
    cut_on_attempts: Option<Vec<u32>>,
    fail: Option<Fail>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    id: Option<String>,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fail {
    kind: FailKind,
    #[serde(default = "default_fail_message")]
    message: String,
    on_attempts: Option<Vec<u32>>,
    /// Sent as the failure's `retry-after`.
    retry_after_ms: Option<u64>,
    /// Fail only the first this many calls of the turn, in this process
    /// (a rate limit retried at the same attempt needs the next call to
    /// pass).
    calls: Option<u32>,
}

fn default_fail_message() -> String {
    "scripted failure".into()
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FailKind {
    Server,
    RateLimited,
    Client,
    Timeout,
}

fn on(attempts: &Option<Vec<u32>>, attempt: u32) -> bool {
    attempts.as_ref().is_none_or(|a| a.contains(&attempt))
}

/// Splits `s` into pieces of at most `n` bytes, on char boundaries.
fn pieces(s: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        if cur.len() + c.len_utf8() > n && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl ScriptedProvider {
    /// Reads a script file; a bad file is a `config` error naming it.
    pub fn from_file(path: &Path) -> Result<Self, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            LlmError::new(
                NAME,
                LlmErrorKind::Config,
                format!("cannot read script {}: {e}", path.display()),
            )
        })?;
        Self::parse(&text).map_err(|mut e| {
            e.message = format!("script {}: {}", path.display(), e.message);
            e
        })
    }

    /// Parses a script's text.
    pub fn parse(text: &str) -> Result<Self, LlmError> {
        let script: Script = toml::from_str(text).map_err(|e| {
            LlmError::new(
                NAME,
                LlmErrorKind::Config,
                e.message().trim().replace('\n', " "),
            )
        })?;
        let made = script
            .responses
            .iter()
            .map(|_| Default::default())
            .collect();
        Ok(ScriptedProvider {
            responses: script.responses,
            made: std::sync::Arc::new(made),
        })
    }

    fn log(request: &Request) {
        let Ok(path) = std::env::var("CAIRN_SCRIPTED_LOG") else {
            return;
        };
        let line = serde_json::json!({"meta": request.meta, "items": request.items});
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        NAME
    }

    async fn stream(&self, request: &Request) -> Result<EventStream, LlmError> {
        crate::pairing::check_openai(&request.items)
            .and_then(|()| crate::pairing::check_anthropic(&request.items))
            .map_err(|e| LlmError::new(NAME, LlmErrorKind::InvalidRequest, e.to_string()))?;
        Self::log(request);
        let turn = request.meta.turn;
        let attempt = request.meta.attempt;
        let r = self.responses.get(turn as usize).ok_or_else(|| {
            LlmError::new(
                NAME,
                LlmErrorKind::Config,
                format!(
                    "script exhausted: turn {turn} asked, the script has {} responses",
                    self.responses.len()
                ),
            )
        })?;
        let made = self
            .made
            .get(turn as usize)
            .map_or(0, |m| m.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        let failing = |f: &&Fail| on(&f.on_attempts, attempt) && f.calls.is_none_or(|n| made < n);
        if let Some(fail) = r.fail.as_ref().filter(failing) {
            let kind = match fail.kind {
                FailKind::Server => LlmErrorKind::Server,
                FailKind::RateLimited => LlmErrorKind::RateLimited,
                FailKind::Client => LlmErrorKind::Client,
                FailKind::Timeout => LlmErrorKind::Timeout,
            };
            let mut e = LlmError::new(NAME, kind, fail.message.clone());
            e.retry_after = fail.retry_after_ms.map(Duration::from_millis);
            return Err(e);
        }
        let n = r.chunk_bytes.unwrap_or(16).max(1);
        let mut plan: Vec<Result<StreamEvent, LlmError>> = Vec::new();
        let mut out_bytes = 0;
        if let Some(text) = r.text.as_deref().filter(|t| !t.is_empty()) {
            out_bytes += text.len();
            plan.extend(
                pieces(text, n)
                    .into_iter()
                    .map(|p| Ok(StreamEvent::TextDelta(p))),
            );
            plan.push(Ok(StreamEvent::TextDone(text.to_owned())));
        }
        let cut = r.cut_mid_tool_input && on(&r.cut_on_attempts, attempt);
        for (i, call) in r.tool_calls.iter().enumerate() {
            let id = call
                .id
                .clone()
                .unwrap_or_else(|| format!("call_{turn}_{i}"));
            let arguments = match &call.arguments {
                None => "{}".to_owned(),
                Some(Value::String(raw)) => raw.clone(),
                Some(v) => v.to_string(),
            };
            out_bytes += arguments.len();
            plan.push(Ok(StreamEvent::ToolCallStarted {
                id: id.clone(),
                name: call.name.clone(),
            }));
            let parts = pieces(&arguments, n);
            if cut && i == 0 {
                let half = parts.len().div_ceil(2);
                plan.extend(parts.into_iter().take(half).map(|fragment| {
                    Ok(StreamEvent::ToolInputDelta {
                        id: id.clone(),
                        fragment,
                    })
                }));
                plan.push(Err(LlmError::new(
                    NAME,
                    LlmErrorKind::StreamDropped,
                    "the stream was cut in the middle of a tool call's input (scripted)",
                )));
                break;
            }
            plan.extend(parts.into_iter().map(|fragment| {
                Ok(StreamEvent::ToolInputDelta {
                    id: id.clone(),
                    fragment,
                })
            }));
            plan.push(Ok(StreamEvent::ToolCallDone {
                id,
                name: call.name.clone(),
                arguments,
            }));
        }
        if !plan.last().is_some_and(Result::is_err) {
            let usage = r.usage.unwrap_or(TokenUsage {
                input_tokens: crate::estimate_request_tokens(request),
                output_tokens: out_bytes.div_ceil(4) as u64,
                ..TokenUsage::default()
            });
            plan.push(Ok(StreamEvent::Finished {
                stop_reason: if r.tool_calls.is_empty() {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                },
                usage,
            }));
        }
        let delay = Duration::from_millis(r.chunk_delay_ms);
        Ok(stream::iter(plan)
            .then(move |event| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                event
            })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Item, RequestMeta};

    fn request(turn: u32, attempt: u32) -> Request {
        Request {
            model: "scripted".into(),
            system: None,
            items: vec![Item::User { text: "go".into() }],
            tools: vec![],
            max_tokens: 100,
            temperature: None,
            meta: RequestMeta {
                run_id: "r".into(),
                step_idx: 0,
                attempt,
                turn,
            },
        }
    }

    async fn events(
        p: &ScriptedProvider,
        turn: u32,
        attempt: u32,
    ) -> Vec<Result<StreamEvent, LlmError>> {
        match p.stream(&request(turn, attempt)).await {
            Ok(s) => s.collect().await,
            Err(e) => vec![Err(e)],
        }
    }

    const SCRIPT: &str = r#"
[[responses]]
text = "Searching now."
tool_calls = [{ id = "c1", name = "search", arguments = { q = "a long query" } }]
chunk_bytes = 4
cut_mid_tool_input = true
cut_on_attempts = [1]
usage = { input_tokens = 7, output_tokens = 3 }

[[responses]]
text = "done"
fail = { kind = "server", on_attempts = [1] }
"#;

    #[tokio::test]
    async fn a_cut_response_stops_mid_input_on_the_listed_attempt_only() {
        let p = ScriptedProvider::parse(SCRIPT).unwrap();
        let cut = events(&p, 0, 1).await;
        assert!(cut
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::ToolCallStarted { id, .. }) if id == "c1")));
        assert!(cut
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::ToolInputDelta { .. }))));
        assert!(!cut
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::ToolCallDone { .. }))));
        assert!(
            matches!(cut.last(), Some(Err(e)) if e.kind == LlmErrorKind::StreamDropped && e.retryable())
        );

        let whole = events(&p, 0, 2).await;
        let done: Vec<_> = whole
            .iter()
            .filter_map(|e| match e {
                Ok(StreamEvent::ToolCallDone { arguments, .. }) => Some(arguments.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(done, vec![r#"{"q":"a long query"}"#.to_owned()]);
        assert!(matches!(whole.first(), Some(Ok(StreamEvent::TextDelta(t))) if t == "Sear"));
        assert!(matches!(
            whole.last(),
            Some(Ok(StreamEvent::Finished { stop_reason: StopReason::ToolUse, usage }))
                if usage.input_tokens == 7 && usage.output_tokens == 3
        ));
    }

    #[tokio::test]
    async fn failures_and_exhaustion_are_typed() {
        let p = ScriptedProvider::parse(SCRIPT).unwrap();
        assert!(
            matches!(events(&p, 1, 1).await.last(), Some(Err(e)) if e.kind == LlmErrorKind::Server)
        );
        assert!(matches!(
            events(&p, 1, 2).await.last(),
            Some(Ok(StreamEvent::Finished {
                stop_reason: StopReason::EndTurn,
                ..
            }))
        ));
        let exhausted = events(&p, 2, 1).await;
        assert!(
            matches!(exhausted.last(), Some(Err(e)) if e.kind == LlmErrorKind::Config && e.message.contains("script exhausted"))
        );
    }

    #[test]
    fn a_bad_script_is_a_config_error_naming_the_file() {
        // Removed when the test ends: tests leave nothing behind.
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "[[responses]]\ntxt = 1\n").unwrap();
        let err = ScriptedProvider::from_file(&path).unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::Config);
        assert!(
            err.message.contains("bad.toml") && err.message.contains("txt"),
            "{}",
            err.message
        );
        assert!(ScriptedProvider::from_file(&dir.join("missing.toml")).is_err());
    }
}
