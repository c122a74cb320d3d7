//! OTLP over gRPC: the collector's `TraceService/Export` and
//! `MetricsService/Export` unary calls, through the tonic clients that
//! `opentelemetry-proto` generates. Each endpoint gets one lazily connected
//! HTTP/2 channel (TLS with the webpki roots for `https://`), reused by
//! every send; the configured headers travel as gRPC metadata.

use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::{
    metrics_service_client::MetricsServiceClient, ExportMetricsServiceRequest,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    trace_service_client::TraceServiceClient, ExportTraceServiceRequest,
};
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::{Config, SendError};

/// The channels opened so far, one per endpoint.
#[derive(Debug, Clone, Default)]
pub(crate) struct Channels(Arc<Mutex<Vec<(String, Channel)>>>);

impl Channels {
    pub(crate) async fn traces(
        &self,
        config: &Config,
        req: ExportTraceServiceRequest,
    ) -> Result<(), SendError> {
        let endpoint = &config.traces_endpoint;
        let mut client = TraceServiceClient::new(self.channel(config, endpoint)?);
        let sent = client.export(with_headers(config, endpoint, req)?).await;
        answered(endpoint, sent)
    }

    pub(crate) async fn metrics(
        &self,
        config: &Config,
        endpoint: &str,
        req: ExportMetricsServiceRequest,
    ) -> Result<(), SendError> {
        let mut client = MetricsServiceClient::new(self.channel(config, endpoint)?);
        let sent = client.export(with_headers(config, endpoint, req)?).await;
        answered(endpoint, sent)
    }

    /// The channel to `endpoint`, opened on first use (connecting lazily:
    /// an unreachable collector fails the call, not this).
    fn channel(&self, config: &Config, endpoint: &str) -> Result<Channel, SendError> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, channel)) = open.iter().find(|(e, _)| e == endpoint) {
            return Ok(channel.clone());
        }
        let bad = |e: tonic::transport::Error| SendError::Grpc {
            endpoint: endpoint.to_owned(),
            code: "InvalidArgument".into(),
            message: e.to_string(),
        };
        let mut target = Endpoint::from_shared(endpoint.to_owned())
            .map_err(bad)?
            .timeout(config.timeout)
            .connect_timeout(config.timeout);
        if endpoint.starts_with("https://") {
            target = target
                .tls_config(ClientTlsConfig::new().with_webpki_roots())
                .map_err(bad)?;
        }
        let channel = target.connect_lazy();
        open.push((endpoint.to_owned(), channel.clone()));
        Ok(channel)
    }
}

/// `message` with the configured headers as metadata. A header gRPC cannot
/// carry is an error naming the header, never its value.
fn with_headers<T>(
    config: &Config,
    endpoint: &str,
    message: T,
) -> Result<tonic::Request<T>, SendError> {
    let mut req = tonic::Request::new(message);
    for (k, v) in &config.headers {
        let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes()).ok();
        let value = MetadataValue::try_from(v.as_str()).ok();
        let (Some(key), Some(value)) = (key, value) else {
            return Err(SendError::Grpc {
                endpoint: endpoint.to_owned(),
                code: "InvalidArgument".into(),
                message: format!("the header `{k}` cannot be sent as gRPC metadata"),
            });
        };
        req.metadata_mut().insert(key, value);
    }
    Ok(req)
}

/// A collector's answer to an export: nothing on success, else what it
/// refused ([`refused`]).
fn answered<T>(endpoint: &str, sent: Result<T, tonic::Status>) -> Result<(), SendError> {
    sent.map(drop).map_err(|status| refused(endpoint, &status))
}

fn refused(endpoint: &str, status: &tonic::Status) -> SendError {
    SendError::Grpc {
        endpoint: endpoint.to_owned(),
        code: format!("{:?}", status.code()),
        message: status.message().chars().take(200).collect(),
    }
}
