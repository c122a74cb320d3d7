//! The database's replication setup as Cairn's own connection sees it
//! (`MaintenanceStore::replication`): whether the server takes writes, the
//! settings that decide whether a commit waits for a standby, and the
//! standbys streaming from it. Facts only; what they mean for a failover
//! is the reader's (`cairn doctor`, `/readyz`). PostgreSQL only: SQLite
//! has no replication.

use crate::sql::{query, Conn, Dialect};
use crate::{Error, Result};

/// A PostgreSQL server's replication setup, read on one of Cairn's own
/// connections (so `synchronous_commit` is the one Cairn's commits use:
/// `?durability=process` turns it off). The JSON of `cairn doctor --json`'s
/// `replication`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Replication {
    /// `pg_is_in_recovery()`: the server is a standby (or still replaying
    /// its WAL) and refuses writes.
    pub in_recovery: bool,
    /// `transaction_read_only` of a new transaction on Cairn's connection:
    /// on for a standby, and for a primary set read-only
    /// (`default_transaction_read_only = on`, as some failover tools demote
    /// one).
    pub read_only: bool,
    /// `synchronous_standby_names`: the standbys a commit waits for; empty
    /// when commits wait for none.
    pub synchronous_standby_names: String,
    /// `synchronous_commit` of Cairn's connection: `on`, `remote_apply` or
    /// `remote_write` wait for the synchronous standbys; `local` and `off`
    /// do not.
    pub synchronous_commit: String,
    /// `pg_stat_replication`: the standbys streaming from this server.
    pub standbys: Vec<Standby>,
}

/// A standby connected to the server (a row of `pg_stat_replication`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Standby {
    /// Its `application_name`, what `synchronous_standby_names` lists.
    pub application_name: String,
    /// `streaming`, `catchup`, `startup`, `backup`, `stopping`; `None`
    /// when Cairn's role may not see it (it needs `pg_monitor`).
    pub state: Option<String>,
    /// `sync`, `quorum`, `potential` or `async`; `None` as for `state`.
    pub sync_state: Option<String>,
}

impl Replication {
    /// The server takes writes: out of recovery and not read-only.
    pub fn writable(&self) -> bool {
        !self.in_recovery && !self.read_only
    }

    /// Cairn's commits wait for a standby that streams: one is streaming
    /// as `sync` (or `quorum`), and Cairn's `synchronous_commit` waits for
    /// it. Then a failover to that standby loses no acknowledged commit.
    pub fn synchronous(&self) -> bool {
        let waits = matches!(
            self.synchronous_commit.as_str(),
            "on" | "remote_apply" | "remote_write"
        );
        waits
            && self.standbys.iter().any(|s| {
                s.state.as_deref() == Some("streaming")
                    && matches!(s.sync_state.as_deref(), Some("sync" | "quorum"))
            })
    }
}

/// The facts, or `None` on SQLite.
pub(super) async fn replication_in(c: &mut Conn<'_>) -> Result<Option<Replication>> {
    if c.dialect() == Dialect::Sqlite {
        return Ok(None);
    }
    let settings = c
        .fetch_optional(query(
            "SELECT pg_is_in_recovery()::text AS in_recovery, \
                    current_setting('transaction_read_only') AS read_only, \
                    current_setting('synchronous_standby_names') AS names, \
                    current_setting('synchronous_commit') AS sync_commit",
        ))
        .await?
        .ok_or_else(|| Error::Statement("the settings query returned no row".into()))?;
    let rows = c
        .fetch_all(query(
            "SELECT application_name, state, sync_state FROM pg_stat_replication \
             ORDER BY application_name, pid",
        ))
        .await?;
    let standbys = rows
        .iter()
        .map(|r| {
            Ok(Standby {
                application_name: r.opt_text("application_name")?.unwrap_or_default(),
                state: r.opt_text("state")?,
                sync_state: r.opt_text("sync_state")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Replication {
        in_recovery: settings.text("in_recovery")? == "true",
        read_only: settings.text("read_only")? == "on",
        synchronous_standby_names: settings.text("names")?,
        synchronous_commit: settings.text("sync_commit")?,
        standbys,
    }))
}
