//! sqlx for PostgreSQL and SQLite only. The `sqlx` crate itself declares its
//! MySQL driver (`sqlx-mysql`, which depends on `rsa`) as an optional
//! dependency and names it in weak features (`sqlx-mysql?/chrono`, ...);
//! Cargo puts such a dependency in Cargo.lock even when nothing enables it
//! (rust-lang/cargo#10801), and cargo-deny then reports `rsa`'s advisory.
//! This crate re-exports what `sqlx` 0.8.6's `lib.rs` does for our features
//! (tokio, rustls, PostgreSQL, SQLite, json, uuid, chrono, migrate) from
//! `sqlx-core`, `sqlx-postgres` and `sqlx-sqlite` directly, and the
//! `migrate!` macro from `sqlx-macros` built with `migrate` alone (its other
//! features name `sqlx-mysql` the same way). The root `Cargo.toml` declares
//! it as `sqlx = { package = "cairn-sqlx", .. }`, so `sqlx::...` paths, and
//! the `::sqlx::migrate::...` paths `migrate!` expands to, resolve here.
//! Not re-exported: `any`, the query macros and the derives (unused).

pub use sqlx_core::acquire::Acquire;
pub use sqlx_core::arguments::{Arguments, IntoArguments};
pub use sqlx_core::column::{Column, ColumnIndex};
pub use sqlx_core::connection::{ConnectOptions, Connection};
pub use sqlx_core::database::{self, Database};
pub use sqlx_core::describe::Describe;
pub use sqlx_core::error::{self, Error, Result};
pub use sqlx_core::executor::{Execute, Executor};
pub use sqlx_core::from_row::FromRow;
pub use sqlx_core::migrate;
pub use sqlx_core::pool::{self, Pool};
pub use sqlx_core::query::{query, query_with};
pub use sqlx_core::query_as::{query_as, query_as_with};
pub use sqlx_core::query_builder::{self, QueryBuilder};
pub use sqlx_core::query_scalar::{query_scalar, query_scalar_with};
pub use sqlx_core::raw_sql::{raw_sql, RawSql};
pub use sqlx_core::row::Row;
pub use sqlx_core::statement::Statement;
pub use sqlx_core::transaction::{Transaction, TransactionManager};
pub use sqlx_core::type_info::TypeInfo;
pub use sqlx_core::types::Type;
pub use sqlx_core::value::{Value, ValueRef};
pub use sqlx_core::Either;
/// `sqlx::migrate!("dir")`: the migrations of `dir` embedded at compile time.
pub use sqlx_macros::migrate;
pub use sqlx_postgres::{
    self as postgres, PgConnection, PgExecutor, PgPool, PgTransaction, Postgres,
};
pub use sqlx_sqlite::{
    self as sqlite, Sqlite, SqliteConnection, SqliteExecutor, SqlitePool, SqliteTransaction,
};

/// Types that can be bound and decoded (`sqlx::types::Json`, ...).
pub mod types {
    pub use sqlx_core::types::*;
}

/// Encoding bound values.
pub mod encode {
    pub use sqlx_core::encode::{Encode, IsNull};
}
pub use self::encode::Encode;

/// Decoding column values.
pub mod decode {
    pub use sqlx_core::decode::Decode;
}
pub use self::decode::Decode;

/// The query builders' types.
pub mod query {
    pub use sqlx_core::query::{Map, Query};
    pub use sqlx_core::query_as::QueryAs;
    pub use sqlx_core::query_scalar::QueryScalar;
}

/// The traits most code imports.
pub mod prelude {
    pub use super::{
        Acquire, ConnectOptions, Connection, Decode, Encode, Executor, FromRow, IntoArguments, Row,
        Statement, Type,
    };
}
