//! Traces: a run's W3C trace context, the ids of its spans, and the sampler.
//!
//! A run's spans are not kept in memory: they are built from what the store
//! holds (`spans`), so a span's ids must follow from the stored work alone.
//! The trace id of a run with no caller is its run id; every span id is a
//! hash of the run id and what the span stands for (the run itself, or the
//! stored event that closed the span). A takeover on another process builds
//! the same ids again, and nothing is held open across a wait or a crash.

mod content;
mod messages;
mod spans;

pub use content::{capture, StepContent};
pub use spans::{spans, AttrValue, SpanBatch, SpanKind, SpanRecord, SpanStatus, TracedRun};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::RunId;

/// A trace id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    pub fn to_hex(self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    pub fn to_hex(self) -> String {
        hex(&self.0)
    }

    /// The id of what `parts` name inside run `run`: the same parts always
    /// give the same id, on any process.
    pub fn derive(run: RunId, parts: &[&[u8]]) -> SpanId {
        let mut h = Sha256::new();
        h.update(b"cairn-span\0");
        h.update(run.as_uuid().as_bytes());
        for p in parts {
            h.update((p.len() as u32).to_be_bytes());
            h.update(p);
        }
        let digest = h.finalize();
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[..8]);
        if id == [0; 8] {
            id[7] = 1;
        }
        SpanId(id)
    }

    /// The span of the run itself, parent of its steps.
    pub fn of_run(run: RunId) -> SpanId {
        SpanId::derive(run, &[b"run"])
    }

    /// The span that stored event `seq` of `run` closed (or stands for).
    pub fn of_event(run: RunId, seq: i64) -> SpanId {
        SpanId::derive(run, &[b"event", &seq.to_be_bytes()])
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A `traceparent` that is not W3C's `00-<32 hex>-<16 hex>-<2 hex>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad traceparent `{0}`: expected 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zero")]
pub struct BadTraceparent(pub String);

/// Where a run's spans hang: the trace, the caller's span (when a
/// `traceparent` came with the submit, or the parent run's span for a
/// child), and whether the trace is sampled. Stored with the run at submit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    #[serde(with = "hex_trace")]
    pub trace_id: TraceId,
    #[serde(with = "hex_span", default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<SpanId>,
    pub sampled: bool,
}

impl TraceContext {
    /// A run's own trace when nobody called it: its trace id is the run id.
    pub fn root(run: RunId, sampled: bool) -> TraceContext {
        TraceContext {
            trace_id: TraceId(*run.as_uuid().as_bytes()),
            parent: None,
            sampled,
        }
    }

    /// W3C `traceparent` (version 00): the caller's trace and span.
    pub fn parse_traceparent(s: &str) -> Result<TraceContext, BadTraceparent> {
        let bad = || BadTraceparent(crate::text::printable_line(s).chars().take(80).collect());
        let parts: Vec<&str> = s.trim().split('-').collect();
        let [version, trace, span, flags] = parts.as_slice() else {
            return Err(bad());
        };
        let trace = unhex::<16>(trace)
            .filter(|t| *t != [0; 16])
            .ok_or_else(bad)?;
        let span = unhex::<8>(span).filter(|s| *s != [0; 8]).ok_or_else(bad)?;
        let flags = unhex::<1>(flags).ok_or_else(bad)?;
        if unhex::<1>(version).is_none_or(|v| v == [0xff]) {
            return Err(bad());
        }
        Ok(TraceContext {
            trace_id: TraceId(trace),
            parent: Some(SpanId(span)),
            sampled: flags[0] & 1 == 1,
        })
    }

    /// The `traceparent` naming span `span` of this trace (what a command
    /// step or a child receives).
    pub fn traceparent(&self, span: SpanId) -> String {
        format!(
            "00-{}-{}-{:02x}",
            self.trace_id.to_hex(),
            span.to_hex(),
            u8::from(self.sampled)
        )
    }
}

mod hex_trace {
    use super::{unhex, TraceId};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &TraceId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_hex())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TraceId, D::Error> {
        let s = String::deserialize(d)?;
        unhex::<16>(&s)
            .map(TraceId)
            .ok_or_else(|| serde::de::Error::custom("a trace id is 32 hex digits"))
    }
}

mod hex_span {
    use super::{unhex, SpanId};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<SpanId>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&t.to_hex()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SpanId>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| {
            unhex::<8>(&s)
                .map(SpanId)
                .ok_or_else(|| serde::de::Error::custom("a span id is 16 hex digits"))
        })
        .transpose()
    }
}

/// How a new run is traced: the submitting process's sampler, and the
/// caller's context if a `traceparent` came with the submit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tracing {
    pub sampler: Sampler,
    pub parent: Option<TraceContext>,
}

impl Tracing {
    /// The context stored with run `run`.
    pub fn context(&self, run: RunId) -> TraceContext {
        self.sampler.context(run, self.parent)
    }
}

/// Which runs are traced: OpenTelemetry's `OTEL_TRACES_SAMPLER` (and its
/// `_ARG`), decided once at submit and stored with the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    /// A fraction of trace ids, the same decision for the same trace id.
    Ratio(f64),
    /// A caller's decision when a `traceparent` came; the inner one else.
    ParentBased(Root),
}

/// The root decision of a parent-based sampler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
}

/// An `OTEL_TRACES_SAMPLER` (or its argument) Cairn does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad OTEL_TRACES_SAMPLER `{0}`: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (with OTEL_TRACES_SAMPLER_ARG a ratio from 0 to 1)")]
pub struct BadSampler(pub String);

impl Default for Sampler {
    /// OpenTelemetry's default: `parentbased_always_on`.
    fn default() -> Self {
        Sampler::ParentBased(Root::AlwaysOn)
    }
}

impl Sampler {
    pub fn parse(name: &str, arg: Option<&str>) -> Result<Sampler, BadSampler> {
        let ratio = || -> Result<f64, BadSampler> {
            match arg {
                None => Ok(1.0),
                Some(a) => a
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| BadSampler(format!("{name} with argument {a}"))),
            }
        };
        Ok(match name.trim() {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::Ratio(ratio()?),
            "parentbased_always_on" => Sampler::ParentBased(Root::AlwaysOn),
            "parentbased_always_off" => Sampler::ParentBased(Root::AlwaysOff),
            "parentbased_traceidratio" => Sampler::ParentBased(Root::Ratio(ratio()?)),
            other => return Err(BadSampler(other.to_owned())),
        })
    }

    /// The trace of a new run: the caller's (`parent`), or the run's own;
    /// sampled as this sampler says.
    pub fn context(&self, run: RunId, parent: Option<TraceContext>) -> TraceContext {
        let mut cx = parent.unwrap_or_else(|| TraceContext::root(run, false));
        cx.sampled = match (*self, parent) {
            (Sampler::AlwaysOn, _) => true,
            (Sampler::AlwaysOff, _) => false,
            (Sampler::Ratio(r), _) => by_ratio(cx.trace_id, r),
            (Sampler::ParentBased(_), Some(p)) => p.sampled,
            (Sampler::ParentBased(Root::AlwaysOn), None) => true,
            (Sampler::ParentBased(Root::AlwaysOff), None) => false,
            (Sampler::ParentBased(Root::Ratio(r)), None) => by_ratio(cx.trace_id, r),
        };
        cx
    }
}

/// OpenTelemetry's trace-id ratio rule: the trace id's last 8 bytes, read as
/// a number, below the ratio of the whole range.
fn by_ratio(trace: TraceId, ratio: f64) -> bool {
    let mut low = [0u8; 8];
    low.copy_from_slice(&trace.0[8..]);
    let n = u64::from_be_bytes(low) >> 1;
    (n as f64) < ratio * ((1u64 << 63) as f64)
}

#[cfg(test)]
mod tests;
