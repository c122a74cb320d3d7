//! OpenTelemetry export for Cairn. Off unless configured by the standard
//! variables ([`Config::from_env`]). Spans are not recorded in memory as
//! work happens: `cairn_core::trace::spans` builds them from the events a
//! run stored, and [`Exporter::send`] sends them over OTLP (HTTP protobuf
//! or gRPC), so a process killed after a commit loses no span of it.
//!
//! Supported: `http/protobuf` and `grpc`. `http/json` is refused with a
//! typed error rather than silently ignored.

mod config;
mod encode;
mod grpc;
mod metrics;

pub use config::{Config, ConfigError, Protocol};
pub use encode::request;
pub use metrics::{metrics_request, Gauges, Tally};

use cairn_core::trace::SpanRecord;
use prost::Message;

/// A collector that did not take a batch.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Its source carries no URL: the endpoint is said once.
    #[error("the collector at {endpoint} could not be reached")]
    Unreachable {
        endpoint: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the collector at {endpoint} answered {status}: {body}")]
    Refused {
        endpoint: String,
        status: u16,
        body: String,
    },
    /// A gRPC call that did not succeed (the collector unreachable
    /// included: `unavailable`).
    #[error("the collector at {endpoint} answered gRPC {code}: {message}")]
    Grpc {
        endpoint: String,
        code: String,
        message: String,
    },
}

/// Sends spans to one collector.
#[derive(Debug, Clone)]
pub struct Exporter {
    config: Config,
    http: reqwest::Client,
    grpc: grpc::Channels,
}

impl Exporter {
    pub fn new(config: Config) -> Exporter {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .unwrap_or_default();
        Exporter {
            config,
            http,
            grpc: grpc::Channels::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Posts `spans` in one OTLP request.
    pub async fn send(&self, spans: &[SpanRecord]) -> Result<(), SendError> {
        if spans.is_empty() {
            return Ok(());
        }
        let req = request(&self.config, spans);
        match self.config.protocol {
            Protocol::HttpProtobuf => {
                let body = req.encode_to_vec();
                self.post(self.config.traces_endpoint.clone(), body).await
            }
            Protocol::Grpc => self.grpc.traces(&self.config, req).await,
        }
    }

    /// Posts metrics, when a metrics endpoint is configured.
    pub async fn send_metrics(
        &self,
        req: &opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest,
    ) -> Result<(), SendError> {
        match (&self.config.metrics_endpoint, self.config.protocol) {
            (None, _) => Ok(()),
            (Some(endpoint), Protocol::HttpProtobuf) => {
                self.post(endpoint.clone(), req.encode_to_vec()).await
            }
            (Some(endpoint), Protocol::Grpc) => {
                self.grpc.metrics(&self.config, endpoint, req.clone()).await
            }
        }
    }

    async fn post(&self, endpoint: String, body: Vec<u8>) -> Result<(), SendError> {
        let mut req = self
            .http
            .post(&endpoint)
            .header("content-type", "application/x-protobuf")
            .body(body);
        for (k, v) in &self.config.headers {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|source| SendError::Unreachable {
            endpoint: endpoint.clone(),
            source: source.without_url(),
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body = resp.text().await.unwrap_or_default();
        Err(SendError::Refused {
            endpoint,
            status: status.as_u16(),
            body: body.chars().take(200).collect(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod unreachable_tests {
    use super::*;

    /// The error and its sources, as the logs print them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }

    /// A collector nobody listens on: the export error names its URL
    /// once, not once per layer of the chain.
    #[tokio::test]
    async fn an_unreachable_collector_is_named_once() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        drop(listener);
        let var =
            |name: &str| (name == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").then(|| endpoint.clone());
        let config = Config::from_env(var).unwrap().expect("a traces endpoint");
        let exporter = Exporter::new(config);
        let err = exporter.post(endpoint.clone(), vec![]).await.unwrap_err();
        let text = chain(&err);
        assert_eq!(text.matches(&endpoint).count(), 1, "{text}");
        assert!(matches!(err, SendError::Unreachable { .. }), "{text}");
    }
}
