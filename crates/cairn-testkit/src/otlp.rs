//! A local OpenTelemetry collector for tests: it takes OTLP/HTTP protobuf
//! trace and metric exports (`POST /v1/traces`, `/v1/metrics`), decodes
//! them with the `opentelemetry-proto` types, and keeps every span and
//! data point it received. It can play a collector that is down (503).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use prost::Message;
use serde_json::Value;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};

/// One span as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent: String,
    pub name: String,
    /// OTLP's span kind (1 internal, 3 client).
    pub kind: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: BTreeMap<String, Value>,
    /// OTLP's status code (0 unset, 1 ok, 2 error).
    pub status: i32,
    /// The resource's `service.name`.
    pub service: String,
}

/// One data point as received: a histogram's count and sum, or a gauge's
/// value.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedPoint {
    pub metric: String,
    pub attributes: BTreeMap<String, Value>,
    pub count: u64,
    pub sum: f64,
    pub value: i64,
}

/// The collector (a thread; it lives as long as the test process).
#[derive(Debug)]
pub struct Collector {
    /// `http://127.0.0.1:PORT`, an `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    points: Arc<Mutex<Vec<ReceivedPoint>>>,
    requests: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
}

impl Collector {
    pub fn start() -> std::io::Result<Collector> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let spans = Arc::new(Mutex::new(Vec::new()));
        let points = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(AtomicUsize::new(0));
        let down = Arc::new(AtomicBool::new(false));
        let (s, p, n, d) = (
            spans.clone(),
            points.clone(),
            requests.clone(),
            down.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (s, p, n, d) = (s.clone(), p.clone(), n.clone(), d.clone());
                std::thread::spawn(move || {
                    let _ = take(stream, (&s, &p), &n, &d);
                });
            }
        });
        Ok(Collector {
            endpoint,
            spans,
            points,
            requests,
            down,
        })
    }

    /// Every metric data point received so far, in arrival order.
    pub fn points(&self) -> Vec<ReceivedPoint> {
        self.points
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Export requests received (including refused ones).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// While `true`, every export is answered 503 and nothing is kept.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

fn take(
    mut stream: TcpStream,
    (spans, points): (&Mutex<Vec<ReceivedSpan>>, &Mutex<Vec<ReceivedPoint>>),
    requests: &AtomicUsize,
    down: &AtomicBool,
) -> std::io::Result<()> {
    let Some((path, body)) = crate::slow_model::read_request(&stream)? else {
        return Ok(());
    };
    requests.fetch_add(1, Ordering::SeqCst);
    let status = if down.load(Ordering::SeqCst) {
        "503 Service Unavailable"
    } else if path == "/v1/metrics" {
        match ExportMetricsServiceRequest::decode(body.as_slice()) {
            Ok(req) => {
                let got = received_points(req);
                points.lock().unwrap_or_else(|p| p.into_inner()).extend(got);
                "200 OK"
            }
            Err(_) => "400 Bad Request",
        }
    } else {
        match ExportTraceServiceRequest::decode(body.as_slice()) {
            Ok(req) => {
                let got = received(req);
                spans.lock().unwrap_or_else(|p| p.into_inner()).extend(got);
                "200 OK"
            }
            Err(_) => "400 Bad Request",
        }
    };
    stream.write_all(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\n\
             content-length: 0\r\nconnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
}

fn received_points(req: ExportMetricsServiceRequest) -> Vec<ReceivedPoint> {
    let mut out = Vec::new();
    let metrics = req
        .resource_metrics
        .into_iter()
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics);
    for m in metrics {
        let attrs = |kvs: Vec<opentelemetry_proto::tonic::common::v1::KeyValue>| {
            kvs.into_iter()
                .filter_map(|kv| Some((kv.key, json(kv.value?))))
                .collect()
        };
        match m.data {
            Some(metric::Data::Histogram(h)) => {
                out.extend(h.data_points.into_iter().map(|p| ReceivedPoint {
                    metric: m.name.clone(),
                    attributes: attrs(p.attributes),
                    count: p.count,
                    sum: p.sum.unwrap_or(0.0),
                    value: 0,
                }))
            }
            Some(metric::Data::Gauge(g)) => {
                out.extend(g.data_points.into_iter().map(|p| ReceivedPoint {
                    metric: m.name.clone(),
                    attributes: attrs(p.attributes),
                    count: 0,
                    sum: 0.0,
                    value: match p.value {
                        Some(number_data_point::Value::AsInt(n)) => n,
                        _ => 0,
                    },
                }))
            }
            _ => {}
        }
    }
    out
}

fn received(req: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for rs in req.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.clone())
            .map(json)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
            out.push(ReceivedSpan {
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent: hex(&span.parent_span_id),
                name: span.name,
                kind: span.kind,
                start_ns: span.start_time_unix_nano,
                end_ns: span.end_time_unix_nano,
                attributes: span
                    .attributes
                    .into_iter()
                    .filter_map(|kv| Some((kv.key, json(kv.value?))))
                    .collect(),
                status: span.status.map_or(0, |s| s.code),
                service: service.clone(),
            });
        }
    }
    out
}

fn json(v: AnyValue) -> Value {
    match v.value {
        Some(any_value::Value::StringValue(s)) => Value::String(s),
        Some(any_value::Value::IntValue(n)) => Value::from(n),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(b),
        Some(any_value::Value::DoubleValue(f)) => Value::from(f),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.into_iter().map(json).collect())
        }
        _ => Value::Null,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
