//! Metrics over OTLP: histograms of the model calls and steps whose spans
//! this process exported (delta temporality: each call is counted by the
//! one process that exported its span, once), and gauges of the database's
//! runs.
//!
//! Names follow the GenAI semantic conventions where they exist
//! (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`, with
//! their recommended bucket boundaries); Cairn's own are `cairn.*`.

use std::collections::BTreeMap;

use cairn_core::trace::{AttrValue, SpanRecord, SpanStatus};
use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint,
    Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
};

use crate::encode::{kv, nanos, resource, scope};
use crate::Config;

/// Seconds: the GenAI conventions' boundaries for operation durations.
const SECONDS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// Tokens: the GenAI conventions' boundaries for token counts.
const TOKENS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// One histogram series.
#[derive(Debug, Clone, PartialEq)]
struct Hist {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    min: f64,
    max: f64,
}

impl Hist {
    fn new(bounds: &'static [f64]) -> Hist {
        Hist {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    fn record(&mut self, v: f64) {
        let i = self.bounds.iter().take_while(|b| v > **b).count();
        self.counts[i] += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

type Series = (&'static str, Vec<(&'static str, String)>);

/// What this process observed since its last metrics export.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    since: DateTime<Utc>,
    series: BTreeMap<Series, Hist>,
}

/// The database's runs, now (`RunStore::stats`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Gauges {
    /// Runs by status.
    pub runs: Vec<(String, u64)>,
    /// Queued runs a worker could claim now.
    pub ready: u64,
}

impl Tally {
    pub fn new(since: DateTime<Utc>) -> Tally {
        Tally {
            since,
            series: BTreeMap::new(),
        }
    }

    fn record(&mut self, name: &'static str, attrs: Vec<(&'static str, String)>, v: f64) {
        let bounds = if name == "gen_ai.client.token.usage" {
            TOKENS
        } else {
            SECONDS
        };
        self.series
            .entry((name, attrs))
            .or_insert_with(|| Hist::new(bounds))
            .record(v);
    }

    /// Counts the model calls and step attempts among `spans` (spans just
    /// exported, each once).
    pub fn observe(&mut self, spans: &[SpanRecord]) {
        for s in spans {
            let secs = (s.end - s.start).num_microseconds().unwrap_or(0) as f64 / 1e6;
            match s.text("gen_ai.operation.name").as_deref() {
                Some("chat") => self.call(s, secs),
                Some("invoke_agent") => {
                    let attrs = vec![
                        (
                            "gen_ai.agent.name",
                            s.text("gen_ai.agent.name").unwrap_or_default(),
                        ),
                        (
                            "cairn.step.outcome",
                            s.text("cairn.step.outcome").unwrap_or_default(),
                        ),
                    ];
                    self.record("cairn.step.duration", attrs, secs);
                }
                _ => {}
            }
        }
    }

    fn call(&mut self, s: &SpanRecord, secs: f64) {
        let mut attrs = vec![
            ("gen_ai.operation.name", "chat".to_owned()),
            (
                "gen_ai.provider.name",
                s.text("gen_ai.provider.name").unwrap_or_default(),
            ),
            (
                "gen_ai.request.model",
                s.text("gen_ai.request.model").unwrap_or_default(),
            ),
        ];
        for (kind, key) in [
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
        ] {
            if let Some(n) = s.int(key) {
                let mut a = attrs.clone();
                a.push(("gen_ai.token.type", kind.to_owned()));
                self.record("gen_ai.client.token.usage", a, n as f64);
            }
        }
        if matches!(s.status, SpanStatus::Error(_)) {
            attrs.push(("error.type", s.text("error.type").unwrap_or_default()));
        }
        self.record("gen_ai.client.operation.duration", attrs, secs);
    }

    /// Whether nothing was observed.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// The tally so far; this one starts again at `now`.
    pub fn take(&mut self, now: DateTime<Utc>) -> Tally {
        std::mem::replace(self, Tally::new(now))
    }
}

/// One export request: the histograms of `tally` (from its start to
/// `now`) and, when given, the gauges.
pub fn metrics_request(
    config: &Config,
    tally: &Tally,
    gauges: Option<&Gauges>,
    now: DateTime<Utc>,
) -> ExportMetricsServiceRequest {
    let mut by_name: BTreeMap<&'static str, Vec<HistogramDataPoint>> = BTreeMap::new();
    for ((name, attrs), h) in &tally.series {
        by_name.entry(name).or_default().push(HistogramDataPoint {
            attributes: attrs
                .iter()
                .map(|(k, v)| kv(k, AttrValue::Str(v.clone())))
                .collect(),
            start_time_unix_nano: nanos(tally.since),
            time_unix_nano: nanos(now),
            count: h.counts.iter().sum(),
            sum: Some(h.sum),
            bucket_counts: h.counts.clone(),
            explicit_bounds: h.bounds.to_vec(),
            min: Some(h.min),
            max: Some(h.max),
            ..Default::default()
        });
    }
    let mut metrics: Vec<Metric> = by_name
        .into_iter()
        .map(|(name, points)| Metric {
            name: name.to_owned(),
            unit: if name == "gen_ai.client.token.usage" {
                "{token}"
            } else {
                "s"
            }
            .to_owned(),
            data: Some(metric::Data::Histogram(Histogram {
                data_points: points,
                aggregation_temporality: AggregationTemporality::Delta as i32,
            })),
            ..Default::default()
        })
        .collect();
    if let Some(g) = gauges {
        metrics.extend(gauges_of(g, now));
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource(config)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics,
                schema_url: crate::encode::SCHEMA_URL.into(),
            }],
            schema_url: String::new(),
        }],
    }
}

fn gauges_of(g: &Gauges, now: DateTime<Utc>) -> Vec<Metric> {
    let point = |attrs: Vec<(&str, &str)>, n: u64| NumberDataPoint {
        attributes: attrs
            .into_iter()
            .map(|(k, v)| kv(k, AttrValue::Str(v.into())))
            .collect(),
        time_unix_nano: nanos(now),
        value: Some(number_data_point::Value::AsInt(
            i64::try_from(n).unwrap_or(i64::MAX),
        )),
        ..Default::default()
    };
    let gauge = |name: &str, unit: &str, data_points| Metric {
        name: name.to_owned(),
        unit: unit.to_owned(),
        data: Some(metric::Data::Gauge(Gauge { data_points })),
        ..Default::default()
    };
    vec![
        gauge(
            "cairn.runs",
            "{run}",
            g.runs
                .iter()
                .map(|(s, n)| point(vec![("cairn.run.status", s)], *n))
                .collect(),
        ),
        gauge("cairn.queue.ready", "{run}", vec![point(vec![], g.ready)]),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use cairn_core::trace::{SpanKind, TraceContext};
    use cairn_core::{RunId, SpanId};

    fn span(attrs: Vec<(&'static str, AttrValue)>, ms: i64) -> SpanRecord {
        let start = Utc::now();
        SpanRecord {
            trace_id: TraceContext::root(RunId::new(), true).trace_id,
            span_id: SpanId([1; 8]),
            parent: None,
            name: "x".into(),
            kind: SpanKind::Client,
            start,
            end: start + chrono::Duration::milliseconds(ms),
            status: SpanStatus::Unset,
            attributes: attrs,
            links: vec![],
        }
    }

    #[test]
    fn calls_and_steps_fill_histograms_with_the_conventions_buckets() {
        let chat = |input: i64| {
            span(
                vec![
                    ("gen_ai.operation.name", AttrValue::Str("chat".into())),
                    ("gen_ai.provider.name", AttrValue::Str("openai".into())),
                    ("gen_ai.request.model", AttrValue::Str("m".into())),
                    ("gen_ai.usage.input_tokens", AttrValue::Int(input)),
                    ("gen_ai.usage.output_tokens", AttrValue::Int(5)),
                ],
                300,
            )
        };
        let step = span(
            vec![
                (
                    "gen_ai.operation.name",
                    AttrValue::Str("invoke_agent".into()),
                ),
                ("gen_ai.agent.name", AttrValue::Str("writer".into())),
            ],
            1000,
        );
        let mut t = Tally::new(Utc::now());
        t.observe(&[chat(100), chat(3000), step, span(vec![], 5)]);
        let tokens = |kind: &str| {
            t.series
                .iter()
                .find(|((n, a), _)| {
                    *n == "gen_ai.client.token.usage" && a.iter().any(|(_, v)| v == kind)
                })
                .map(|(_, h)| h.clone())
                .unwrap()
        };
        let input = tokens("input");
        assert_eq!(input.sum, 3100.0);
        assert_eq!((input.min, input.max), (100.0, 3000.0));
        // Bucket i is (bounds[i-1], bounds[i]]: 100 in (64, 256], 3000 in (1024, 4096].
        assert_eq!(input.counts[4], 1);
        assert_eq!(input.counts[6], 1);
        let durations: Vec<_> = t.series.keys().map(|(n, _)| *n).collect();
        assert!(durations.contains(&"gen_ai.client.operation.duration"));
        assert!(durations.contains(&"cairn.step.duration"));
        let config = Config::from_env(|k| {
            (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://c".to_owned())
        })
        .unwrap()
        .unwrap();
        let now = Utc::now();
        let req = metrics_request(&config, &t.take(now), Some(&Gauges::default()), now);
        let names: Vec<_> = req.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "cairn.step.duration",
                "gen_ai.client.operation.duration",
                "gen_ai.client.token.usage",
                "cairn.runs",
                "cairn.queue.ready"
            ]
        );
        assert!(t.is_empty(), "taken");
    }
}
