//! Anthropic Messages over a real socket.

use std::time::Duration;

use cairn_llm::{
    AnthropicConfig, AnthropicProvider, HttpTimeouts, Item, LlmErrorKind, Provider, StopReason,
    StreamEvent,
};
use serde_json::{json, Value};

use crate::{
    ask_x, collect, exchange, hello_then_finished, ok_events, request, serve, sse, tokens, Reply,
};

fn provider(base: &str) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        base_url: base.to_owned(),
        api_key: Some("ak-test".into()),
        timeouts: HttpTimeouts::default(),
    })
    .unwrap()
}

fn ev(name: &'static str, data: Value) -> (Option<&'static str>, Value) {
    let mut data = data;
    data["type"] = json!(name);
    (Some(name), data)
}

/// A text block opening at `index`.
fn text_block(index: u32) -> (Option<&'static str>, Value) {
    ev(
        "content_block_start",
        json!({"index": index, "content_block": {"type": "text", "text": ""}}),
    )
}

/// A piece of the text of the block at `index`.
fn text_delta(index: u32, text: &str) -> (Option<&'static str>, Value) {
    ev(
        "content_block_delta",
        json!({"index": index, "delta": {"type": "text_delta", "text": text}}),
    )
}

/// A `search` tool use `id` opening at `index`, its input to come.
fn search_block(index: u32, id: &str) -> (Option<&'static str>, Value) {
    let block = json!({"type": "tool_use", "id": id, "name": "search", "input": {}});
    ev(
        "content_block_start",
        json!({"index": index, "content_block": block}),
    )
}

/// A piece of the JSON input of the tool use at `index`.
fn input_delta(index: u32, partial: &str) -> (Option<&'static str>, Value) {
    let delta = json!({"type": "input_json_delta", "partial_json": partial});
    ev(
        "content_block_delta",
        json!({"index": index, "delta": delta}),
    )
}

fn start(input: u64) -> (Option<&'static str>, Value) {
    ev(
        "message_start",
        json!({"message": {"id": "m", "usage": {"input_tokens": input, "output_tokens": 1}}}),
    )
}

fn stop(reason: &str, output: u64) -> Vec<(Option<&'static str>, Value)> {
    vec![
        ev(
            "message_delta",
            json!({"delta": {"stop_reason": reason}, "usage": {"output_tokens": output}}),
        ),
        ev("message_stop", json!({})),
    ]
}

/// What the provider says to a server answering `reply`: an error.
async fn refused(reply: Reply) -> cairn_llm::LlmError {
    crate::refused(reply, provider).await
}

#[tokio::test]
async fn streamed_text_with_usage_and_the_request_it_sent() {
    let mut events = vec![
        // With prompt caching reported, as Anthropic sends it.
        ev(
            "message_start",
            json!({"message": {"id": "m", "usage": {"input_tokens": 25, "output_tokens": 1,
                   "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}}}),
        ),
        ev("ping", json!({})),
        text_block(0),
        text_delta(0, "Hel"),
        text_delta(0, "lo"),
        ev("content_block_stop", json!({"index": 0})),
    ];
    events.extend(stop("end_turn", 7));
    let server = serve(Reply::sse(sse(&events))).await;
    let got = ok_events(&collect(provider(&server.base).stream(&request(exchange())).await).await);
    assert_eq!(got, hello_then_finished(tokens(25, 7, 100, 20)));
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.headers["x-api-key"], "ak-test");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    let b = &seen.body;
    assert_eq!(b["system"], "Be brief.");
    assert_eq!(b["max_tokens"], 256);
    assert_eq!(b["stream"], true);
    assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    // Strict alternation; the tool result first in its user message, then
    // the user's text.
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "find rust"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "rust"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "no results", "is_error": true},
                {"type": "text", "text": "try again"}]},
        ])
    );
}

#[tokio::test]
async fn tool_use_with_split_input() {
    let mut events = vec![
        start(40),
        search_block(0, "tu1"),
        input_delta(0, "{\"q\": \"ru"),
        input_delta(0, "st\"}"),
        ev("content_block_stop", json!({"index": 0})),
        search_block(1, "tu2"),
        ev("content_block_stop", json!({"index": 1})),
    ];
    events.extend(stop("tool_use", 11));
    let server = serve(Reply::sse(sse(&events))).await;
    let got = ok_events(&collect(provider(&server.base).stream(&ask_x()).await).await);
    let done: Vec<_> = got
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDone { id, arguments, .. } => {
                Some((id.as_str(), arguments.as_str()))
            }
            _ => None,
        })
        .collect();
    // An input that never streamed is an empty object.
    assert_eq!(done, vec![("tu1", r#"{"q": "rust"}"#), ("tu2", "{}")]);
    assert!(
        matches!(got.last(), Some(StreamEvent::Finished { stop_reason: StopReason::ToolUse, usage }) if usage.output_tokens == 11)
    );
}

#[tokio::test]
async fn statuses_and_error_events_are_classified() {
    let mut limited = Reply::status(
        429,
        r#"{"type": "error", "error": {"type": "rate_limit_error", "message": "too fast"}}"#,
    );
    limited.headers.push(("retry-after", "3".into()));
    let e = refused(limited).await;
    assert_eq!(
        (e.kind, e.retry_after),
        (LlmErrorKind::RateLimited, Some(Duration::from_secs(3)))
    );
    assert!(e.message.contains("too fast"), "{e}");

    let e = refused(Reply::status(
        529,
        r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
    ))
    .await;
    assert_eq!(e.kind, LlmErrorKind::Server);
    assert!(e.retryable());

    let e = refused(Reply::status(401, r#"{"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}"#)).await;
    assert_eq!(e.kind, LlmErrorKind::Client);
    assert!(!e.retryable());

    // An error event in the middle of a stream.
    let server = serve(Reply::sse(sse(&[
        start(5),
        ev(
            "error",
            json!({"error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ])))
    .await;
    let events = collect(provider(&server.base).stream(&request(exchange())).await).await;
    assert!(
        matches!(events.last(), Some(Err(e)) if e.kind == LlmErrorKind::Server && e.retryable())
    );
}

#[tokio::test]
async fn a_stream_cut_mid_tool_input_is_a_dropped_stream() {
    let mut reply = Reply::sse(sse(&[
        start(5),
        search_block(0, "tu1"),
        input_delta(0, "{\"q\": "),
    ]));
    reply.abort = true;
    let server = serve(reply).await;
    let events = collect(provider(&server.base).stream(&request(exchange())).await).await;
    assert!(events
        .iter()
        .any(|e| matches!(e, Ok(StreamEvent::ToolCallStarted { id, .. }) if id == "tu1")));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Ok(StreamEvent::ToolCallDone { .. }))));
    assert!(matches!(events.last(), Some(Err(e)) if e.kind == LlmErrorKind::StreamDropped));
}

#[tokio::test]
async fn a_malformed_event_is_an_error() {
    let mut chunks = sse(&[start(5)]);
    chunks.push("event: content_block_delta\ndata: {not json\n\n".into());
    let server = serve(Reply::sse(chunks)).await;
    let events = collect(provider(&server.base).stream(&request(exchange())).await).await;
    assert!(
        matches!(events.last(), Some(Err(e)) if e.kind == LlmErrorKind::Malformed),
        "{events:?}"
    );
}

#[tokio::test]
async fn broken_arguments_still_pair_as_an_object() {
    let server = serve(Reply::sse(vec![])).await;
    let items = vec![
        Item::User { text: "x".into() },
        Item::ToolCall {
            id: "c1".into(),
            name: "search".into(),
            arguments: "{\"q\": ".into(),
        },
        Item::ToolResult {
            call_id: "c1".into(),
            content: "not JSON".into(),
            is_error: true,
        },
    ];
    let _ = collect(provider(&server.base).stream(&request(items)).await).await;
    let body = server.seen.lock().unwrap()[0].body.clone();
    assert_eq!(
        body["messages"][1]["content"][0]["input"],
        json!({"invalid_arguments": "{\"q\": "})
    );
}
