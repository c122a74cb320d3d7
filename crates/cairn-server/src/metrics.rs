//! In-process counters and their Prometheus text rendering. Only what this
//! process can count honestly lives here (requests it answered, steps its
//! runner executed); what every process shares (runs by status, the
//! claimable queue, lease takeovers by any worker) is read from the store
//! per scrape by the `/metrics` handler (`RunStore::stats`, aggregates only).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use cairn::{KeyState, RunStatus, StepRecord, StoreStats};

/// Upper bounds (seconds) of the step duration histogram's buckets.
const STEP_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Counters shared by the HTTP layer and the runner.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Requests answered, by matched route and status code.
    http: Mutex<BTreeMap<(String, u16), u64>>,
    /// Runs the runner is driving now.
    in_flight: AtomicU64,
    /// Drives the runner finished, by the run's status afterwards (or `error`).
    drives: Mutex<BTreeMap<&'static str, u64>>,
    /// Step attempts the runner executed (each retry counts).
    attempts: AtomicU64,
    /// Runs this process's runner claimed from a holder whose lease expired.
    takeovers: AtomicU64,
    /// Retention passes this process ran, and the rows they removed by table.
    compactions: AtomicU64,
    compacted: Mutex<BTreeMap<&'static str, u64>>,
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    /// The same tokens by crew and, for `llm` steps, provider and model
    /// (empty for other kinds): input, output, and the steps' cost.
    usage: Mutex<BTreeMap<Usage, (u64, u64, cairn::Usd)>>,
    step_duration: Histogram,
}

/// Whose tokens: (crew, provider, model).
type Usage = (String, String, String);

/// One executed step's row and who spent its tokens.
pub struct Spender<'a> {
    pub step: &'a StepRecord,
    pub crew: &'a str,
    /// `(provider, model)` of an `llm` step.
    pub model: Option<(&'a str, &'a str)>,
}

#[derive(Debug, Default)]
struct Histogram {
    /// Cumulative counts would race; keep per-bucket counts and sum on render.
    buckets: [AtomicU64; STEP_BUCKETS.len()],
    /// Observations above the last bound.
    over: AtomicU64,
    count: AtomicU64,
    /// Sum in microseconds.
    sum_us: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        match STEP_BUCKETS.iter().position(|b| secs <= *b) {
            Some(i) => self.buckets[i].fetch_add(1, Ordering::Relaxed),
            None => self.over.fetch_add(1, Ordering::Relaxed),
        };
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
}

impl Metrics {
    pub fn record_request(&self, route: &str, code: u16) {
        let mut http = self.http.lock().unwrap_or_else(|p| p.into_inner());
        *http.entry((route.to_owned(), code)).or_default() += 1;
    }

    pub fn set_in_flight(&self, n: usize) {
        self.in_flight.store(n as u64, Ordering::Relaxed);
    }

    /// A retention pass of this process and what it removed.
    pub fn record_compaction(&self, c: &cairn::Compacted) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
        let mut rows = self.compacted.lock().unwrap_or_else(|p| p.into_inner());
        for (table, n) in [
            ("runs", c.runs),
            ("steps", c.steps),
            ("events", c.events),
            ("journal_items", c.journal_items),
            ("waits", c.waits),
        ] {
            *rows.entry(table).or_default() += n;
        }
    }

    /// A claim that took a run over from a holder whose lease expired.
    pub fn record_takeover(&self) {
        self.takeovers.fetch_add(1, Ordering::Relaxed);
    }

    /// One finished drive: the run's status afterwards (or `error`), how
    /// many attempts it executed, and the rows of the steps it executed
    /// (their durations and tokens).
    pub fn record_drive(&self, outcome: &'static str, attempts: usize, steps: &[Spender<'_>]) {
        {
            let mut drives = self.drives.lock().unwrap_or_else(|p| p.into_inner());
            *drives.entry(outcome).or_default() += 1;
        }
        self.attempts.fetch_add(attempts as u64, Ordering::Relaxed);
        for Spender { step, crew, model } in steps {
            let (input, output) = (
                step.input_tokens.unwrap_or(0),
                step.output_tokens.unwrap_or(0),
            );
            let cost = step.cost_usd.unwrap_or_default();
            if input + output > 0 || !cost.is_zero() {
                let (provider, name) = model.unwrap_or(("", ""));
                let key = (crew.to_string(), provider.to_owned(), name.to_owned());
                let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
                let spent = usage.entry(key).or_default();
                *spent = (
                    spent.0 + input,
                    spent.1 + output,
                    spent.2.saturating_add(cost),
                );
            }
            if let Some(ms) = step.duration_ms() {
                let ms = u64::try_from(ms).unwrap_or(0);
                self.step_duration.observe(Duration::from_millis(ms));
            }
            self.input_tokens
                .fetch_add(step.input_tokens.unwrap_or(0), Ordering::Relaxed);
            self.output_tokens
                .fetch_add(step.output_tokens.unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// The Prometheus text exposition (format 0.0.4).
    /// `outside`: missed schedule slots and buffered signals, if read.
    pub fn render(
        &self,
        store: Option<&StoreStats>,
        keys: &[KeyState],
        outside: Option<(u64, u64)>,
    ) -> String {
        let mut out = String::new();
        let o = &mut out;
        render_keys(o, keys);
        if let Some((missed, buffered)) = outside {
            header(
                o,
                "cairn_schedule_missed_slots_total",
                "counter",
                "Schedule slots recorded missed (every process down past them, and the catch-up policy ran others), over every stored schedule.",
            );
            let _ = writeln!(o, "cairn_schedule_missed_slots_total {missed}");
            header(
                o,
                "cairn_signals_buffered",
                "gauge",
                "Signals sent and not yet consumed by a step, within their retention.",
            );
            let _ = writeln!(o, "cairn_signals_buffered {buffered}");
        }
        header(
            o,
            "cairn_store_up",
            "gauge",
            "1 if the store answered this scrape's count, else 0.",
        );
        let _ = writeln!(o, "cairn_store_up {}", u8::from(store.is_some()));
        if let Some(store) = store {
            render_store(o, store);
        }

        header(
            o,
            "cairn_http_requests_total",
            "counter",
            "HTTP requests this process answered, by route and status code.",
        );
        {
            let http = self.http.lock().unwrap_or_else(|p| p.into_inner());
            for ((route, code), n) in http.iter() {
                let _ = writeln!(
                    o,
                    "cairn_http_requests_total{{route=\"{}\",code=\"{code}\"}} {n}",
                    escape(route)
                );
            }
        }

        single(
            o,
            ("cairn_store_statements_total", "counter"),
            "Statements this process sent to its database (not counting BEGIN, COMMIT and pings).",
            cairn::store_statements(),
        );
        single(
            o,
            ("cairn_runner_in_flight", "gauge"),
            "Runs this process's runner is executing now.",
            self.in_flight.load(Ordering::Relaxed),
        );
        labelled(
            o,
            ("cairn_runner_drives_total", "outcome"),
            "Runs this process's runner drove to a stop, by the run's status afterwards (error: the drive failed).",
            &self.drives.lock().unwrap_or_else(|p| p.into_inner()),
        );
        single(
            o,
            ("cairn_lease_takeovers_total", "counter"),
            "Runs this process's runner took over after their holder's lease expired (a worker died or hung).",
            self.takeovers.load(Ordering::Relaxed),
        );
        single(
            o,
            ("cairn_retention_passes_total", "counter"),
            "Retention passes this process ran (serve --compact-every).",
            self.compactions.load(Ordering::Relaxed),
        );
        labelled(
            o,
            ("cairn_retention_removed_rows_total", "table"),
            "Rows this process's retention passes removed, by table.",
            &self.compacted.lock().unwrap_or_else(|p| p.into_inner()),
        );
        header(
            o,
            "cairn_step_attempts_total",
            "counter",
            "Step attempts this process's runner executed (a retried step counts each attempt).",
        );
        let _ = writeln!(
            o,
            "cairn_step_attempts_total {}",
            self.attempts.load(Ordering::Relaxed)
        );
        self.render_usage(o);
        header(
            o,
            "cairn_step_tokens_total",
            "counter",
            "Tokens reported by steps this process's runner executed (last attempt of each step).",
        );
        for (direction, n) in [
            ("input", &self.input_tokens),
            ("output", &self.output_tokens),
        ] {
            let _ = writeln!(
                o,
                "cairn_step_tokens_total{{direction=\"{direction}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }

        header(
            o,
            "cairn_step_duration_seconds",
            "histogram",
            "Duration of steps this process's runner executed (last attempt, database clock).",
        );
        let h = &self.step_duration;
        let mut cumulative = 0;
        for (bound, bucket) in STEP_BUCKETS.iter().zip(&h.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(
                o,
                "cairn_step_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
            );
        }
        cumulative += h.over.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "cairn_step_duration_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            o,
            "cairn_step_duration_seconds_sum {}",
            h.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            o,
            "cairn_step_duration_seconds_count {}",
            h.count.load(Ordering::Relaxed)
        );
        out
    }
}

/// A metric with one value.
fn single(out: &mut String, (name, kind): (&str, &str), help: &str, value: u64) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// A counter with one label, a line per label value.
fn labelled(
    out: &mut String,
    (name, label): (&str, &str),
    help: &str,
    values: &BTreeMap<&'static str, u64>,
) {
    header(out, name, "counter", help);
    for (value, n) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {n}");
    }
}

impl Metrics {
    /// `cairn_tokens_total` by crew, provider, model and direction, and
    /// `cairn_cost_usd_total` by crew, provider and model.
    fn render_usage(&self, o: &mut String) {
        let usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        if usage.is_empty() {
            return;
        }
        header(
            o,
            "cairn_tokens_total",
            "counter",
            "Tokens of steps this process's runner executed, by crew and (llm steps) provider and model.",
        );
        let labels = |(crew, provider, model): &Usage| {
            format!(
                "crew=\"{}\",provider=\"{}\",model=\"{}\"",
                escape(crew),
                escape(provider),
                escape(model)
            )
        };
        for (who, (input, output, _)) in usage.iter() {
            for (direction, n) in [("input", input), ("output", output)] {
                let _ = writeln!(
                    o,
                    "cairn_tokens_total{{{},direction=\"{direction}\"}} {n}",
                    labels(who)
                );
            }
        }
        header(
            o,
            "cairn_cost_usd_total",
            "counter",
            "What the priced model calls of steps this process's runner executed cost, in US dollars (CAIRN_PRICES), by crew, provider and model.",
        );
        for (who, (_, _, cost)) in usage.iter().filter(|(_, u)| !u.2.is_zero()) {
            let _ = writeln!(
                o,
                "cairn_cost_usd_total{{{}}} {}",
                labels(who),
                cost.dollars()
            );
        }
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value in the exposition format.
/// A series per provider key: name, type, help, and its value for a key.
type KeySeries = (
    &'static str,
    &'static str,
    &'static str,
    fn(&KeyState) -> u64,
);

/// Provider keys (read from the store per scrape, like the run counts):
/// whether each is paused, the runs deferred on it, the permits in use,
/// the pauses it had.
/// The gauges read from the database at each scrape: runs by status, the
/// claimable queue, takeovers, blocked runs.
fn render_store(o: &mut String, store: &StoreStats) {
    header(o, "cairn_runs", "gauge", "Runs in the store by status.");
    for status in RunStatus::ALL {
        let n = store
            .runs_by_status
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(o, "cairn_runs{{status=\"{status}\"}} {n}");
    }
    header(
        o,
        "cairn_queue_ready",
        "gauge",
        "Queued runs whose retry back-off has passed (claimable now).",
    );
    let _ = writeln!(o, "cairn_queue_ready {}", store.ready);
    header(
            o,
            "cairn_lease_takeovers",
            "gauge",
            "Lease takeovers by any process, from the event log: claims of runs that were running under another lease (an expired lease, or cairn resume). Events removed by retention no longer count.",
        );
    let _ = writeln!(o, "cairn_lease_takeovers {}", store.takeovers);
    header(
            o,
            "cairn_runs_blocked",
            "gauge",
            "Runnable runs whose crew version has Rust agents no live process offers (see cairn workers).",
        );
    let _ = writeln!(o, "cairn_runs_blocked {}", store.blocked);
}

fn render_keys(o: &mut String, keys: &[KeyState]) {
    if keys.is_empty() {
        return;
    }
    let gauges: [KeySeries; 4] = [
        (
            "cairn_provider_key_paused",
            "gauge",
            "1 while a provider's rate limit (or an operator) pauses the key for every run.",
            |k| u64::from(k.paused_until.is_some()),
        ),
        (
            "cairn_provider_key_deferred_runs",
            "gauge",
            "Queued runs deferred on the key, waiting for its pause to end or a permit.",
            |k| k.deferred_runs,
        ),
        (
            "cairn_provider_key_permits_in_use",
            "gauge",
            "Model calls executing on the key under a permit (keys with limits).",
            |k| k.permits_in_use,
        ),
        (
            "cairn_provider_key_pauses_total",
            "counter",
            "Pauses of the key that began.",
            |k| k.pauses,
        ),
    ];
    for (name, kind, help, value) in gauges {
        header(o, name, kind, help);
        for k in keys {
            let _ = writeln!(o, "{name}{{key=\"{}\"}} {}", escape(&k.key), value(k));
        }
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_keys_are_rendered_with_their_pause_and_queue() {
        let key = |name: &str, paused: bool, deferred| KeyState {
            key: name.into(),
            paused_until: paused.then(chrono::Utc::now),
            reason: None,
            paused_by: None,
            paused_at: None,
            pauses: 3,
            deferred_runs: deferred,
            limits: Default::default(),
            permits_in_use: deferred / 7,
            limits_from: None,
        };
        let m = Metrics::default();
        assert!(!m.render(None, &[], None).contains("cairn_provider_key"));
        let text = m.render(None, &[key("a\"b", true, 7), key("c", false, 0)], None);
        for line in [
            "cairn_provider_key_paused{key=\"a\\\"b\"} 1\n",
            "cairn_provider_key_paused{key=\"c\"} 0\n",
            "cairn_provider_key_deferred_runs{key=\"a\\\"b\"} 7\n",
            "cairn_provider_key_pauses_total{key=\"c\"} 3\n",
            "cairn_provider_key_permits_in_use{key=\"a\\\"b\"} 1\n",
            "# TYPE cairn_provider_key_pauses_total counter\n",
        ] {
            assert!(text.contains(line), "{line} not in {text}");
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.step_duration.observe(Duration::from_millis(5));
        m.step_duration.observe(Duration::from_millis(700));
        m.step_duration.observe(Duration::from_secs(7200));
        let text = m.render(None, &[], None);
        assert!(text.contains("cairn_step_duration_seconds_bucket{le=\"0.01\"} 1\n"));
        assert!(text.contains("cairn_step_duration_seconds_bucket{le=\"1\"} 2\n"));
        assert!(text.contains("cairn_step_duration_seconds_bucket{le=\"3600\"} 2\n"));
        assert!(text.contains("cairn_step_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("cairn_step_duration_seconds_count 3\n"));
        assert!(text.contains("cairn_store_up 0\n"));
        assert!(text.contains("cairn_lease_takeovers_total 0\n"));
        m.record_takeover();
        assert!(m
            .render(None, &[], None)
            .contains("cairn_lease_takeovers_total 1\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
