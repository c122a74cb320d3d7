//! Signals: named messages from the world to a run. A `signal` step
//! ([`SignalDef`]) waits for one name or any of several; a sender names
//! its [`Target`] (a run, the run submitted with an idempotency key, or
//! the one unfinished run of a thread). A signal sent before its wait
//! opens is buffered; per run and name, the oldest is consumed first, at
//! the commit of the step that consumes it. Pure: storage keeps and
//! consumes them, the executor decides the step's end from [`Heard`].

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{Attempt, RunId, StepIdx};

/// The longest signal name, idempotency id, correlation key or thread id
/// a sender may give, in bytes.
pub const MAX_SIGNAL_TEXT: usize = 256;

/// How long a signal nobody consumed is kept (buffered) after it was sent:
/// seven days. Past that it is never consumed, and retention deletes it.
pub const SIGNAL_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most unconsumed signals one run may hold; a send beyond it is
/// refused (`SignalRefused`) with nothing stored.
pub const MAX_BUFFERED_PER_RUN: u32 = 1_000;

/// A `signal` step: it waits for `signal`, or for any of `any_of`, and its
/// output is the consumed signal's payload (with `any_of`,
/// `{"name": …, "payload": …}`). Its agent's `timeout_ms` bounds the wait;
/// at the timeout the step outputs `default`, or fails (`deadline`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalDef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

impl SignalDef {
    /// What is wrong with it, if anything: no name, both forms, a bad name.
    pub fn problem(&self) -> Option<String> {
        match (&self.signal, self.any_of.is_empty()) {
            (None, true) => return Some("needs `signal` or `any_of`".into()),
            (Some(_), false) => return Some("takes `signal` or `any_of`, not both".into()),
            _ => {}
        }
        self.names()
            .iter()
            .find_map(|n| check_name(n).err())
            .map(|e| e.0)
    }

    /// The names it waits for.
    pub fn names(&self) -> Vec<String> {
        match &self.signal {
            Some(name) => vec![name.clone()],
            None => self.any_of.clone(),
        }
    }

    /// The wait a step of this kind asks for, bounded by `timeout_ms`.
    pub fn listen(&self, timeout_ms: Option<u64>) -> Listen {
        Listen {
            names: self.names(),
            any: self.signal.is_none(),
            timeout: timeout_ms.map(Duration::from_millis),
            default: self.default.clone(),
        }
    }
}

/// What a step waits for ([`crate::Stop::Listen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub names: Vec<String>,
    /// `any_of`: the output names the signal that came.
    pub any: bool,
    /// From the first time the wait opened, at this attempt.
    pub timeout: Option<Duration>,
    /// The output at the timeout; `None`: the step fails.
    pub default: Option<Value>,
}

impl Listen {
    /// The step's output for the signal `s`.
    pub fn output(&self, s: &Signal) -> Value {
        match self.any {
            true => serde_json::json!({"name": s.name, "payload": s.payload}),
            false => s.payload.clone(),
        }
    }
}

/// Who a signal is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Run(RunId),
    /// `key:K`: the run submitted with idempotency key K.
    Key(String),
    /// `thread:T`: the one unfinished run of thread T.
    Thread(String),
}

impl Target {
    /// Reads `RUN_ID`, `key:K` or `thread:T`.
    pub fn parse(s: &str) -> Result<Target, BadSignal> {
        let text = |t: &str, what: &str| match check_text(t, what) {
            Ok(()) => Ok(t.to_owned()),
            Err(e) => Err(e),
        };
        if let Some(k) = s.strip_prefix("key:") {
            return text(k, "a correlation key").map(Target::Key);
        }
        if let Some(t) = s.strip_prefix("thread:") {
            return text(t, "a thread id").map(Target::Thread);
        }
        s.parse::<RunId>().map(Target::Run).map_err(|_| {
            BadSignal(format!(
                "`{s}` is not a target: give a run id, `key:IDEMPOTENCY_KEY` or `thread:ID`"
            ))
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Run(r) => write!(f, "{r}"),
            Target::Key(k) => write!(f, "key:{k}"),
            Target::Thread(t) => write!(f, "thread:{t}"),
        }
    }
}

/// A signal as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    /// Its idempotency id: the sender's, or one Cairn made.
    pub id: String,
    pub run_id: RunId,
    pub name: String,
    pub payload: Value,
    pub sent_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_by: Option<String>,
    /// When a step's commit consumed it; `None`: buffered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_by: Option<(StepIdx, Attempt)>,
}

/// What a `signal` step finds when it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    /// The oldest unconsumed signal of one of its names: the step's commit
    /// consumes it.
    Signal(Box<Signal>),
    /// Its wait timed out with none.
    TimedOut,
    /// Nothing yet: the step waits.
    Nothing,
}

/// A signal name, id or key that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadSignal(pub String);

/// A signal name: 1 to 256 bytes, printable, no NUL.
pub fn check_name(name: &str) -> Result<(), BadSignal> {
    check_text(name, "a signal name")
}

/// An idempotency id, key or thread a sender gives: 1 to 256 bytes, no
/// NUL character.
pub fn check_text(t: &str, what: &str) -> Result<(), BadSignal> {
    if t.is_empty() || t.len() > MAX_SIGNAL_TEXT || t.contains('\0') {
        return Err(BadSignal(format!(
            "{what} must be 1 to {MAX_SIGNAL_TEXT} bytes with no NUL character (got {} bytes)",
            t.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_a_run_a_key_or_a_thread() {
        let run = RunId::new();
        assert_eq!(Target::parse(&run.to_string()).unwrap(), Target::Run(run));
        assert_eq!(
            Target::parse("key:order-7").unwrap(),
            Target::Key("order-7".into())
        );
        assert_eq!(
            Target::parse("thread:t:1").unwrap(),
            Target::Thread("t:1".into())
        );
        for bad in ["", "key:", "thread:", "nope", "key:a\0b"] {
            assert!(Target::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Target::Key("k".into()).to_string(), "key:k");
    }

    #[test]
    fn a_signal_step_names_one_or_any() {
        let one = SignalDef {
            signal: Some("paid".into()),
            any_of: vec![],
            default: None,
        };
        assert_eq!(one.problem(), None);
        let any = SignalDef {
            signal: None,
            any_of: vec!["a".into(), "b".into()],
            default: Some(Value::Null),
        };
        assert_eq!(any.names(), ["a", "b"]);
        let s = Signal {
            id: "i".into(),
            run_id: RunId::new(),
            name: "b".into(),
            payload: serde_json::json!(3),
            sent_at: Utc::now(),
            sent_by: None,
            consumed_at: None,
            consumed_by: None,
        };
        assert_eq!(
            any.listen(None).output(&s),
            serde_json::json!({"name": "b", "payload": 3})
        );
        assert_eq!(one.listen(Some(5)).output(&s), serde_json::json!(3));
        assert_eq!(one.listen(Some(5)).timeout, Some(Duration::from_millis(5)));
        let neither = SignalDef {
            signal: None,
            any_of: vec![],
            default: None,
        };
        assert!(neither.problem().is_some());
        let both = SignalDef {
            any_of: vec!["x".into()],
            ..one.clone()
        };
        assert!(both.problem().is_some());
        let empty = SignalDef {
            any_of: vec!["".into()],
            signal: None,
            default: None,
        };
        assert!(empty.problem().is_some());
    }
}
