//! A local model server that speaks OpenAI's streamed Chat Completions and
//! enforces a rate limit the way providers do: at most `limit` requests in
//! any sliding `window`, and "429 Too Many Requests" with `Retry-After`
//! (whole seconds until the window has room) beyond it. It keeps its books:
//! the requests it accepted and refused, and the requests that arrived
//! while a pause it had announced still stood, split by how long after the
//! 429 that announced it (a request already on the wire when the 429 left
//! is a race between callers; one sent long after is a caller that ignored
//! the pause).

use std::collections::VecDeque;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server (a thread; it lives as long as the test process).
#[derive(Debug, Clone)]
pub struct RateLimitedModel {
    /// `http://127.0.0.1:PORT/v1`, a crew's `base_url`.
    pub base_url: String,
    books: Arc<Mutex<Books>>,
}

/// What the provider saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    pub accepted: usize,
    pub refused: usize,
    /// Requests that arrived while an announced pause stood.
    pub during_pause: usize,
    /// Of those, the ones that arrived later than `late` after the 429 that
    /// announced the pause.
    pub late_in_pause: usize,
}

#[derive(Debug)]
struct Books {
    limit: usize,
    window: Duration,
    late: Duration,
    accepted: VecDeque<Instant>,
    seen: Seen,
    paused_until: Option<Instant>,
    announced: Option<Instant>,
}

impl Books {
    /// `None`: accepted; else the whole seconds to wait.
    fn admit(&mut self, now: Instant) -> Option<u64> {
        if self.paused_until.is_some_and(|p| now < p) {
            self.seen.during_pause += 1;
            if self.announced.is_some_and(|a| now - a > self.late) {
                self.seen.late_in_pause += 1;
            }
        }
        while self
            .accepted
            .front()
            .is_some_and(|t| now - *t >= self.window)
        {
            self.accepted.pop_front();
        }
        if self.accepted.len() < self.limit {
            self.accepted.push_back(now);
            self.seen.accepted += 1;
            return None;
        }
        let oldest = self.accepted.front().copied().unwrap_or(now);
        let secs = (oldest + self.window - now).as_secs_f64().ceil().max(1.0) as u64;
        if self.paused_until.is_none_or(|p| p <= now) {
            self.announced = Some(now);
        }
        let until = now + Duration::from_secs(secs);
        self.paused_until = Some(self.paused_until.map_or(until, |p| p.max(until)));
        self.seen.refused += 1;
        Some(secs)
    }
}

impl RateLimitedModel {
    /// Allows `limit` requests in any sliding `window`; a request arriving
    /// more than `late` into an announced pause counts as late.
    pub fn start(limit: usize, window: Duration, late: Duration) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let books = Arc::new(Mutex::new(Books {
            limit,
            window,
            late,
            accepted: VecDeque::new(),
            seen: Seen::default(),
            paused_until: None,
            announced: None,
        }));
        let b = books.clone();
        crate::serve_each(listener, move |stream| {
            let _ = answer(stream, &b);
        });
        Ok(RateLimitedModel { base_url, books })
    }

    /// What it saw so far.
    pub fn seen(&self) -> Seen {
        self.books
            .lock()
            .map(|b| b.seen.clone())
            .unwrap_or_default()
    }
}

fn answer(stream: TcpStream, books: &Mutex<Books>) -> std::io::Result<()> {
    if crate::slow_model::read_request(&stream)?.is_none() {
        return Ok(());
    }
    let verdict = match books.lock() {
        Ok(mut b) => b.admit(Instant::now()),
        Err(_) => Some(1),
    };
    let mut out = stream;
    if let Some(secs) = verdict {
        return crate::slow_model::too_many_requests(&mut out, &secs.to_string());
    }
    let events = [
        r#"{"choices":[{"index":0,"delta":{"content":"an answer"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2}}"#,
        "[DONE]",
    ];
    let text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    out.write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
             connection: close\r\n\r\n{text}"
        )
        .as_bytes(),
    )
}
