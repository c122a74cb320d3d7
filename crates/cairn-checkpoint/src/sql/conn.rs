//! Connections and rows of either database behind one face, so a storage
//! script is written once: `Pool` opens transactions, `Conn` runs a
//! [`Query`](super::Query), and `Row` reads a column as Cairn's types
//! whatever the backend stores (a UUID, a JSON document and a time are
//! native on PostgreSQL and text on SQLite).

use std::cell::Cell;
use std::future::Future;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgConnection, PgPool, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqlitePool, SqliteRow};
use sqlx::types::Json;
use sqlx::{Postgres, Row as _, Sqlite, Transaction, TypeInfo, ValueRef};
use uuid::Uuid;

use cairn_core::{Corruption, RunId};

use super::query::{Dialect, Param, Query};
use crate::{Backend, Error, Result};

/// The pool of one store.
#[derive(Clone)]
pub enum Pool {
    Sqlite(SqlitePool),
    /// The pool, how statements are sent, and the lanes single statements
    /// take first (`lanes.rs`).
    Postgres(PgPool, Prepare, std::sync::Arc<super::Lanes>),
}

/// How statements are sent to PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepare {
    /// Named prepared statements, cached per connection: a direct
    /// connection, or a pooler in session mode.
    Cached,
    /// The unnamed statement only, and every statement inside a
    /// transaction: a pooler in transaction mode (PgBouncer) gives each
    /// transaction whichever server connection is free, where a named
    /// statement of another client may exist or ours may not
    /// (`?pooler=transaction`, DESIGN.md "Storage").
    Unnamed,
}

impl Prepare {
    fn persistent(self) -> bool {
        self == Prepare::Cached
    }
}

/// An open transaction.
pub enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>, Prepare),
}

/// A connection to run statements on: a transaction's, or one taken from
/// the pool for a single read.
pub enum Conn<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection, Prepare),
    /// SQLite through its C interface: the writer thread's own connection
    /// (`sqlite/writer.rs`), where a script's statements need no hop to
    /// sqlx's thread each. Locked per statement (only that thread uses it;
    /// the lock makes the reference `Send`). The `&str` names the file.
    Direct(&'c std::sync::Mutex<rusqlite::Connection>, &'c str),
}

/// A pooled connection, for a single statement that needs no transaction.
pub enum Held {
    Sqlite(sqlx::pool::PoolConnection<Sqlite>),
    Postgres(sqlx::pool::PoolConnection<Postgres>, Prepare),
    /// A PostgreSQL lane (`lanes.rs`): kept for the next statement when
    /// this one answered whole ([`Held::keep`]).
    Lane(super::lanes::Lane),
}

impl Pool {
    pub fn backend(&self) -> Backend {
        match self {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(..) => Backend::Postgres,
        }
    }

    /// A transaction that will write. SQLite takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so writers queue on the busy timeout instead of
    /// failing mid-transaction; PostgreSQL locks rows as the script reads
    /// them (`{for_update}`).
    pub async fn write(&self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Postgres(p, prepare, _) => Tx::Postgres(p.begin().await?, *prepare),
        })
    }

    /// A transaction that only reads, from one snapshot.
    pub async fn read(&self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin().await?),
            Pool::Postgres(p, prepare, _) => Tx::Postgres(
                p.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await?,
                *prepare,
            ),
        })
    }

    pub async fn acquire(&self) -> Result<Held> {
        Ok(match self {
            Pool::Sqlite(p) => Held::Sqlite(p.acquire().await?),
            Pool::Postgres(p, Prepare::Cached, lanes) => match lanes.take(p).await? {
                Some(lane) => Held::Lane(lane),
                None => Held::Postgres(p.acquire().await?, Prepare::Cached),
            },
            Pool::Postgres(p, prepare, _) => Held::Postgres(p.acquire().await?, *prepare),
        })
    }

    /// An idle lane, or a new one while fewer than the store's count are
    /// open; `None` on SQLite, behind a transaction-mode pooler, or when
    /// every lane is busy.
    pub async fn lane(&self) -> Result<Option<super::lanes::Lane>> {
        match self {
            Pool::Postgres(p, Prepare::Cached, lanes) => lanes.take(p).await,
            _ => Ok(None),
        }
    }

    /// Whether even a single statement must run in a transaction of its
    /// own ([`Prepare::Unnamed`]): outside one, a transaction-mode pooler
    /// may send its execution to another server connection than its parse.
    pub fn needs_transactions(&self) -> bool {
        matches!(self, Pool::Postgres(_, Prepare::Unnamed, _))
    }
}

impl Tx {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Tx::Sqlite(t) => Conn::Sqlite(t),
            Tx::Postgres(t, prepare) => Conn::Postgres(t, *prepare),
        }
    }

    pub async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.commit().await?,
            Tx::Postgres(t, _) => t.commit().await?,
        }
        Ok(())
    }

    pub async fn rollback(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.rollback().await?,
            Tx::Postgres(t, _) => t.rollback().await?,
        }
        Ok(())
    }
}

impl Held {
    pub fn conn(&mut self) -> Result<Conn<'_>> {
        Ok(match self {
            Held::Sqlite(c) => Conn::Sqlite(c),
            Held::Postgres(c, prepare) => Conn::Postgres(c, *prepare),
            Held::Lane(lane) => Conn::Postgres(
                lane.conn().ok_or_else(|| {
                    Error::Statement("a lane was used after it was given back".into())
                })?,
                Prepare::Cached,
            ),
        })
    }

    /// The statement answered whole: a lane is kept for the next one (a
    /// pooled connection goes back to its pool either way).
    pub fn keep(self) {
        if let Held::Lane(lane) = self {
            lane.keep();
        }
    }
}

thread_local! {
    /// Whether a statement of a [`Conn`] returned `Pending` in the current
    /// poll of a script (the writer-thread rule, `script/mod.rs`).
    static STATEMENT_PENDED: Cell<bool> = const { Cell::new(false) };
}

/// Whether a statement pended since the last call (which clears it): a
/// script's poll that returned `Pending` without one pended on something
/// else.
pub fn statement_pended() -> bool {
    STATEMENT_PENDED.replace(false)
}

/// Awaits a statement's future, noting each `Pending` it returns.
async fn statement<F: Future>(f: F) -> F::Output {
    crate::counters::sent(1);
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| {
        let polled = f.as_mut().poll(cx);
        if polled.is_pending() {
            STATEMENT_PENDED.set(true);
        }
        polled
    })
    .await
}

/// Binds values in placeholder order; each backend says how it stores a
/// JSON document and a UUID (text on SQLite, native on PostgreSQL).
macro_rules! arguments {
    ($args:ty, $values:expr, json: |$j:ident| $json:expr, uuid: |$u:ident| $uuid:expr) => {{
        use sqlx::Arguments;
        let mut args = <$args>::default();
        for v in $values {
            let bound = match v {
                Param::Text(t) => args.add(t.as_deref()),
                Param::Int(i) => args.add(*i),
                Param::Float(f) => args.add(*f),
                Param::Bool(b) => args.add(*b),
                Param::Json($j) => args.add($json),
                Param::Uuid($u) => args.add($uuid),
            };
            // Encoding these types into an argument list cannot fail.
            debug_assert!(bound.is_ok());
        }
        args
    }};
}

fn sqlite_args<'q>(values: &[&'q Param]) -> SqliteArguments<'q> {
    arguments!(SqliteArguments<'q>, values,
        json: |j| j.as_ref().map(Value::to_string),
        uuid: |u| u.map(|u| u.to_string()))
}

fn pg_args(values: &[&Param]) -> PgArguments {
    arguments!(PgArguments, values, json: |j| j.as_ref().map(Json), uuid: |u| *u)
}

impl Conn<'_> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) | Conn::Direct(..) => Dialect::Sqlite,
            Conn::Postgres(..) => Dialect::Postgres,
        }
    }

    /// Runs a statement; the number of rows it changed.
    pub async fn execute(&mut self, q: Query) -> Result<u64> {
        let (sql, values) = q.prepare(self.dialect())?;
        Ok(match self {
            Conn::Sqlite(c) => {
                statement(sqlx::query_with(sql, sqlite_args(&values)).execute(&mut **c))
                    .await?
                    .rows_affected()
            }
            Conn::Postgres(c, prepare) => {
                let q = sqlx::query_with(sql, pg_args(&values)).persistent(prepare.persistent());
                statement(q.execute(&mut **c)).await?.rows_affected()
            }
            Conn::Direct(c, file) => {
                let c = c.lock().unwrap_or_else(|p| p.into_inner());
                direct_statement(&c, file, sql, &values, |s| s.raw_execute())? as u64
            }
        })
    }

    pub async fn fetch_all(&mut self, q: Query) -> Result<Vec<Row>> {
        let (sql, values) = q.prepare(self.dialect())?;
        Ok(match self {
            Conn::Sqlite(c) => {
                statement(sqlx::query_with(sql, sqlite_args(&values)).fetch_all(&mut **c))
                    .await?
                    .into_iter()
                    .map(Row::Sqlite)
                    .collect()
            }
            Conn::Postgres(c, prepare) => {
                let q = sqlx::query_with(sql, pg_args(&values)).persistent(prepare.persistent());
                statement(q.fetch_all(&mut **c))
                    .await?
                    .into_iter()
                    .map(Row::Postgres)
                    .collect()
            }
            Conn::Direct(c, file) => {
                let c = c.lock().unwrap_or_else(|p| p.into_inner());
                direct_statement(&c, file, sql, &values, direct_rows)?
            }
        })
    }

    /// The first row, if any (statements that match one row by key).
    pub async fn fetch_optional(&mut self, q: Query) -> Result<Option<Row>> {
        Ok(self.fetch_all(q).await?.into_iter().next())
    }

    /// The first row, or the error `missing` makes when there is none.
    pub async fn fetch_found(&mut self, q: Query, missing: impl FnOnce() -> Error) -> Result<Row> {
        self.fetch_optional(q).await?.ok_or_else(missing)
    }

    /// Wakes listening workers when the transaction commits (PostgreSQL
    /// `NOTIFY`); SQLite has no notifications, its workers poll.
    pub async fn notify_runnable(&mut self, id: RunId) -> Result<()> {
        if let Conn::Postgres(c, prepare) = self {
            let notify = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(RUNNABLE)
                .bind(id.to_string())
                .persistent(prepare.persistent());
            statement(notify.execute(&mut **c)).await?;
        }
        Ok(())
    }
}

/// Prepares (once per connection), binds as sqlx binds for SQLite, and
/// runs `then` on the statement.
fn direct_statement<T>(
    c: &rusqlite::Connection,
    file: &str,
    sql: &str,
    values: &[&Param],
    then: impl FnOnce(&mut rusqlite::Statement<'_>) -> rusqlite::Result<T>,
) -> Result<T> {
    use rusqlite::types::Value as V;
    let fail = |e: rusqlite::Error| crate::sqlite::direct_error(file, &e);
    crate::counters::sent(1);
    let mut statement = c.prepare_cached(sql).map_err(fail)?;
    for (i, v) in values.iter().enumerate() {
        let value = match v {
            Param::Text(t) => t.clone().map_or(V::Null, V::Text),
            Param::Int(n) => n.map_or(V::Null, V::Integer),
            Param::Float(f) => f.map_or(V::Null, V::Real),
            Param::Bool(b) => V::Integer(i64::from(*b)),
            Param::Json(j) => j.as_ref().map_or(V::Null, |j| V::Text(j.to_string())),
            Param::Uuid(u) => u.map_or(V::Null, |u| V::Text(u.to_string())),
        };
        statement.raw_bind_parameter(i + 1, value).map_err(fail)?;
    }
    then(&mut statement).map_err(fail)
}

/// Every row of a statement, its values owned.
fn direct_rows(s: &mut rusqlite::Statement<'_>) -> rusqlite::Result<Vec<Row>> {
    let names: std::sync::Arc<[String]> = s.column_names().into_iter().map(String::from).collect();
    let mut rows = s.raw_query();
    let mut out = vec![];
    while let Some(r) = rows.next()? {
        let values = (0..names.len())
            .map(|i| r.get::<_, rusqlite::types::Value>(i))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        out.push(Row::Direct(DirectRow {
            names: names.clone(),
            values,
        }));
    }
    Ok(out)
}

/// A row read through SQLite's C interface ([`Conn::Direct`]).
pub struct DirectRow {
    names: std::sync::Arc<[String]>,
    values: Vec<rusqlite::types::Value>,
}

impl DirectRow {
    fn get(&self, col: &str) -> Result<&rusqlite::types::Value> {
        self.names
            .iter()
            .position(|n| n == col)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| sqlx::Error::ColumnNotFound(col.to_owned()).into())
    }

    /// As sqlx reads a SQLite column: NULL is `None`, another type an error.
    fn typed<'r, T>(
        &'r self,
        col: &str,
        want: &str,
        pick: impl FnOnce(&'r rusqlite::types::Value) -> Option<T>,
    ) -> Result<Option<T>> {
        let v = self.get(col)?;
        if *v == rusqlite::types::Value::Null {
            return Ok(None);
        }
        pick(v).map(Some).ok_or_else(|| {
            sqlx::Error::ColumnDecode {
                index: col.to_owned(),
                source: format!("expected {want}, found {:?}", v.data_type()).into(),
            }
            .into()
        })
    }

    fn text(&self, col: &str) -> Result<Option<&str>> {
        self.typed(col, "text", |v| match v {
            rusqlite::types::Value::Text(t) => Some(t.as_str()),
            _ => None,
        })
    }

    fn int(&self, col: &str) -> Result<Option<i64>> {
        self.typed(col, "an integer", |v| match v {
            rusqlite::types::Value::Integer(i) => Some(*i),
            _ => None,
        })
    }
}

/// The channel notified when a run becomes runnable.
pub(crate) const RUNNABLE: &str = "cairn_runnable";

/// A row of either database.
pub enum Row {
    Sqlite(SqliteRow),
    Postgres(PgRow),
    Direct(DirectRow),
}

/// Why a column did not read: the database said so, or the stored text is
/// not what the column holds (SQLite).
fn corrupt(run: RunId, what: &str, detail: impl std::fmt::Display) -> Error {
    Corruption::new(run, format!("{what} {detail}")).into()
}

/// A SQLite text column parsed into what it stands for; text that does not
/// parse is a corruption naming the run and the column.
fn parsed<T>(
    text: Option<&str>,
    (run, what): (RunId, &str),
    parse: impl FnOnce(&str) -> std::result::Result<T, String>,
) -> Result<Option<T>> {
    text.map(|t| parse(t).map_err(|detail| corrupt(run, what, detail)))
        .transpose()
}

/// A PostgreSQL `timestamptz` read without sqlx's decoder, which panics on
/// `infinity` and on times past chrono's range: a stored time Cairn cannot
/// represent is a corruption naming the run and the column, not a crash.
fn pg_time(r: &PgRow, col: &str, (run, what): (RunId, &str)) -> Result<Option<DateTime<Utc>>> {
    let raw = r.try_get_raw(col)?;
    if raw.is_null() {
        return Ok(None);
    }
    if raw.format() != sqlx::postgres::PgValueFormat::Binary {
        return Ok(r.try_get(col)?);
    }
    let bytes = raw
        .as_bytes()
        .map_err(|e| corrupt(run, what, format!("cannot be read: {e}")))?;
    let micros = <[u8; 8]>::try_from(bytes)
        .map(i64::from_be_bytes)
        .map_err(|_| corrupt(run, what, "is not an 8-byte time"))?;
    // PostgreSQL's epoch is 2000-01-01; ±infinity are i64::MAX / MIN.
    const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
    micros
        .checked_add(PG_EPOCH_MICROS)
        .and_then(DateTime::from_timestamp_micros)
        .filter(|_| micros != i64::MAX && micros != i64::MIN)
        .map(Some)
        .ok_or_else(|| corrupt(run, what, "is outside the times Cairn can represent"))
}

impl Row {
    /// A text column of a SQLite row, borrowed (either connection).
    fn sqlite_text(&self, col: &str) -> Result<Option<&str>> {
        match self {
            Row::Sqlite(r) => Ok(r.try_get(col)?),
            Row::Direct(r) => r.text(col),
            Row::Postgres(_) => Err(Error::Statement(format!(
                "column `{col}` of a PostgreSQL row read as SQLite text"
            ))),
        }
    }

    /// An integer column of any width (PostgreSQL's `int4` and `int8`).
    pub fn opt_int(&self, col: &str) -> Result<Option<i64>> {
        Ok(match self {
            Row::Sqlite(r) => r.try_get(col)?,
            Row::Direct(r) => r.int(col)?,
            Row::Postgres(r) => {
                let raw = r.try_get_raw(col)?;
                let width = raw.type_info().name().to_owned();
                match width.as_str() {
                    "INT4" => r.try_get::<Option<i32>, _>(col)?.map(i64::from),
                    "INT2" => r.try_get::<Option<i16>, _>(col)?.map(i64::from),
                    _ => r.try_get(col)?,
                }
            }
        })
    }

    pub fn int(&self, col: &str) -> Result<i64> {
        not_null(self.opt_int(col)?, col)
    }

    pub fn opt_text(&self, col: &str) -> Result<Option<String>> {
        Ok(match self {
            Row::Sqlite(r) => r.try_get(col)?,
            Row::Postgres(r) => r.try_get(col)?,
            Row::Direct(r) => r.text(col)?.map(str::to_owned),
        })
    }

    pub fn text(&self, col: &str) -> Result<String> {
        not_null(self.opt_text(col)?, col)
    }

    /// A UUID column; `what` names it in a corruption.
    pub fn opt_uuid(&self, col: &str, run: RunId, what: &str) -> Result<Option<Uuid>> {
        match self {
            Row::Sqlite(_) | Row::Direct(_) => parsed(self.sqlite_text(col)?, (run, what), |t| {
                Uuid::from_str(t).map_err(|e| format!("`{t}` is not an id: {e}"))
            }),
            Row::Postgres(r) => Ok(r.try_get(col)?),
        }
    }

    pub fn opt_json(&self, col: &str, run: RunId, what: &str) -> Result<Option<Value>> {
        match self {
            Row::Sqlite(_) | Row::Direct(_) => parsed(self.sqlite_text(col)?, (run, what), |t| {
                serde_json::from_str(t).map_err(|e| format!("is not valid JSON: {e}"))
            }),
            Row::Postgres(r) => Ok(r.try_get::<Option<Json<Value>>, _>(col)?.map(|j| j.0)),
        }
    }

    /// A JSON column's stored text, undecoded, handed to `f` (no copy on
    /// SQLite; PostgreSQL's binary `jsonb` is its version byte and the text).
    pub fn json_text<T>(&self, col: &str, f: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        match self {
            Row::Sqlite(_) | Row::Direct(_) => Ok(self.sqlite_text(col)?.map(|t| f(t.as_bytes()))),
            Row::Postgres(r) => {
                let raw = r.try_get_raw(col)?;
                if raw.is_null() {
                    return Ok(None);
                }
                let binary_jsonb = raw.format() == sqlx::postgres::PgValueFormat::Binary
                    && raw.type_info().name() == "JSONB";
                let bytes = raw.as_bytes().map_err(sqlx::Error::Decode)?;
                Ok(Some(match (binary_jsonb, bytes.split_first()) {
                    (true, Some((1, text))) => f(text),
                    // Another jsonb version: let the caller's decoder refuse it.
                    _ => f(bytes),
                }))
            }
        }
    }

    pub fn json(&self, col: &str, run: RunId, what: &str) -> Result<Value> {
        self.opt_json(col, run, what)?
            .ok_or_else(|| corrupt(run, what, "is missing"))
    }

    pub fn opt_time(&self, col: &str, run: RunId, what: &str) -> Result<Option<DateTime<Utc>>> {
        match self {
            Row::Sqlite(_) | Row::Direct(_) => parsed(self.sqlite_text(col)?, (run, what), |t| {
                DateTime::parse_from_rfc3339(t)
                    .map(|d| d.with_timezone(&Utc))
                    .map_err(|e| format!("`{t}` is not a time: {e}"))
            }),
            Row::Postgres(r) => pg_time(r, col, (run, what)),
        }
    }

    pub fn time(&self, col: &str, run: RunId, what: &str) -> Result<DateTime<Utc>> {
        self.opt_time(col, run, what)?
            .ok_or_else(|| corrupt(run, what, "is missing"))
    }
}

/// A column's value that must not be NULL: a decode error naming `col`
/// when it is.
fn not_null<T>(value: Option<T>, col: &str) -> Result<T> {
    value
        .ok_or_else(|| sqlx::Error::ColumnDecode {
            index: col.to_owned(),
            source: "unexpected NULL".into(),
        })
        .map_err(Error::from)
}
