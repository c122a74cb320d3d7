//! `PgCluster`: a throwaway PostgreSQL cluster a test owns, started from the
//! installed binaries on a free port, so the test can crash and restart it
//! without touching the shared server on 127.0.0.1:5432.

use std::fmt;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Why a cluster could not be made or driven. The message says what to do.
#[derive(Debug)]
pub struct ClusterError(pub(crate) String);

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ClusterError {}

/// The newest `/usr/lib/postgresql/*/bin` (version-sorted), if any.
pub fn pg_bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name
                .split('.')
                .map(|p| p.parse::<u64>().ok())
                .collect::<Option<Vec<_>>>()?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").is_file().then_some((version, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, bin)| bin)
}

/// A PostgreSQL cluster of its own (trust auth, user `postgres`, database
/// `test`) in a fresh temporary directory, listening on 127.0.0.1 only.
/// Dropping it stops the server (immediately) and removes the directory.
///
/// Needs root (`initdb` refuses root, so the server runs as the `postgres`
/// user through `runuser`) and the binaries under `/usr/lib/postgresql`.
/// The methods block; from async code that is fine for a test (about 1 s).
pub struct PgCluster {
    pub(crate) bin: PathBuf,
    pub(crate) port: u16,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) running: bool,
    /// A standby's `application_name` (`pg_standby.rs`); `None` for a
    /// primary made by [`PgCluster::start`].
    pub(crate) name: Option<String>,
    /// The server's environment beyond ours (a skewed clock,
    /// `pg_faults.rs`), in force from its next start.
    pub(crate) env: Vec<(String, String)>,
}

impl fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgCluster")
            .field("port", &self.port)
            .field("dir", &self.dir.path())
            .field("running", &self.running)
            .field("name", &self.name)
            .finish()
    }
}

impl PgCluster {
    /// `initdb`, start, and create database `test`. A port taken by someone
    /// else between picking it and starting is retried on another port.
    pub fn start() -> Result<PgCluster, ClusterError> {
        PgCluster::start_with_wal(None)
    }

    /// [`PgCluster::start`], its write-ahead log in `wal` (a directory the
    /// `postgres` user may create, a small disk of the test's, say) in
    /// segments of 1 MB, if given.
    pub(crate) fn start_with_wal(wal: Option<&std::path::Path>) -> Result<PgCluster, ClusterError> {
        let mut cluster = PgCluster::unstarted(None)?;
        cluster.as_postgres("initdb", |c| {
            c.arg("-D")
                .arg(cluster.data_dir())
                .args(["--auth=trust", "-U", "postgres", "--no-sync"])
                .args(["--locale=C", "--encoding=UTF8"]);
            if let Some(wal) = wal {
                c.arg("--waldir").arg(wal).arg("--wal-segsize=1");
            }
        })?;
        if wal.is_some() {
            // A WAL of a few segments between checkpoints, so that the
            // disk fills only when the test fills it.
            let conf = cluster.data_dir().join("postgresql.auto.conf");
            let mut text = std::fs::read_to_string(&conf).unwrap_or_default();
            text.push_str("max_wal_size = '16MB'\nmin_wal_size = '2MB'\n");
            std::fs::write(&conf, text)
                .map_err(|e| ClusterError(format!("{}: {e}", conf.display())))?;
        }
        cluster.start_on_a_free_port()?;
        run(Command::new(cluster.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(cluster.port.to_string())
            .arg("test"))?;
        Ok(cluster)
    }

    /// A cluster not yet made: the binaries found, root checked, an empty
    /// directory the `postgres` user owns.
    pub(crate) fn unstarted(name: Option<String>) -> Result<PgCluster, ClusterError> {
        let bin = pg_bin_dir().ok_or_else(|| {
            ClusterError(
                "no PostgreSQL binaries under /usr/lib/postgresql/*/bin \
                 (install the `postgresql` package, as .ci/start-postgres expects)"
                    .into(),
            )
        })?;
        let uid = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .map_err(|e| ClusterError(format!("cannot tell who we are (/proc/self): {e}")))?;
        if uid != 0 {
            return Err(ClusterError(format!(
                "PgCluster needs root (uid {uid} here) to run initdb and pg_ctl as the \
                 `postgres` user through runuser"
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("cairn-pgcluster-")
            .tempdir()
            .map_err(|e| ClusterError(format!("cannot create a temp dir: {e}")))?;
        run(Command::new("chown")
            .arg("postgres:postgres")
            .arg(dir.path()))?;
        Ok(PgCluster {
            bin,
            port: 0,
            dir,
            running: false,
            name,
            env: vec![],
        })
    }

    /// Starts the made cluster on a free port. A port taken by someone else
    /// between picking it and starting is retried on another port.
    pub(crate) fn start_on_a_free_port(&mut self) -> Result<(), ClusterError> {
        // Counted as running from the first try on, so that Drop stops a
        // server that came up too late for `pg_ctl -w`.
        self.running = true;
        let mut tries = 0;
        loop {
            tries += 1;
            self.port = free_port()?;
            match self.pg_ctl(&["-w", "-t", "30", "start"]) {
                Ok(()) => return Ok(()),
                Err(e) if tries == 3 => return Err(e),
                Err(_) => {
                    let _ = self.pg_ctl(&["-w", "-m", "immediate", "stop"]);
                }
            }
        }
    }

    /// `postgres://postgres@127.0.0.1:PORT/test`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/test", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data directory (`PGDATA`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("db")
    }

    /// The server log so far (all starts and stops append to it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_file()).unwrap_or_default()
    }

    /// A crash-like restart: `pg_ctl -m immediate restart` kills the server
    /// without a shutdown checkpoint (every client connection is severed),
    /// then starts it again, which replays the WAL. Returns when the server
    /// accepts connections again, with how long that took.
    pub fn restart_immediate(&mut self) -> Result<Duration, ClusterError> {
        let t = Instant::now();
        // Still `running` if this fails: Drop then tries to stop it anyway.
        self.pg_ctl(&["-w", "-t", "30", "-m", "immediate", "restart"])?;
        Ok(t.elapsed())
    }

    /// A fast restart (`pg_ctl -m fast restart`): clients are disconnected,
    /// in-flight transactions roll back, a shutdown checkpoint is written,
    /// and the server starts again. Returns when it accepts connections.
    pub fn restart_fast(&mut self) -> Result<Duration, ClusterError> {
        let t = Instant::now();
        self.pg_ctl(&["-w", "-t", "30", "-m", "fast", "restart"])?;
        Ok(t.elapsed())
    }

    /// A clean stop (`-m fast`: a shutdown checkpoint, clients disconnected).
    pub fn stop(&mut self) -> Result<(), ClusterError> {
        if self.running {
            self.pg_ctl(&["-w", "-t", "30", "-m", "fast", "stop"])?;
            self.running = false;
        }
        Ok(())
    }

    /// A crash-like stop (`-m immediate`: no shutdown checkpoint, clients
    /// severed), as a failover finds a lost primary.
    pub fn stop_immediate(&mut self) -> Result<(), ClusterError> {
        if self.running {
            self.pg_ctl(&["-w", "-t", "30", "-m", "immediate", "stop"])?;
            self.running = false;
        }
        Ok(())
    }

    /// Starts a stopped cluster again on the same port.
    pub fn start_again(&mut self) -> Result<(), ClusterError> {
        if !self.running {
            self.running = true;
            self.pg_ctl(&["-w", "-t", "30", "start"])?;
        }
        Ok(())
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("log")
    }

    pub(crate) fn pg_ctl(&self, args: &[&str]) -> Result<(), ClusterError> {
        // `syncfs`: after a crash the server flushes its data directory
        // with one syncfs(2) instead of an fsync per file (seconds on a busy
        // disk); commits are flushed exactly as by default.
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -c recovery_init_sync_method=syncfs -p {} -k {}",
            self.port,
            self.dir.path().display()
        );
        self.as_postgres("pg_ctl", |c| {
            c.arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.log_file())
                .arg("-o")
                .arg(&opts)
                .args(args);
        })
        .map_err(|e| ClusterError(format!("{e}\nserver log:\n{}", tail(&self.log(), 20))))
    }

    /// Runs one of the cluster's programs as the `postgres` user, from a
    /// directory that user can enter.
    pub(crate) fn as_postgres(
        &self,
        program: &str,
        args: impl FnOnce(&mut Command),
    ) -> Result<(), ClusterError> {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"])
            .arg(self.bin.join(program))
            .current_dir(self.dir.path())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        args(&mut c);
        run(&mut c)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.running {
            let _ = self.pg_ctl(&["-w", "-t", "30", "-m", "immediate", "stop"]);
        }
        // The TempDir removes the data directory after this.
    }
}

fn free_port() -> Result<u16, ClusterError> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ClusterError(format!("cannot bind 127.0.0.1:0 to pick a port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| ClusterError(format!("no local address: {e}")))
}

pub(crate) fn run(c: &mut Command) -> Result<(), ClusterError> {
    output(c).map(drop)
}

/// Runs `c`; its standard output if it succeeds.
pub(crate) fn output(c: &mut Command) -> Result<String, ClusterError> {
    let shown = format!("{c:?}");
    let out: Output = c
        .output()
        .map_err(|e| ClusterError(format!("cannot run {shown}: {e}")))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(ClusterError(format!(
        "{shown} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )))
}

pub(crate) fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
