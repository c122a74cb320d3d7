//! The HTTP adapters against a local server that speaks each wire protocol:
//! Server-Sent Events written in small, delayed chunks (so pieces arrive
//! split), status codes with `retry-after`, connections dropped mid-stream,
//! malformed chunks; and the requests the adapters send, as the server
//! received them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic;
mod openai;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use cairn_llm::{EventStream, Item, LlmError, Request, RequestMeta, StreamEvent, ToolSpec};
use futures_util::StreamExt;
use serde_json::{json, Value};

/// What the server answers.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// Body pieces, written 5 ms apart.
    pub chunks: Vec<String>,
    /// Drop the connection after the last chunk instead of ending cleanly.
    pub abort: bool,
}

impl Reply {
    pub fn sse(chunks: Vec<String>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            chunks,
            abort: false,
        }
    }

    pub fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", "application/json".into())],
            chunks: vec![body.to_owned()],
            abort: false,
        }
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

pub struct Server {
    pub base: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

/// Serves `reply` to every request on 127.0.0.1 (a free port).
pub async fn serve(reply: Reply) -> Server {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let reply = reply.clone();
        let log = log.clone();
        async move {
            log.lock().unwrap().push(Seen {
                path: uri.path().to_owned(),
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            });
            let abort = reply.abort;
            let pieces = futures_util::stream::iter(reply.chunks.clone())
                .then(|c| async move {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok::<_, std::io::Error>(Bytes::from(c))
                })
                .chain(futures_util::stream::iter(abort.then(|| {
                    Err(std::io::Error::other("connection dropped on purpose"))
                })));
            let mut resp = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
            for (k, v) in &reply.headers {
                resp = resp.header(*k, v);
            }
            resp.body(Body::from_stream(pieces)).unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server {
        base: format!("http://{addr}"),
        seen,
    }
}

/// `data: JSON` events, one per chunk, split in the middle so the client
/// sees partial lines.
pub fn sse(events: &[(Option<&str>, Value)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, data) in events {
        let text = match name {
            Some(n) => format!("event: {n}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        };
        let mid = text.len() / 2;
        let mid = (mid..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap();
        out.push(text[..mid].to_owned());
        out.push(text[mid..].to_owned());
    }
    out
}

/// [`request`] of one user message, "x".
pub fn ask_x() -> Request {
    request(vec![Item::User { text: "x".into() }])
}

pub fn request(items: Vec<Item>) -> Request {
    Request {
        model: "m-1".into(),
        system: Some("Be brief.".into()),
        items,
        tools: vec![ToolSpec {
            name: "search".into(),
            description: "Search.".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }],
        max_tokens: 256,
        temperature: Some(0.2),
        meta: RequestMeta::default(),
    }
}

/// A transcript with a finished tool exchange: user, assistant text + call,
/// its (error) result, and user text.
pub fn exchange() -> Vec<Item> {
    vec![
        Item::User {
            text: "find rust".into(),
        },
        Item::Assistant {
            text: "Searching.".into(),
        },
        Item::ToolCall {
            id: "c1".into(),
            name: "search".into(),
            arguments: r#"{"q":"rust"}"#.into(),
        },
        Item::ToolResult {
            call_id: "c1".into(),
            content: "no results".into(),
            is_error: true,
        },
        Item::User {
            text: "try again".into(),
        },
    ]
}

/// A streamed "Hel" + "lo", its text done, then the end of the turn
/// with `usage`.
pub fn hello_then_finished(usage: cairn_llm::TokenUsage) -> Vec<StreamEvent> {
    vec![
        StreamEvent::TextDelta("Hel".into()),
        StreamEvent::TextDelta("lo".into()),
        StreamEvent::TextDone("Hello".into()),
        StreamEvent::Finished {
            stop_reason: cairn_llm::StopReason::EndTurn,
            usage,
        },
    ]
}

/// Token counts: input, output, read from and written to a cache.
pub fn tokens(input: u64, output: u64, read: u64, written: u64) -> cairn_llm::TokenUsage {
    cairn_llm::TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: written,
    }
}

/// What the provider `make` builds for a server's base URL says to a
/// server answering `reply`: an error.
pub async fn refused<P: cairn_llm::Provider>(
    reply: Reply,
    make: impl FnOnce(&str) -> P,
) -> LlmError {
    let server = serve(reply).await;
    make(&server.base)
        .stream(&request(exchange()))
        .await
        .err()
        .unwrap()
}

/// Every event of a stream, errors included.
pub async fn collect(stream: Result<EventStream, LlmError>) -> Vec<Result<StreamEvent, LlmError>> {
    match stream {
        Ok(s) => s.collect().await,
        Err(e) => vec![Err(e)],
    }
}

pub fn ok_events(events: &[Result<StreamEvent, LlmError>]) -> Vec<StreamEvent> {
    events
        .iter()
        .filter_map(|e| e.as_ref().ok().cloned())
        .collect()
}
