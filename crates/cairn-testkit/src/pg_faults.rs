//! The faults a [`PgCluster`] can be dealt beyond restarts and failovers,
//! for the fault campaign: every server process paused (SIGSTOP) and
//! continued, a standby whose wall clock runs ahead (Debian's libfaketime
//! preloaded into its server), a write-ahead log on a [`SmallDisk`] that
//! can fill, and a server brought back if such a fault stopped it.

use std::path::PathBuf;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::pg_cluster::{ClusterError, PgCluster};
use crate::small_disk::SmallDisk;

/// Debian's libfaketime (package `faketime`), the multi-threaded build,
/// if this machine has it.
pub fn libfaketime() -> Option<PathBuf> {
    let dirs = std::fs::read_dir("/usr/lib").ok()?;
    dirs.filter_map(|d| d.ok())
        .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
        .find(|lib| lib.is_file())
}

/// The environment that runs a program `offset` off the true wall clock
/// (libfaketime's syntax: `+1h`, `-30s`), its monotonic clock left alone.
pub fn skewed_clock(offset: &str) -> Option<Vec<(String, String)>> {
    let lib = libfaketime()?;
    Some(vec![
        ("LD_PRELOAD".into(), lib.display().to_string()),
        ("FAKETIME".into(), offset.into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ])
}

impl PgCluster {
    /// [`PgCluster::start`] with its write-ahead log on `disk` (segments of
    /// 1 MB), so that filling the disk stops the server's writes.
    pub fn start_with_wal_on(disk: &SmallDisk) -> Result<PgCluster, ClusterError> {
        let wal = disk.dir_for_postgres("pg_wal")?;
        PgCluster::start_with_wal(Some(&wal))
    }

    /// A streaming standby of this cluster ([`PgCluster::standby`]) whose
    /// server runs `offset` off the true clock (`+1h`): once promoted,
    /// `now()` jumps. `None` where libfaketime is not installed.
    pub fn skewed_standby(&self, offset: &str) -> Option<Result<PgCluster, ClusterError>> {
        let env = skewed_clock(offset)?;
        Some(self.standby_with(self.port, env))
    }

    /// Pauses every process of the server (SIGSTOP): the postmaster first,
    /// so it starts nothing new, then each of its children. Connections
    /// stay open; nothing is answered until [`PgCluster::resume`].
    pub fn pause(&self) -> Result<(), ClusterError> {
        let postmaster = self.postmaster()?;
        signal(postmaster, Signal::SIGSTOP)?;
        for child in children(postmaster) {
            let _ = signal(child, Signal::SIGSTOP);
        }
        Ok(())
    }

    /// Continues what [`PgCluster::pause`] stopped, children first.
    pub fn resume(&self) -> Result<(), ClusterError> {
        let postmaster = self.postmaster()?;
        for child in children(postmaster) {
            let _ = signal(child, Signal::SIGCONT);
        }
        signal(postmaster, Signal::SIGCONT)
    }

    /// Starts the server again if a fault stopped it (a full disk makes
    /// PostgreSQL panic, and a recovery without room gives up); a running
    /// server is left alone.
    pub fn revive(&mut self) -> Result<(), ClusterError> {
        if self.pg_ctl(&["status"]).is_ok() {
            return Ok(());
        }
        self.pg_ctl(&["-w", "-t", "30", "start"])
    }

    /// The postmaster's pid: the first line of `postmaster.pid`.
    fn postmaster(&self) -> Result<i32, ClusterError> {
        let file = self.data_dir().join("postmaster.pid");
        let text = std::fs::read_to_string(&file)
            .map_err(|e| ClusterError(format!("{}: {e}", file.display())))?;
        text.lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| ClusterError(format!("{}: no pid on its first line", file.display())))
    }
}

fn signal(pid: i32, sig: Signal) -> Result<(), ClusterError> {
    kill(Pid::from_raw(pid), sig).map_err(|e| ClusterError(format!("kill -{sig} {pid}: {e}")))
}

/// The pids whose parent is `parent` (`/proc/PID/stat`'s fourth field).
fn children(parent: i32) -> Vec<i32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `PID (COMM) STATE PPID ...`; COMM may hold spaces and parens.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().nth(1) == Some(&parent.to_string())
        })
        .collect()
}
