//! Process-wide counts of what the store sent to its database, for
//! `/metrics` (`cairn_store_statements_total`) and `cairn-bench
//! --in-flight`: every statement Cairn itself sends (a storage script's, a
//! fast path's, the SQLite writer thread's, a `NOTIFY`), not the `BEGIN`
//! and `COMMIT` around them nor sqlx's own pings.

use std::sync::atomic::{AtomicU64, Ordering};

static STATEMENTS: AtomicU64 = AtomicU64::new(0);

/// Statements this process sent to its databases so far.
pub fn statements() -> u64 {
    STATEMENTS.load(Ordering::Relaxed)
}

/// Counts `n` statements about to be sent.
pub(crate) fn sent(n: u64) {
    STATEMENTS.fetch_add(n, Ordering::Relaxed);
}
