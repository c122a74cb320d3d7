//! `PgBouncer`: Debian's `pgbouncer` in transaction mode in front of the
//! test server, for tests of `?pooler=transaction`. It serves a database
//! of its own: a test schema cannot be chosen through it (`search_path` is
//! a startup option, which PgBouncer refuses). Dropping it stops the
//! pooler (by pid) and drops the database.

use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::postgres::PgConnectOptions;
use sqlx::Connection;

use crate::pg_cluster::ClusterError;

/// Every such database's name starts with this; the rest is a UUID v7
/// (its creation time, for the sweep of ones a killed test left).
const PREFIX: &str = "cairn_pgb_";

/// Where Debian installs it.
const BINARY: &str = "/usr/sbin/pgbouncer";

/// A PgBouncer of the test's own, in transaction mode.
#[derive(Debug)]
pub struct PgBouncer {
    child: Child,
    port: u16,
    database: String,
    /// The test server (`pg_base_url`), where the database lives.
    base: String,
    dir: tempfile::TempDir,
}

impl PgBouncer {
    /// Whether the binary is installed (`.ci/run` installs it).
    pub fn installed() -> bool {
        std::path::Path::new(BINARY).is_file()
    }

    /// Creates a fresh database on the test server and starts PgBouncer in
    /// transaction mode in front of it, `pool_size` server connections per
    /// database and user (small, so clients share them), on a free port.
    pub fn start(pool_size: u32) -> Result<PgBouncer, ClusterError> {
        let base = crate::pg_base_url();
        let server = PgConnectOptions::from_str(&base)
            .map_err(|e| ClusterError(format!("the test server's URL {base}: {e}")))?;
        let database = format!("{PREFIX}{}", uuid::Uuid::now_v7().simple());
        on_server(&base, vec![format!("CREATE DATABASE {database}")])?;
        let dir = tempfile::Builder::new()
            .prefix("cairn-pgbouncer-")
            .tempdir()
            .map_err(|e| ClusterError(format!("cannot create a temp dir: {e}")))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| ClusterError(format!("cannot pick a port: {e}")))?;
        let config = format!(
            "[databases]\n* = host={host} port={server_port}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {users}\npool_mode = transaction\n\
             default_pool_size = {pool_size}\nmax_client_conn = 500\n",
            host = server.get_host(),
            server_port = server.get_port(),
            users = dir.path().join("users.txt").display(),
        );
        write(&dir, "users.txt", "\"postgres\" \"\"\n")?;
        write(&dir, "pgbouncer.ini", &config)?;
        let log = std::fs::File::create(dir.path().join("pgbouncer.log"))
            .map_err(|e| ClusterError(format!("cannot create the log: {e}")))?;
        // PgBouncer refuses to run as root: as root, become `postgres`
        // (setpriv execs it, so the pid is PgBouncer's own).
        let mut cmd = match std::fs::metadata("/proc/self").map(|m| m.uid()) {
            Ok(0) => {
                let mut c = Command::new("setpriv");
                c.args([
                    "--reuid=postgres",
                    "--regid=postgres",
                    "--clear-groups",
                    BINARY,
                ]);
                c
            }
            _ => Command::new(BINARY),
        };
        let child = cmd
            .arg(dir.path().join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| ClusterError(format!("cannot start {BINARY}: {e}")))?;
        let bouncer = PgBouncer {
            child,
            port,
            database,
            base,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(ClusterError(format!(
                    "PgBouncer did not listen on {port} within 10 s: {}",
                    bouncer.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(bouncer)
    }

    /// The database through PgBouncer, as Cairn is told to use it.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{}?pooler=transaction",
            self.port, self.database
        )
    }

    /// What PgBouncer wrote (stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }

    /// The process id, for a test that checks what is still running.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.database);
        if let Err(e) = on_server(&self.base, vec![drop]) {
            eprintln!("cairn-testkit: could not drop {}: {e}", self.database);
        }
    }
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> Result<PathBuf, ClusterError> {
    let path = dir.path().join(name);
    let fail = |e: std::io::Error| ClusterError(format!("{}: {e}", path.display()));
    std::fs::write(&path, text).map_err(fail)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).map_err(fail)?;
    // The pooler may run as another user: it must read the directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    Ok(path)
}

/// Runs `sql` on the test server (after dropping databases of this kind
/// that a killed test left more than an hour ago), on a thread of its own
/// so it may be called from inside a Tokio runtime.
fn on_server(base: &str, sql: Vec<String>) -> Result<(), ClusterError> {
    let base = base.to_owned();
    std::thread::spawn(move || -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&base)
                .await
                .map_err(|e| e.to_string())?;
            for stale in stale_databases(&mut conn).await {
                let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {stale} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await;
            }
            for statement in sql {
                sqlx::raw_sql(&statement)
                    .execute(&mut conn)
                    .await
                    .map_err(|e| format!("{statement}: {e}"))?;
            }
            let _ = conn.close().await;
            Ok(())
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the thread panicked".into()))
    .map_err(ClusterError)
}

/// Databases of this kind created more than an hour ago.
async fn stale_databases(conn: &mut sqlx::PgConnection) -> Vec<String> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT datname::text FROM pg_database WHERE datname LIKE 'cairn_pgb_%'",
    )
    .fetch_all(conn)
    .await
    .unwrap_or_default();
    let stale_before = SystemTime::now() - crate::schema::STALE_AFTER;
    names
        .into_iter()
        .filter(|name| {
            let created = uuid::Uuid::try_parse(&name[PREFIX.len()..])
                .ok()
                .and_then(|id| id.get_timestamp())
                .map(|t| {
                    let (secs, nanos) = t.to_unix();
                    UNIX_EPOCH + Duration::new(secs, nanos)
                });
            created.is_some_and(|t| t < stale_before)
        })
        .collect()
}
