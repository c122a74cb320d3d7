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

/// One export request holding `spans`, under the configured resource.
pub fn request(config: &Config, spans: &[SpanRecord]) -> ExportTraceServiceRequest {
    let mut resource = vec![kv(
        "service.name",
        AttrValue::Str(config.service_name.clone()),
    )];
    resource.extend(
        config
            .resource
            .iter()
            .map(|(k, v)| kv(k, AttrValue::Str(v.clone()))),
    );
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource,
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "cairn".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans: spans.iter().map(span).collect(),
                schema_url: "https://opentelemetry.io/schemas/1.37.0".into(),
            }],
            schema_url: String::new(),
        }],
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
        status: Some(Status {
            message,
            code: code as i32,
        }),
        ..Default::default()
    }
}

fn kv(key: &str, value: AttrValue) -> KeyValue {
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

fn nanos(t: DateTime<Utc>) -> u64 {
    t.timestamp_nanos_opt()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}
