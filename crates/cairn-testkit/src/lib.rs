//! Test support, dev-only: a fresh SQLite file or a fresh PostgreSQL schema
//! per test, so tests run in parallel against real databases. If no
//! PostgreSQL answers, `.ci/start-postgres` is run once (under a file lock)
//! to start one; `CAIRN_TEST_DATABASE_URL` overrides the server.
//! `PgCluster` (in `pg_cluster.rs`) is a throwaway PostgreSQL server of a
//! test's own, for tests that crash or restart the database, with streaming
//! standbys to promote (in `pg_standby.rs`) and the campaign's faults
//! (paused, skewed, a full disk: `pg_faults.rs`, `small_disk.rs`);
//! `CutProxy` (in `proxy.rs`) a TCP proxy that loses one request or answer
//! on cue, delays, resets and redirects; `SlowModel`
//! (in `slow_model.rs`) an OpenAI-speaking model server that streams slowly,
//! `RateLimitedModel` (in `rate_limited.rs`) one that enforces a rate limit
//! with `Retry-After`, `PacedModel` (in `paced_model.rs`) one that streams
//! at a fixed pace and notes when each answer's first and last token left;
//! `PgBouncer` (in `pgbouncer.rs`) a transaction-mode pooler in front of a
//! database of a test's own. A test's schema
//! is dropped with its `TestDb`, and stale ones are swept (`schema.rs`).
//! `events::complete` fills a hand-built event out to its writers' shape.
//! `browser::Browser` drives a headless Chromium for the console's
//! end-to-end tests.
#![allow(clippy::expect_used)]

pub mod browser;
mod delegating_model;
pub mod events;
pub mod otlp;
mod paced_model;
mod pg_cluster;
mod pg_faults;
mod pg_standby;
mod pgbouncer;
mod proxy;
mod rate_limited;
pub mod schema;
mod skipped;
mod slow_model;
mod small_disk;
mod snapshot;
pub use delegating_model::DelegatingModel;
pub use paced_model::{PacedCall, PacedModel};
pub use pg_cluster::{pg_bin_dir, ClusterError, PgCluster};
pub use pg_faults::{libfaketime, skewed_clock};
pub use pgbouncer::PgBouncer;
pub use proxy::{Cut, CutProxy};
pub use rate_limited::{RateLimitedModel, Seen};
pub use skipped::{skip, skip_to, SKIP_LOG};
pub use slow_model::SlowModel;
pub use small_disk::SmallDisk;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use sqlx::Connection;

/// The default server of the test suite.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A database a test owns. Keep it alive for the test's duration: dropping
/// it removes the SQLite file's directory or drops the PostgreSQL schema
/// (also when the test panics), so runs of the suite leave nothing behind.
pub struct TestDb {
    pub url: String,
    pub kind: Kind,
    _dir: Option<tempfile::TempDir>,
    /// The schema this `TestDb` created (and drops).
    schema: Option<String>,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(schema) = self.schema.take() {
            schema::drop_blocking(&pg_base_url(), &schema);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

impl TestDb {
    /// A new SQLite file in a fresh temporary directory.
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("cairn.db").display());
        TestDb {
            url,
            kind: Kind::Sqlite,
            _dir: Some(dir),
            schema: None,
        }
    }

    /// A new SQLite file `cairn.db` in `dir`, which the test owns (a
    /// [`SmallDisk`], say): nothing is removed with the `TestDb`.
    pub fn sqlite_in(dir: &std::path::Path) -> TestDb {
        TestDb {
            url: format!("sqlite://{}", dir.join("cairn.db").display()),
            kind: Kind::Sqlite,
            _dir: None,
            schema: None,
        }
    }

    /// A new, empty schema on the test PostgreSQL server; the URL selects it
    /// through `search_path`. It is dropped with the `TestDb`. The first call
    /// in a process also sweeps schemas older than an hour (left by a test
    /// process that was killed before its drops ran).
    pub async fn postgres() -> TestDb {
        let base = pg_base_url();
        let name = schema::new_name();
        let mut conn = sqlx::PgConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("test PostgreSQL at {base} does not answer: {e}"));
        schema::sweep_once(&mut conn).await;
        sqlx::raw_sql(&format!("CREATE SCHEMA {name}"))
            .execute(&mut conn)
            .await
            .expect("create schema");
        let _ = conn.close().await;
        let sep = if base.contains('?') { '&' } else { '?' };
        TestDb {
            url: format!("{base}{sep}options[search_path]={name}"),
            kind: Kind::Postgres,
            _dir: None,
            schema: Some(name),
        }
    }

    /// Loads `dump` into this `TestDb`'s schema (PostgreSQL only): a plain
    /// `pg_dump --schema=FROM --inserts` whose schema `from` is renamed to
    /// this one (a database an earlier release made, for upgrade tests).
    pub async fn load_dump(&self, dump: &str, from: &str) {
        let schema = self
            .schema
            .as_deref()
            .expect("load_dump: a PostgreSQL TestDb");
        let sql = dump
            .replace(&format!("CREATE SCHEMA {from};"), "")
            .replace(&format!("{from}."), &format!("{schema}."));
        let mut conn = sqlx::PgConnection::connect(&pg_base_url())
            .await
            .expect("connect to the test PostgreSQL");
        sqlx::raw_sql(&sql)
            .execute(&mut conn)
            .await
            .expect("load the dump");
        let _ = conn.close().await;
    }

    /// The schema this `TestDb` created and will drop (PostgreSQL only).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// A PostgreSQL database at `url` that the test owns otherwise (a
    /// `PgCluster`'s, say); nothing is created or dropped.
    pub fn postgres_at(url: String) -> TestDb {
        TestDb {
            url,
            kind: Kind::Postgres,
            _dir: None,
            schema: None,
        }
    }

    /// Both backends, for conformance tests.
    pub async fn both() -> [TestDb; 2] {
        [TestDb::sqlite(), TestDb::postgres().await]
    }

    pub async fn of(kind: Kind) -> TestDb {
        match kind {
            Kind::Sqlite => TestDb::sqlite(),
            Kind::Postgres => TestDb::postgres().await,
        }
    }

    /// Runs raw SQL on this database (to damage it on purpose, for example).
    pub async fn exec(&self, sql: &str) {
        match self.kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect sqlite");
                sqlx::raw_sql(sql).execute(&mut c).await.expect("raw sql");
            }
            Kind::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect postgres");
                sqlx::raw_sql(sql).execute(&mut c).await.expect("raw sql");
            }
        }
    }

    /// The first column of the first row of `sql` as text (`None`: no row
    /// or NULL); write the query so the column is text (`::text`).
    pub async fn scalar(&self, sql: &str) -> Option<String> {
        match self.kind {
            Kind::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("connect sqlite");
                sqlx::query_scalar::<_, Option<String>>(sql)
                    .fetch_optional(&mut c)
                    .await
                    .expect("query")
                    .flatten()
            }
            Kind::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect postgres");
                sqlx::query_scalar::<_, Option<String>>(sql)
                    .fetch_optional(&mut c)
                    .await
                    .expect("query")
                    .flatten()
            }
        }
    }

    /// A directory for the test's other files (SQLite tests only have one;
    /// PostgreSQL tests get a new one).
    pub fn dir(&self) -> PathBuf {
        match &self._dir {
            Some(d) => d.path().to_owned(),
            None => std::env::temp_dir(),
        }
    }
}

/// Defines `mod NAME { sqlite, postgres }`: two tests that call
/// `NAME(Kind::Sqlite)` and `NAME(Kind::Postgres)`, an async fn of the caller's.
#[macro_export]
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::Kind::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::Kind::Postgres).await
            }
        }
    )*};
}

fn answers(url: &str) -> bool {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(3),
                sqlx::PgConnection::connect(&url),
            )
            .await
            .is_ok_and(|r| r.is_ok())
        })
    })
    .join()
    .unwrap_or(false)
}

/// The URL of a PostgreSQL server that answers, starting one if needed.
pub fn pg_base_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("CAIRN_TEST_DATABASE_URL") {
            return url;
        }
        if answers(DEFAULT_PG_URL) {
            return DEFAULT_PG_URL.to_owned();
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.ci/start-postgres");
        let out = Command::new("flock")
            .arg("/tmp/cairn-start-postgres.lock")
            .arg("bash")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let url = String::from_utf8_lossy(&out.stdout)
            .trim()
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        if !out.status.success() || url.is_empty() {
            panic!(
                "no PostgreSQL answers at {DEFAULT_PG_URL} and {} could not start one: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        url
    })
    .clone()
}

/// Serves every connection `listener` accepts with `serve`, each on a
/// thread of its own, from a thread that accepts for as long as the
/// process lives (the test doubles' servers).
pub(crate) fn serve_each<F>(listener: std::net::TcpListener, serve: F)
where
    F: Fn(std::net::TcpStream) + Send + Sync + 'static,
{
    let serve = std::sync::Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let serve = std::sync::Arc::clone(&serve);
            std::thread::spawn(move || serve(stream));
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    async fn exists(schema: &str) -> bool {
        let mut conn = sqlx::PgConnection::connect(&pg_base_url())
            .await
            .expect("connect");
        sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
        )
        .bind(schema)
        .fetch_one(&mut conn)
        .await
        .expect("query pg_namespace")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_test_schema_is_dropped_with_its_test_db() {
        let db = TestDb::postgres().await;
        let name = db.schema().expect("a schema").to_owned();
        // Tables in it too: the drop cascades.
        db.exec("CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
            .await;
        assert!(exists(&name).await);
        drop(db);
        assert!(!exists(&name).await, "{name} outlived its TestDb");
    }

    #[test]
    fn a_test_schema_is_dropped_when_the_test_panics() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let name = std::sync::Mutex::new(String::new());
        let panicked = std::panic::catch_unwind(|| {
            rt.block_on(async {
                let db = TestDb::postgres().await;
                *name.lock().expect("lock") = db.schema().expect("a schema").to_owned();
                panic!("the test fails while it holds its database");
            })
        });
        assert!(panicked.is_err());
        let name = name.into_inner().expect("lock");
        assert!(name.starts_with(schema::PREFIX), "{name}");
        assert!(
            !rt.block_on(exists(&name)),
            "{name} outlived a panicking test"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sweep_drops_only_test_schemas_older_than_an_hour() {
        let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
        let since_epoch = two_hours_ago
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970");
        let ts = uuid::Timestamp::from_unix(
            uuid::NoContext,
            since_epoch.as_secs(),
            since_epoch.subsec_nanos(),
        );
        let stale = format!("{}{}", schema::PREFIX, uuid::Uuid::new_v7(ts).simple());
        let fresh = TestDb::postgres().await;
        let fresh_name = fresh.schema().expect("a schema").to_owned();
        let mut conn = sqlx::PgConnection::connect(&pg_base_url())
            .await
            .expect("connect");
        sqlx::raw_sql(&format!(
            "CREATE SCHEMA {stale}; CREATE TABLE {stale}.t (x int)"
        ))
        .execute(&mut conn)
        .await
        .expect("create a stale schema");
        let dropped = schema::sweep(&mut conn, SystemTime::now()).await;
        assert!(dropped.contains(&stale), "{stale} not swept: {dropped:?}");
        assert!(
            !dropped.contains(&fresh_name),
            "a live test's schema was swept"
        );
        assert!(!exists(&stale).await);
        assert!(exists(&fresh_name).await);
    }
}
