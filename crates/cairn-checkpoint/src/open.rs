//! Opening a store from a URL: `sqlite://PATH` (the embedded default) or
//! `postgres://…`. Connection failures name the database, never a password.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

use crate::{Error, PgStore, Result, SqliteStore, Store};

/// Which backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Create a missing SQLite file, or Cairn's tables in a PostgreSQL
    /// database without them (commands that write). Read-only commands
    /// pass `false` and get [`Error::MissingFile`] or [`Error::NoSchema`].
    pub create: bool,
    /// How long to wait for the database to answer.
    pub connect_timeout: Duration,
    /// Pool size (PostgreSQL).
    pub max_connections: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: true,
            connect_timeout: Duration::from_secs(5),
            max_connections: 8,
        }
    }
}

/// A parsed database URL.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Sqlite(PathBuf),
    Postgres(Box<PgConnectOptions>),
}

pub(crate) fn parse_url(url: &str) -> Result<Target> {
    let bad = |reason: &str| Error::BadUrl {
        url: redact(url),
        reason: reason.to_owned(),
    };
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        let path = path.split('?').next().unwrap_or_default();
        if path.is_empty() {
            return Err(bad("no file path after sqlite://"));
        }
        return Ok(Target::Sqlite(PathBuf::from(path)));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let opts = PgConnectOptions::from_str(url).map_err(|e| bad(&e.to_string()))?;
        return Ok(Target::Postgres(Box::new(opts)));
    }
    Err(bad("unknown scheme"))
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => url.split('@').next_back().unwrap_or_default().to_owned(),
    }
}

/// Opens the store a URL names and applies its migrations.
pub async fn open(url: &str, opts: &OpenOptions) -> Result<Arc<dyn Store>> {
    match parse_url(url)? {
        Target::Sqlite(path) => Ok(Arc::new(
            SqliteStore::open(&path, opts.create, opts.connect_timeout).await?,
        )),
        Target::Postgres(pg) => Ok(Arc::new(PgStore::connect_with(*pg, opts).await?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_explain() {
        assert!(
            matches!(parse_url("sqlite://cairn.db"), Ok(Target::Sqlite(p)) if p.as_os_str() == "cairn.db")
        );
        assert!(
            matches!(parse_url("sqlite:///tmp/x.db"), Ok(Target::Sqlite(p)) if p.as_os_str() == "/tmp/x.db")
        );
        assert!(matches!(
            parse_url("postgres://u@localhost:5432/db"),
            Ok(Target::Postgres(_))
        ));
        for bad in [
            "mysql://x",
            "cairn.db",
            "sqlite://",
            "postgres://u@host:notaport/db",
        ] {
            let err = parse_url(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("is not a database URL"), "{bad}: {err}");
        }
    }

    #[test]
    fn redact_hides_passwords() {
        let r = redact("postgres://alice:s3cret@db:5432/x");
        assert!(
            !r.contains("s3cret") && r.contains("alice") && r.contains("db:5432"),
            "{r}"
        );
    }
}
