//! A local model server that speaks OpenAI's streamed Chat Completions and
//! streams slowly: it holds a response until the test lets it begin (so
//! watchers can be in place), sends its pieces of text a gap apart, then
//! holds the response open until the test releases it. So a test can see
//! every piece arrive while the step is certainly still running. It can
//! also refuse its first requests "429 Too Many Requests" with a
//! `Retry-After` (a rate-limited provider), and it keeps when each request
//! arrived.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server (a thread; it lives as long as the test process).
#[derive(Debug)]
pub struct SlowModel {
    /// `http://127.0.0.1:PORT/v1`, a crew's `base_url`.
    pub base_url: String,
    begun: Arc<AtomicBool>,
    released: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    refusals: Arc<Refusals>,
}

/// The 429s still to send, the arrival time of every request, and how
/// many answers are being streamed at once (now and at most).
#[derive(Debug, Default)]
struct Refusals {
    left: AtomicUsize,
    retry_after: std::sync::Mutex<String>,
    arrivals: std::sync::Mutex<Vec<Instant>>,
    streaming: AtomicUsize,
    peak: AtomicUsize,
}

/// How long a held response waits for its release before it ends anyway.
const HOLD_LIMIT: Duration = Duration::from_secs(120);

impl SlowModel {
    /// Serves `pieces` of one answer, `gap` apart, to every request.
    pub fn start(pieces: &[&str], gap: Duration) -> std::io::Result<SlowModel> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let begun = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let pieces: Arc<Vec<String>> = Arc::new(pieces.iter().map(|p| p.to_string()).collect());
        let refusals = Arc::new(Refusals::default());
        let (b, r, n, f) = (
            begun.clone(),
            released.clone(),
            requests.clone(),
            refusals.clone(),
        );
        crate::serve_each(listener, move |stream| {
            let _ = answer(stream, &pieces, gap, [&b, &r], (&n, &f));
        });
        Ok(SlowModel {
            base_url,
            begun,
            released,
            requests,
            refusals,
        })
    }

    /// Answers the next `n` requests 429 with `Retry-After: {retry_after}`.
    pub fn refuse_next(&self, n: usize, retry_after: &str) {
        if let Ok(mut r) = self.refusals.retry_after.lock() {
            *r = retry_after.to_owned();
        }
        self.refusals.left.store(n, Ordering::SeqCst);
    }

    /// When each request so far arrived (its body read), in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.refusals
            .arrivals
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default()
    }

    /// Lets held responses (and every later one) send their pieces.
    pub fn begin(&self) {
        self.begun.store(true, Ordering::SeqCst);
    }

    /// Lets held responses (and every later one) finish (and begin).
    pub fn release(&self) {
        self.begun.store(true, Ordering::SeqCst);
        self.released.store(true, Ordering::SeqCst);
    }

    /// The most answers ever streamed at once (calls in flight at the
    /// provider; refusals not counted).
    pub fn peak(&self) -> usize {
        self.refusals.peak.load(Ordering::SeqCst)
    }

    /// Answers being streamed now.
    pub fn streaming(&self) -> usize {
        self.refusals.streaming.load(Ordering::SeqCst)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn answer(
    stream: TcpStream,
    pieces: &[String],
    gap: Duration,
    [begun, released]: [&AtomicBool; 2],
    (requests, refusals): (&AtomicUsize, &Refusals),
) -> std::io::Result<()> {
    if read_request(&stream)?.is_none() {
        return Ok(());
    }
    requests.fetch_add(1, Ordering::SeqCst);
    if let Ok(mut a) = refusals.arrivals.lock() {
        a.push(Instant::now());
    }
    let mut out = stream;
    let refuse = refusals
        .left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if refuse {
        let after = refusals
            .retry_after
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        return too_many_requests(&mut out, &after);
    }
    let now = refusals.streaming.fetch_add(1, Ordering::SeqCst) + 1;
    refusals.peak.fetch_max(now, Ordering::SeqCst);
    let streamed = stream_answer(&mut out, pieces, gap, [begun, released]);
    refusals.streaming.fetch_sub(1, Ordering::SeqCst);
    streamed
}

/// The head of a 200 answer of Server-Sent Events, the connection closed
/// after it.
pub(crate) const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";

/// One event of `data`, flushed.
pub(crate) fn send_data(out: &mut impl Write, data: impl std::fmt::Display) -> std::io::Result<()> {
    out.write_all(format!("data: {data}\n\n").as_bytes())?;
    out.flush()
}

/// A 200 answer: the pieces, the finish and the usage.
fn stream_answer(
    out: &mut TcpStream,
    pieces: &[String],
    gap: Duration,
    [begun, released]: [&AtomicBool; 2],
) -> std::io::Result<()> {
    out.write_all(SSE_HEAD)?;
    let mut send = |data: String| send_data(out, data);
    hold(begun);
    for piece in pieces {
        let chunk = chunk(Some(piece), None);
        send(chunk)?;
        std::thread::sleep(gap);
    }
    hold(released);
    send(chunk(None, Some("stop")))?;
    let words: usize = pieces.iter().map(|p| p.split_whitespace().count()).sum();
    send(format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":12,"completion_tokens":{words}}}}}"#
    ))?;
    send("[DONE]".to_owned())
}

/// Waits until `gate` opens (at most [`HOLD_LIMIT`]).
fn hold(gate: &AtomicBool) {
    let held = Instant::now();
    while !gate.load(Ordering::SeqCst) && held.elapsed() < HOLD_LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `chat.completion.chunk`: a piece of content, or the finish.
pub(crate) fn chunk(content: Option<&str>, finish: Option<&str>) -> String {
    let delta = match content {
        Some(c) => serde_json::json!({ "content": c }),
        None => serde_json::json!({}),
    };
    serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
}

/// Reads one HTTP request's head and body from `stream`: its path and
/// body, or `None` if the peer closed first.
pub(crate) fn read_request(stream: &TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some((path, body)))
}

/// Answers "429 Too Many Requests" with `Retry-After: {retry_after}`, as
/// OpenAI does when a rate limit is reached.
pub(crate) fn too_many_requests(out: &mut TcpStream, retry_after: &str) -> std::io::Result<()> {
    let body = r#"{"error":{"message":"Rate limit reached for requests","type":"requests"}}"#;
    out.write_all(
        format!(
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
             retry-after: {retry_after}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}
