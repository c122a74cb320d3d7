//! A run's spans, built from its stored events (pure): `spans` turns the
//! events after an export cursor into finished spans, and says how far the
//! cursor may move. A step attempt's span closes at the event that ended it
//! (its commit, wait, deferral, …); the model and tool calls inside it are
//! its children. Events of a step still running stay behind the cursor, so
//! a span is only ever built once, whole, whichever process exports it.
//!
//! Attribute names follow OpenTelemetry's GenAI semantic conventions
//! (semantic-conventions v1.37.0, `gen_ai.*`); Cairn's own are `cairn.*`.
//! No prompt, output, tool argument or answer is ever put in a span.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::{SpanId, TraceContext, TraceId};
use crate::event::{EventKind, EventRecord};
use crate::ids::RunId;

/// What a run's spans need to know of the run itself.
#[derive(Debug, Clone)]
pub struct TracedRun {
    pub id: RunId,
    pub crew: String,
    pub version: String,
    /// The role of each step, by index.
    pub roles: Vec<String>,
    pub thread: Option<String>,
    pub parent_run: Option<RunId>,
    pub created_at: DateTime<Utc>,
    pub trace: TraceContext,
    /// The run's own span was exported already (it ended once before an
    /// operator sent it on again).
    pub root_exported: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal,
    Client,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanStatus {
    Unset,
    Ok,
    Error(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
    StrList(Vec<String>),
}

/// One finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent: Option<SpanId>,
    pub name: String,
    pub kind: SpanKind,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub status: SpanStatus,
    pub attributes: Vec<(&'static str, AttrValue)>,
}

impl SpanRecord {
    /// The text attribute `key`, if the span has it.
    pub fn text(&self, key: &str) -> Option<String> {
        self.attributes.iter().find_map(|(k, v)| match v {
            AttrValue::Str(t) if *k == key => Some(t.clone()),
            _ => None,
        })
    }

    /// The integer attribute `key`, if the span has it.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.iter().find_map(|(k, v)| match v {
            AttrValue::Int(n) if *k == key => Some(*n),
            _ => None,
        })
    }
}

/// The spans of a stretch of events, and the cursor after them.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanBatch {
    pub spans: Vec<SpanRecord>,
    /// The last event the spans cover: the export cursor's next value.
    pub through: i64,
    /// Whether the run's own span has been exported, with this batch.
    pub root_exported: bool,
}

/// The spans of `events` (those after the cursor `after`, in order).
pub fn spans(run: &TracedRun, after: i64, events: &[EventRecord]) -> SpanBatch {
    let through = settled_through(after, events);
    let mut b = Builder {
        run,
        spans: Vec::new(),
        open: BTreeMap::new(),
        root_exported: run.root_exported,
    };
    for e in events.iter().filter(|e| e.seq <= through) {
        b.event(e);
    }
    SpanBatch {
        spans: b.spans,
        through,
        root_exported: b.root_exported,
    }
}

/// The last event before the first one of a step attempt that has not
/// ended yet: everything up to it can be exported whole.
fn settled_through(after: i64, events: &[EventRecord]) -> i64 {
    let mut open: BTreeMap<i64, i64> = BTreeMap::new(); // idx -> first seq
    for e in events {
        match role_of(e) {
            Some(Part::Opens(idx)) => {
                // A claim of another step ends whatever was left open.
                open.retain(|k, _| *k == idx);
                open.entry(idx).or_insert(e.seq);
            }
            Some(Part::Inside(idx)) => {
                open.entry(idx).or_insert(e.seq);
            }
            Some(Part::Ends(idx)) => {
                open.remove(&idx);
            }
            Some(Part::EndsAll) => open.clear(),
            None => {}
        }
    }
    match open.values().min() {
        Some(first) => first - 1,
        None => events.last().map_or(after, |e| e.seq),
    }
}

/// Where an event stands towards a step attempt's span.
enum Part {
    /// A claim: a step attempt starts (or goes on, after a takeover).
    Opens(i64),
    /// A call inside a step attempt.
    Inside(i64),
    /// The event that ends a step attempt.
    Ends(i64),
    /// The run ended: whatever is open ends with it.
    EndsAll,
}

fn role_of(e: &EventRecord) -> Option<Part> {
    let idx = || e.data["idx"].as_i64();
    Some(match e.kind {
        EventKind::RunClaimed => Part::Opens(e.data["cursor"].as_i64()?),
        EventKind::ModelCalled | EventKind::ToolExecuted | EventKind::TranscriptRepaired => {
            Part::Inside(idx()?)
        }
        EventKind::StepSucceeded
        | EventKind::StepFailed
        | EventKind::StepInterrupted
        | EventKind::StepDeferred
        | EventKind::StepCancelled
        | EventKind::WaitOpened
        | EventKind::ChildrenSpawned => Part::Ends(idx()?),
        EventKind::RunSucceeded | EventKind::RunFailed | EventKind::RunCancelled => Part::EndsAll,
        _ => return None,
    })
}

/// A step attempt's span while its events are read.
struct Segment {
    start: DateTime<Utc>,
    epoch: Option<i64>,
    resumed: bool,
    takeovers: i64,
    repairs: i64,
    calls: Vec<SpanRecord>,
}

struct Builder<'a> {
    run: &'a TracedRun,
    spans: Vec<SpanRecord>,
    open: BTreeMap<i64, Segment>,
    root_exported: bool,
}

impl Builder<'_> {
    fn event(&mut self, e: &EventRecord) {
        match role_of(e) {
            Some(Part::Opens(idx)) => self.claimed(idx, e),
            Some(Part::Inside(idx)) => self.inside(idx, e),
            Some(Part::Ends(idx)) => self.close(idx, e),
            Some(Part::EndsAll) => {
                let open: Vec<i64> = self.open.keys().copied().collect();
                for idx in open {
                    self.close(idx, e);
                }
                self.run_ended(e);
            }
            None => self.marker(e),
        }
    }

    fn segment(&mut self, idx: i64, at: DateTime<Utc>) -> &mut Segment {
        self.open.entry(idx).or_insert_with(|| Segment {
            start: at,
            epoch: None,
            resumed: false,
            takeovers: 0,
            repairs: 0,
            calls: Vec::new(),
        })
    }

    fn claimed(&mut self, idx: i64, e: &EventRecord) {
        let others: Vec<i64> = self.open.keys().copied().filter(|k| *k != idx).collect();
        for other in others {
            self.close(other, e);
        }
        let seg = self.segment(idx, e.at);
        seg.epoch = e.data["epoch"].as_i64();
        let took_over = e.data["took_over_step"] == true;
        seg.takeovers += i64::from(took_over);
        // Resumed: taken over, or claimed back from a wait or an interrupt.
        seg.resumed |= took_over || e.data["from_status"] != "queued";
    }

    fn inside(&mut self, idx: i64, e: &EventRecord) {
        let span = match e.kind {
            EventKind::ModelCalled => Some(self.model_call(e)),
            EventKind::ToolExecuted => Some(self.tool_call(e)),
            _ => None,
        };
        let start = span.as_ref().map_or(e.at, |s| s.start);
        let seg = self.segment(idx, start);
        match span {
            Some(s) => seg.calls.push(s),
            None => seg.repairs += 1,
        }
    }

    fn span(
        &self,
        id: SpanId,
        name: String,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> SpanRecord {
        SpanRecord {
            trace_id: self.run.trace.trace_id,
            span_id: id,
            parent: Some(SpanId::of_run(self.run.id)),
            name,
            kind: SpanKind::Internal,
            start,
            end: end.max(start),
            status: SpanStatus::Unset,
            attributes: vec![("cairn.run.id", str(self.run.id.to_string()))],
        }
    }

    fn model_call(&self, e: &EventRecord) -> SpanRecord {
        let d = &e.data;
        let model = d["model"].as_str().unwrap_or_default();
        let start = e.at - ms(&d["ms"]);
        let mut s = self.span(
            SpanId::of_event(self.run.id, e.seq),
            format!("chat {model}"),
            start,
            e.at,
        );
        s.kind = SpanKind::Client;
        s.attributes.extend([
            ("gen_ai.operation.name", str("chat")),
            (
                "cairn.step.idx",
                AttrValue::Int(d["idx"].as_i64().unwrap_or(-1)),
            ),
            (
                "gen_ai.provider.name",
                str(d["provider"].as_str().unwrap_or_default()),
            ),
            ("gen_ai.request.model", str(model)),
        ]);
        for (attr, key) in [
            ("gen_ai.usage.input_tokens", "input_tokens"),
            ("gen_ai.usage.output_tokens", "output_tokens"),
            ("gen_ai.usage.cache_read.input_tokens", "cache_read_tokens"),
            (
                "gen_ai.usage.cache_creation.input_tokens",
                "cache_write_tokens",
            ),
            ("cairn.model.turn", "turn"),
            ("cairn.model.first_chunk_ms", "first_chunk_ms"),
        ] {
            if let Some(n) = d[key].as_i64() {
                s.attributes.push((attr, AttrValue::Int(n)));
            }
        }
        if let Some(stop) = d["stop_reason"].as_str() {
            s.attributes.push((
                "gen_ai.response.finish_reasons",
                AttrValue::StrList(vec![stop.into()]),
            ));
        }
        if let Some(err) = d["error"].as_str() {
            s.attributes.push(("error.type", str("provider_error")));
            s.status = SpanStatus::Error(err.into());
        }
        s
    }

    fn tool_call(&self, e: &EventRecord) -> SpanRecord {
        let d = &e.data;
        let tool = d["tool"].as_str().unwrap_or_default();
        let start = e.at - ms(&d["ms"]);
        let mut s = self.span(
            SpanId::of_event(self.run.id, e.seq),
            format!("execute_tool {tool}"),
            start,
            e.at,
        );
        s.attributes.extend([
            ("gen_ai.operation.name", str("execute_tool")),
            (
                "cairn.step.idx",
                AttrValue::Int(d["idx"].as_i64().unwrap_or(-1)),
            ),
            ("gen_ai.tool.name", str(tool)),
            (
                "gen_ai.tool.call.id",
                str(d["call_id"].as_str().unwrap_or_default()),
            ),
        ]);
        if let Some(key) = d["idempotency_key"].as_str() {
            s.attributes.push(("cairn.tool.idempotency_key", str(key)));
        }
        if d["is_error"] == true {
            s.attributes.push(("error.type", str("tool_error")));
            s.status = SpanStatus::Error("the tool returned an error".into());
        }
        s
    }

    /// The step attempt `idx` ended at `e`: its span, then its calls.
    fn close(&mut self, idx: i64, e: &EventRecord) {
        let seg = self.open.remove(&idx).unwrap_or(Segment {
            start: e.at - ms(&e.data["duration_ms"]),
            epoch: None,
            resumed: false,
            takeovers: 0,
            repairs: 0,
            calls: Vec::new(),
        });
        let role = e.data["role"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                usize::try_from(idx)
                    .ok()
                    .and_then(|i| self.run.roles.get(i).cloned())
            })
            .unwrap_or_default();
        let id = SpanId::of_event(self.run.id, e.seq);
        let mut s = self.span(id, format!("invoke_agent {role}"), seg.start, e.at);
        s.attributes.extend([
            ("gen_ai.operation.name", str("invoke_agent")),
            ("gen_ai.agent.name", str(role)),
            ("cairn.step.idx", AttrValue::Int(idx)),
            ("cairn.step.outcome", str(outcome(e))),
            ("cairn.step.resumed", AttrValue::Bool(seg.resumed)),
            ("cairn.step.takeovers", AttrValue::Int(seg.takeovers)),
            ("cairn.step.repairs", AttrValue::Int(seg.repairs)),
        ]);
        let numbers = [
            ("cairn.step.attempt", e.data["attempt"].as_i64()),
            ("cairn.lease.epoch", seg.epoch),
            ("gen_ai.usage.input_tokens", e.data["input_tokens"].as_i64()),
            (
                "gen_ai.usage.output_tokens",
                e.data["output_tokens"].as_i64(),
            ),
        ];
        for (attr, n) in numbers {
            if let Some(n) = n {
                s.attributes.push((attr, AttrValue::Int(n)));
            }
        }
        s.status = match e.kind {
            EventKind::StepSucceeded => SpanStatus::Ok,
            EventKind::StepFailed => SpanStatus::Error(error_message(&e.data["error"])),
            _ => SpanStatus::Unset,
        };
        self.spans.push(s);
        for mut call in seg.calls {
            call.parent = Some(id);
            self.spans.push(call);
        }
    }

    fn run_ended(&mut self, e: &EventRecord) {
        if self.root_exported {
            return;
        }
        self.root_exported = true;
        let run = self.run;
        let mut s = self.span(
            SpanId::of_run(run.id),
            format!("invoke_workflow {}", run.crew),
            run.created_at,
            e.at,
        );
        s.parent = run.trace.parent;
        s.attributes.extend([
            ("gen_ai.operation.name", str("invoke_workflow")),
            ("gen_ai.workflow.name", str(&run.crew)),
            ("cairn.crew.version", str(&run.version)),
            (
                "cairn.run.status",
                str(e.kind.as_str().trim_start_matches("run_")),
            ),
        ]);
        if let Some(thread) = &run.thread {
            s.attributes.push(("gen_ai.conversation.id", str(thread)));
        }
        if let Some(parent) = run.parent_run {
            s.attributes
                .push(("cairn.parent_run.id", str(parent.to_string())));
        }
        s.status = match e.kind {
            EventKind::RunSucceeded => SpanStatus::Ok,
            EventKind::RunFailed => SpanStatus::Error(error_message(&e.data["error"])),
            _ => SpanStatus::Unset,
        };
        self.spans.push(s);
    }

    /// Moments between step attempts (a submit, an answer, a back-off, a
    /// pause): short spans under the run, with what they carry that is not
    /// content.
    fn marker(&mut self, e: &EventRecord) {
        let d = &e.data;
        let (name, end, attrs): (&str, DateTime<Utc>, Vec<(&'static str, &Value)>) = match e.kind {
            EventKind::RunSubmitted => ("cairn.run.submitted", e.at, vec![]),
            EventKind::WaitAnswered => (
                "cairn.wait.answered",
                e.at,
                vec![
                    ("cairn.wait.id", &d["wait"]),
                    ("cairn.wait.kind", &d["kind"]),
                    ("cairn.actor", &d["by"]),
                ],
            ),
            EventKind::WaitExpired => (
                "cairn.wait.expired",
                e.at,
                vec![("cairn.wait.id", &d["wait"])],
            ),
            EventKind::StepRetryScheduled => (
                "cairn.backoff",
                e.at + ms(&d["delay_ms"]),
                vec![
                    ("cairn.step.idx", &d["idx"]),
                    ("cairn.step.next_attempt", &d["next_attempt"]),
                ],
            ),
            EventKind::KeyPaused => (
                "cairn.key.paused",
                e.at,
                vec![
                    ("cairn.provider_key", &d["key"]),
                    ("cairn.pause_ms", &d["for_ms"]),
                ],
            ),
            EventKind::RunCancelRequested => (
                "cairn.run.cancel_requested",
                e.at,
                vec![("cairn.actor", &d["by"])],
            ),
            EventKind::RunRetried | EventKind::RunContinued => {
                ("cairn.run.operator", e.at, vec![("cairn.actor", &d["by"])])
            }
            EventKind::ChildrenJoined => (
                "cairn.children.joined",
                e.at,
                vec![
                    ("cairn.step.idx", &d["idx"]),
                    ("cairn.children.ok", &d["ok"]),
                ],
            ),
            _ => return,
        };
        let mut s = self.span(SpanId::of_event(self.run.id, e.seq), name.into(), e.at, end);
        s.attributes.push(("cairn.event", str(e.kind.as_str())));
        for (k, v) in attrs {
            match v {
                Value::String(t) => s.attributes.push((k, str(t))),
                Value::Number(n) => s
                    .attributes
                    .extend(n.as_i64().map(|n| (k, AttrValue::Int(n)))),
                Value::Bool(b) => s.attributes.push((k, AttrValue::Bool(*b))),
                _ => {}
            }
        }
        self.spans.push(s);
    }
}

fn outcome(e: &EventRecord) -> &'static str {
    match e.kind {
        EventKind::StepSucceeded => "succeeded",
        EventKind::StepFailed if e.data["will_retry"] == true => "retry",
        EventKind::StepFailed => "failed",
        EventKind::StepInterrupted => "interrupted",
        EventKind::StepDeferred => "deferred",
        EventKind::StepCancelled => "cancelled",
        EventKind::WaitOpened => "waiting",
        EventKind::ChildrenSpawned => "children",
        _ => "ended",
    }
}

fn error_message(error: &Value) -> String {
    error["message"]
        .as_str()
        .or_else(|| error["kind"].as_str())
        .unwrap_or("failed")
        .to_owned()
}

fn str(s: impl Into<String>) -> AttrValue {
    AttrValue::Str(s.into())
}

fn ms(v: &Value) -> Duration {
    Duration::milliseconds(v.as_i64().unwrap_or(0).max(0))
}
