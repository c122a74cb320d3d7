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
/// an HTTP date (a date already past is zero). A rate limit (`limited`)
/// without either is read from its reset headers ([`reset_wait`]).
fn retry_after(resp: &Response, limited: bool) -> Option<Duration> {
    let header = |name: &str| resp.headers().get(name)?.to_str().ok();
    let now = chrono::Utc::now();
    let asked = wait_asked(header("retry-after-ms"), header("retry-after"), now);
    match (asked, limited) {
        (Some(wait), _) => Some(wait),
        (None, true) => reset_wait(
            resp.headers()
                .iter()
                .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?))),
            now,
        ),
        (None, false) => None,
    }
}

/// A rate limit's wait from its reset headers, OpenAI's
/// `x-ratelimit-reset-*` or Anthropic's `anthropic-ratelimit-*-reset`: the
/// latest reset of a limit whose `remaining` is 0, or else the soonest
/// reset (a key still limited then is refused and paused again, spending
/// no attempt).
fn reset_wait<'a>(
    headers: impl Iterator<Item = (&'a str, &'a str)>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let headers: Vec<(&str, &str)> = headers.collect();
    let exhausted = |reset: &str| {
        let remaining = reset
            .replacen("-reset-", "-remaining-", 1)
            .replace("-reset", "-remaining");
        headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(&remaining) && v.trim() == "0")
    };
    let resets: Vec<(bool, Duration)> = headers
        .iter()
        .filter_map(|(n, v)| Some((exhausted(n), reset_in(n, v, now)?)))
        .collect();
    let spent = resets.iter().filter(|(e, _)| *e).map(|(_, d)| *d).max();
    spent.or_else(|| resets.iter().map(|(_, d)| *d).min())
}

/// One reset header's wait, if `name` is one: OpenAI's
/// `x-ratelimit-reset-requests|tokens` (a Go-style duration) or Anthropic's
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset`
/// (an RFC 3339 time).
fn reset_in(name: &str, value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if name.starts_with("x-ratelimit-reset-") {
        return go_duration(value.trim());
    }
    if name.starts_with("anthropic-ratelimit-") && name.ends_with("-reset") {
        let at = chrono::DateTime::parse_from_rfc3339(value.trim()).ok()?;
        return Some(
            (at.with_timezone(&chrono::Utc) - now)
                .to_std()
                .unwrap_or_default(),
        );
    }
    None
}

/// `6m0s`, `1h2m3.5s`, `20ms`, `1.5s`: numbers each with a unit (h, m, s,
/// ms), summed.
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(split);
        let n: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        total += n * match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        rest = next;
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
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
    let after = retry_after(&resp, status == StatusCode::TOO_MANY_REQUESTS);
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
    /// The body ended before the protocol's end (the pump stops reading
    /// once [`finished`](Decoder::finished)): what is left, or
    /// `StreamDropped` if the response never finished.
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

/// Sends `req` with the API key, if there is one, put on it by `auth`,
/// and streams the response through `decoder` ([`stream_redacted`]: the
/// key kept out of every error).
pub(crate) async fn stream_keyed<D: Decoder>(
    provider: &'static str,
    req: RequestBuilder,
    key: Option<&String>,
    auth: fn(RequestBuilder, &str) -> RequestBuilder,
    decoder: D,
) -> Result<EventStream, LlmError> {
    let req = match key {
        Some(key) => auth(req, key),
        None => req,
    };
    stream_redacted(provider, req, key.cloned(), decoder).await
}

/// Sends `req` and streams its response through `decoder`, keeping the API
/// key (`secret`) out of every error, the send's and the stream's.
pub(crate) async fn stream_redacted<D: Decoder>(
    provider: &'static str,
    req: RequestBuilder,
    secret: Option<String>,
    decoder: D,
) -> Result<EventStream, LlmError> {
    let resp = send(provider, req)
        .await
        .map_err(|e| e.redacted(secret.as_deref()))?;
    Ok(pump(provider, resp, decoder)
        .map(move |r| r.map_err(|e| e.redacted(secret.as_deref())))
        .boxed())
}

/// The request body's optional tail, the same for every protocol but for how
/// one tool is written: `tools` (when there are any) and `temperature`.
pub(crate) fn add_tools_and_temperature(
    body: &mut serde_json::Value,
    request: &crate::Request,
    tool: impl Fn(&crate::ToolSpec) -> serde_json::Value,
) {
    if !request.tools.is_empty() {
        body["tools"] = serde_json::Value::Array(request.tools.iter().map(tool).collect());
    }
    if let Some(t) = request.temperature {
        body["temperature"] = serde_json::json!(t);
    }
}

/// A finished tool call; arguments never streamed are an empty object.
pub(crate) fn tool_call_done(id: String, name: String, arguments: String) -> StreamEvent {
    StreamEvent::ToolCallDone {
        id,
        name,
        arguments: if arguments.trim().is_empty() {
            "{}".into()
        } else {
            arguments
        },
    }
}

/// The body ended before the protocol's end: `message` says which end.
pub(crate) fn cut_short(provider: &str, message: &str) -> LlmError {
    LlmError::new(provider, LlmErrorKind::StreamDropped, message)
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
    fn reset_headers_are_read_as_durations_or_times() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-26T08:00:00Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_default();
        let ms = Duration::from_millis;
        let cases: [(&str, &str, Option<Duration>); 9] = [
            ("x-ratelimit-reset-requests", "6m0s", Some(ms(360_000))),
            ("x-ratelimit-reset-tokens", "1.5s", Some(ms(1500))),
            ("x-ratelimit-reset-tokens", "20ms", Some(ms(20))),
            ("x-ratelimit-reset-requests", "1h2m3s", Some(ms(3_723_000))),
            ("x-ratelimit-reset-requests", "soon", None),
            ("x-ratelimit-reset-requests", "5", None),
            (
                "anthropic-ratelimit-tokens-reset",
                "2026-11-26T08:00:12Z",
                Some(ms(12_000)),
            ),
            (
                "anthropic-ratelimit-requests-reset",
                "2026-11-26T07:00:00Z",
                Some(ms(0)),
            ),
            ("x-ratelimit-limit-requests", "60", None),
        ];
        for (name, value, want) in cases {
            assert_eq!(reset_in(name, value, now), want, "{name}: {value}");
        }
    }

    #[test]
    fn the_reset_of_the_spent_limit_is_waited_for_else_the_soonest() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-26T08:00:00Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_default();
        let openai = |remaining_tokens: &'static str| {
            vec![
                ("x-ratelimit-remaining-requests", "12"),
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-remaining-tokens", remaining_tokens),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ]
        };
        let wait = |h: Vec<(&'static str, &'static str)>| reset_wait(h.into_iter(), now);
        assert_eq!(wait(openai("0")), Some(Duration::from_secs(360)));
        assert_eq!(wait(openai("900")), Some(Duration::from_secs(1)));
        let anthropic = vec![
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-11-26T08:00:30Z"),
            ("anthropic-ratelimit-tokens-remaining", "5000"),
            ("anthropic-ratelimit-tokens-reset", "2026-11-26T08:00:05Z"),
        ];
        assert_eq!(wait(anthropic), Some(Duration::from_secs(30)));
        assert_eq!(wait(vec![("content-type", "application/json")]), None);
    }

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
