//! Maintenance: compaction, vacuum, the integrity check, the replication
//! setup, periodic tasks.

use std::time::Duration;

use async_trait::async_trait;

use crate::{CompactPolicy, Compacted, Replication, Result};

/// Maintenance: compaction, vacuum, the integrity check, the replication
/// setup, periodic tasks.
#[async_trait]
pub trait MaintenanceStore: Send + Sync + 'static {
    /// Removes what `policy` names (or, dry, counts it), never what an
    /// unfinished run needs, in small batches; the rows removed by table.
    async fn compact(&self, policy: &CompactPolicy) -> Result<Compacted>;

    /// Gives the space compaction freed back: SQLite rewrites the file
    /// (`VACUUM`, then a truncating checkpoint of its write-ahead log), so
    /// it shrinks; PostgreSQL vacuums Cairn's tables (`VACUUM`), which
    /// makes the space reusable without shrinking the files. Runs beside
    /// other work, waiting for writers; no transaction may hold it.
    async fn vacuum(&self) -> Result<()>;

    /// The database's own integrity check: SQLite's `PRAGMA quick_check`,
    /// the problems it found (none when healthy). PostgreSQL checks its
    /// pages itself; nothing to report.
    async fn check(&self) -> Result<Vec<String>>;

    /// The replication setup as Cairn's own connection sees it: whether
    /// the server takes writes, `synchronous_standby_names`, this
    /// connection's `synchronous_commit`, and the standbys streaming from
    /// it (`pg_stat_replication`). `None` on SQLite. Reads only.
    async fn replication(&self) -> Result<Option<Replication>>;

    /// Takes periodic `task` for this interval if it is due (by the
    /// database clock) and nobody took it yet: `true` for exactly one
    /// caller across processes, which then does the work; the task is due
    /// again after `every`.
    async fn claim_task(&self, task: &str, every: Duration, owner: &str) -> Result<bool>;
}
