//! A local model server that speaks OpenAI's streamed Chat Completions at a
//! fixed pace and keeps the clock: every answer is the same `tokens`
//! tokens, the first `first_after` after the request arrived and each next
//! one `gap` after the one before (deadlines from the arrival, so a slow
//! write does not shift the rest), each its own event, written at once
//! (`TCP_NODELAY`). It notes for every answer when its request arrived and
//! when its first and last token left, so a reader in the same process can
//! tell the model's time from the time spent after it. No gates: it is for
//! measuring (`cairn-bench --model-overhead`), where `SlowModel` is for
//! holding a step open.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::slow_model::{chunk, read_request, send_data, SSE_HEAD};

/// The server (a thread; it lives as long as the process).
#[derive(Debug, Clone)]
pub struct PacedModel {
    /// `http://127.0.0.1:PORT/v1`, a crew's `base_url`.
    pub base_url: String,
    tokens: usize,
    calls: Arc<Mutex<Vec<PacedCall>>>,
}

/// One answer, as the model's clock saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacedCall {
    /// The request's body was read.
    pub arrived: Instant,
    /// The first token's event was written.
    pub first_sent: Instant,
    /// The last token's event was written.
    pub last_sent: Instant,
}

impl PacedModel {
    /// Serves `tokens` tokens to every request: the first `first_after`
    /// after the request, then one every `gap`.
    pub fn start(tokens: usize, first_after: Duration, gap: Duration) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let calls = Arc::new(Mutex::new(Vec::new()));
        let kept = calls.clone();
        crate::serve_each(listener, move |stream| {
            let _ = answer(stream, tokens, first_after, gap, &kept);
        });
        Ok(PacedModel {
            base_url,
            tokens,
            calls,
        })
    }

    /// The text of token `i` (each ends with a space).
    pub fn token(i: usize) -> String {
        format!("t{i} ")
    }

    /// The whole answer's text.
    pub fn text(&self) -> String {
        (0..self.tokens).map(Self::token).collect()
    }

    /// Tokens per answer.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Every answer streamed to its end so far, in the order they ended.
    pub fn calls(&self) -> Vec<PacedCall> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

fn answer(
    stream: TcpStream,
    tokens: usize,
    first_after: Duration,
    gap: Duration,
    calls: &Mutex<Vec<PacedCall>>,
) -> std::io::Result<()> {
    if read_request(&stream)?.is_none() {
        return Ok(());
    }
    let arrived = Instant::now();
    stream.set_nodelay(true)?;
    let mut out = stream;
    out.write_all(SSE_HEAD)?;
    out.flush()?;
    let (mut first_sent, mut last_sent) = (arrived, arrived);
    for i in 0..tokens {
        let due = arrived + first_after + gap * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let token = PacedModel::token(i);
        send_data(&mut out, chunk(Some(token.as_str()), None))?;
        last_sent = Instant::now();
        if i == 0 {
            first_sent = last_sent;
        }
    }
    send_data(&mut out, chunk(None, Some("stop")))?;
    send_data(
        &mut out,
        format!(r#"{{"choices":[],"usage":{{"prompt_tokens":12,"completion_tokens":{tokens}}}}}"#),
    )?;
    send_data(&mut out, "[DONE]")?;
    if let Ok(mut c) = calls.lock() {
        c.push(PacedCall {
            arrived,
            first_sent,
            last_sent,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn every_token_is_streamed_at_the_pace_and_the_call_is_noted() {
        let model = PacedModel::start(20, Duration::from_millis(5), Duration::from_millis(2))
            .expect("start");
        let addr = model
            .base_url
            .trim_start_matches("http://")
            .trim_end_matches("/v1");
        let mut s = TcpStream::connect(addr).expect("connect");
        let body = "{}";
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut got = String::new();
        s.read_to_string(&mut got).expect("read");
        let text: String = got
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(text, model.text());
        assert!(got.contains(r#""completion_tokens":20"#) && got.ends_with("data: [DONE]\n\n"));
        let calls = model.calls();
        assert_eq!(calls.len(), 1);
        let c = calls[0];
        assert!(
            c.first_sent - c.arrived >= Duration::from_millis(5),
            "{c:?}"
        );
        // 19 gaps, less the lateness of the first write.
        assert!(
            c.last_sent - c.arrived >= Duration::from_millis(43),
            "{c:?}"
        );
    }
}
