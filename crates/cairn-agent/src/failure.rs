//! What a journal failure makes of a step: the one mapping from
//! `JournalError` to the step's `ErrorInfo`, shared by the turn loop, its
//! budget checks, `ask_human` and `delegate`.

use cairn_core::{ErrorInfo, ErrorKind, JournalError};

/// A journal failure as the step's error: retried when the store may
/// answer next time, not when the same turn would fail the same way.
pub(crate) fn journal_failure(e: JournalError) -> ErrorInfo {
    match e {
        // Another process holds the run: this one must stop; its commit will
        // be refused by the same fence.
        JournalError::LeaseLost => ErrorInfo::new(ErrorKind::Agent, e.to_string(), true),
        JournalError::Storage(_) => ErrorInfo::new(ErrorKind::Agent, e.to_string(), true),
        // A model text or tool result with a NUL: named as such, not retried
        // (the same turn would produce it again), as a step output's is.
        JournalError::Unstorable(_) => ErrorInfo::new(ErrorKind::Unstorable, e.to_string(), false),
        // A model text over the journal item cap (which is also the step
        // output's by default): `too_large`, as a step output over its cap
        // is, not a generic agent failure; not retried.
        JournalError::TooLarge(_) => ErrorInfo::new(ErrorKind::TooLarge, e.to_string(), false),
        other => ErrorInfo::new(ErrorKind::Agent, other.to_string(), false),
    }
}
