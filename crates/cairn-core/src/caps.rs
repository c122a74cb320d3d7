//! Size caps on what Cairn stores: run inputs, step outputs, journal items
//! and answers.
//! Exceeding one is a typed error naming the cap and the size, raised before
//! anything is written, so nothing partial is stored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The caps, in bytes of compact JSON. Defaults: 1 MiB for a run input, a
/// step output and a journal item, 256 KiB for an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_input_bytes: usize,
    pub max_output_bytes: usize,
    pub max_answer_bytes: usize,
    /// One journal item of an agent step (a tool result, a model's text).
    pub max_journal_item_bytes: usize,
    /// A thread's earlier runs a step is given, at most: the newest ones
    /// (older runs are not even read).
    pub thread_history_runs: u32,
    /// The bytes of thread history (earlier runs' inputs and final outputs,
    /// as compact JSON) a step is given, at most: the newest whole runs
    /// that fit. An `llm` step windows it further by its token budget.
    pub thread_history_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_input_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
            max_answer_bytes: 256 << 10,
            max_journal_item_bytes: 1 << 20,
            thread_history_runs: 50,
            thread_history_bytes: 1 << 20,
        }
    }
}

/// A value over its cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is {size} bytes, over the cap of {cap} bytes")]
pub struct TooLarge {
    pub what: &'static str,
    pub size: usize,
    pub cap: usize,
}

/// Checks the compact JSON size of `value` against `cap`.
pub fn check_size(what: &'static str, value: &Value, cap: usize) -> Result<(), TooLarge> {
    let size = value.to_string().len();
    if size > cap {
        Err(TooLarge { what, size, cap })
    } else {
        Ok(())
    }
}

/// A value that holds a NUL character (`\u0000`), which Cairn refuses to
/// store: PostgreSQL's `text` and `jsonb` cannot hold one, and both
/// databases must keep the same values, so SQLite refuses it too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} contains a NUL character (\\u0000), which Cairn cannot store; nothing was stored")]
pub struct Unstorable {
    /// The field that holds it (`the run input`, `the idempotency key`, …).
    pub what: String,
}

/// Whether a text holds a NUL character.
pub fn has_nul(text: &str) -> bool {
    text.as_bytes().contains(&0)
}

/// Refuses a text with a NUL character, naming the field.
pub fn check_text(what: &str, text: &str) -> Result<(), Unstorable> {
    if has_nul(text) {
        return Err(Unstorable {
            what: what.to_owned(),
        });
    }
    Ok(())
}

/// Refuses a JSON value with a NUL character in any string or key.
pub fn check_storable(what: &str, value: &Value) -> Result<(), Unstorable> {
    if json_has_nul(value) {
        return Err(Unstorable {
            what: what.to_owned(),
        });
    }
    Ok(())
}

/// Whether any string or object key inside `value` holds a NUL character.
pub fn json_has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => has_nul(s),
        Value::Array(items) => items.iter().any(json_has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| has_nul(k) || json_has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_anywhere_in_a_value_is_refused_by_name() {
        for bad in [
            serde_json::json!("a\u{0}b"),
            serde_json::json!({"k": ["ok", {"deep": "x\u{0}"}]}),
            serde_json::json!({"ke\u{0}y": 1}),
        ] {
            let err = check_storable("the run input", &bad)
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                err.as_deref(),
                Some("the run input contains a NUL character (\\u0000), which Cairn cannot store; nothing was stored")
            );
        }
        assert!(check_storable("x", &serde_json::json!({"k": ["\\u0000 is text"]})).is_ok());
        assert!(check_text("by", "alice\u{0}").is_err());
        assert!(check_text("by", "alice").is_ok());
    }

    #[test]
    fn a_value_over_its_cap_names_both_numbers() {
        let v = Value::String("x".repeat(100));
        assert!(check_size("run input", &v, 102).is_ok());
        let err = check_size("run input", &v, 50).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("run input is 102 bytes, over the cap of 50 bytes")
        );
    }
}
