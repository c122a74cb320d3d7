//! OpenAI Chat Completions over a real socket.

use std::time::Duration;

use cairn_llm::{
    HttpTimeouts, Item, LlmErrorKind, OpenAiConfig, OpenAiProvider, Provider, StopReason,
    StreamEvent,
};
use serde_json::json;

use crate::{
    ask_x, collect, exchange, hello_then_finished, ok_events, request, serve, sse, tokens, Reply,
};

fn provider(base: &str, key: Option<&str>) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{base}/v1"),
        api_key: key.map(str::to_owned),
        timeouts: HttpTimeouts::default(),
        completion_tokens_field: false,
    })
    .unwrap()
}

fn delta(d: serde_json::Value) -> (Option<&'static str>, serde_json::Value) {
    (
        None,
        json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]}),
    )
}

fn finish(reason: &str) -> (Option<&'static str>, serde_json::Value) {
    (
        None,
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}),
    )
}

fn usage(i: u64, o: u64) -> (Option<&'static str>, serde_json::Value) {
    (
        None,
        json!({"choices": [], "usage": {"prompt_tokens": i, "completion_tokens": o}}),
    )
}

fn done() -> String {
    "data: [DONE]\n\n".into()
}

/// What the provider (no key) says to a server answering `reply`: an error.
async fn refused(reply: Reply) -> cairn_llm::LlmError {
    crate::refused(reply, |base| provider(base, None)).await
}

#[tokio::test]
async fn streamed_text_with_usage_and_the_request_it_sent() {
    let mut chunks = sse(&[
        delta(json!({"role": "assistant", "content": ""})),
        delta(json!({"content": "Hel"})),
        delta(json!({"content": "lo"})),
        finish("stop"),
        // With prompt caching reported, as OpenAI sends it.
        (
            None,
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3,
                   "prompt_tokens_details": {"cached_tokens": 8}}}),
        ),
    ]);
    chunks.push(done());
    let server = serve(Reply::sse(chunks)).await;
    let events = collect(
        provider(&server.base, Some("sk-test"))
            .stream(&request(exchange()))
            .await,
    )
    .await;
    assert_eq!(ok_events(&events), hello_then_finished(tokens(12, 3, 8, 0)));
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.headers["authorization"], "Bearer sk-test");
    let b = &seen.body;
    assert_eq!(b["model"], "m-1");
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"]["include_usage"], true);
    assert_eq!(b["max_tokens"], 256);
    assert_eq!(b["temperature"], 0.2);
    assert_eq!(b["tools"][0]["function"]["name"], "search");
    assert_eq!(
        b["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "find rust"},
            {"role": "assistant", "content": "Searching.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"rust\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "error: no results"},
            {"role": "user", "content": "try again"},
        ])
    );
}

#[tokio::test]
async fn parallel_tool_calls_with_split_arguments() {
    let mut chunks = sse(&[
        delta(json!({"content": "Two searches."})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "search", "arguments": ""}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"q\":"}}]})),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "search", "arguments": "{\"q\""}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"rust\"}"}}]})),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": ":\"go\"}"}}]})),
        finish("tool_calls"),
        usage(30, 9),
    ]);
    chunks.push(done());
    let server = serve(Reply::sse(chunks)).await;
    let events = ok_events(&collect(provider(&server.base, None).stream(&ask_x()).await).await);
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallStarted { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, vec!["c1", "c2"]);
    let done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDone {
                id,
                name,
                arguments,
            } => Some((id.as_str(), name.as_str(), arguments.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        vec![
            ("c1", "search", r#"{"q":"rust"}"#),
            ("c2", "search", r#"{"q":"go"}"#)
        ]
    );
    // The text was complete before the first call started.
    let text_done = events
        .iter()
        .position(|e| matches!(e, StreamEvent::TextDone(t) if t == "Two searches."))
        .unwrap();
    let first_call = events
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
        .unwrap();
    assert!(text_done < first_call);
    assert!(
        matches!(events.last(), Some(StreamEvent::Finished { stop_reason: StopReason::ToolUse, usage }) if usage.input_tokens == 30)
    );
    // No key configured: no Authorization header.
    assert!(server.seen.lock().unwrap()[0]
        .headers
        .get("authorization")
        .is_none());
}

#[tokio::test]
async fn rate_limits_server_errors_and_client_errors_are_classified() {
    let mut limited = Reply::status(429, r#"{"error": {"message": "slow down"}}"#);
    limited.headers.push(("retry-after", "7".into()));
    let e = refused(limited).await;
    assert_eq!(e.kind, LlmErrorKind::RateLimited);
    assert!(e.retryable());
    assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
    assert!(e.message.contains("slow down"), "{e}");

    // Without `retry-after`, a rate limit's wait is its spent limit's reset;
    // a server error's reset headers say nothing about the error.
    let resets = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "2.5s"),
        ("x-ratelimit-remaining-tokens", "9000"),
        ("x-ratelimit-reset-tokens", "40ms"),
    ];
    let mut limited = Reply::status(429, r#"{"error": {"message": "requests"}}"#);
    limited
        .headers
        .extend(resets.map(|(n, v)| (n, v.to_owned())));
    let e = refused(limited).await;
    assert_eq!(e.pause(), Some(Duration::from_millis(2500)));

    let mut failed = Reply::status(500, "upstream exploded");
    failed
        .headers
        .extend(resets.map(|(n, v)| (n, v.to_owned())));
    let e = refused(failed).await;
    assert_eq!(e.kind, LlmErrorKind::Server);
    assert!(e.retryable() && e.message.contains("500"), "{e}");
    assert_eq!(e.pause(), None, "a 500's reset headers pause nothing");

    let e = refused(Reply::status(400, r#"{"error": {"message": "bad model"}}"#)).await;
    assert_eq!(e.kind, LlmErrorKind::Client);
    assert!(!e.retryable() && e.message.contains("bad model"), "{e}");
}

#[tokio::test]
async fn an_error_body_that_echoes_the_key_is_redacted() {
    let server = serve(Reply::status(
        401,
        r#"{"error": {"message": "key sk-live-0123456789 is not valid for this project"}}"#,
    ))
    .await;
    let e = provider(&server.base, Some("sk-live-0123456789"))
        .stream(&request(exchange()))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, LlmErrorKind::Client);
    assert!(!e.message.contains("sk-live-0123456789"), "{e}");
    assert!(e.message.contains("key [redacted] is not valid"), "{e}");
}

#[tokio::test]
async fn an_unreachable_server_is_named_with_its_url_and_the_reason() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = provider(&format!("http://127.0.0.1:{port}"), Some("sk-secret"))
        .stream(&request(exchange()))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, LlmErrorKind::Unreachable, "{e}");
    assert!(e.retryable());
    assert!(
        e.message
            .contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")),
        "{e}"
    );
    assert!(e.message.contains("refused"), "{e}");
    assert!(!e.message.contains("sk-secret"), "{e}");

    // `.invalid` never resolves (RFC 6761): a DNS failure, named as such.
    let e = provider("http://cairn-test.invalid", None)
        .stream(&request(exchange()))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, LlmErrorKind::Unreachable, "{e}");
    assert!(e.message.contains("cairn-test.invalid"), "{e}");
    assert!(
        e.message.contains("lookup") || e.message.contains("resolve"),
        "{e}"
    );
}

#[tokio::test]
async fn a_stream_cut_mid_tool_input_is_a_dropped_stream() {
    let mut reply = Reply::sse(sse(&[
        delta(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":"}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"ru"}}]})),
    ]));
    reply.abort = true;
    let server = serve(reply).await;
    let events = collect(
        provider(&server.base, None)
            .stream(&request(exchange()))
            .await,
    )
    .await;
    assert!(events
        .iter()
        .any(|e| matches!(e, Ok(StreamEvent::ToolCallStarted { id, .. }) if id == "c1")));
    assert!(events
        .iter()
        .any(|e| matches!(e, Ok(StreamEvent::ToolInputDelta { .. }))));
    assert!(!events.iter().any(|e| matches!(
        e,
        Ok(StreamEvent::ToolCallDone { .. }) | Ok(StreamEvent::Finished { .. })
    )));
    let last = events.last().unwrap().as_ref().err().unwrap();
    assert_eq!(last.kind, LlmErrorKind::StreamDropped);
    assert!(last.retryable());

    // A clean end of the body without a finish is a dropped stream too.
    let server = serve(Reply::sse(sse(&[delta(json!({"content": "half"}))]))).await;
    let events = collect(
        provider(&server.base, None)
            .stream(&request(exchange()))
            .await,
    )
    .await;
    assert!(matches!(events.last(), Some(Err(e)) if e.kind == LlmErrorKind::StreamDropped));
}

#[tokio::test]
async fn a_malformed_chunk_is_an_error_not_a_guess() {
    let mut chunks = sse(&[delta(json!({"content": "ok"}))]);
    chunks.push("data: {\"choices\": [ nope\n\n".into());
    let server = serve(Reply::sse(chunks)).await;
    let events = collect(
        provider(&server.base, None)
            .stream(&request(exchange()))
            .await,
    )
    .await;
    assert!(
        matches!(events.last(), Some(Err(e)) if e.kind == LlmErrorKind::Malformed),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_request_that_breaks_pairing_is_never_sent() {
    let server = serve(Reply::sse(vec![done()])).await;
    let orphan = vec![
        Item::User { text: "x".into() },
        Item::ToolResult {
            call_id: "gone".into(),
            content: "r".into(),
            is_error: false,
        },
    ];
    let e = provider(&server.base, None)
        .stream(&request(orphan))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, LlmErrorKind::InvalidRequest);
    assert!(server.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn openai_itself_gets_max_completion_tokens() {
    assert!(OpenAiConfig::completion_tokens_field_for(
        "https://api.openai.com/v1"
    ));
    assert!(!OpenAiConfig::completion_tokens_field_for(
        "http://127.0.0.1:8080/v1"
    ));
    let server = serve(Reply::sse(vec![done()])).await;
    let p = OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{}/v1", server.base),
        api_key: None,
        timeouts: HttpTimeouts::default(),
        completion_tokens_field: true,
    })
    .unwrap();
    let _ = collect(p.stream(&request(exchange())).await).await;
    let body = server.seen.lock().unwrap()[0].body.clone();
    assert_eq!(body["max_completion_tokens"], 256);
    assert!(body.get("max_tokens").is_none(), "{body}");
}
