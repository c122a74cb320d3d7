//! Opening a store from a URL: `sqlite://PATH` (the embedded default) or
//! `postgres://…`, with one host or several (libpq's `h1:5432,h2:5433`,
//! which sqlx does not parse: split here, one set of options per host).
//! Connection failures name the database, never a password.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

use crate::{Error, PgHosts, PgStore, Result, SessionAttrs, SqliteStore, Store};

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

/// What a committed write survives (DESIGN.md, "Storage"). Chosen per
/// store: `?durability=process` on the URL, or [`OpenOptions::durability`]
/// (the URL wins).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// A committed step survives a power cut: SQLite `synchronous=FULL`,
    /// PostgreSQL's own `synchronous_commit` (on by default).
    #[default]
    Sync,
    /// A committed step survives the death of the process, not of the
    /// machine: SQLite `synchronous=NORMAL` in WAL mode (the WAL is synced
    /// at checkpoints only), PostgreSQL `synchronous_commit=off` for
    /// Cairn's own connections (a commit returns before its WAL is flushed;
    /// the server flushes within `3 × wal_writer_delay`, 600 ms by default).
    Process,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Process => "process",
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "sync" => Ok(Durability::Sync),
            "process" => Ok(Durability::Process),
            other => Err(format!(
                "durability `{other}` is not `sync` (survives a power cut) or `process` (survives the process)"
            )),
        }
    }
}

/// Whether Cairn reaches PostgreSQL through a connection pooler in
/// transaction mode: `?pooler=transaction` on the URL, or
/// [`OpenOptions::pooler`] (the URL wins). DESIGN.md, "Storage".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pooler {
    /// Straight to the server, or through a pooler in session mode (which
    /// keeps a client on one server connection): nothing changes.
    #[default]
    None,
    /// PgBouncer (or a managed pooler that works the same way) in
    /// transaction mode: only unnamed statements, each inside a
    /// transaction; idle workers poll instead of `LISTEN`; live text from
    /// other processes is not streamed (the journal still has it);
    /// `durability=process` is refused (a session setting).
    Transaction,
}

impl Pooler {
    pub fn as_str(self) -> &'static str {
        match self {
            Pooler::None => "none",
            Pooler::Transaction => "transaction",
        }
    }
}

impl FromStr for Pooler {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" | "session" => Ok(Pooler::None),
            "transaction" => Ok(Pooler::Transaction),
            other => Err(format!(
                "pooler `{other}` is not `transaction` (PgBouncer in transaction mode), \
                 `session` or `none` (a direct connection)"
            )),
        }
    }
}

/// A process's PostgreSQL connections unless it says otherwise
/// (`--db-connections`): enough for thousands of steps in flight, whose
/// commits and heartbeats each hold one for a round trip.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

/// How to open a store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Create a missing SQLite file, or Cairn's tables in a PostgreSQL
    /// database without them (commands that write). Read-only commands
    /// pass `false` and get [`Error::MissingFile`] or [`Error::NoSchema`].
    pub create: bool,
    /// How long to wait for the database to answer.
    pub connect_timeout: Duration,
    /// The most connections this store opens (PostgreSQL), whatever the
    /// work asks: a burst of commits queues for them (up to
    /// `acquire_timeout`) instead of opening more. The `LISTEN` connection
    /// of an idle worker is one of them.
    pub max_connections: u32,
    /// How long an operation waits for one of those connections before it
    /// fails (a connection error, retried like one).
    pub acquire_timeout: Duration,
    /// What a commit survives, unless the URL says (`?durability=`).
    pub durability: Durability,
    /// A pooler between Cairn and PostgreSQL, unless the URL says
    /// (`?pooler=`).
    pub pooler: Pooler,
    /// How long a step commit, a journal item, an answer or an operator
    /// action whose connection failed (or whose server refused writes for
    /// now, as during a failover) is tried again, asking first whether the
    /// earlier try landed. The rule: half the lease, so a retry ends well
    /// before another process could take the run over (fencing refuses it
    /// if one did) and a failover shorter than that is ridden out.
    /// `cairn::Engine` sets it from its lease (`ExecutorConfig::lease / 2`);
    /// the default, [`DEFAULT_RETRY_FOR`], is half the default 30 s lease.
    pub retry_for: Duration,
}

/// [`OpenOptions::retry_for`] unless set: half the default lease (30 s).
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(15);

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            create: true,
            connect_timeout: Duration::from_secs(5),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: Duration::from_secs(30),
            durability: Durability::Sync,
            pooler: Pooler::None,
            retry_for: DEFAULT_RETRY_FOR,
        }
    }
}

/// A parsed database URL.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Sqlite(PathBuf),
    /// The servers, and the pooler the URL names (`?pooler=`), if any.
    Postgres(Box<PgHosts>, Option<Pooler>),
}

/// A URL's target and the durability it names (`?durability=`), if any.
pub(crate) fn parse_url(url: &str) -> Result<(Target, Option<Durability>)> {
    let bad = |reason: &str| Error::BadUrl {
        url: redact(url),
        reason: reason.to_owned(),
    };
    let (url, params) = take_params(url).map_err(|e| bad(&e))?;
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        let path = path.split('?').next().unwrap_or_default();
        if path.is_empty() {
            return Err(bad("no file path after sqlite://"));
        }
        if params.pooler.is_some() {
            return Err(bad(
                "`pooler=` is for PostgreSQL URLs; SQLite has no server",
            ));
        }
        if params.attrs.is_some() {
            return Err(bad(
                "`target_session_attrs=` is for PostgreSQL URLs; SQLite has no server",
            ));
        }
        return Ok((Target::Sqlite(PathBuf::from(path)), params.durability));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let pg = Box::new(pg_hosts(&url, params.attrs.unwrap_or_default())?);
        return Ok((Target::Postgres(pg, params.pooler), params.durability));
    }
    Err(bad("unknown scheme"))
}

/// A PostgreSQL URL as Cairn connects to it: sqlx's parsing, and no TLS to
/// a server on this machine (loopback or a Unix socket) unless the URL
/// asks for it with `sslmode=`. libpq's default `prefer` would negotiate
/// TLS there too, which protects nothing on loopback and costs a handshake
/// per connection and about 20–70 µs per round trip (docs/benchmarks.md).
pub fn pg_options(url: &str) -> Result<PgConnectOptions> {
    let opts = PgConnectOptions::from_str(url).map_err(|e| Error::BadUrl {
        url: redact(url),
        reason: e.to_string(),
    })?;
    let asked = url
        .split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|p| p.starts_with("sslmode=")));
    let host = opts.get_host();
    let local = opts.get_socket().is_some()
        || host.starts_with('/')
        || host == "localhost"
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    Ok(match (asked, local) {
        (false, true) => opts.ssl_mode(sqlx::postgres::PgSslMode::Disable),
        _ => opts,
    })
}

/// A PostgreSQL URL's servers: one, as [`pg_options`] reads it, or several
/// (`postgres://u@h1:5432,h2,[::1]:5433/db`, libpq's syntax; sqlx parses
/// one host only): one set of options per host, each from the URL with
/// that host alone (so the same user, password, database and parameters),
/// in the URL's order.
fn pg_hosts(url: &str, attrs: SessionAttrs) -> Result<PgHosts> {
    let Some((head, list, tail)) = split_hosts(url) else {
        return Ok(PgHosts {
            hosts: vec![pg_options(url)?],
            attrs,
        });
    };
    let bad = |reason: String| Error::BadUrl {
        url: redact(url),
        reason,
    };
    let hosts = list
        .split(',')
        .map(|host| match host {
            "" => Err(bad("an empty host in the list of hosts".into())),
            host => pg_options(&format!("{head}{host}{tail}")).map_err(|e| match e {
                Error::BadUrl { reason, .. } => bad(format!("host `{host}`: {reason}")),
                e => e,
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PgHosts { hosts, attrs })
}

/// A URL of several hosts cut around its list of hosts: what comes before
/// (scheme and user), the list, what follows (database and query). `None`
/// for a URL of one host. The user's part ends at the last `@` before the
/// query, as in [`redact`] (a password may hold `/`, `@` or `,`).
fn split_hosts(url: &str) -> Option<(&str, &str, &str)> {
    let start = url.find("://")? + 3;
    let before_query = url[start..]
        .find(['?', '#'])
        .map_or(url.len(), |i| start + i);
    let from = url[start..before_query]
        .rfind('@')
        .map_or(start, |at| start + at + 1);
    let to = url[from..before_query]
        .find('/')
        .map_or(before_query, |i| from + i);
    let list = &url[from..to];
    list.contains(',').then(|| (&url[..from], list, &url[to..]))
}

/// Cairn's own parameters of a URL, which the drivers do not know.
#[derive(Debug, Default)]
struct UrlParams {
    durability: Option<Durability>,
    pooler: Option<Pooler>,
    /// libpq's `target_session_attrs` (`postgres/hosts.rs`).
    attrs: Option<SessionAttrs>,
}

/// Takes `durability=…`, `pooler=…` and `target_session_attrs=…` out of a
/// URL's query.
fn take_params(url: &str) -> std::result::Result<(String, UrlParams), String> {
    let mut params = UrlParams::default();
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), params));
    };
    let mut kept = vec![];
    for pair in query.split('&') {
        if let Some(value) = pair.strip_prefix("durability=") {
            params.durability = Some(value.parse()?);
        } else if let Some(value) = pair.strip_prefix("pooler=") {
            params.pooler = Some(value.parse()?);
        } else if let Some(value) = pair.strip_prefix("target_session_attrs=") {
            params.attrs = Some(value.parse()?);
        } else {
            kept.push(pair);
        }
    }
    let url = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((url, params))
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    cairn_core::text::redact_url(url)
}

/// Opens the store a URL names and applies its migrations.
pub async fn open(url: &str, opts: &OpenOptions) -> Result<Arc<dyn Store>> {
    let (target, durability) = parse_url(url)?;
    let opts = OpenOptions {
        durability: durability.unwrap_or(opts.durability),
        ..opts.clone()
    };
    match target {
        Target::Sqlite(path) => Ok(Arc::new(SqliteStore::open_with(&path, &opts).await?)),
        Target::Postgres(pg, pooler) => {
            let opts = OpenOptions {
                pooler: pooler.unwrap_or(opts.pooler),
                ..opts
            };
            Ok(Arc::new(PgStore::connect_hosts(*pg, &opts).await?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_explain() {
        assert!(
            matches!(parse_url("sqlite://cairn.db"), Ok((Target::Sqlite(p), None)) if p.as_os_str() == "cairn.db")
        );
        assert!(
            matches!(parse_url("sqlite:///tmp/x.db"), Ok((Target::Sqlite(p), None)) if p.as_os_str() == "/tmp/x.db")
        );
        assert!(matches!(
            parse_url("postgres://u@localhost:5432/db"),
            Ok((Target::Postgres(_, None), None))
        ));
        assert!(matches!(
            parse_url("sqlite://x.db?durability=process"),
            Ok((Target::Sqlite(p), Some(Durability::Process))) if p.as_os_str() == "x.db"
        ));
        use sqlx::postgres::PgSslMode;
        let ssl = |url: &str| match parse_url(url) {
            Ok((Target::Postgres(pg, _), _)) => pg.hosts[0].get_ssl_mode(),
            other => panic!("{url}: {other:?}"),
        };
        let local = [
            "postgres://u@127.0.0.1:5432/db",
            "postgres://u@localhost/db",
            "postgres://u@[::1]:5432/db",
        ];
        let remote = ["postgres://u@db.example.com/db"];
        let cases = local
            .map(|url| (url, PgSslMode::Disable))
            .into_iter()
            .chain([(
                "postgres://u@127.0.0.1/db?sslmode=prefer",
                PgSslMode::Prefer,
            )])
            .chain([(
                "postgres://u@127.0.0.1/db?sslmode=require",
                PgSslMode::Require,
            )])
            .chain(remote.map(|url| (url, PgSslMode::Prefer)));
        for (url, want) in cases {
            let got = ssl(url);
            assert!(
                std::mem::discriminant(&got) == std::mem::discriminant(&want),
                "case {url}: {got:?}, want {want:?}"
            );
        }
        match parse_url("postgres://u@h:5432/db?durability=sync&options[search_path]=s") {
            Ok((Target::Postgres(pg, None), Some(Durability::Sync))) => {
                assert_eq!(pg.hosts[0].get_options(), Some("-c search_path=s"));
            }
            other => panic!("{other:?}"),
        }
        match parse_url("postgres://u@h:6432/db?pooler=transaction&sslmode=disable") {
            Ok((Target::Postgres(pg, Some(Pooler::Transaction)), None)) => {
                assert_eq!(pg.hosts[0].get_port(), 6432);
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            "mysql://x",
            "cairn.db",
            "sqlite://",
            "postgres://u@host:notaport/db",
            "sqlite://x.db?durability=fast",
            "sqlite://x.db?pooler=transaction",
            "postgres://u@h/db?pooler=statement",
        ] {
            let err = parse_url(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("is not a database URL"), "{bad}: {err}");
        }
    }

    /// The hosts a PostgreSQL URL parses to, as `HOST:PORT`, and its attrs.
    fn hosts(url: &str) -> (Vec<String>, SessionAttrs) {
        match parse_url(url) {
            Ok((Target::Postgres(pg, _), _)) => (
                pg.hosts
                    .iter()
                    .map(|h| format!("{}:{}", h.get_host(), h.get_port()))
                    .collect(),
                pg.attrs,
            ),
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn several_hosts_parse_in_order_with_everything_else_shared() {
        use SessionAttrs::*;
        let cases: [(&str, &[&str], SessionAttrs); 7] = [
            ("postgres://u@h1:5432/db", &["h1:5432"], Any),
            (
                "postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write",
                &["h1:5432", "h2:5433"],
                ReadWrite,
            ),
            // A host without a port gets the default, as in libpq.
            (
                "postgres://u@h1,h2:6000,h3/db",
                &["h1:5432", "h2:6000", "h3:5432"],
                Any,
            ),
            (
                "postgresql://u@[::1]:5433,[2001:db8::7],127.0.0.1/db?target_session_attrs=primary",
                &["[::1]:5433", "[2001:db8::7]:5432", "127.0.0.1:5432"],
                Primary,
            ),
            (
                "postgres://u@h1,h2/db?target_session_attrs=any",
                &["h1:5432", "h2:5432"],
                Any,
            ),
            // One host may ask for a kind too.
            (
                "postgres://u@h1/db?target_session_attrs=read-write",
                &["h1:5432"],
                ReadWrite,
            ),
            // A password may hold `,` and `@`: the hosts follow the last `@`.
            ("postgres://u:p,a@s@h1,h2/db", &["h1:5432", "h2:5432"], Any),
        ];
        for (url, want, attrs) in cases {
            let want: Vec<String> = want.iter().map(|h| h.to_string()).collect();
            assert_eq!(hosts(url), (want, attrs), "case {url}");
        }
        // Every host gets the same user, password, database and parameters.
        let url = "postgres://alice:pw@db1.example.com:5432,db2.example.com:5433/app\
                   ?options[search_path]=s&sslmode=require&durability=process";
        match parse_url(url) {
            Ok((Target::Postgres(pg, None), Some(Durability::Process))) => {
                assert_eq!(pg.hosts.len(), 2);
                for h in &pg.hosts {
                    assert_eq!(h.get_username(), "alice");
                    assert_eq!(h.get_database(), Some("app"));
                    assert_eq!(h.get_options(), Some("-c search_path=s"));
                    assert!(matches!(
                        h.get_ssl_mode(),
                        sqlx::postgres::PgSslMode::Require
                    ));
                }
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_host_lists_and_kinds_are_refused_naming_no_password() {
        for (url, says) in [
            (
                "postgres://u:s3cret@h1,h2/db?target_session_attrs=standby",
                "Cairn writes",
            ),
            (
                "postgres://u:s3cret@h1/db?target_session_attrs=prefer-standby",
                "Cairn writes",
            ),
            (
                "postgres://u:s3cret@h1,h2/db?target_session_attrs=read-only",
                "Cairn writes",
            ),
            (
                "postgres://u:s3cret@h1,h2/db?target_session_attrs=writable",
                "is not `read-write`, `primary` or `any`",
            ),
            ("postgres://u:s3cret@h1,,h2/db", "an empty host"),
            (
                "postgres://u:s3cret@h1,h2:notaport/db",
                "host `h2:notaport`",
            ),
            ("postgres://u:s3cret@h1:5432,/db", "an empty host"),
            (
                "sqlite://x.db?target_session_attrs=read-write",
                "for PostgreSQL URLs",
            ),
        ] {
            let err = parse_url(url)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                err.contains("is not a database URL") && err.contains(says),
                "{url}: {err}"
            );
            assert!(!err.contains("s3cret"), "{url}: the password shows: {err}");
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
