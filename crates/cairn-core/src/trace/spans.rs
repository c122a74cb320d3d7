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

use super::{SpanId, TraceContext, TraceId};
use crate::checkpoint::ErrorInfo;
use crate::event::payload::{ModelCalled, ToolExecuted};
use crate::event::{EventData, EventData as D, EventRecord};
use crate::ids::{Attempt, Role, RunId, StepIdx};
use crate::status::RunStatus;
use chrono::{DateTime, Duration, Utc};

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
    /// Spans of other traces this one follows from (a signal's sender).
    pub links: Vec<(TraceId, SpanId)>,
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
    // Each event read once as its kind's payload; one that does not decode
    // (a newer release's shape this one cannot read) makes no span.
    let typed: Vec<Ev<'_>> = events
        .iter()
        .filter_map(|e| {
            Some(Ev {
                e,
                d: e.payload().ok()?,
            })
        })
        .collect();
    let through = settled_through(after, &typed, events.last().map(|e| e.seq));
    let mut b = Builder {
        run,
        spans: Vec::new(),
        open: BTreeMap::new(),
        root_exported: run.root_exported,
    };
    for ev in typed.iter().filter(|ev| ev.e.seq <= through) {
        b.event(ev);
    }
    SpanBatch {
        spans: b.spans,
        through,
        root_exported: b.root_exported,
    }
}

/// A stored event with its typed payload.
struct Ev<'a> {
    e: &'a EventRecord,
    d: EventData,
}

/// The last event before the first one of a step attempt that has not
/// ended yet: everything up to it can be exported whole.
fn settled_through(after: i64, events: &[Ev<'_>], last: Option<i64>) -> i64 {
    let mut open: BTreeMap<i64, i64> = BTreeMap::new(); // idx -> first seq
    for ev in events {
        match part_of(&ev.d) {
            Some(Part::Opens(idx)) => {
                // A claim of another step ends whatever was left open.
                open.retain(|k, _| *k == idx);
                open.entry(idx).or_insert(ev.e.seq);
            }
            Some(Part::Inside(idx)) => {
                open.entry(idx).or_insert(ev.e.seq);
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
        None => last.unwrap_or(after),
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

fn part_of(d: &EventData) -> Option<Part> {
    let i = |idx: StepIdx| i64::from(idx.get());
    Some(match d {
        D::RunClaimed(c) => Part::Opens(i(c.cursor)),
        D::ModelCalled(m) => Part::Inside(i(m.idx)),
        D::ToolExecuted(t) => Part::Inside(i(t.idx)),
        D::TranscriptRepaired(t) => Part::Inside(i(t.idx?)),
        D::StepSucceeded(s) => Part::Ends(i(s.idx)),
        D::StepFailed(s) => Part::Ends(i(s.idx)),
        D::StepInterrupted(s) => Part::Ends(i(s.idx)),
        D::StepDeferred(s) => Part::Ends(i(s.idx)),
        D::StepCancelled(s) => Part::Ends(i(s.idx)),
        D::WaitOpened(w) => Part::Ends(i(w.idx)),
        D::ChildrenSpawned(c) => Part::Ends(i(c.idx)),
        D::RunSucceeded(_) | D::RunFailed(_) | D::RunCancelled(_) => Part::EndsAll,
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
    fn event(&mut self, ev: &Ev<'_>) {
        match part_of(&ev.d) {
            Some(Part::Opens(idx)) => self.claimed(idx, ev),
            Some(Part::Inside(idx)) => self.inside(idx, ev),
            Some(Part::Ends(idx)) => self.close(idx, ev),
            Some(Part::EndsAll) => {
                let open: Vec<i64> = self.open.keys().copied().collect();
                for idx in open {
                    self.close(idx, ev);
                }
                self.run_ended(ev);
            }
            None => self.marker(ev),
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

    fn claimed(&mut self, idx: i64, ev: &Ev<'_>) {
        let others: Vec<i64> = self.open.keys().copied().filter(|k| *k != idx).collect();
        for other in others {
            self.close(other, ev);
        }
        let D::RunClaimed(c) = &ev.d else { return };
        let seg = self.segment(idx, ev.e.at);
        seg.epoch = Some(c.epoch.0);
        seg.takeovers += i64::from(c.took_over_step);
        // Resumed: taken over, or claimed back from a wait or an interrupt.
        seg.resumed |= c.took_over_step || c.from_status != RunStatus::Queued;
    }

    fn inside(&mut self, idx: i64, ev: &Ev<'_>) {
        let span = match &ev.d {
            D::ModelCalled(m) => self.model_call(ev.e, m),
            D::ToolExecuted(t) => self.tool_call(ev.e, t),
            _ => {
                self.segment(idx, ev.e.at).repairs += 1;
                return;
            }
        };
        self.segment(idx, span.start).calls.push(span);
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
            links: vec![],
        }
    }

    /// The span of an event that reports what took `took_ms` and ended
    /// at the event.
    fn timed(&self, e: &EventRecord, took_ms: u64, name: String) -> SpanRecord {
        let start = e.at - ms(took_ms);
        self.span(SpanId::of_event(self.run.id, e.seq), name, start, e.at)
    }

    fn model_call(&self, e: &EventRecord, m: &ModelCalled) -> SpanRecord {
        let mut s = self.timed(e, m.ms, format!("chat {}", m.model));
        s.kind = SpanKind::Client;
        s.attributes.extend([
            ("gen_ai.operation.name", str("chat")),
            ("cairn.step.idx", AttrValue::Int(i64::from(m.idx.get()))),
            ("gen_ai.provider.name", str(&m.provider)),
            ("gen_ai.request.model", str(&m.model)),
        ]);
        let numbers = [
            ("gen_ai.usage.input_tokens", m.input_tokens),
            ("gen_ai.usage.output_tokens", m.output_tokens),
            ("gen_ai.usage.cache_read.input_tokens", m.cache_read_tokens),
            (
                "gen_ai.usage.cache_creation.input_tokens",
                m.cache_write_tokens,
            ),
            ("cairn.model.turn", Some(u64::from(m.turn))),
            ("cairn.model.first_chunk_ms", m.first_chunk_ms),
        ];
        ints(&mut s, numbers);
        if let Some(stop) = &m.stop_reason {
            s.attributes.push((
                "gen_ai.response.finish_reasons",
                AttrValue::StrList(vec![stop.clone()]),
            ));
        }
        if let Some(err) = &m.error {
            s.attributes.push(("error.type", str("provider_error")));
            s.status = SpanStatus::Error(err.clone());
        }
        s
    }

    fn tool_call(&self, e: &EventRecord, t: &ToolExecuted) -> SpanRecord {
        let mut s = self.timed(e, t.ms, format!("execute_tool {}", t.tool));
        s.attributes.extend([
            ("gen_ai.operation.name", str("execute_tool")),
            ("cairn.step.idx", AttrValue::Int(i64::from(t.idx.get()))),
            ("gen_ai.tool.name", str(&t.tool)),
            ("gen_ai.tool.call.id", str(&t.call_id)),
            ("cairn.tool.idempotency_key", str(&t.idempotency_key)),
        ]);
        if t.is_error {
            s.attributes.push(("error.type", str("tool_error")));
            s.status = SpanStatus::Error("the tool returned an error".into());
        }
        s
    }

    /// The step attempt `idx` ended at `ev`: its span, then its calls.
    fn close(&mut self, idx: i64, ev: &Ev<'_>) {
        let end = StepEnd::of(&ev.d);
        let seg = self.open.remove(&idx).unwrap_or(Segment {
            start: ev.e.at - ms(end.duration_ms),
            epoch: None,
            resumed: false,
            takeovers: 0,
            repairs: 0,
            calls: Vec::new(),
        });
        let role = end
            .role
            .clone()
            .or_else(|| {
                usize::try_from(idx)
                    .ok()
                    .and_then(|i| self.run.roles.get(i).cloned())
            })
            .unwrap_or_default();
        let id = SpanId::of_event(self.run.id, ev.e.seq);
        let mut s = self.span(id, format!("invoke_agent {role}"), seg.start, ev.e.at);
        s.attributes.extend([
            ("gen_ai.operation.name", str("invoke_agent")),
            ("gen_ai.agent.name", str(role)),
            ("cairn.step.idx", AttrValue::Int(idx)),
            ("cairn.step.outcome", str(end.outcome)),
            ("cairn.step.resumed", AttrValue::Bool(seg.resumed)),
            ("cairn.step.takeovers", AttrValue::Int(seg.takeovers)),
            ("cairn.step.repairs", AttrValue::Int(seg.repairs)),
        ]);
        let numbers = [
            ("cairn.step.attempt", end.attempt),
            (
                "cairn.lease.epoch",
                seg.epoch.and_then(|n| n.try_into().ok()),
            ),
            ("gen_ai.usage.input_tokens", end.input_tokens),
            ("gen_ai.usage.output_tokens", end.output_tokens),
        ];
        ints(&mut s, numbers);
        s.status = end.status;
        self.spans.push(s);
        for mut call in seg.calls {
            call.parent = Some(id);
            self.spans.push(call);
        }
    }

    fn run_ended(&mut self, ev: &Ev<'_>) {
        if self.root_exported {
            return;
        }
        self.root_exported = true;
        let run = self.run;
        let mut s = self.span(
            SpanId::of_run(run.id),
            format!("invoke_workflow {}", run.crew),
            run.created_at,
            ev.e.at,
        );
        s.parent = run.trace.parent;
        s.attributes.extend([
            ("gen_ai.operation.name", str("invoke_workflow")),
            ("gen_ai.workflow.name", str(&run.crew)),
            ("cairn.crew.version", str(&run.version)),
            (
                "cairn.run.status",
                str(ev.e.kind.as_str().trim_start_matches("run_")),
            ),
        ]);
        if let Some(thread) = &run.thread {
            s.attributes.push(("gen_ai.conversation.id", str(thread)));
        }
        if let Some(parent) = run.parent_run {
            s.attributes
                .push(("cairn.parent_run.id", str(parent.to_string())));
        }
        s.status = match &ev.d {
            D::RunSucceeded(_) => SpanStatus::Ok,
            D::RunFailed(f) => SpanStatus::Error(error_message(&f.error)),
            _ => SpanStatus::Unset,
        };
        self.spans.push(s);
    }

    /// Moments between step attempts (a submit, an answer, a back-off, a
    /// pause): short spans under the run, with what they carry that is not
    /// content.
    fn marker(&mut self, ev: &Ev<'_>) {
        let Some((name, end, attrs)) = marker_of(ev) else {
            return;
        };
        let e = ev.e;
        let mut s = self.span(SpanId::of_event(self.run.id, e.seq), name.into(), e.at, end);
        s.attributes.push(("cairn.event", str(e.kind.as_str())));
        s.attributes.extend(attrs);
        // A signal links the span of its sender, when it sent its trace.
        if let D::SignalReceived(r) = &ev.d {
            let sender = r
                .traceparent
                .as_deref()
                .map(crate::TraceContext::parse_traceparent);
            if let Some(Ok(crate::TraceContext {
                trace_id,
                parent: Some(span),
                ..
            })) = sender
            {
                s.links.push((trace_id, span));
            }
        }
        self.spans.push(s);
    }
}

type Attrs = Vec<(&'static str, AttrValue)>;

/// A marker's name, end and attributes, for the events that make one.
fn marker_of(ev: &Ev<'_>) -> Option<(&'static str, DateTime<Utc>, Attrs)> {
    let at = ev.e.at;
    let int = |n: u64| AttrValue::Int(n.try_into().unwrap_or(i64::MAX));
    let step = |idx: StepIdx| AttrValue::Int(i64::from(idx.get()));
    Some(match &ev.d {
        D::RunSubmitted(_) => ("cairn.run.submitted", at, vec![]),
        D::WaitAnswered(w) => (
            "cairn.wait.answered",
            at,
            vec![
                ("cairn.wait.id", str(w.wait.to_string())),
                ("cairn.wait.kind", str(w.kind.as_str())),
                ("cairn.actor", str(&w.by)),
            ],
        ),
        D::WaitExpired(w) => (
            "cairn.wait.expired",
            at,
            vec![("cairn.wait.id", str(w.wait.to_string()))],
        ),
        D::StepRetryScheduled(r) => (
            "cairn.backoff",
            at + ms(r.delay_ms),
            vec![
                ("cairn.step.idx", step(r.idx)),
                (
                    "cairn.step.next_attempt",
                    int(u64::from(r.next_attempt.get())),
                ),
            ],
        ),
        D::KeyPaused(k) => (
            "cairn.key.paused",
            at,
            vec![
                ("cairn.provider_key", str(&k.key)),
                ("cairn.pause_ms", int(k.for_ms)),
            ],
        ),
        D::RunCancelRequested(a) => (
            "cairn.run.cancel_requested",
            at,
            vec![("cairn.actor", str(&a.actor.by))],
        ),
        D::RunRetried(a) | D::RunContinued(a) => (
            "cairn.run.operator",
            at,
            vec![("cairn.actor", str(&a.actor.by))],
        ),
        D::SignalReceived(r) => (
            "cairn.signal.received",
            at,
            vec![
                ("cairn.signal.name", str(&r.name)),
                ("cairn.signal.id", str(&r.id)),
                ("cairn.actor", str(&r.actor.by)),
            ],
        ),
        D::SignalConsumed(c) => (
            "cairn.signal.consumed",
            at,
            vec![
                ("cairn.step.idx", step(c.idx)),
                ("cairn.signal.name", str(&c.name)),
                ("cairn.signal.id", str(&c.id)),
            ],
        ),
        D::SignalTimedOut(t) => (
            "cairn.signal.timed_out",
            at,
            vec![("cairn.step.idx", step(t.idx))],
        ),
        D::ChildrenJoined(j) => (
            "cairn.children.joined",
            at,
            vec![
                ("cairn.step.idx", step(j.idx)),
                ("cairn.children.ok", int(u64::from(j.ok))),
            ],
        ),
        _ => return None,
    })
}

/// What the event that ended a step attempt says of it.
struct StepEnd {
    role: Option<String>,
    attempt: Option<u64>,
    duration_ms: u64,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    outcome: &'static str,
    status: SpanStatus,
}

impl StepEnd {
    fn of(d: &EventData) -> StepEnd {
        let mut end = StepEnd {
            role: None,
            attempt: None,
            duration_ms: 0,
            input_tokens: None,
            output_tokens: None,
            outcome: "ended",
            status: SpanStatus::Unset,
        };
        let role = |r: &Option<Role>| r.as_ref().map(Role::to_string);
        let n = |a: Attempt| Some(u64::from(a.get()));
        match d {
            D::StepSucceeded(s) => {
                (end.role, end.attempt) = (role(&s.role), n(s.attempt));
                end.duration_ms = s.duration_ms.unwrap_or(0);
                (end.input_tokens, end.output_tokens) = (s.input_tokens, s.output_tokens);
                (end.outcome, end.status) = ("succeeded", SpanStatus::Ok);
            }
            D::StepFailed(s) => {
                (end.role, end.attempt) = (role(&s.role), s.attempt.and_then(n));
                end.duration_ms = s.duration_ms.unwrap_or(0);
                end.outcome = match s.will_retry {
                    Some(true) => "retry",
                    _ => "failed",
                };
                end.status = SpanStatus::Error(error_message(&s.error));
            }
            D::StepInterrupted(s) => {
                (end.role, end.attempt) = (Some(s.role.to_string()), n(s.attempt));
                (end.duration_ms, end.outcome) = (s.duration_ms, "interrupted");
            }
            D::StepDeferred(s) => {
                (end.role, end.attempt) = (Some(s.role.to_string()), n(s.attempt));
                (end.duration_ms, end.outcome) = (s.duration_ms, "deferred");
            }
            D::StepCancelled(s) => (end.attempt, end.outcome) = (n(s.attempt), "cancelled"),
            D::WaitOpened(w) => (end.attempt, end.outcome) = (n(w.attempt), "waiting"),
            D::ChildrenSpawned(c) => (end.attempt, end.outcome) = (n(c.attempt), "children"),
            _ => {}
        }
        end
    }
}

/// Adds the integer attributes that have a value.
fn ints<const N: usize>(s: &mut SpanRecord, numbers: [(&'static str, Option<u64>); N]) {
    for (attr, n) in numbers {
        if let Some(n) = n.and_then(|n| i64::try_from(n).ok()) {
            s.attributes.push((attr, AttrValue::Int(n)));
        }
    }
}

fn error_message(error: &ErrorInfo) -> String {
    error.message.clone()
}

fn str(s: impl Into<String>) -> AttrValue {
    AttrValue::Str(s.into())
}

fn ms(n: u64) -> Duration {
    Duration::milliseconds(i64::try_from(n).unwrap_or(i64::MAX))
}
