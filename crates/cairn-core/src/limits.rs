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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_input_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
            max_answer_bytes: 256 << 10,
            max_journal_item_bytes: 1 << 20,
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

#[cfg(test)]
mod tests {
    use super::*;

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
