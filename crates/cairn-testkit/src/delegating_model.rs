//! A local model server that speaks OpenAI's streamed Chat Completions and
//! delegates: asked with a `delegate` tool and no tool result yet, it
//! answers with one `delegate` call per task (parallel calls, arguments
//! streamed in pieces); asked again with the results, it answers with a
//! text that quotes every result it was given. Stateless, so a killed and
//! resumed run asks it again and gets the same answers; it keeps every
//! request body for the test to read.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::slow_model::{read_request, send_data, SSE_HEAD};

/// The server (a thread; it lives as long as the test process).
#[derive(Debug)]
pub struct DelegatingModel {
    /// `http://127.0.0.1:PORT/v1`, a crew's `base_url`.
    pub base_url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl DelegatingModel {
    /// Delegates each of `tasks` (a child's input) to crew `crew`.
    pub fn start(crew: &str, tasks: &[Value]) -> std::io::Result<DelegatingModel> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (kept, crew, tasks) = (bodies.clone(), crew.to_owned(), tasks.to_vec());
        crate::serve_each(listener, move |stream| {
            let _ = answer(stream, &crew, &tasks, &kept);
        });
        Ok(DelegatingModel { base_url, bodies })
    }

    /// Every request body so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.bodies.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

fn answer(
    stream: TcpStream,
    crew: &str,
    tasks: &[Value],
    kept: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let Some((_, body)) = read_request(&stream)? else {
        return Ok(());
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Ok(mut k) = kept.lock() {
        k.push(body.clone());
    }
    let results: Vec<&str> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let mut out = stream;
    out.write_all(SSE_HEAD)?;
    let mut send = |data: Value| send_data(&mut out, data);
    if results.is_empty() {
        for (i, task) in tasks.iter().enumerate() {
            let args = json!({"crew": crew, "input": task}).to_string();
            let (head, tail) = args.split_at(args.len() / 2);
            send(delta(
                json!({"tool_calls": [{"index": i, "id": format!("d{i}"),
                "type": "function", "function": {"name": "delegate", "arguments": head}}]}),
            ))?;
            send(delta(
                json!({"tool_calls": [{"index": i, "function": {"arguments": tail}}]}),
            ))?;
        }
        send(finish("tool_calls"))?;
    } else {
        send(delta(
            json!({"content": format!("Summary of {}: {}", results.len(), results.join(" | "))}),
        ))?;
        send(finish("stop"))?;
    }
    send(json!({"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 8}}))?;
    out.write_all(b"data: [DONE]\n\n")?;
    out.flush()
}

fn delta(delta: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}
