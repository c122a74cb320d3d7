//! Starting and stopping the server: options → [`Server::bind`] (checks,
//! database, crews, socket) → [`Server::run_until`] (API + runner until a
//! shutdown signal) → graceful stop. [`serve`] is both with Ctrl-C/SIGTERM.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cairn::{Engine, ExecutorConfig, OpenOptions};

use crate::crews::Crews;
use crate::listen::{self, Limits};
use crate::runner::{Runner, RunnerOptions};
use crate::{
    router, AppState, Error, Result, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_EVENT_STREAMS, MIN_TOKEN_LEN,
};

/// The default time a client gets to send a request's headers.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The default number of connections open at once. Keep it below the
/// process's file limit (`ulimit -n`), which the database connections and
/// `command` steps share.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Everything `cairn serve` configures.
///
/// Build it with a struct literal and `..Default::default()`, so fields
/// added later keep callers compiling:
///
/// ```no_run
/// # async fn example() -> Result<(), cairn_server::Error> {
/// use cairn_server::{serve, ServeOptions};
/// serve(ServeOptions {
///     db_url: "sqlite://cairn.db".into(),
///     crews_dir: "crews".into(),
///     listen: "127.0.0.1:8080".parse().unwrap(),
///     tokens: std::env::var("CAIRN_API_TOKENS")
///         .unwrap_or_default()
///         .split(',')
///         .map(str::to_owned)
///         .collect(),
///     ..Default::default()
/// })
/// .await
/// # }
/// ```
#[derive(Clone)]
pub struct ServeOptions {
    /// The database: `sqlite://PATH` (created if missing) or `postgres://…`.
    /// Default `sqlite://cairn.db`.
    pub db_url: String,
    /// A directory of crew files: every `*.toml` directly inside it is
    /// loaded at startup (by its `name`); a file that fails to load, or two
    /// files with the same crew name, stop the startup with an error naming
    /// the file. Other files are ignored. Default `crews`; an empty path
    /// serves no crews (runs of stored crews can still be acted on).
    pub crews_dir: PathBuf,
    /// The address to listen on. Default `127.0.0.1:8080`. Without
    /// `tokens` it must be a loopback address.
    pub listen: SocketAddr,
    /// API tokens (the CLI reads `CAIRN_API_TOKENS`, comma-separated).
    /// With at least one non-blank token every route but `/healthz` and
    /// `/readyz` requires `Authorization: Bearer <token>`. A token shorter
    /// than [`MIN_TOKEN_LEN`] (16) stops the startup ([`Error::WeakToken`]). With none the
    /// API is open (development mode): the server logs a warning and
    /// refuses to listen on a non-loopback address ([`Error::OpenOnNetwork`]).
    /// Blank entries are ignored.
    pub tokens: Vec<String>,
    /// Runs the embedded runner executes at the same time. Default 4; 0
    /// starts no runner (the API only queues runs and records answers, and
    /// wait deadlines are left to `cairn waits expire` or another server).
    pub concurrency: usize,
    /// The largest request body accepted (413 `too_large` beyond). Default 1 MiB.
    pub body_limit: usize,
    /// How long a client gets to send a request's headers, from the
    /// moment the connection opens or its previous request was answered:
    /// the connection is closed after that. Default 10 s.
    pub header_timeout: Duration,
    /// How long a client gets to send a request's body once the headers
    /// arrived (408 `request_timeout`, and the connection closes). Default 30 s.
    pub body_timeout: Duration,
    /// Connections open at once; one more is answered 503
    /// `too_many_connections` and closed. Default 512.
    pub max_connections: usize,
    /// The most database connections this process opens (PostgreSQL),
    /// whatever `concurrency`.
    pub db_connections: u32,
    /// Event streams (`GET /v1/runs/{id}/events`) open at once; one more
    /// is 503 `too_many_streams`. Default 100.
    pub max_event_streams: usize,
    /// Let API clients retry, continue and fork runs of crews this server
    /// does not offer (runs submitted by the CLI or another server on a
    /// shared database). Default `false`: such actions are 404
    /// `crew_not_offered`, because a fork from step 0 re-executes the
    /// run's crew with an input the caller picks.
    pub foreign_runs: bool,
    /// How often the runner applies wait deadlines and looks for queued
    /// runs (it also looks right after each submit, action and answer).
    /// Default 200 ms.
    pub poll_interval: Duration,
    /// On shutdown, how long open requests and runs in flight get to
    /// finish. Runs still executing then are abandoned as `running`; a
    /// `cairn resume` takes them over. Default 10 s.
    pub shutdown_grace: Duration,
    /// A retention pass with this policy every this long, in one process
    /// at a time across every server and worker of the database (needs a
    /// runner: `concurrency` above 0). Default none.
    pub compact: Option<(cairn::CompactPolicy, Duration)>,
    /// The address browsers use to reach this server, such as
    /// `https://cairn.example.com` behind a TLS-terminating proxy: an
    /// `http` or `https` URL with a host ([`Error::PublicUrl`] otherwise).
    /// With `https` the console's session cookie is `Secure` (the server
    /// speaks plain HTTP and trusts no proxy's `X-Forwarded-Proto`, so
    /// this is how it learns). Without tokens (development mode), requests
    /// addressed to its host are served besides those addressed to
    /// `127.0.0.1`, `[::1]` or `localhost`; any other `Host` is 400
    /// `host_not_allowed`, which keeps DNS rebinding pages out. Default
    /// none.
    pub public_url: Option<url::Url>,
    /// Trace export (`OTEL_*`, `cairn::otel`): the runs submitted here
    /// are traced, and this server exports every sampled run's spans.
    /// Default none.
    pub otel: Option<cairn::otel::OtelConfig>,
    /// What the model calls this server executes cost
    /// ([`cairn::PriceTable`], `CAIRN_PRICES`). Default none: unpriced.
    pub prices: Option<std::sync::Arc<cairn::PriceTable>>,
    /// The limits this server declares per provider key
    /// ([`cairn::LimitTable`], `CAIRN_LIMITS`), applied to a key no crew
    /// and no operator set limits for. Default none.
    pub key_limits: Option<std::sync::Arc<cairn::LimitTable>>,
    /// Notices of open waits: a signed webhook per wait, with a link per
    /// principal who may answer (`notify.rs`). Default none.
    pub notify: Option<crate::notify::NotifyOptions>,
}

/// Tokens and the database password are left out, so options can be logged.
impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let db_url = match url::Url::parse(&self.db_url) {
            Ok(mut url) if url.password().is_some() => {
                let _ = url.set_password(Some("redacted"));
                url.to_string()
            }
            _ => self.db_url.clone(),
        };
        f.debug_struct("ServeOptions")
            .field("db_url", &db_url)
            .field("crews_dir", &self.crews_dir)
            .field("listen", &self.listen)
            .field("tokens", &format_args!("[{} redacted]", self.tokens.len()))
            .field("concurrency", &self.concurrency)
            .field("body_limit", &self.body_limit)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("db_connections", &self.db_connections)
            .field("max_event_streams", &self.max_event_streams)
            .field("foreign_runs", &self.foreign_runs)
            .field("poll_interval", &self.poll_interval)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("compact", &self.compact)
            .field(
                "public_url",
                &self.public_url.as_ref().map(url::Url::as_str),
            )
            .field("otel", &self.otel)
            .field("prices", &self.prices.as_ref().map(|p| &p.version))
            .field("key_limits", &self.key_limits.as_ref().map(|t| t.len()))
            .finish()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            db_url: "sqlite://cairn.db".to_owned(),
            crews_dir: PathBuf::from("crews"),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            tokens: vec![],
            concurrency: 4,
            body_limit: DEFAULT_BODY_LIMIT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            db_connections: cairn::DEFAULT_DB_CONNECTIONS,
            max_event_streams: DEFAULT_MAX_EVENT_STREAMS,
            foreign_runs: false,
            poll_interval: Duration::from_millis(200),
            shutdown_grace: Duration::from_secs(10),
            compact: None,
            public_url: None,
            otel: None,
            prices: None,
            key_limits: None,
            notify: None,
        }
    }
}

/// Refuses a public URL that is not `http(s)://host…`.
fn check_public_url(url: &url::Url) -> Result<()> {
    let reason = if !matches!(url.scheme(), "http" | "https") {
        "is not an http or https URL"
    } else if url.host_str().is_none_or(str::is_empty) {
        "has no host"
    } else {
        return Ok(());
    };
    Err(Error::PublicUrl {
        url: url.to_string(),
        reason,
    })
}

/// A bound server, not serving yet.
pub struct Server {
    listener: tokio::net::TcpListener,
    state: AppState,
    opts: ServeOptions,
}

impl Server {
    /// Checks the options, loads the crews, opens the database and binds
    /// the address, in that order (so a mistake costs no connection).
    pub async fn bind(opts: ServeOptions) -> Result<Server> {
        if let Some(len) = crate::auth::Tokens::too_short(&opts.tokens) {
            return Err(Error::WeakToken {
                len,
                min: MIN_TOKEN_LEN,
            });
        }
        if let Some(notify) = &opts.notify {
            crate::notify::Notifier::new(notify.clone(), String::new()).map_err(Error::Notify)?;
        }
        if let Some(url) = &opts.public_url {
            check_public_url(url)?;
        }
        let state_tokens = crate::auth::Tokens::new(&opts.tokens);
        let crews = match opts.crews_dir.as_os_str().is_empty() {
            true => Crews::default(),
            false => Crews::load_dir(&opts.crews_dir)?,
        };
        if crews.is_empty() {
            tracing::warn!(dir = %opts.crews_dir.display(), "no crew files (*.toml) found: runs cannot be submitted");
        }
        let config = ExecutorConfig {
            owner: format!("cairn-server:pid:{}", std::process::id()),
            prices: opts.prices.clone(),
            key_limits: opts.key_limits.clone(),
            ..ExecutorConfig::default()
        };
        let open = OpenOptions {
            max_connections: opts.db_connections,
            ..OpenOptions::default()
        };
        let mut engine = Engine::open_with(&opts.db_url, &open, config)
            .await
            .map_err(|e| Error::Open(Box::new(e)))?;
        if let Some(otel) = &opts.otel {
            engine = engine.traced(otel.sampler);
        }
        // Every version it loads is offered: a run's `compatible` policy
        // moves it to the newest at a claim.
        for crew in crews.iter() {
            engine.register(crew);
        }
        // Without tokens, only principals stored in the database close the API.
        if state_tokens.is_empty() && !opts.listen.ip().is_loopback() {
            let principals = engine
                .principals()
                .await
                .map_err(|e| Error::Open(Box::new(e)))?;
            if principals.is_empty() {
                return Err(Error::OpenOnNetwork {
                    listen: opts.listen,
                });
            }
        }
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|source| Error::Bind {
                listen: opts.listen,
                source,
            })?;
        let mut state = AppState::new(engine, crews)
            .with_tokens(&opts.tokens)
            .with_body_limit(opts.body_limit)
            .with_body_timeout(opts.body_timeout)
            .with_max_event_streams(opts.max_event_streams)
            .with_foreign_runs(opts.foreign_runs);
        if let Some(url) = &opts.public_url {
            state = state.with_public_url(url.clone());
        }
        Ok(Server {
            listener,
            state,
            opts,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr().map_err(|source| Error::Bind {
            listen: self.opts.listen,
            source,
        })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves the API and runs the runner until `shutdown` completes, then
    /// stops: no new connections or runs, event streams end, open requests
    /// and runs in flight get `shutdown_grace` to finish.
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
        let Server {
            listener,
            state,
            opts,
        } = self;
        let addr = listener.local_addr().unwrap_or(opts.listen);
        if let Err(e) = state.closed().refresh(&state).await {
            tracing::warn!(%addr, error = %cairn::ErrorChain(&e), "the database did not say whether principals exist: requests are refused until it does");
        }
        if state.requires_token() {
            tracing::info!(%addr, crews = state.crews().len(), "cairn API listening (bearer tokens required)");
        } else {
            tracing::warn!(%addr, crews = state.crews().len(), "cairn API listening in DEVELOPMENT MODE: no API tokens or principals, anyone who can reach {addr} can submit runs; add a principal (`cairn principals add NAME --role admin`) or set CAIRN_API_TOKENS to require a token");
        }
        let traces = opts
            .otel
            .clone()
            .map(|c| cairn::otel::TraceExporter::start(state.engine(), c));
        if let Some(notify) = opts.notify.clone() {
            let base = match &opts.public_url {
                Some(url) => url.to_string(),
                None => format!("http://{addr}"),
            };
            match crate::notify::Notifier::new(notify, base) {
                Ok(n) => {
                    tokio::spawn(n.run(state.clone(), state.shutdown_signal()));
                }
                Err(e) => tracing::error!(error = %e, "notices are off"),
            }
        }
        let runner = (opts.concurrency > 0).then(|| {
            Runner::start(
                state.engine().clone(),
                RunnerOptions {
                    concurrency: opts.concurrency,
                    poll: opts.poll_interval,
                    grace: opts.shutdown_grace,
                    compact: opts.compact.clone(),
                },
                state.waker().clone(),
                state.shutdown_signal(),
                state.metrics().clone(),
            )
        });

        let limits = Limits {
            header_timeout: opts.header_timeout,
            max_connections: opts.max_connections,
        };
        let server = listen::serve(
            listener,
            router(state.clone()),
            limits,
            state.shutdown_signal(),
        );
        tokio::pin!(server);
        let ended_by_itself = tokio::select! {
            () = &mut server => true,
            () = shutdown => false,
        };
        tracing::info!("shutting down");
        state.begin_shutdown();
        if !ended_by_itself
            && tokio::time::timeout(opts.shutdown_grace, &mut server)
                .await
                .is_err()
        {
            tracing::warn!("open connections did not close within the grace period; dropping them");
        }
        if let Some(runner) = runner {
            runner.stopped().await;
        }
        if let Some(traces) = traces {
            traces.stop().await;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// Runs the server until Ctrl-C or SIGTERM: what `cairn serve` calls.
/// The handlers are in place before the server binds, so a stop that
/// comes while it starts is a graceful one too.
pub async fn serve(opts: ServeOptions) -> Result<()> {
    let stop = shutdown_signal();
    Server::bind(opts).await?.run_until(stop).await
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM; both handlers are installed
/// when this is called, not when the future is first polled (a process
/// stopped as it starts stops gracefully). `cairn serve` and `cairn
/// worker` both stop on it.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        let listen = |kind: SignalKind, name: &'static str| {
            signal(kind)
                .map_err(|e| tracing::error!(error = %e, "cannot listen for {name}"))
                .ok()
        };
        let (int, term) = (
            listen(SignalKind::interrupt(), "Ctrl-C"),
            listen(SignalKind::terminate(), "SIGTERM"),
        );
        async fn recv(s: Option<Signal>) {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        async move {
            tokio::select! {
                () = recv(int) => {}
                () = recv(term) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_tokens_and_the_database_password() {
        let opts = ServeOptions {
            db_url: "postgres://cairn:hunter2@db:5432/cairn".into(),
            tokens: vec!["tok-abc".into()],
            ..ServeOptions::default()
        };
        let text = format!("{opts:?}");
        assert!(
            !text.contains("hunter2") && !text.contains("tok-abc"),
            "{text}"
        );
        assert!(
            text.contains("db:5432") && text.contains("[1 redacted]"),
            "{text}"
        );
    }
}
