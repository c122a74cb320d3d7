//! One SQL text for both databases: parameters by name (`:run`), and a few
//! `{tokens}` for what the dialects spell differently. `compile` turns a text
//! into a dialect's own (`$1` or `?`, tokens expanded), once per statement.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use serde_json::Value;
use uuid::Uuid;

use cairn_core::{RunId, WaitId};

use crate::{Error, Result};

/// The SQL dialects Cairn speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// The tokens that name a parameter (`{ago:NAME}`): (prefix, PostgreSQL,
/// SQLite), `@` standing for `:NAME`.
const PARAM_TOKENS: [(&str, &str, &str); 7] = [
    // The database's now less `:NAME` seconds, either sign (a run's
    // `claim_at`: now less its priority's head start).
    (
        "ahead",
        "clock_timestamp() - make_interval(secs => @)",
        "strftime('%Y-%m-%dT%H:%M:%fZ','now', (-@) || ' seconds')",
    ),
    // The database's now plus `:NAME` seconds (a float).
    (
        "later",
        "clock_timestamp() + make_interval(secs => @)",
        "strftime('%Y-%m-%dT%H:%M:%fZ','now', '+' || @ || ' seconds')",
    ),
    // The database's now minus `:NAME` seconds (a float; NULL makes the
    // whole comparison NULL, so a criterion left out of a policy matches
    // nothing).
    (
        "ago",
        "clock_timestamp() - make_interval(secs => @)",
        "strftime('%Y-%m-%dT%H:%M:%fZ','now', '-' || @ || ' seconds')",
    ),
    // The time in the RFC 3339 text `:NAME` (an audit's `--since`).
    (
        "time",
        "CAST(@ AS timestamptz)",
        "strftime('%Y-%m-%dT%H:%M:%fZ', @)",
    ),
    // The ids in the JSON array `:NAME`, as a subquery.
    (
        "ids",
        "SELECT (jsonb_array_elements_text(@))::uuid",
        "SELECT value FROM json_each(@)",
    ),
    // The elements of the JSON array `:NAME` as rows of a table `j` with
    // one column, `value` (`j.value->>'k'`, `j.value->'k'`).
    (
        "rows",
        "jsonb_array_elements(@) AS j(value)",
        "json_each(@) AS j",
    ),
    // The (id, epoch, owner) triples of the JSON array `:NAME`, as a
    // subquery (a process's held runs, for one beat).
    (
        "held",
        "SELECT (e->>0)::uuid, (e->>1)::bigint, e->>2 FROM jsonb_array_elements(@) e",
        "SELECT value->>0, CAST(value->>1 AS INTEGER), value->>2 FROM json_each(@)",
    ),
];

impl Dialect {
    /// What a `{token}` means in this dialect. Everything that differs
    /// between the two outside the fast paths is here.
    fn token(self, name: &str) -> Option<std::borrow::Cow<'static, str>> {
        use Dialect::*;
        // `{index=NAME}` after a table: the index SQLite must use. Cairn
        // never runs ANALYZE, so SQLite's planner guesses that an equality
        // on `status` leaves a few rows, takes `runs_by_status` and sorts
        // every queued run per claim (33 ms with 10,000 queued) where a
        // partial index in claim order would read one. PostgreSQL plans
        // from statistics: nothing.
        if let Some(index) = name.strip_prefix("index=") {
            return Some(match self {
                Postgres => "".into(),
                Sqlite => format!("INDEXED BY {index}").into(),
            });
        }
        if let Some((prefix, param)) = name.split_once(':') {
            let (_, postgres, sqlite) = PARAM_TOKENS.iter().find(|(p, ..)| *p == prefix)?;
            let text = match self {
                Postgres => postgres,
                Sqlite => sqlite,
            };
            return Some(text.replace('@', &format!(":{param}")).into());
        }
        Some(std::borrow::Cow::Borrowed(match (self, name) {
            // The database's clock; SQLite's as RFC 3339 UTC with milliseconds.
            (Postgres, "now") => "clock_timestamp()",
            (Sqlite, "now") => "strftime('%Y-%m-%dT%H:%M:%fZ','now')",
            // A UUID from text (SQLite stores ids as text).
            (Postgres, "uuid") => "::uuid",
            (Sqlite, "uuid") => "",
            // Row locks: SQLite's write transactions (`BEGIN IMMEDIATE`)
            // already exclude every other writer.
            (Postgres, "for_update") => "FOR UPDATE",
            (Postgres, "skip_locked") => "FOR UPDATE SKIP LOCKED",
            (Sqlite, "for_update" | "skip_locked") => "",
            // A lease's end: now plus `:lease_secs` (a float).
            (Postgres, "lease_until") => "clock_timestamp() + make_interval(secs => :lease_secs)",
            (Sqlite, "lease_until") => {
                "strftime('%Y-%m-%dT%H:%M:%fZ','now', '+' || :lease_secs || ' seconds')"
            }
            // Milliseconds until the run's `not_before` (negative if past).
            (Postgres, "not_before_ms") => {
                "CEIL(EXTRACT(EPOCH FROM (not_before - clock_timestamp())) * 1000)::bigint"
            }
            (Sqlite, "not_before_ms") => {
                "CAST(ROUND((julianday(not_before) - julianday('now')) * 86400000) AS INTEGER)"
            }
            // Milliseconds until a provider key's `paused_until`.
            (Postgres, "paused_ms") => {
                "CEIL(EXTRACT(EPOCH FROM (paused_until - clock_timestamp())) * 1000)::bigint"
            }
            (Sqlite, "paused_ms") => {
                "CAST(ROUND((julianday(paused_until) - julianday('now')) * 86400000) AS INTEGER)"
            }
            // Whole seconds from the run's submission to its end (or now).
            (Postgres, "age_secs") => {
                "FLOOR(EXTRACT(EPOCH FROM (COALESCE(finished_at, clock_timestamp()) - created_at)))::bigint"
            }
            (Sqlite, "age_secs") => {
                "CAST((julianday(COALESCE(finished_at, 'now')) - julianday(created_at)) * 86400 AS INTEGER)"
            }
            // A tenant's next claim-order time, as its submit moves it: the
            // later of its stored one and now, plus `:spacing` seconds
            // (`cairn_core::meter::tenant`).
            (Postgres, "tenant_next") => {
                "GREATEST(tenants.next_at, clock_timestamp()) + make_interval(secs => :spacing)"
            }
            (Sqlite, "tenant_next") => {
                "strftime('%Y-%m-%dT%H:%M:%fZ', MAX(tenants.next_at, \
                 strftime('%Y-%m-%dT%H:%M:%fZ','now')), '+' || :spacing || ' seconds')"
            }
            // A submitted run's `claim_at`: its tenant's slot (the time
            // `tenant_next` moved on from) less its priority's head start,
            // or, with no `:tenant`, now less the head start.
            (Postgres, "claim_at") => {
                "COALESCE((SELECT next_at FROM tenants WHERE tenant = :tenant) \
                 - make_interval(secs => :spacing + :head), \
                 clock_timestamp() - make_interval(secs => :head))"
            }
            (Sqlite, "claim_at") => {
                "COALESCE(strftime('%Y-%m-%dT%H:%M:%fZ', \
                 (SELECT next_at FROM tenants WHERE tenant = :tenant), \
                 (-(:spacing + :head)) || ' seconds'), \
                 strftime('%Y-%m-%dT%H:%M:%fZ','now', (-:head) || ' seconds'))"
            }
            // The database's clock in milliseconds since the Unix epoch.
            (Postgres, "now_ms") => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint",
            (Sqlite, "now_ms") => "CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)",
            // Milliseconds since a provider key's buckets were refilled.
            (Postgres, "refilled_ms") => {
                "FLOOR(EXTRACT(EPOCH FROM (clock_timestamp() - refilled_at)) * 1000)::bigint"
            }
            (Sqlite, "refilled_ms") => {
                "CAST(ROUND((julianday('now') - julianday(refilled_at)) * 86400000) AS INTEGER)"
            }
            _ => return None,
        }))
    }
}

/// A statement in one dialect, and the parameter name behind each
/// placeholder (SQLite: one per `?`, in textual order, repeats included;
/// PostgreSQL: one per `$n`).
#[derive(Debug)]
pub struct Compiled {
    pub text: String,
    pub names: Vec<String>,
}

/// Compiled statements by dialect and the address and length of their
/// text: a statement is a `&'static str`, so its address names it, and a
/// lookup neither hashes nor compares the text (some are kilobytes long and
/// run once a step).
static CACHE: LazyLock<RwLock<HashMap<TextKey, &'static Compiled>>> =
    LazyLock::new(Default::default);

/// A dialect, and a static text's address and length.
type TextKey = (Dialect, usize, usize);

/// `sql` in `dialect`, compiled once per process (statements are static, so
/// the cache is bounded by the program's text).
pub fn compiled(sql: &'static str, dialect: Dialect) -> Result<&'static Compiled> {
    let key = (dialect, sql.as_ptr() as usize, sql.len());
    if let Some(c) = CACHE.read().ok().and_then(|m| m.get(&key).copied()) {
        return Ok(c);
    }
    let c: &'static Compiled = Box::leak(Box::new(compile(sql, dialect)?));
    if let Ok(mut m) = CACHE.write() {
        m.insert(key, c);
    }
    Ok(c)
}

/// Expands tokens and replaces `:name` with the dialect's placeholders,
/// leaving quoted text and PostgreSQL's `::type` casts alone.
pub fn compile(sql: &str, dialect: Dialect) -> Result<Compiled> {
    let expanded = expand_tokens(sql, dialect)?;
    let mut text = String::with_capacity(expanded.len());
    let mut names: Vec<String> = vec![];
    let mut chars = expanded.char_indices().peekable();
    let bytes = expanded.as_bytes();
    while let Some((i, ch)) = chars.next() {
        match ch {
            '\'' | '"' => {
                text.push(ch);
                for (_, c) in chars.by_ref() {
                    text.push(c);
                    if c == ch {
                        break;
                    }
                }
            }
            ':' if bytes.get(i + 1) == Some(&b':') => {
                text.push_str("::");
                chars.next();
            }
            ':' if bytes
                .get(i + 1)
                .is_some_and(|b| b.is_ascii_lowercase() || *b == b'_') =>
            {
                let mut name = String::new();
                while let Some(&(_, c)) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        name.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                match dialect {
                    Dialect::Sqlite => {
                        text.push('?');
                        names.push(name);
                    }
                    Dialect::Postgres => {
                        let n = match names.iter().position(|x| *x == name) {
                            Some(p) => p + 1,
                            None => {
                                names.push(name);
                                names.len()
                            }
                        };
                        text.push('$');
                        text.push_str(&n.to_string());
                    }
                }
            }
            c => text.push(c),
        }
    }
    Ok(Compiled { text, names })
}

fn expand_tokens(sql: &str, dialect: Dialect) -> Result<String> {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut rest = sql;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| bad_statement(sql, "an unclosed `{`"))?;
        let name = &rest[open + 1..open + close];
        let value = dialect
            .token(name)
            .ok_or_else(|| bad_statement(sql, &format!("unknown token `{{{name}}}`")))?;
        out.push_str(&value);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn bad_statement(sql: &str, reason: &str) -> Error {
    let head: String = sql.chars().take(80).collect();
    Error::Statement(format!("{reason} in `{head}…`"))
}

/// A value bound to a named parameter. Each backend maps it to its own
/// column type (a UUID is `uuid` on PostgreSQL, text on SQLite; JSON is
/// `jsonb` or text).
#[derive(Debug, Clone)]
pub enum Param {
    Text(Option<String>),
    Int(Option<i64>),
    Float(Option<f64>),
    Bool(bool),
    Json(Option<Value>),
    Uuid(Option<Uuid>),
}

macro_rules! param_from {
    ($($t:ty => |$v:ident| $e:expr;)*) => {$(
        impl From<$t> for Param {
            fn from($v: $t) -> Param {
                $e
            }
        }
    )*};
}

param_from! {
    &str => |v| Param::Text(Some(v.to_owned()));
    String => |v| Param::Text(Some(v));
    Option<&str> => |v| Param::Text(v.map(str::to_owned));
    Option<String> => |v| Param::Text(v);
    &Option<String> => |v| Param::Text(v.clone());
    i64 => |v| Param::Int(Some(v));
    Option<i64> => |v| Param::Int(v);
    u32 => |v| Param::Int(Some(i64::from(v)));
    Option<u32> => |v| Param::Int(v.map(i64::from));
    f64 => |v| Param::Float(Some(v));
    Option<f64> => |v| Param::Float(v);
    bool => |v| Param::Bool(v);
    Value => |v| Param::Json(Some(v));
    &Value => |v| Param::Json(Some(v.clone()));
    Option<Value> => |v| Param::Json(v);
    RunId => |v| Param::Uuid(Some(v.as_uuid()));
    Option<RunId> => |v| Param::Uuid(v.map(|r| r.as_uuid()));
    WaitId => |v| Param::Uuid(Some(v.as_uuid()));
    Option<WaitId> => |v| Param::Uuid(v.map(|w| w.as_uuid()));
}

/// A statement with its parameters bound by name.
#[derive(Debug)]
pub struct Query {
    pub sql: &'static str,
    params: Vec<(&'static str, Param)>,
}

/// Starts a statement; bind its parameters with [`Query::bind`].
pub fn query(sql: &'static str) -> Query {
    Query::sized(sql, 8)
}

impl Query {
    /// Starts a statement with room for `n` parameters (a step commit binds
    /// 25; growing the list from [`query`]'s eight reallocates twice).
    pub fn sized(sql: &'static str, n: usize) -> Query {
        Query {
            sql,
            params: Vec::with_capacity(n),
        }
    }

    pub fn bind(mut self, name: &'static str, value: impl Into<Param>) -> Query {
        self.params.push((name, value.into()));
        self
    }

    /// The statement in `dialect` and its values in placeholder order.
    /// A name used but not bound, or bound but not used, is refused: a
    /// parameter can never be bound to the wrong placeholder.
    pub fn prepare(&self, dialect: Dialect) -> Result<(&'static str, Vec<&Param>)> {
        let c = compiled(self.sql, dialect)?;
        let mut used = vec![false; self.params.len()];
        let mut values = Vec::with_capacity(c.names.len());
        for n in &c.names {
            let (i, (_, v)) = self
                .params
                .iter()
                .enumerate()
                .find(|(_, (name, _))| name == n)
                .ok_or_else(|| bad_statement(self.sql, &format!("`:{n}` is not bound")))?;
            if let Some(u) = used.get_mut(i) {
                *u = true;
            }
            values.push(v);
        }
        // One rule for both databases (PostgreSQL cannot store a NUL), so
        // SQLite refuses it too; the storage script names the field first.
        for (name, value) in &self.params {
            let nul = match value {
                Param::Text(Some(t)) => cairn_core::caps::has_nul(t),
                Param::Json(Some(j)) => cairn_core::json_has_nul(j),
                _ => false,
            };
            if nul {
                return Err(cairn_core::Unstorable {
                    what: format!("the value bound to `:{name}`"),
                }
                .into());
            }
        }
        // A parameter no placeholder took is refused unless its name is
        // used (bound twice: the first binding counts, as before).
        let unused = self
            .params
            .iter()
            .zip(&used)
            .find(|((name, _), used)| !**used && !c.names.iter().any(|n| n == name));
        if let Some(((unused, _), _)) = unused {
            return Err(bad_statement(
                self.sql,
                &format!("`:{unused}` is bound but not used"),
            ));
        }
        Ok((c.text.as_str(), values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sql: &str, dialect: Dialect, text: &str, names: &[&str]) {
        let c = compile(sql, dialect).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(c.text, text);
        assert_eq!(c.names, names);
    }

    #[test]
    fn names_become_each_dialects_placeholders() {
        let sql = "UPDATE runs SET a = :a, b = :b WHERE id = :id AND a = :a";
        check(
            sql,
            Dialect::Postgres,
            "UPDATE runs SET a = $1, b = $2 WHERE id = $3 AND a = $1",
            &["a", "b", "id"],
        );
        check(
            sql,
            Dialect::Sqlite,
            "UPDATE runs SET a = ?, b = ? WHERE id = ? AND a = ?",
            &["a", "b", "id", "a"],
        );
    }

    #[test]
    fn quotes_casts_and_tokens() {
        check(
            "SELECT ':no', \"x:y\", :n::bigint, data->>'k' FROM t WHERE at < {now} {for_update}",
            Dialect::Postgres,
            "SELECT ':no', \"x:y\", $1::bigint, data->>'k' FROM t WHERE at < clock_timestamp() FOR UPDATE",
            &["n"],
        );
        check(
            "SELECT 1 FROM t WHERE at < {now} {for_update}",
            Dialect::Sqlite,
            "SELECT 1 FROM t WHERE at < strftime('%Y-%m-%dT%H:%M:%fZ','now') ",
            &[],
        );
        check(
            "UPDATE runs SET e = {lease_until} WHERE id = :id",
            Dialect::Sqlite,
            "UPDATE runs SET e = strftime('%Y-%m-%dT%H:%M:%fZ','now', '+' || ? || ' seconds') WHERE id = ?",
            &["lease_secs", "id"],
        );
        let indexed = "SELECT id FROM runs {index=runs_queued} WHERE status = 'queued'";
        check(
            indexed,
            Dialect::Sqlite,
            "SELECT id FROM runs INDEXED BY runs_queued WHERE status = 'queued'",
            &[],
        );
        check(
            indexed,
            Dialect::Postgres,
            "SELECT id FROM runs  WHERE status = 'queued'",
            &[],
        );
    }

    #[test]
    fn unknown_tokens_and_unmatched_binds_are_refused() {
        assert!(compile("SELECT {nope}", Dialect::Sqlite).is_err());
        let q = query("SELECT :a, :b").bind("a", 1i64);
        assert!(q.prepare(Dialect::Postgres).is_err(), "b is not bound");
        let q = query("SELECT :a").bind("a", 1i64).bind("c", 2i64);
        assert!(q.prepare(Dialect::Sqlite).is_err(), "c is not used");
        let q = query("SELECT :a").bind("a", 1i64);
        assert!(q.prepare(Dialect::Sqlite).is_ok());
    }

    #[test]
    fn a_name_bound_twice_takes_its_first_value() {
        let q = query("SELECT :a, :b")
            .bind("b", 2i64)
            .bind("a", 1i64)
            .bind("a", 3i64);
        let (_, values) = q
            .prepare(Dialect::Postgres)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            values.as_slice(),
            [Param::Int(Some(1)), Param::Int(Some(2))]
        ));
    }

    #[test]
    fn a_nul_is_refused_on_both_dialects() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            let q = query("SELECT :a").bind("a", "x\u{0}");
            assert!(matches!(q.prepare(dialect), Err(Error::Unstorable(_))));
            let q = query("SELECT :a").bind("a", serde_json::json!({"k": "\u{0}"}));
            assert!(matches!(q.prepare(dialect), Err(Error::Unstorable(_))));
        }
    }
}
