//! A local OpenTelemetry collector for tests: it takes OTLP/HTTP protobuf
//! trace and metric exports (`POST /v1/traces`, `/v1/metrics`) or, started
//! with [`Collector::start_grpc`], the same over gRPC; it decodes
//! them with the `opentelemetry-proto` types, and keeps every span and
//! data point it received. It can play a collector that is down (503).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message;
use serde_json::Value;
use tonic::transport::server::TcpIncoming;

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
    /// `http://127.0.0.1:PORT`, an `OTEL_EXPORTER_OTLP_ENDPOINT` (for the
    /// protocol it was started with).
    pub endpoint: String,
    kept: Arc<Kept>,
}

/// What every connection shares.
#[derive(Debug, Default)]
struct Kept {
    spans: Mutex<Vec<ReceivedSpan>>,
    points: Mutex<Vec<ReceivedPoint>>,
    requests: AtomicUsize,
    down: AtomicBool,
}

impl Kept {
    /// Counts an export; `false` while playing a collector that is down.
    fn up(&self) -> bool {
        self.requests.fetch_add(1, Ordering::SeqCst);
        !self.down.load(Ordering::SeqCst)
    }

    fn traces(&self, req: ExportTraceServiceRequest) {
        let got = received(req);
        self.spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(got);
    }

    fn metrics(&self, req: ExportMetricsServiceRequest) {
        let got = received_points(req);
        self.points
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(got);
    }
}

impl Collector {
    /// A collector taking OTLP/HTTP protobuf (`http/protobuf`).
    pub fn start() -> std::io::Result<Collector> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let kept = Arc::new(Kept::default());
        let shared = kept.clone();
        crate::serve_each(listener, move |stream| {
            let _ = take(stream, &shared);
        });
        Ok(Collector { endpoint, kept })
    }

    /// A collector taking OTLP over gRPC (`grpc`): the generated
    /// `TraceService` and `MetricsService` servers, on a runtime of its own.
    pub fn start_grpc() -> std::io::Result<Collector> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let kept = Arc::new(Kept::default());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let service = Grpc(kept.clone());
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let _ = tonic::transport::Server::builder()
                    .add_service(TraceServiceServer::new(service.clone()))
                    .add_service(MetricsServiceServer::new(service))
                    .serve_with_incoming(TcpIncoming::from(listener))
                    .await;
            })
        });
        Ok(Collector { endpoint, kept })
    }

    /// Every metric data point received so far, in arrival order.
    pub fn points(&self) -> Vec<ReceivedPoint> {
        self.kept
            .points
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.kept
            .spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Export requests received (including refused ones).
    pub fn requests(&self) -> usize {
        self.kept.requests.load(Ordering::SeqCst)
    }

    /// While `true`, every export is refused (HTTP 503, gRPC
    /// `unavailable`) and nothing is kept.
    pub fn set_down(&self, down: bool) {
        self.kept.down.store(down, Ordering::SeqCst);
    }
}

fn take(mut stream: TcpStream, kept: &Kept) -> std::io::Result<()> {
    let Some((path, body)) = crate::slow_model::read_request(&stream)? else {
        return Ok(());
    };
    let status = if !kept.up() {
        "503 Service Unavailable"
    } else if path == "/v1/metrics" {
        match ExportMetricsServiceRequest::decode(body.as_slice()) {
            Ok(req) => {
                kept.metrics(req);
                "200 OK"
            }
            Err(_) => "400 Bad Request",
        }
    } else {
        match ExportTraceServiceRequest::decode(body.as_slice()) {
            Ok(req) => {
                kept.traces(req);
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

/// The gRPC services, over the same [`Kept`].
#[derive(Debug, Clone)]
struct Grpc(Arc<Kept>);

fn unavailable() -> tonic::Status {
    tonic::Status::unavailable("the test collector is down")
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        if !self.0.up() {
            return Err(unavailable());
        }
        self.0.traces(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Grpc {
    async fn export(
        &self,
        req: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        if !self.0.up() {
            return Err(unavailable());
        }
        self.0.metrics(req.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
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
