//! Values a run publishes for its callers (DBOS's `set_event`): a step sets
//! `key` to a JSON value, recorded as a `value_published` event in the
//! run's event stream (so a watcher sees it as it happens), and a caller
//! reads the newest value of a key (`GET /v1/runs/{id}/values/{key}`)
//! instead of polling outputs. A Rust agent calls
//! [`crate::StepContext::publish`]; a `command` step's program writes a
//! line `cairn-publish: {"key": …, "value": …}` on stderr, recorded as
//! soon as it is read.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{Attempt, StepIdx};

/// A program's stderr line that publishes a value starts with this.
pub const PUBLISH_PREFIX: &str = "cairn-publish:";

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;

/// The largest value, as compact JSON (a larger one is refused, and a
/// program's line naming one is skipped with a warning).
pub const MAX_VALUE_BYTES: usize = 256 * 1024;

/// A value a run published: the newest of its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    pub key: String,
    pub value: Value,
    /// The step (and attempt) that published it.
    pub idx: StepIdx,
    pub attempt: Attempt,
    pub at: DateTime<Utc>,
}

/// A value that cannot be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPublish(pub String);

/// Why [`crate::StepContext::publish`] published nothing.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Bad(#[from] BadPublish),
    /// The journal refused the event (the lease lost, the database).
    #[error(transparent)]
    Journal(#[from] crate::JournalError),
    /// A context without the executor's services (a unit test's).
    #[error("this step context has no journal to publish through")]
    NoJournal,
}

/// Checks a key (1 to 256 bytes, no NUL) and a value's size.
pub fn check(key: &str, value: &Value) -> Result<(), BadPublish> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES || key.contains('\0') {
        return Err(BadPublish(format!(
            "a published key must be 1 to {MAX_KEY_BYTES} bytes with no NUL character"
        )));
    }
    crate::check_size("a published value", value, MAX_VALUE_BYTES)
        .map_err(|e| BadPublish(e.to_string()))?;
    if crate::json_has_nul(value) {
        return Err(BadPublish("a published value holds a NUL character".into()));
    }
    Ok(())
}

/// What a program's stderr `line` publishes, if it is a publish line:
/// the key and value, or why it cannot be published.
pub fn parse_line(line: &str) -> Option<Result<(String, Value), BadPublish>> {
    let json = line.trim().strip_prefix(PUBLISH_PREFIX)?;
    #[derive(Deserialize)]
    struct Line {
        key: String,
        value: Value,
    }
    Some(match serde_json::from_str::<Line>(json.trim()) {
        Ok(l) => check(&l.key, &l.value).map(|()| (l.key, l.value)),
        Err(e) => Err(BadPublish(format!(
            "`{PUBLISH_PREFIX}` takes {{\"key\": …, \"value\": …}}: {e}"
        ))),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_publish_line_names_a_key_and_a_value() {
        let line = r#"  cairn-publish: {"key": "draft", "value": {"v": 1}}"#;
        assert_eq!(
            parse_line(line).unwrap().unwrap(),
            ("draft".to_owned(), json!({"v": 1}))
        );
        assert!(parse_line("progress: 40%").is_none());
        assert!(parse_line("cairn-publish: {\"key\": \"\", \"value\": 1}")
            .unwrap()
            .is_err());
        assert!(parse_line("cairn-publish: not json").unwrap().is_err());
        let big = json!("x".repeat(MAX_VALUE_BYTES + 1));
        assert!(check("k", &big).is_err());
    }
}
