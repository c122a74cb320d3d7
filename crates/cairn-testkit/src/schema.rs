//! The lifetime of a test's PostgreSQL schema: dropped when its `TestDb` is
//! (also when the test panics), and, once per test process, a sweep of
//! `cairn_t_*` schemas older than an hour that a killed test run left, so
//! the suite can run a thousand times on one server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::Connection;

/// Every test schema's name starts with this; the rest is a UUID v7, whose
/// first 48 bits are its creation time (so the sweep needs no catalog
/// column PostgreSQL does not have).
pub const PREFIX: &str = "cairn_t_";

/// A schema older than this is a leftover: no test runs that long.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

/// How long a drop waits for a lock (a connection of the test still in a
/// transaction) before giving up and leaving the schema to the sweep.
const LOCK_TIMEOUT: &str = "5s";

/// A fresh schema name, stamped with the current time.
pub fn new_name() -> String {
    format!("{PREFIX}{}", uuid::Uuid::now_v7().simple())
}

/// When the schema `name` was created, if it is a test schema's name.
pub fn created_at(name: &str) -> Option<SystemTime> {
    let id = uuid::Uuid::try_parse(name.strip_prefix(PREFIX)?).ok()?;
    let (secs, nanos) = id.get_timestamp()?.to_unix();
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

fn drop_sql(schema: &str) -> String {
    format!("SET lock_timeout = '{LOCK_TIMEOUT}'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")
}

/// Drops `schema` on the server at `base` with a short blocking connection
/// of its own. It runs on a thread of its own because `Drop` often runs
/// inside a Tokio runtime, which must not be blocked on from within. A
/// failure is reported on stderr, never a panic (a panic in a drop during
/// unwinding aborts the test binary); the sweep removes what is left.
pub fn drop_blocking(base: &str, schema: &str) {
    let (base, sql) = (base.to_owned(), drop_sql(schema));
    let done = std::thread::spawn(move || -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let mut conn =
                tokio::time::timeout(Duration::from_secs(5), sqlx::PgConnection::connect(&base))
                    .await
                    .map_err(|_| "connect timed out".to_owned())?
                    .map_err(|e| e.to_string())?;
            sqlx::raw_sql(&sql)
                .execute(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            let _ = conn.close().await;
            Ok(())
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the drop thread panicked".to_owned()));
    if let Err(e) = done {
        eprintln!("cairn-testkit: could not drop test schema {schema} (the sweep will): {e}");
    }
}

/// Drops every test schema created before `now - STALE_AFTER`. Best effort:
/// another process sweeping at the same time may win a drop.
pub async fn sweep(conn: &mut sqlx::PgConnection, now: SystemTime) -> Vec<String> {
    let names: Vec<String> = match sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname, $1)",
    )
    .bind(PREFIX)
    .fetch_all(&mut *conn)
    .await
    {
        Ok(names) => names,
        Err(_) => return Vec::new(),
    };
    let mut dropped = Vec::new();
    for name in names {
        let stale = created_at(&name)
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if stale
            && sqlx::raw_sql(&drop_sql(&name))
                .execute(&mut *conn)
                .await
                .is_ok()
        {
            dropped.push(name);
        }
    }
    dropped
}

/// Sweeps once per test process (the first `TestDb::postgres()` does it).
pub async fn sweep_once(conn: &mut sqlx::PgConnection) {
    static SWEPT: AtomicBool = AtomicBool::new(false);
    if !SWEPT.swap(true, Ordering::SeqCst) {
        sweep(conn, SystemTime::now()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_carries_its_creation_time() {
        let before = SystemTime::now() - Duration::from_millis(1);
        let name = new_name();
        let at = created_at(&name).expect("a test schema name");
        assert!(at >= before && at <= SystemTime::now() + Duration::from_millis(1));
        assert_eq!(created_at("public"), None);
        assert_eq!(created_at("cairn_t_notauuid"), None);
    }
}
