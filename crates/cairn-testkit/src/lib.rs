//! Test support, dev-only: a fresh SQLite file or a fresh PostgreSQL schema
//! per test, so tests run in parallel against real databases. If no
//! PostgreSQL answers, `.ci/start-postgres` is run once (under a file lock)
//! to start one; `CAIRN_TEST_DATABASE_URL` overrides the server.
//! `PgCluster` (in `pg_cluster.rs`) is a throwaway PostgreSQL server of a
//! test's own, for tests that crash or restart the database.
#![allow(clippy::expect_used)]

mod pg_cluster;
pub use pg_cluster::{pg_bin_dir, ClusterError, PgCluster};

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use sqlx::Connection;

/// The default server of the test suite.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A database a test owns. Keep it alive for the test's duration.
pub struct TestDb {
    pub url: String,
    pub kind: Kind,
    _dir: Option<tempfile::TempDir>,
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
        }
    }

    /// A new, empty schema on the test PostgreSQL server; the URL selects it
    /// through `search_path`.
    pub async fn postgres() -> TestDb {
        let base = pg_base_url();
        let schema = format!("cairn_t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::PgConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("test PostgreSQL at {base} does not answer: {e}"));
        sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
            .execute(&mut conn)
            .await
            .expect("create schema");
        let sep = if base.contains('?') { '&' } else { '?' };
        TestDb {
            url: format!("{base}{sep}options[search_path]={schema}"),
            kind: Kind::Postgres,
            _dir: None,
        }
    }

    /// A PostgreSQL database at `url` that the test owns otherwise (a
    /// `PgCluster`'s, say); nothing is created.
    pub fn postgres_at(url: String) -> TestDb {
        TestDb {
            url,
            kind: Kind::Postgres,
            _dir: None,
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
