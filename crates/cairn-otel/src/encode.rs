//! Spans into OTLP's protobuf messages.

use cairn_core::trace::{AttrValue, SpanKind, SpanRecord, SpanStatus};
use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};

use crate::Config;

/// The semantic conventions' version the names follow.
pub(crate) const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

/// One export request holding `spans`, under the configured resource.
pub fn request(config: &Config, spans: &[SpanRecord]) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource(config)),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans: spans.iter().map(span).collect(),
                schema_url: SCHEMA_URL.into(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// `service.name` and `OTEL_RESOURCE_ATTRIBUTES`.
pub(crate) fn resource(config: &Config) -> Resource {
    let mut attributes = vec![kv(
        "service.name",
        AttrValue::Str(config.service_name.clone()),
    )];
    attributes.extend(
        config
            .resource
            .iter()
            .map(|(k, v)| kv(k, AttrValue::Str(v.clone()))),
    );
    Resource {
        attributes,
        ..Default::default()
    }
}

pub(crate) fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "cairn".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

fn span(s: &SpanRecord) -> Span {
    let (code, message) = match &s.status {
        SpanStatus::Unset => (status::StatusCode::Unset, String::new()),
        SpanStatus::Ok => (status::StatusCode::Ok, String::new()),
        SpanStatus::Error(m) => (status::StatusCode::Error, m.clone()),
    };
    Span {
        trace_id: s.trace_id.0.to_vec(),
        span_id: s.span_id.0.to_vec(),
        parent_span_id: s.parent.map(|p| p.0.to_vec()).unwrap_or_default(),
        name: s.name.clone(),
        kind: match s.kind {
            SpanKind::Internal => span::SpanKind::Internal,
            SpanKind::Client => span::SpanKind::Client,
        } as i32,
        start_time_unix_nano: nanos(s.start),
        end_time_unix_nano: nanos(s.end),
        attributes: s.attributes.iter().map(|(k, v)| kv(k, v.clone())).collect(),
        links: s
            .links
            .iter()
            .map(|(trace, span)| span::Link {
                trace_id: trace.0.to_vec(),
                span_id: span.0.to_vec(),
                ..Default::default()
            })
            .collect(),
        status: Some(Status {
            message,
            code: code as i32,
        }),
        ..Default::default()
    }
}

pub(crate) fn kv(key: &str, value: AttrValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(any(value)),
        ..Default::default()
    }
}

fn any(value: AttrValue) -> AnyValue {
    let value = match value {
        AttrValue::Str(s) => any_value::Value::StringValue(s),
        AttrValue::Int(n) => any_value::Value::IntValue(n),
        AttrValue::Bool(b) => any_value::Value::BoolValue(b),
        AttrValue::StrList(l) => any_value::Value::ArrayValue(ArrayValue {
            values: l.into_iter().map(|s| any(AttrValue::Str(s))).collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

pub(crate) fn nanos(t: DateTime<Utc>) -> u64 {
    t.timestamp_nanos_opt()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}
