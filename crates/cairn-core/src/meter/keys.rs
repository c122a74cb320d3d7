//! Provider keys: what a provider's rate limit pauses. Every `llm` step that
//! calls the same provider with the same API key shares one key (built by
//! `cairn_agent::limit_key`); a "too many requests" that says how long to
//! stay away pauses the key for every run on the database, and steps that
//! find it paused wait for its end instead of calling (deferred, the same
//! attempt, no retry spent). [`KeyState`]'s serde form is the JSON contract
//! of `cairn limits list --json` and `GET /v1/limits`: extend it, never
//! rename.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub mod window;

/// A provider key as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyState {
    pub key: String,
    /// Paused until then (database clock); absent when it is not paused.
    pub paused_until: Option<DateTime<Utc>>,
    /// Why it was last paused (the provider's answer, or an operator's
    /// reason).
    pub reason: Option<String>,
    /// Who last paused it: `provider` for a rate limit, else the operator.
    pub paused_by: Option<String>,
    pub paused_at: Option<DateTime<Utc>>,
    /// How many pauses began (one that met a pause still standing, from
    /// another run refused at the same time, is not counted again).
    pub pauses: u64,
    /// Queued runs deferred on it, waiting for its pause to end or a
    /// permit (its queue).
    pub deferred_runs: u64,
    /// Its limits (`cairn limits set`); empty when it has none.
    #[serde(default)]
    pub limits: KeyLimits,
    /// Permits held now by calls executing on it (runs whose lease still
    /// stands).
    #[serde(default)]
    pub permits_in_use: u64,
    /// Who set its limits: `operator` (`cairn limits set`), `crew` (an
    /// agent's `limits`) or `config` (`CAIRN_LIMITS`); absent without
    /// limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits_from: Option<crate::LimitsFrom>,
}

/// A pause to record: `key` paused for `wait` from now (database clock). A
/// longer pause already standing wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPause {
    pub key: String,
    pub wait: Duration,
    pub reason: String,
    /// `provider` for a rate limit; an operator's name otherwise.
    pub by: String,
}

impl KeyPause {
    /// Who a provider's own pause is recorded as.
    pub const PROVIDER: &'static str = "provider";

    /// The pause held to `cap` when it is a provider's (an operator's is
    /// never capped): one that asks for longer waits `cap`, and its
    /// reason says what was asked and what was kept.
    pub fn capped(mut self, cap: Duration) -> KeyPause {
        if self.by == Self::PROVIDER && self.wait > cap {
            self.reason = format!(
                "{} (the provider asked for {}; capped at {}, the key's max_pause)",
                self.reason,
                format_age(self.wait),
                format_age(cap)
            );
            self.wait = cap;
        }
        self
    }

    /// Refuses a pause longer than [`LONGEST_PAUSE`] (`bad_age`).
    pub fn check(&self) -> Result<(), PauseTooLong> {
        check_pause(self.wait)
    }
}

/// A pause as it stands once one was recorded: how long it has left (a
/// longer one already standing wins) and the reason recorded (a
/// provider's capped one says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paused {
    pub after: Duration,
    pub reason: String,
}

/// The longest a provider's answer (`Retry-After`, reset headers) pauses
/// a key whose limits set no `max_pause_ms`: a pause of years is a
/// provider's mistake, and would stop every run on the key.
pub const DEFAULT_MAX_PAUSE: Duration = Duration::from_secs(15 * 60);

/// The longest pause stored at all, an operator's or a key's
/// `max_pause_ms` (100 years, 36500d): a pause must end at a time both
/// databases can store.
pub const LONGEST_PAUSE: Duration = Duration::from_secs(36_500 * 86_400);

/// A pause past [`LONGEST_PAUSE`] (`bad_age`); nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a pause of {} is longer than the longest kept, {}; pause for at most that", format_age(self.wait), format_age(LONGEST_PAUSE))]
pub struct PauseTooLong {
    pub wait: Duration,
}

/// Refuses a pause of `wait` when it is longer than [`LONGEST_PAUSE`]
/// (`bad_age`).
pub fn check_pause(wait: Duration) -> Result<(), PauseTooLong> {
    match wait > LONGEST_PAUSE {
        true => Err(PauseTooLong { wait }),
        false => Ok(()),
    }
}

/// The longest provider key name taken from an operator, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// A provider key name an operator gave that is refused (`bad_key`):
/// empty, longer than [`MAX_KEY_BYTES`], or with a control character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad provider key: {0}")]
pub struct BadKey(pub String);

/// Refuses a key name that is empty, over [`MAX_KEY_BYTES`] bytes or holds
/// a control character (a newline, a NUL, an escape): `cairn limits
/// list` prints keys one a line, and the server logs them.
pub fn check_key(key: &str) -> Result<(), BadKey> {
    if key.trim().is_empty() {
        return Err(BadKey("the key is empty".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(BadKey(format!(
            "the key is {} bytes long, more than the {MAX_KEY_BYTES} a key may have",
            key.len()
        )));
    }
    match key.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(BadKey(format!(
            "the key has a control character (U+{:04X}) at byte {at}; a key is printable text",
            u32::from(c)
        ))),
        None => Ok(()),
    }
}

/// A duration as the CLI's ages write it: `15m`, `36500d`, `90s`,
/// `250ms`.
pub fn format_age(d: Duration) -> String {
    let ms = d.as_millis();
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
    ];
    match units.iter().find(|(n, _)| ms > 0 && ms.is_multiple_of(*n)) {
        Some((n, unit)) => format!("{}{unit}", ms / n),
        None => format!("{ms}ms"),
    }
}

/// Limits on a provider key, shared by every process on the database (set
/// with `cairn limits set`, stored on the key). A limit left out is no
/// limit. Requests per minute are a sliding window: at most `rpm` in any
/// 60 seconds ([`window`]). Tokens per minute are a bucket holding at most
/// a minute's worth, refilled continuously, full when first set (so up to
/// twice `tpm` may pass in the minute after it is set or after a quiet
/// minute).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyLimits {
    /// Model calls executing at once on the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
    /// Requests in any 60-second window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Tokens per minute: a call reserves its estimate (input estimated,
    /// plus its `max_tokens`) and settles its real usage after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u32>,
    /// The longest a provider's answer (`Retry-After`) may pause the key,
    /// in milliseconds; [`DEFAULT_MAX_PAUSE`] when unset. Not a limit on
    /// calls: a key with only this takes no permit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pause_ms: Option<u64>,
}

/// A limit out of range (`cairn limits set`): each is at least 1
/// (`max_pause_ms` at least 1000).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be between {min} and {max}, not {value}")]
pub struct BadLimit {
    pub name: &'static str,
    pub value: u64,
    pub min: u64,
    pub max: u64,
}

/// How long a step that found every permit of its key taken waits at most
/// before it looks again (a permit released wakes one such run at once).
pub const IN_FLIGHT_RECHECK: Duration = Duration::from_secs(5);

impl KeyLimits {
    /// The largest value each limit takes.
    pub const MAX: u32 = 1_000_000_000;

    /// Whether any limit is set, `max_pause_ms` included.
    pub fn any(&self) -> bool {
        self.gates() || self.max_pause_ms.is_some()
    }

    /// Whether a limit on calls is set (a key without one needs no
    /// permit).
    pub fn gates(&self) -> bool {
        self.in_flight.is_some() || self.rpm.is_some() || self.tpm.is_some()
    }

    /// The longest a provider's answer may pause the key.
    pub fn max_pause(&self) -> Duration {
        self.max_pause_ms
            .map_or(DEFAULT_MAX_PAUSE, Duration::from_millis)
    }

    /// Refuses a limit of 0 or past [`Self::MAX`], and a `max_pause_ms`
    /// under a second or past [`LONGEST_PAUSE`].
    pub fn check(&self) -> Result<(), BadLimit> {
        let max = u64::from(Self::MAX);
        let named = [
            ("in_flight", self.in_flight.map(u64::from), 1, max),
            ("rpm", self.rpm.map(u64::from), 1, max),
            ("tpm", self.tpm.map(u64::from), 1, max),
            (
                "max_pause_ms",
                self.max_pause_ms,
                1000,
                LONGEST_PAUSE.as_millis() as u64,
            ),
        ];
        for (name, value, min, max) in named {
            if let Some(value) = value.filter(|v| *v < min || *v > max) {
                return Err(BadLimit {
                    name,
                    value,
                    min,
                    max,
                });
            }
        }
        Ok(())
    }

    /// Whether a call reserving `tokens` may start now on a key with these
    /// limits, `in_use` permits held by live runs, buckets as `stored`
    /// (`None`: full) and last refilled `since` ago. Pure: the store locks
    /// the key's row, asks, and writes the answer's buckets back.
    pub fn decide(&self, stored: Buckets, since: Duration, in_use: u64, tokens: u64) -> Decision {
        let refill = |cap: Option<u32>, held: Option<f64>| {
            cap.map(|cap| {
                let cap = f64::from(cap);
                (held.unwrap_or(cap) + since.as_secs_f64() * cap / 60.0).min(cap)
            })
        };
        let held = refill(self.tpm, stored.tokens);
        // A call larger than a whole minute's tokens waits for a full bucket.
        let need = self.tpm.map(|cap| (tokens as f64).min(f64::from(cap)));
        let mut wait: Option<(Duration, Held)> = None;
        let mut longer = |after: Duration, why: Held| {
            if wait.is_none_or(|(w, _)| after > w) {
                wait = Some((after, why));
            }
        };
        if self.in_flight.is_some_and(|cap| in_use >= u64::from(cap)) {
            longer(IN_FLIGHT_RECHECK, Held::InFlight);
        }
        if let (Some(_), Some(after)) = (self.rpm, stored.requests_full_for) {
            longer(after, Held::Requests);
        }
        if let (Some(cap), Some(have), Some(need)) = (self.tpm, held, need) {
            if have < need {
                longer(per_minute(need - have, cap), Held::Tokens);
            }
        }
        match wait {
            Some((after, why)) => Decision::Wait { after, why },
            None => Decision::Grant {
                tokens: held.zip(need).map(|(t, n)| t - n),
            },
        }
    }
}

/// The time `missing` units take to refill at `cap` a minute (at least a
/// millisecond).
fn per_minute(missing: f64, cap: u32) -> Duration {
    let secs = missing * 60.0 / f64::from(cap);
    Duration::from_secs_f64(secs.max(0.001))
}

/// A key's state as the store read it under its lock: how long until its
/// request window has room for one more (`None`: room, or no `rpm`;
/// [`window::full_for`]), and what is left of its minute of tokens
/// (`None`: full, or no `tpm`; below zero when calls used more than they
/// reserved).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Buckets {
    pub requests_full_for: Option<Duration>,
    pub tokens: Option<f64>,
}

/// [`KeyLimits::decide`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// Call now (the store adds the request to the key's window); the
    /// tokens left after this call's reservation.
    Grant { tokens: Option<f64> },
    /// Do not call yet: look again after this long.
    Wait { after: Duration, why: Held },
}

/// What a step waits for before calling a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// The key is paused (a provider's rate limit, or an operator).
    Paused,
    /// Every in-flight permit is held by a running call.
    InFlight,
    /// The minute's requests are spent.
    Requests,
    /// The minute's tokens are spent.
    Tokens,
}

impl Held {
    /// How a deferral names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Paused => "paused",
            Held::InFlight => "every in-flight permit is taken",
            Held::Requests => "its requests per minute are spent",
            Held::Tokens => "its tokens per minute are spent",
        }
    }
}

/// What a step asks before a model call on a key: `tokens` to reserve,
/// for run `run` at lease epoch `epoch` (the permit lives with the lease).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAsk {
    pub key: String,
    pub run: crate::RunId,
    pub epoch: crate::LeaseEpoch,
    pub tokens: u64,
    /// The key's limits as the step's crew or process declares them
    /// (`crate::meter::declared`): applied unless an operator set the key's.
    pub declared: Option<crate::Declared>,
}

/// A permit to call on a key, held until the call ends (released then,
/// and with the run's lease if the process dies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    pub id: i64,
    pub key: String,
    /// Tokens reserved from the key's bucket (0 without a tokens limit);
    /// the call's real usage is settled against it.
    pub reserved: u64,
    /// Whether the key limits calls in flight, so its release wakes a run
    /// deferred for a permit.
    pub wakes: bool,
}

/// The store's answer to a [`KeyAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Call now; with a permit to release after the call when the key has
    /// limits.
    Go(Option<Permit>),
    /// Do not call: the step waits this long (deferred, holding nothing).
    Wait { after: Duration, why: Held },
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NONE: Buckets = Buckets {
        requests_full_for: None,
        tokens: None,
    };
    const GRANT: Decision = Decision::Grant { tokens: None };

    fn limits(in_flight: Option<u32>, rpm: Option<u32>, tpm: Option<u32>) -> KeyLimits {
        KeyLimits {
            in_flight,
            rpm,
            tpm,
            ..KeyLimits::default()
        }
    }

    #[test]
    fn decisions_by_limit() {
        let zero = Duration::ZERO;
        let secs = Duration::from_secs;
        #[allow(clippy::type_complexity)]
        let table: [(&str, KeyLimits, Buckets, Duration, u64, u64, Decision); 9] = [
            (
                "no limit",
                limits(None, None, None),
                NONE,
                zero,
                0,
                10,
                GRANT,
            ),
            (
                "a permit free",
                limits(Some(2), None, None),
                NONE,
                zero,
                1,
                10,
                GRANT,
            ),
            (
                "every permit taken",
                limits(Some(2), None, None),
                NONE,
                zero,
                2,
                10,
                Decision::Wait {
                    after: IN_FLIGHT_RECHECK,
                    why: Held::InFlight,
                },
            ),
            (
                "room in the request window",
                limits(None, Some(60), None),
                NONE,
                zero,
                0,
                10,
                GRANT,
            ),
            (
                "the request window full for 15 s more",
                limits(None, Some(60), None),
                Buckets {
                    requests_full_for: Some(secs(15)),
                    tokens: None,
                },
                zero,
                0,
                10,
                Decision::Wait {
                    after: secs(15),
                    why: Held::Requests,
                },
            ),
            (
                "a full window read for a key without rpm holds nothing",
                limits(None, None, None),
                Buckets {
                    requests_full_for: Some(secs(15)),
                    tokens: None,
                },
                zero,
                0,
                10,
                GRANT,
            ),
            (
                "tokens reserved",
                limits(None, None, Some(6000)),
                NONE,
                zero,
                0,
                1000,
                Decision::Grant {
                    tokens: Some(5000.0),
                },
            ),
            (
                "tokens short: the missing 500 refill in 5 s at 6,000 a minute",
                limits(None, None, Some(6000)),
                Buckets {
                    requests_full_for: None,
                    tokens: Some(500.0),
                },
                zero,
                0,
                1000,
                Decision::Wait {
                    after: secs(5),
                    why: Held::Tokens,
                },
            ),
            (
                "the longest wait wins",
                limits(Some(1), Some(60), Some(6000)),
                Buckets {
                    requests_full_for: Some(secs(1)),
                    tokens: Some(-59_000.0),
                },
                zero,
                1,
                1000,
                Decision::Wait {
                    after: secs(600),
                    why: Held::Tokens,
                },
            ),
        ];
        for (name, limits, stored, since, in_use, tokens, want) in table {
            assert_eq!(limits.decide(stored, since, in_use, tokens), want, "{name}");
        }
    }

    #[test]
    fn a_call_larger_than_a_minute_waits_for_a_full_bucket_only() {
        let l = limits(None, None, Some(100));
        let got = l.decide(NONE, Duration::ZERO, 0, 5000);
        assert_eq!(got, Decision::Grant { tokens: Some(0.0) });
    }

    #[test]
    fn a_providers_pause_is_capped_and_says_so_and_an_operators_is_not() {
        let pause = |by: &str, secs| KeyPause {
            key: "k".into(),
            wait: Duration::from_secs(secs),
            reason: "HTTP 429".into(),
            by: by.into(),
        };
        let capped = pause(KeyPause::PROVIDER, 999_999_999).capped(DEFAULT_MAX_PAUSE);
        assert_eq!(capped.wait, Duration::from_secs(900));
        assert_eq!(
            capped.reason,
            "HTTP 429 (the provider asked for 999999999s; capped at 15m, the key's max_pause)"
        );
        let short = pause(KeyPause::PROVIDER, 30).capped(DEFAULT_MAX_PAUSE);
        assert_eq!(
            (short.wait, short.reason.as_str()),
            (Duration::from_secs(30), "HTTP 429")
        );
        let operator = pause("ops", 86_400).capped(DEFAULT_MAX_PAUSE);
        assert_eq!(operator.wait, Duration::from_secs(86_400));
        assert!(pause("ops", 36_500 * 86_400).check().is_ok());
        let e = pause("ops", 3_000_000 * 86_400).check().unwrap_err();
        assert!(
            e.to_string().contains("3000000d") && e.to_string().contains("36500d"),
            "{e}"
        );
    }

    #[test]
    fn key_names_are_printable_and_at_most_a_kib() {
        assert!(check_key("provider=openai,url=https://x/v1,key=K").is_ok());
        assert!(check_key(&"é".repeat(512)).is_ok());
        for bad in ["", " \t", "a\nb", "a\u{1b}[31m", "a\0b", &"k".repeat(1025)] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
        let e = check_key("a\nb").unwrap_err().to_string();
        assert!(e.contains("(U+000A) at byte 1"), "{e}");
    }

    #[test]
    fn ages_are_written_as_the_cli_reads_them() {
        for (ms, text) in [
            (900_000, "15m"),
            (1_500, "1500ms"),
            (2_000, "2s"),
            (0, "0ms"),
        ] {
            assert_eq!(format_age(Duration::from_millis(ms)), text);
        }
        assert_eq!(format_age(LONGEST_PAUSE), "36500d");
    }

    #[test]
    fn limits_out_of_range_are_named() {
        assert!(limits(Some(1), Some(1), Some(1)).check().is_ok());
        let e = limits(None, Some(0), None).check().unwrap_err();
        assert_eq!(e.name, "rpm");
        assert!(limits(Some(KeyLimits::MAX + 1), None, None)
            .check()
            .is_err());
        let max_pause = |ms| KeyLimits {
            max_pause_ms: Some(ms),
            ..KeyLimits::default()
        };
        assert!(max_pause(1000).check().is_ok() && max_pause(1000).any());
        assert!(!max_pause(1000).gates(), "no permit for a cap alone");
        let e = max_pause(999).check().unwrap_err();
        assert_eq!((e.name, e.min), ("max_pause_ms", 1000));
        assert!(max_pause(LONGEST_PAUSE.as_millis() as u64 + 1)
            .check()
            .is_err());
    }
}
