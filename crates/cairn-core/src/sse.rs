//! Server-Sent Events: an incremental decoder of an `text/event-stream` body
//! by the WHATWG HTML standard's parsing rules (§9.2.6, "Interpreting an
//! event stream"), and [`events`], which puts it over a stream of byte
//! chunks. The decoder does no I/O: it is fed chunks as they arrive, cut
//! anywhere (inside a `\r\n`, inside a UTF-8 character), and hands back each
//! event a blank line completes.
//!
//! The rules, as implemented:
//! - a line ends at `\n`, `\r\n` or `\r` (a `\r\n` cut between two chunks is
//!   one line ending);
//! - one UTF-8 byte order mark at the very start of the stream is dropped;
//!   lines are decoded as UTF-8, invalid bytes becoming U+FFFD;
//! - a line starting with `:` is a comment, ignored;
//! - `name:value` sets a field, one space after the colon is dropped; a line
//!   without a colon is a field with an empty value; unknown fields are
//!   ignored;
//! - `data` lines are joined with `\n`; `event` sets the event's type
//!   (`message` when none); `id` sets the last event id, which later events
//!   keep until another `id` (one holding NUL is ignored); `retry` with only
//!   ASCII digits sets the reconnection time;
//! - a blank line dispatches the event, unless no `data` line came (then the
//!   type is forgotten and nothing is dispatched);
//! - at the end of the stream an event without its blank line is dropped.
//!
//! What one event may buffer is capped ([`DEFAULT_MAX_EVENT_BYTES`]): past
//! the cap the decoder fails with [`SseError::TooLarge`] instead of growing.

use std::collections::VecDeque;
use std::pin::Pin;

use futures_util::stream::{self, Stream, StreamExt};

#[cfg(test)]
mod tests;

/// The default cap on what one event may buffer, in bytes: its unfinished
/// line, its `data` and its type. Model streams send events of a few hundred
/// bytes; this leaves room for a whole response in one event.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its type: the last `event` field, or `message`.
    pub event: String,
    /// Its `data` lines, joined with `\n`.
    pub data: String,
    /// The last event id of the stream so far (empty when none).
    pub id: String,
}

/// Why decoding stopped. The decoder stays failed: later input returns the
/// same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One event (or one line) buffered more than the cap.
    #[error("a server-sent event is over the cap of {cap} bytes")]
    TooLarge {
        /// The cap, in bytes.
        cap: usize,
    },
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The incremental decoder: [`Decoder::feed`] it chunks.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// The current line's bytes, without its ending.
    line: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` first in the next one belongs
    /// to that line ending.
    after_cr: bool,
    /// A first line was completed (so a BOM is no longer dropped).
    started: bool,
    /// The event being built: its type and its data (each line with `\n`).
    event: String,
    data: String,
    /// The last event id buffer (kept across events).
    id: String,
    retry: Option<u64>,
    max_event_bytes: usize,
    failed: Option<SseError>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the default cap, [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new() -> Self {
        Decoder::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder whose events may buffer at most `cap` bytes.
    pub fn with_max_event_bytes(cap: usize) -> Self {
        Decoder {
            line: Vec::new(),
            after_cr: false,
            started: false,
            event: String::new(),
            data: String::new(),
            id: String::new(),
            retry: None,
            max_event_bytes: cap,
            failed: None,
        }
    }

    /// The reconnection time the stream asked for (`retry`), in
    /// milliseconds, if it did.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Decodes `chunk`, the next bytes of the stream, appending the events
    /// it completes to `out`. On an error, the events completed before it
    /// are in `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(at) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (text, rest) = chunk.split_at(at);
            self.line.extend_from_slice(text);
            self.check()?;
            chunk = match rest {
                [b'\r', b'\n', rest @ ..] => rest,
                [b'\r'] => {
                    self.after_cr = true;
                    &[]
                }
                [_, rest @ ..] => rest,
                [] => &[],
            };
            self.end_line(out)?;
        }
        self.line.extend_from_slice(chunk);
        self.check()
    }

    /// Fails, for good, if the event being built is over the cap.
    fn check(&mut self) -> Result<(), SseError> {
        let size = self.line.len() + self.data.len() + self.event.len();
        if size > self.max_event_bytes {
            let e = SseError::TooLarge {
                cap: self.max_event_bytes,
            };
            self.failed = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// The current line is complete: interprets it.
    fn end_line(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        let mut bytes = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            if bytes.starts_with(BOM) {
                bytes.drain(..BOM.len());
            }
        }
        let line = String::from_utf8_lossy(&bytes);
        if line.is_empty() {
            self.dispatch(out);
        } else if !line.starts_with(':') {
            let (name, value) = match line.split_once(':') {
                Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
                None => (&*line, ""),
            };
            self.field(name, value)?;
        }
        // The line's buffer is kept for the next one (no new allocation).
        bytes.clear();
        self.line = bytes;
        Ok(())
    }

    fn field(&mut self, name: &str, value: &str) -> Result<(), SseError> {
        match name {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
                self.check()?;
            }
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.check()?;
            }
            "id" if !value.contains('\0') => {
                self.id.clear();
                self.id.push_str(value);
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                // Digits only; a value too large for u64 is ignored.
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A blank line: the event is complete.
    fn dispatch(&mut self, out: &mut Vec<Event>) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the `\n` after the last data line
        let event = match std::mem::take(&mut self.event) {
            e if e.is_empty() => "message".to_owned(),
            e => e,
        };
        out.push(Event {
            event,
            data,
            id: self.id.clone(),
        });
    }
}

/// What a stream of [`events`] fails with.
#[derive(Debug, thiserror::Error)]
pub enum StreamError<E> {
    /// The body failed (a transport error, as the body stream gave it).
    #[error("{0}")]
    Body(E),
    /// The bytes broke a rule of the decoder (an event over its cap).
    #[error(transparent)]
    Sse(#[from] SseError),
}

/// The events of a body given as a stream of byte chunks (as reqwest's
/// `bytes_stream()`), decoded with `decoder`. After an error the stream
/// ends; so it does at the end of the body, dropping an event without its
/// blank line.
pub fn events<S, B, E>(
    body: S,
    decoder: Decoder,
) -> impl Stream<Item = Result<Event, StreamError<E>>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    struct State<S, E> {
        body: Pin<Box<S>>,
        decoder: Decoder,
        /// Events decoded and not yet given, then the error that ended the
        /// stream, if one did.
        ready: VecDeque<Event>,
        error: Option<StreamError<E>>,
        scratch: Vec<Event>,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        decoder,
        ready: VecDeque::new(),
        error: None,
        scratch: Vec::new(),
        done: false,
    };
    stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.ready.pop_front() {
                return Some((Ok(event), s));
            }
            if let Some(e) = s.error.take() {
                return Some((Err(e), s));
            }
            if s.done {
                return None;
            }
            match s.body.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = s.decoder.feed(chunk.as_ref(), &mut s.scratch) {
                        s.error = Some(e.into());
                        s.done = true;
                    }
                    s.ready.extend(s.scratch.drain(..));
                }
                Some(Err(e)) => {
                    s.error = Some(StreamError::Body(e));
                    s.done = true;
                }
                None => s.done = true,
            }
        }
    })
}
