//! Streaming standbys of a [`PgCluster`]: made with `pg_basebackup -R`,
//! named (`application_name`) so that the primary can list them in
//! `synchronous_standby_names`, promoted as a failover promotes one; and
//! the primary's side: a standby made synchronous or not, and waits until
//! it streams or has replayed what the primary wrote. Blocking, like the
//! rest of the cluster: SQL goes through the cluster's own `psql`.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::pg_cluster::{output, ClusterError, PgCluster};

/// How long the waits for a standby (streaming, replayed, promoted) last.
const WAIT: Duration = Duration::from_secs(30);

/// Standbys made by this process, so that each has its own name.
static MADE: AtomicUsize = AtomicUsize::new(0);

impl PgCluster {
    /// A streaming standby of this cluster, in a directory of its own, on
    /// a free port: `pg_basebackup -R` (initdb's `pg_hba.conf` trusts
    /// replication connections from 127.0.0.1), then started; it serves
    /// reads (hot standby) once this returns. Its `primary_conninfo` names
    /// it ([`PgCluster::standby_name`]) for `synchronous_standby_names`.
    ///
    /// The primary's `synchronous_standby_names` is not copied: once
    /// promoted, the standby waits for no standby of its own.
    pub fn standby(&self) -> Result<PgCluster, ClusterError> {
        self.standby_through(self.port)
    }

    /// [`PgCluster::standby`], streaming from this cluster through `port`
    /// (a [`crate::CutProxy`] in front of it, which can cut the standby
    /// off while this cluster goes on acknowledging commits).
    pub fn standby_through(&self, port: u16) -> Result<PgCluster, ClusterError> {
        self.standby_with(port, vec![])
    }

    /// [`PgCluster::standby_through`], the standby's server run with `env`
    /// added to its environment (a skewed clock, `pg_faults.rs`).
    pub(crate) fn standby_with(
        &self,
        port: u16,
        env: Vec<(String, String)>,
    ) -> Result<PgCluster, ClusterError> {
        let n = MADE.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("standby_{}_{n}", std::process::id());
        let mut standby = PgCluster::unstarted(Some(name.clone()))?;
        standby.env = env;
        standby.as_postgres("pg_basebackup", |c| {
            c.arg("-D")
                .arg(standby.data_dir())
                .args(["-R", "--checkpoint=fast", "--no-sync", "-X", "stream"])
                .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
                .arg(self.port.to_string());
        })?;
        // `-R` wrote `standby.signal` and a `primary_conninfo` without a
        // name; the last setting in the file wins.
        let settings = format!(
            "primary_conninfo = 'host=127.0.0.1 port={port} user=postgres application_name={name}'\n\
             synchronous_standby_names = ''\n"
        );
        append(&standby.data_dir().join("postgresql.auto.conf"), &settings)?;
        standby.start_on_a_free_port()?;
        Ok(standby)
    }

    /// A standby's `application_name` (what `pg_stat_replication` and
    /// `synchronous_standby_names` call it); `None` for a primary.
    pub fn standby_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Promotes a standby (`pg_ctl promote -w`) and returns once it accepts
    /// writes (out of recovery, not read-only), with how long that took.
    pub fn promote(&mut self) -> Result<Duration, ClusterError> {
        let t = Instant::now();
        self.pg_ctl(&["-w", "-t", "30", "promote"])?;
        self.until("the promoted server to accept writes", || {
            let read_only = self.sql(
                "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool",
            )?;
            Ok(read_only == "f")
        })?;
        Ok(t.elapsed())
    }

    /// On the primary: makes the standby named `standby_name` synchronous
    /// (`synchronous_standby_names = 'FIRST 1 ("name")'`), or none with
    /// `None`, through `ALTER SYSTEM` and a reload. The change reaches the
    /// standby's state a moment later: [`PgCluster::wait_streaming`].
    pub fn set_synchronous(&self, standby_name: Option<&str>) -> Result<(), ClusterError> {
        let set = match standby_name {
            Some(name) => {
                check_name(name)?;
                format!("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (\"{name}\")'")
            }
            None => "ALTER SYSTEM RESET synchronous_standby_names".to_owned(),
        };
        self.sql(&set)?;
        self.sql("SELECT pg_reload_conf()")?;
        Ok(())
    }

    /// On the primary: waits until `pg_stat_replication` shows the standby
    /// named `standby_name` streaming, synchronous (`sync_state = 'sync'`)
    /// or asynchronous as `synchronous` says.
    pub fn wait_streaming(
        &self,
        standby_name: &str,
        synchronous: bool,
    ) -> Result<(), ClusterError> {
        check_name(standby_name)?;
        let want = match synchronous {
            true => "streaming sync",
            false => "streaming async",
        };
        let sql = format!(
            "SELECT state || ' ' || sync_state FROM pg_stat_replication \
             WHERE application_name = '{standby_name}'"
        );
        self.until(&format!("standby {standby_name} to be {want}"), || {
            Ok(self.sql(&sql)? == want)
        })
    }

    /// On the primary: waits until the standby named `standby_name` has
    /// replayed everything the primary had written when this was called
    /// (its `replay_lsn` reached the primary's `pg_current_wal_lsn()`).
    pub fn wait_replayed(&self, standby_name: &str) -> Result<(), ClusterError> {
        check_name(standby_name)?;
        let lsn = self.sql("SELECT pg_current_wal_lsn()")?;
        let sql = format!(
            "SELECT replay_lsn >= '{lsn}'::pg_lsn FROM pg_stat_replication \
             WHERE application_name = '{standby_name}'"
        );
        self.until(&format!("standby {standby_name} to replay {lsn}"), || {
            Ok(self.sql(&sql)? == "t")
        })
    }

    /// Runs `sql` on database `test` with the cluster's `psql` (as
    /// `postgres`, over TCP); what it prints, unaligned, without headers
    /// and trimmed: one value for a one-value query.
    pub fn sql(&self, sql: &str) -> Result<String, ClusterError> {
        let out = output(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
                .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-p"])
                .arg(self.port.to_string())
                .arg("-c")
                .arg(sql),
        )?;
        Ok(out.trim().to_owned())
    }

    /// Polls `done` every 50 ms until it says yes, for at most [`WAIT`]; an
    /// error counts as not yet (a server starting up refuses connections)
    /// and is reported if the time runs out.
    fn until(
        &self,
        what: &str,
        mut done: impl FnMut() -> Result<bool, ClusterError>,
    ) -> Result<(), ClusterError> {
        let t = Instant::now();
        let mut last = None;
        loop {
            match done() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => last = Some(e),
            }
            if t.elapsed() > WAIT {
                let last = last
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default();
                return Err(ClusterError(format!(
                    "waited {WAIT:?} for {what}{last}\nserver log:\n{}",
                    crate::pg_cluster::tail(&self.log(), 20)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A standby name this file can quote: letters, digits and `_`.
fn check_name(name: &str) -> Result<(), ClusterError> {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Ok(());
    }
    Err(ClusterError(format!(
        "standby name {name:?}: only letters, digits and `_`"
    )))
}

/// Appends `text` to the file at `path` (which the `postgres` user keeps
/// owning).
fn append(path: &Path, text: &str) -> Result<(), ClusterError> {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| ClusterError(format!("cannot append to {}: {e}", path.display())))
}
