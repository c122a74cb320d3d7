//! `TestDb::snapshot`: a copy of a test database as it stands now, for
//! tests that model a replica which stopped receiving writes at this
//! point (an asynchronous standby promoted after the primary was lost:
//! every write acknowledged after the snapshot is gone from it).

use std::process::Command;

use crate::{pg_base_url, pg_bin_dir, Kind, TestDb};

impl TestDb {
    /// A new database holding what this one holds now. SQLite: `VACUUM
    /// INTO` a file in a fresh temporary directory. PostgreSQL: `pg_dump`
    /// of this schema loaded into a new schema of the same server.
    pub async fn snapshot(&self) -> TestDb {
        match self.kind {
            Kind::Sqlite => {
                let copy = TestDb::sqlite();
                let path = copy
                    .url
                    .strip_prefix("sqlite://")
                    .expect("a sqlite:// URL")
                    .replace('\'', "''");
                self.exec(&format!("VACUUM INTO '{path}'")).await;
                copy
            }
            Kind::Postgres => {
                let schema = self
                    .schema()
                    .expect("snapshot: a PostgreSQL TestDb of its own");
                let bin = pg_bin_dir().expect("snapshot: pg_dump under /usr/lib/postgresql");
                let out = Command::new(bin.join("pg_dump"))
                    .arg(format!("--dbname={}", pg_base_url()))
                    .args(["--schema", schema, "--inserts", "--no-owner"])
                    .output()
                    .expect("run pg_dump");
                assert!(
                    out.status.success(),
                    "pg_dump failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let dump = String::from_utf8(out.stdout).expect("a UTF-8 dump");
                // psql's meta-commands (`\restrict KEY` in current
                // releases) are not SQL.
                let dump: String = dump
                    .lines()
                    .filter(|l| !l.starts_with('\\'))
                    .map(|l| format!("{l}\n"))
                    .collect();
                let copy = TestDb::postgres().await;
                copy.load_dump(&dump, schema).await;
                copy
            }
        }
    }
}
