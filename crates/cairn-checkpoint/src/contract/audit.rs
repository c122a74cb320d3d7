//! The audit: every decision, refusal and change a principal made.

use async_trait::async_trait;
use cairn_core::{AuditEntry, AuditFilter};

use crate::Result;

/// The audit. Entries come from three writers, each in the transaction of
/// what it records: a run event whose actor names a channel (`via`), a
/// change to a principal (`PeopleStore`), and a refusal ([`record`]).
///
/// [`record`]: AuditStore::record
#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Records an entry that changes nothing else (a refusal); its `id`
    /// and `at` are the store's.
    async fn record(&self, entry: &AuditEntry) -> Result<()>;

    /// Entries, oldest first, as `filter` selects.
    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>>;
}
