//! What the HTTP adapters share: the client, the classification of HTTP
//! failures, and the pump that turns a response's Server-Sent Events into
//! [`StreamEvent`]s through a protocol-specific [`Decoder`]. SSE framing is
//! ours, `cairn_core::sse` (the WHATWG rules, with a cap on an event's size).

use std::collections::VecDeque;
use std::time::Duration;

use cairn_core::sse::{self, Event};
use futures_util::stream::{self, BoxStream, StreamExt};
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::{EventStream, LlmError, LlmErrorKind, StreamEvent};

/// Timeouts of the HTTP adapters.
#[derive(Debug, Clone, Copy)]
pub struct HttpTimeouts {
    /// Connecting to the server.
    pub connect: Duration,
    /// Silence between two pieces of a streamed response (a stalled stream).
    pub idle: Duration,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        HttpTimeouts {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(120),
        }
    }
}

pub(crate) fn client(provider: &str, t: HttpTimeouts) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(t.connect)
        .read_timeout(t.idle)
        .build()
        .map_err(|e| LlmError::new(provider, LlmErrorKind::Config, format!("HTTP client: {e}")))
}

/// A transport failure, classified, naming the URL (scheme, host, port and
/// path: no user, password or query, which may carry secrets) and the
/// innermost cause (`Connection refused`, `failed to lookup address`), which
/// reqwest's own message ("error sending request") hides.
pub(crate) fn transport(provider: &str, e: reqwest::Error) -> LlmError {
    let kind = if e.is_timeout() {
        LlmErrorKind::Timeout
    } else if e.is_connect() {
        LlmErrorKind::Unreachable
    } else {
        LlmErrorKind::StreamDropped
    };
    let url = e.url().map(|u| {
        let mut u = u.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.set_query(None);
        u.set_fragment(None);
        u.to_string()
    });
    let mut cause = None;
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        cause = Some(s.to_string());
        source = s.source();
    }
    let what = match kind {
        LlmErrorKind::Timeout => "timed out",
        LlmErrorKind::Unreachable => "cannot connect",
        _ => "request failed",
    };
    let mut message = match url {
        Some(url) => format!("{what} to {url}"),
        None => what.to_owned(),
    };
    // The innermost cause says why; reqwest's own text adds nothing.
    if let Some(cause) = cause.filter(|c| !c.is_empty()) {
        message.push_str(": ");
        message.push_str(&cause);
    }
    LlmError::new(provider, kind, message)
}

/// How long a refusing server asks to be left alone: `retry-after-ms`
/// (OpenAI's), else `retry-after` as seconds (integer or fractional) or as
/// an HTTP date (a date already past is zero).
fn retry_after(resp: &Response) -> Option<Duration> {
    let header = |name: &str| resp.headers().get(name)?.to_str().ok();
    wait_asked(
        header("retry-after-ms"),
        header("retry-after"),
        chrono::Utc::now(),
    )
}

/// [`retry_after`]'s rule on the header values, at `now`.
fn wait_asked(
    ms: Option<&str>,
    after: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let seconds = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
    };
    if let Some(ms) = ms.and_then(seconds) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let after = after?;
    if let Some(s) = seconds(after) {
        return Some(Duration::from_secs_f64(s));
    }
    let at = chrono::DateTime::parse_from_rfc2822(after.trim()).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or_default(),
    )
}

/// Sends `req`; a non-success status becomes a classified error carrying
/// the provider's own message.
pub(crate) async fn send(provider: &str, req: RequestBuilder) -> Result<Response, LlmError> {
    let resp = req.send().await.map_err(|e| transport(provider, e))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let after = retry_after(&resp);
    let body = resp.text().await.unwrap_or_default();
    let detail = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(500).collect());
    let kind = match status {
        StatusCode::TOO_MANY_REQUESTS => LlmErrorKind::RateLimited,
        s if s.is_server_error() => LlmErrorKind::Server,
        _ => LlmErrorKind::Client,
    };
    let mut e = LlmError::new(
        provider,
        kind,
        format!("HTTP {}: {detail}", status.as_u16()),
    );
    e.retry_after = after;
    Err(e)
}

/// Turns one wire protocol's events into [`StreamEvent`]s.
pub(crate) trait Decoder: Send + 'static {
    /// One SSE event; may yield several stream events.
    fn feed(&mut self, event: &Event) -> Result<Vec<StreamEvent>, LlmError>;
    /// The protocol's end was seen (`[DONE]`, `message_stop`).
    fn finished(&self) -> bool;
    /// The body ended: what is left, or `StreamDropped` if the response
    /// never finished.
    fn eof(&mut self) -> Result<Vec<StreamEvent>, LlmError>;
}

struct Pump<D> {
    sse: BoxStream<'static, Result<Event, String>>,
    decoder: D,
    queue: VecDeque<Result<StreamEvent, LlmError>>,
    done: bool,
    provider: String,
}

/// The stream of a successful response.
pub(crate) fn pump<D: Decoder>(provider: &str, resp: Response, decoder: D) -> EventStream {
    let sse = sse::events(resp.bytes_stream(), sse::Decoder::new())
        .map(|r| r.map_err(|e| e.to_string()))
        .boxed();
    let state = Pump {
        sse,
        decoder,
        queue: VecDeque::new(),
        done: false,
        provider: provider.to_owned(),
    };
    stream::unfold(state, |mut p| async move {
        loop {
            if let Some(item) = p.queue.pop_front() {
                return Some((item, p));
            }
            if p.done {
                return None;
            }
            let step = match p.sse.next().await {
                Some(Ok(event)) => p.decoder.feed(&event),
                Some(Err(e)) => Err(LlmError::new(
                    &p.provider,
                    LlmErrorKind::StreamDropped,
                    format!("the stream broke: {e}"),
                )),
                None => {
                    p.done = true;
                    p.decoder.eof()
                }
            };
            match step {
                Ok(events) => p.queue.extend(events.into_iter().map(Ok)),
                Err(e) => {
                    p.queue.push_back(Err(e));
                    p.done = true;
                }
            }
            if p.decoder.finished() {
                p.done = true;
            }
        }
    })
    .boxed()
}

/// A chunk that does not parse.
pub(crate) fn malformed(provider: &str, what: &str, data: &str) -> LlmError {
    let shown: String = data.chars().take(200).collect();
    LlmError::new(
        provider,
        LlmErrorKind::Malformed,
        format!("{what} does not parse: {shown}"),
    )
}

/// Checks both pairing rules' version for one provider.
pub(crate) fn refuse_invalid(
    provider: &str,
    check: fn(&[crate::Item]) -> Result<(), crate::pairing::PairingError>,
    items: &[crate::Item],
) -> Result<(), LlmError> {
    check(items).map_err(|e| {
        LlmError::new(
            provider,
            LlmErrorKind::InvalidRequest,
            format!("refusing to send a transcript that breaks the pairing rules: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_a_server_asks_for_is_read_from_every_form_it_takes() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-26T08:00:00Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_default();
        let s = Duration::from_secs;
        let cases: [(Option<&str>, Option<&str>, Option<Duration>); 9] = [
            (None, None, None),
            (None, Some("7"), Some(s(7))),
            (None, Some(" 1.5 "), Some(Duration::from_millis(1500))),
            (Some("250"), Some("7"), Some(Duration::from_millis(250))),
            (Some("soon"), Some("3"), Some(s(3))),
            (None, Some("Thu, 26 Nov 2026 08:00:30 GMT"), Some(s(30))),
            (None, Some("Thu, 26 Nov 2026 07:59:00 GMT"), Some(s(0))),
            (None, Some("-4"), None),
            (None, Some("tomorrow"), None),
        ];
        for (ms, after, want) in cases {
            assert_eq!(wait_asked(ms, after, now), want, "{ms:?} {after:?}");
        }
    }
}
