//! Threads: the one rule for what a thread id may be ([`ThreadId`]), and
//! the documents of `cairn threads show` and `GET /v1/threads/{id}`.

use serde::{Deserialize, Serialize};

use cairn_core::RunRecord;

/// The longest thread id, in bytes.
pub const MAX_THREAD_ID_BYTES: usize = 256;

/// A thread id: an opaque string of 1 to [`MAX_THREAD_ID_BYTES`] bytes
/// with no NUL character (PostgreSQL cannot store one). Every front end
/// checks a thread id here, before anything is stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ThreadId(String);

impl ThreadId {
    /// Checks `id`; the error names the field `thread_id`.
    pub fn new(id: impl Into<String>) -> Result<ThreadId, BadThreadId> {
        Self::for_field(id, "thread_id")
    }

    /// Checks `id`; the error names `field` (`--thread` on the command line).
    pub fn for_field(id: impl Into<String>, field: &'static str) -> Result<ThreadId, BadThreadId> {
        let id = id.into();
        let problem = if id.is_empty() {
            "is empty".to_owned()
        } else if id.len() > MAX_THREAD_ID_BYTES {
            format!("is {} bytes long", id.len())
        } else if id.contains('\0') {
            "contains a NUL character".to_owned()
        } else {
            return Ok(ThreadId(id));
        };
        Err(BadThreadId { field, problem })
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::str::FromStr for ThreadId {
    type Err = BadThreadId;

    fn from_str(s: &str) -> Result<ThreadId, BadThreadId> {
        ThreadId::new(s)
    }
}

impl std::fmt::Display for ThreadId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ThreadId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A thread id that breaks the rule; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{field}` {problem}: a thread id is 1 to {MAX_THREAD_ID_BYTES} bytes with no NUL character"
)]
pub struct BadThreadId {
    /// The field that held it (`thread_id`, `--thread`).
    pub field: &'static str,
    pub problem: String,
}

/// Checks an optional thread id, keeping it a `String`.
pub(crate) fn check(id: Option<String>) -> Result<Option<String>, BadThreadId> {
    id.map(|t| ThreadId::new(t).map(ThreadId::into_string))
        .transpose()
}

/// One thread: its runs, oldest first, and what they add up to. The JSON
/// of `cairn threads show --json` and `GET /v1/threads/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadView {
    pub thread_id: String,
    /// As `cairn runs list --json` prints them.
    pub runs: Vec<RunRecord>,
    pub totals: ThreadTotals,
    /// The thread's budget and what its runs spent, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<cairn_checkpoint::ThreadBudget>,
}

/// What a thread's runs add up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTotals {
    pub runs: u64,
    /// Tokens reported by the runs' steps.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the steps' priced model calls cost (absent when nothing was
    /// priced).
    #[serde(default, skip_serializing_if = "cairn_core::Usd::is_zero")]
    pub cost_usd: cairn_core::Usd,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        let long = "é".repeat(128);
        assert_eq!(long.len(), 256);
        for ok in ["a", "user/42 chat #7", "🙂", long.as_str()] {
            assert_eq!(ThreadId::new(ok).unwrap().as_str(), ok);
        }
        let too_long = format!("{long}x");
        for (bad, problem) in [
            ("", "is empty"),
            (too_long.as_str(), "is 257 bytes long"),
            ("a\0b", "contains a NUL character"),
        ] {
            let e = ThreadId::new(bad).unwrap_err();
            assert_eq!(e.problem, problem);
            assert!(e.to_string().starts_with("`thread_id` "), "{e}");
        }
        let e = ThreadId::for_field("", "--thread").unwrap_err();
        assert!(e.to_string().starts_with("`--thread` is empty"), "{e}");
    }
}
