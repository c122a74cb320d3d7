//! Schedules: runs started by the clock. A schedule names a stored crew
//! version, an input template, a cadence (an interval, or a cron
//! expression in an IANA time zone), what to do when the previous run is
//! still going ([`Overlap`]) and which missed slots run after downtime
//! ([`CatchUp`]). Slots are instants in UTC; each one's run is submitted
//! with the idempotency key [`Schedule::key`], in the transaction that
//! moves the schedule's next slot forward, so a slot runs at most once
//! whoever fires it. This module is the rule as pure functions; storage
//! applies it (`cairn-checkpoint`'s `script/schedules.rs`).
//!
//! **Daylight saving** (cron in a zone; croner's rule, table-tested): a
//! fixed time in an hour the clocks repeat fires once, at its first
//! occurrence; a fixed time in an hour the clocks skip fires at the first
//! instant after the gap; a pattern that fires every minute or hour fires
//! at every real instant it matches, through both.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How often a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Cadence {
    /// Every this many seconds from the schedule's anchor (its creation).
    Every { secs: u64 },
    /// A cron expression (5 fields, or 6 with seconds first) in a zone.
    Cron { expr: String, tz: String },
}

/// What a slot does while the schedule's previous run is unfinished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The slot is recorded `skipped`.
    #[default]
    Skip,
    /// The slot waits (`buffered`, at most one) and runs once the previous
    /// run ended; a further slot meanwhile is skipped.
    Buffer,
    /// The slot runs beside it.
    Allow,
    /// The previous run is cancelled and the slot runs.
    Cancel,
}

/// Which of the slots due at once (after downtime) run; the others are
/// recorded `missed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Only the newest due slot.
    #[default]
    Latest,
    /// Only the oldest due slot (one run that starts where the schedule
    /// stopped).
    One,
    /// The newest `n` due slots, oldest first.
    All(u32),
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub name: String,
    /// The crew's name and the stored version's fingerprint its runs use.
    pub crew: String,
    pub fingerprint: String,
    /// The input template: every `{{ scheduled_for }}` and `{{ fired_at }}`
    /// in its strings is replaced by that time (RFC 3339 UTC).
    pub input: Value,
    pub cadence: Cadence,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub paused: bool,
    /// The next slot to fire; it only ever moves forward.
    pub next_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// What became of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotOutcome {
    /// Its run was submitted.
    Fired,
    /// Not run: the previous run was unfinished (`Overlap::Skip`).
    Skipped,
    /// Waiting for the previous run to end (`Overlap::Buffer`).
    Buffered,
    /// Not run: due while nothing fired, and the catch-up policy left it.
    Missed,
}

impl SlotOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotOutcome::Fired => "fired",
            SlotOutcome::Skipped => "skipped",
            SlotOutcome::Buffered => "buffered",
            SlotOutcome::Missed => "missed",
        }
    }
}

impl FromStr for SlotOutcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "fired" => SlotOutcome::Fired,
            "skipped" => SlotOutcome::Skipped,
            "buffered" => SlotOutcome::Buffered,
            "missed" => SlotOutcome::Missed,
            other => return Err(format!("`{other}` is not a slot outcome")),
        })
    }
}

/// The slots due (oldest first) and the first one after them.
pub type Due = (Vec<DateTime<Utc>>, Option<DateTime<Utc>>);

/// A schedule's definition was refused; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schedule: {0}")]
pub struct BadSchedule(pub String);

/// The most slots one pass looks at for one schedule; older due slots
/// beyond it are counted as missed without being listed.
pub const MAX_SLOTS_PER_PASS: usize = 1_000;

impl Cadence {
    /// `--every AGE`: at least one second.
    pub fn every(every: Duration) -> Result<Cadence, BadSchedule> {
        match every.as_secs() {
            0 => Err(BadSchedule("`--every` is at least 1s".into())),
            secs => Ok(Cadence::Every { secs }),
        }
    }

    /// `--cron EXPR [--tz ZONE]`, checked: the expression parses and the
    /// zone is an IANA name (default `UTC`).
    pub fn cron(expr: &str, tz: Option<&str>) -> Result<Cadence, BadSchedule> {
        let cadence = Cadence::Cron {
            expr: expr.trim().to_owned(),
            tz: tz.unwrap_or("UTC").trim().to_owned(),
        };
        cadence.check()?;
        Ok(cadence)
    }

    /// Whether a stored or given cadence is usable.
    pub fn check(&self) -> Result<(), BadSchedule> {
        match self {
            Cadence::Every { secs: 0 } => Err(BadSchedule("`every` is at least 1s".into())),
            Cadence::Every { .. } => Ok(()),
            Cadence::Cron { expr, tz } => {
                parse_cron(expr)?;
                parse_tz(tz)?;
                Ok(())
            }
        }
    }

    /// The first slot strictly after `after`; `anchor` is where intervals
    /// count from. `None` when the expression never matches again.
    pub fn next_after(
        &self,
        anchor: DateTime<Utc>,
        after: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, BadSchedule> {
        match self {
            Cadence::Every { secs } => {
                let step = i64::try_from(*secs).unwrap_or(i64::MAX / 1000).max(1) * 1000;
                // Slots are anchor + k * step for every k, before the
                // anchor too (a backfill reaches back before creation).
                let since = (after - anchor).num_milliseconds();
                let n = since.div_euclid(step) + 1;
                Ok(Some(
                    anchor + chrono::Duration::milliseconds(n.saturating_mul(step)),
                ))
            }
            Cadence::Cron { expr, tz } => {
                let cron = parse_cron(expr)?;
                let zone = parse_tz(tz)?;
                let local = after.with_timezone(&zone);
                Ok(cron
                    .find_next_occurrence(&local, false)
                    .ok()
                    .map(|t| t.with_timezone(&Utc)))
            }
        }
    }

    /// The slots from `first` (itself a slot) up to `now`, oldest first,
    /// at most [`MAX_SLOTS_PER_PASS`]; and the first slot after `now`.
    pub fn due(
        &self,
        anchor: DateTime<Utc>,
        first: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Due, BadSchedule> {
        let mut slots = vec![];
        let mut at = Some(first);
        while let Some(slot) = at.filter(|s| *s <= now) {
            if slots.len() == MAX_SLOTS_PER_PASS {
                // Skip ahead: the rest are counted, not listed.
                return Ok((slots, self.next_after(anchor, now)?));
            }
            slots.push(slot);
            at = self.next_after(anchor, slot)?;
        }
        Ok((slots, at))
    }
}

fn parse_cron(expr: &str) -> Result<croner::Cron, BadSchedule> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(expr)
        .map_err(|e| BadSchedule(format!("cron `{expr}`: {e}")))
}

fn parse_tz(tz: &str) -> Result<chrono_tz::Tz, BadSchedule> {
    tz.parse::<chrono_tz::Tz>().map_err(|_| {
        BadSchedule(format!(
            "`{tz}` is not an IANA time zone (like Europe/Paris)"
        ))
    })
}

impl CatchUp {
    /// `latest`, `one` or `all:N` (N at least 1).
    pub fn parse(text: &str) -> Result<CatchUp, BadSchedule> {
        match text.trim() {
            "latest" => Ok(CatchUp::Latest),
            "one" => Ok(CatchUp::One),
            other => match other.strip_prefix("all:").map(str::parse::<u32>) {
                Some(Ok(n)) if n > 0 => Ok(CatchUp::All(n)),
                _ => Err(BadSchedule(format!(
                    "catch-up `{other}` is not latest, one or all:N (N at least 1)"
                ))),
            },
        }
    }

    /// Which of `due` (oldest first) run; the rest are missed.
    pub fn pick(self, due: &[DateTime<Utc>]) -> Vec<DateTime<Utc>> {
        match (self, due) {
            (_, []) => vec![],
            (CatchUp::Latest, [.., last]) => vec![*last],
            (CatchUp::One, [first, ..]) => vec![*first],
            (CatchUp::All(n), all) => {
                let keep = (n as usize).min(all.len());
                all[all.len() - keep..].to_vec()
            }
        }
    }
}

impl std::fmt::Display for CatchUp {
    /// `latest`, `one` or `all:N`, as [`CatchUp::parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatchUp::Latest => f.write_str("latest"),
            CatchUp::One => f.write_str("one"),
            CatchUp::All(n) => write!(f, "all:{n}"),
        }
    }
}

impl Overlap {
    /// `skip`, `buffer`, `allow` or `cancel`, as [`Overlap::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Buffer => "buffer",
            Overlap::Allow => "allow",
            Overlap::Cancel => "cancel",
        }
    }

    pub fn parse(text: &str) -> Result<Overlap, BadSchedule> {
        Ok(match text.trim() {
            "skip" => Overlap::Skip,
            "buffer" => Overlap::Buffer,
            "allow" => Overlap::Allow,
            "cancel" => Overlap::Cancel,
            other => {
                return Err(BadSchedule(format!(
                    "overlap `{other}` is not skip, buffer, allow or cancel"
                )))
            }
        })
    }
}

impl Schedule {
    /// The idempotency key of the run of `slot`: `schedule:NAME:SLOT`,
    /// the slot in RFC 3339 UTC with seconds.
    pub fn key(name: &str, slot: DateTime<Utc>) -> String {
        format!("schedule:{name}:{}", rfc3339(slot))
    }

    /// The schedule and slot a run's idempotency key names, if a schedule
    /// submitted it.
    pub fn of_key(key: &str) -> Option<(&str, DateTime<Utc>)> {
        // Names hold no `:` (`check_name`); the slot does.
        let (name, slot) = key.strip_prefix("schedule:")?.split_once(':')?;
        let slot = DateTime::parse_from_rfc3339(slot).ok()?.with_timezone(&Utc);
        Some((name, slot))
    }

    /// A schedule's name: 1 to 64 letters, digits, `-`, `_` or `.`.
    pub fn check_name(name: &str) -> Result<(), BadSchedule> {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if name.is_empty() || name.len() > 64 || !name.chars().all(ok) {
            return Err(BadSchedule(format!(
                "name `{name}`: 1 to 64 letters, digits, `-`, `_` or `.`"
            )));
        }
        Ok(())
    }

    /// Its next `n` fire times from its next slot on.
    pub fn upcoming(&self, n: usize) -> Vec<DateTime<Utc>> {
        let mut at = Some(self.next_at);
        let mut out = Vec::with_capacity(n);
        while let Some(t) = at.filter(|_| out.len() < n) {
            out.push(t);
            at = self.cadence.next_after(self.created_at, t).ok().flatten();
        }
        out
    }

    /// The run input of `slot`, fired at `fired_at`.
    pub fn input_of(&self, slot: DateTime<Utc>, fired_at: DateTime<Utc>) -> Value {
        render(&self.input, &rfc3339(slot), &rfc3339(fired_at))
    }
}

/// RFC 3339 UTC with seconds (`2026-11-29T09:00:00Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn render(v: &Value, scheduled_for: &str, fired_at: &str) -> Value {
    match v {
        Value::String(s) => Value::String(
            s.replace("{{ scheduled_for }}", scheduled_for)
                .replace("{{scheduled_for}}", scheduled_for)
                .replace("{{ fired_at }}", fired_at)
                .replace("{{fired_at}}", fired_at),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| render(i, scheduled_for, fired_at))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, i)| (k.clone(), render(i, scheduled_for, fired_at)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
