//! The `OTEL_*` variables Cairn reads (OpenTelemetry's SDK configuration).

use std::time::Duration;

use cairn_core::trace::{BadSampler, Sampler};

/// Where and how spans go. Its `Debug` names the headers, never their
/// values (they often carry a backend's API key).
#[derive(Clone, PartialEq)]
pub struct Config {
    /// How spans and metrics travel (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Protocol,
    /// Where spans go: over HTTP the full URL they are posted to
    /// (`…/v1/traces`), over gRPC the collector's address (`http://host:4317`).
    pub traces_endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`), e.g. a
    /// backend's API key.
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, after `service.name`.
    pub resource: Vec<(String, String)>,
    pub sampler: Sampler,
    /// How long a send may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, ms).
    pub timeout: Duration,
    /// How often an exporter looks for spans to send
    /// (`OTEL_BSP_SCHEDULE_DELAY`, ms).
    pub interval: Duration,
    /// Where metrics are posted (`…/v1/metrics`); `None` when
    /// `OTEL_METRICS_EXPORTER=none`, or when only a traces endpoint is set.
    pub metrics_endpoint: Option<String>,
    /// How often metrics are sent (`OTEL_METRIC_EXPORT_INTERVAL`, ms).
    pub metrics_interval: Duration,
    /// Put tool arguments and results and step outputs on spans, each cut
    /// to `content_limit` bytes
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`). Off
    /// by default.
    pub capture_content: bool,
    pub content_limit: usize,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Config")
            .field("protocol", &self.protocol)
            .field("traces_endpoint", &self.traces_endpoint)
            .field("headers", &headers)
            .field("service_name", &self.service_name)
            .field("resource", &self.resource)
            .field("sampler", &self.sampler)
            .field("timeout", &self.timeout)
            .field("interval", &self.interval)
            .field("metrics_endpoint", &self.metrics_endpoint)
            .field("metrics_interval", &self.metrics_interval)
            .field("capture_content", &self.capture_content)
            .finish()
    }
}

/// OTLP's transports that Cairn speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`, the default: protobuf bodies POSTed to
    /// `/v1/traces` and `/v1/metrics`.
    HttpProtobuf,
    /// `grpc`: the collector's `Export` calls over HTTP/2.
    Grpc,
}

impl Protocol {
    fn parse(value: &str) -> Option<Protocol> {
        match value.trim() {
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            "grpc" => Some(Protocol::Grpc),
            _ => None,
        }
    }
}

/// The most bytes of one captured value (a tool's arguments or result, a
/// step's output); more is cut, marked `…`.
pub const CONTENT_LIMIT: usize = 4096;

/// A variable set to something Cairn cannot honour.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL `{0}` is not supported: Cairn exports http/protobuf or grpc (http/json is not built)")]
    Protocol(String),
    #[error("{var} `{value}` is not a list of key=value pairs separated by commas")]
    Pairs { var: &'static str, value: String },
    #[error("{var} `{value}` is not an http:// or https:// URL")]
    Endpoint { var: &'static str, value: String },
    #[error("{var} `{value}` is not a whole number of milliseconds above 0")]
    Millis { var: &'static str, value: String },
    #[error(transparent)]
    Sampler(#[from] BadSampler),
}

impl Config {
    /// The configuration the variables give, `None` when traces are off:
    /// no endpoint is set, `OTEL_SDK_DISABLED=true`, or
    /// `OTEL_TRACES_EXPORTER=none`.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, ConfigError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let off = set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
        // Refused only when traces are on (below).
        let asked = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or(set("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            Some(p) => Protocol::parse(&p).ok_or(ConfigError::Protocol(p)),
            None => Ok(Protocol::HttpProtobuf),
        };
        let protocol = asked.clone().unwrap_or(Protocol::HttpProtobuf);
        // Over gRPC the base endpoint is the collector itself; over HTTP
        // each signal has its path under it.
        let under = |base: String, path: &str| {
            let base = base.trim().trim_end_matches('/').to_owned();
            match protocol {
                Protocol::Grpc => base,
                Protocol::HttpProtobuf => format!("{base}/{path}"),
            }
        };
        let endpoint = match (
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(full), _) => Some(("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", full.trim().to_owned())),
            (None, Some(base)) => Some(("OTEL_EXPORTER_OTLP_ENDPOINT", under(base, "v1/traces"))),
            (None, None) => None,
        };
        let metrics_endpoint = match (
            set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            _ if set("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim() == "none") => None,
            (Some(full), _) => Some(full.trim().to_owned()),
            (None, Some(base)) => Some(under(base, "v1/metrics")),
            (None, None) => None,
        };
        let Some((name, endpoint)) = endpoint.filter(|_| !off) else {
            return Ok(None);
        };
        asked?;
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ConfigError::Endpoint {
                var: name,
                value: endpoint,
            });
        }
        let mut headers = pairs(
            "OTEL_EXPORTER_OTLP_HEADERS",
            set("OTEL_EXPORTER_OTLP_HEADERS"),
        )?;
        headers.extend(pairs(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            set("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        )?);
        let mut resource = pairs("OTEL_RESOURCE_ATTRIBUTES", set("OTEL_RESOURCE_ATTRIBUTES"))?;
        let service_name = set("OTEL_SERVICE_NAME")
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "cairn".to_owned());
        resource.retain(|(k, _)| k != "service.name");
        let sampler = match set("OTEL_TRACES_SAMPLER") {
            Some(name) => Sampler::parse(&name, set("OTEL_TRACES_SAMPLER_ARG").as_deref())?,
            None => Sampler::default(),
        };
        Ok(Some(Config {
            protocol,
            traces_endpoint: endpoint,
            headers,
            service_name,
            resource,
            sampler,
            timeout: millis(
                "OTEL_EXPORTER_OTLP_TIMEOUT",
                set("OTEL_EXPORTER_OTLP_TIMEOUT"),
                10_000,
            )?,
            interval: millis(
                "OTEL_BSP_SCHEDULE_DELAY",
                set("OTEL_BSP_SCHEDULE_DELAY"),
                5_000,
            )?,
            metrics_endpoint,
            metrics_interval: millis(
                "OTEL_METRIC_EXPORT_INTERVAL",
                set("OTEL_METRIC_EXPORT_INTERVAL"),
                60_000,
            )?,
            capture_content: set("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            content_limit: CONTENT_LIMIT,
        }))
    }
}

fn millis(var: &'static str, value: Option<String>, default: u64) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(Duration::from_millis(default)),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(Duration::from_millis)
            .ok_or(ConfigError::Millis { var, value: v }),
    }
}

/// `k=v,k=v` with percent-encoded values, as the SDK specification says.
fn pairs(var: &'static str, value: Option<String>) -> Result<Vec<(String, String)>, ConfigError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let bad = || ConfigError::Pairs {
        var,
        value: value.clone(),
    };
    value
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').ok_or_else(bad)?;
            let k = k.trim();
            if k.is_empty() {
                return Err(bad());
            }
            Ok((k.to_owned(), percent_decode(v.trim()).ok_or_else(bad)?))
        })
        .collect()
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn off_without_an_endpoint_or_when_disabled() {
        assert_eq!(Config::from_env(env(&[])).unwrap(), None);
        let disabled = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert_eq!(Config::from_env(env(&disabled)).unwrap(), None);
        let none = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert_eq!(Config::from_env(env(&none)).unwrap(), None);
    }

    #[test]
    fn the_standard_variables_are_read() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%3Db,team=ml"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=agents,deployment.environment=prod",
            ),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ];
        let c = Config::from_env(env(&vars)).unwrap().unwrap();
        assert_eq!(c.traces_endpoint, "http://collector:4318/v1/traces");
        assert_eq!(
            c.metrics_endpoint.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        assert_eq!(
            c.headers,
            vec![
                ("x-api-key".into(), "a=b".into()),
                ("team".into(), "ml".into())
            ]
        );
        assert_eq!(c.service_name, "agents");
        assert_eq!(
            c.resource,
            vec![("deployment.environment".into(), "prod".into())]
        );
        assert_eq!(
            c.sampler,
            Sampler::ParentBased(cairn_core::trace::Root::Ratio(0.25))
        );
        let full = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://x/otlp/v1/traces",
            ),
            ("OTEL_SERVICE_NAME", "svc"),
        ];
        let c = Config::from_env(env(&full)).unwrap().unwrap();
        assert_eq!(
            (c.traces_endpoint.as_str(), c.service_name.as_str()),
            ("https://x/otlp/v1/traces", "svc")
        );
        let no_metrics = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ];
        let c = Config::from_env(env(&no_metrics)).unwrap().unwrap();
        assert_eq!(c.metrics_endpoint, None);
    }

    #[test]
    fn grpc_uses_the_endpoint_as_the_collectors_address() {
        let grpc = |vars: &[(&str, &str)]| {
            let c = Config::from_env(env(vars)).unwrap().unwrap();
            assert_eq!(c.protocol, Protocol::Grpc);
            c
        };
        let c = grpc(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]);
        assert_eq!(c.traces_endpoint, "http://c:4317");
        assert_eq!(c.metrics_endpoint.as_deref(), Some("http://c:4317"));
        let traces_only = grpc(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
        ]);
        assert_eq!(traces_only.traces_endpoint, "http://c:4318");
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_name() {
        let json = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ];
        assert_eq!(
            Config::from_env(env(&json)),
            Err(ConfigError::Protocol("http/json".into()))
        );
        // Not refused while traces are off.
        let off = [("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")];
        assert_eq!(Config::from_env(env(&off)), Ok(None));
        type Vars = &'static [(&'static str, &'static str)];
        type Refused = fn(&ConfigError) -> bool;
        let cases: [(&str, Vars, Refused); 3] = [
            (
                "bad endpoint",
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")],
                |e| matches!(e, ConfigError::Endpoint { .. }),
            ),
            (
                "bad pairs",
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_RESOURCE_ATTRIBUTES", "novalue"),
                ],
                |e| matches!(e, ConfigError::Pairs { .. }),
            ),
            (
                "bad sampler",
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_TRACES_SAMPLER", "xray"),
                ],
                |e| matches!(e, ConfigError::Sampler(_)),
            ),
        ];
        for (name, vars, refused) in cases {
            let got = Config::from_env(env(vars));
            assert!(matches!(&got, Err(e) if refused(e)), "case {name}: {got:?}");
        }
    }
}
