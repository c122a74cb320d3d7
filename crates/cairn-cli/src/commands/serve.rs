//! What runs next to the database only: `serve`, `worker` and `demo`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use cairn::{Engine, ExecutorConfig, OpenOptions};

use crate::args::Command;
use crate::demo;
use crate::input::usage;
use crate::report::exit;

/// `serve`, `worker` or `demo` on database `db` (`db_given`: typed as
/// `--db`, which `demo` refuses rather than ignores).
pub async fn main(command: Command, db: &str, db_given: bool) -> anyhow::Result<u8> {
    match command {
        Command::Worker {
            concurrency,
            db_connections,
            lease_ms,
            heartbeat_ms,
            poll_ms,
            grace_ms,
            retention,
        } => {
            let compact = retention.periodic()?;
            if heartbeat_ms == 0 || heartbeat_ms >= lease_ms {
                return Err(usage(format!(
                    "--heartbeat-ms ({heartbeat_ms}) must be above 0 and below --lease-ms ({lease_ms})"
                )));
            }
            let opts = OpenOptions {
                create: true,
                connect_timeout: Duration::from_secs(3),
                max_connections: db_connections,
                ..OpenOptions::default()
            };
            let config = ExecutorConfig {
                owner: cairn::holder::owner("cairn-worker"),
                lease: Duration::from_millis(lease_ms),
                heartbeat: Duration::from_millis(heartbeat_ms),
                prices: crate::config::prices()?,
                key_limits: crate::config::key_limits()?,
                ..ExecutorConfig::default()
            };
            let engine = crate::traces::traced(Engine::open_with(db, &opts, config).await?)?;
            crate::traces::export(&engine)?;
            // Installed before the first line (`cairn_server::shutdown_signal`).
            let signal = cairn_server::shutdown_signal();
            let pid = std::process::id();
            eprintln!("cairn worker {pid}: {concurrency} at once, lease {lease_ms} ms");
            // Said as `serve` says it: what a stop does, then that it ended.
            let shutdown = async move {
                signal.await;
                eprintln!(
                    "cairn worker {pid}: stopping: no new claims; runs in flight get up to \
                     {grace_ms} ms to reach their next stop"
                );
            };
            let work = cairn::WorkOptions {
                concurrency,
                poll: Duration::from_millis(poll_ms),
                shutdown_grace: Duration::from_millis(grace_ms),
                compact,
                ..cairn::WorkOptions::default()
            };
            let worked = engine.work(work, shutdown).await;
            crate::traces::finish().await;
            worked?;
            eprintln!("cairn worker {pid}: stopped");
            Ok(exit::OK)
        }
        Command::Serve { serve: args } => {
            let compact = args.retention.periodic()?;
            let crews_dir = match args.crews {
                Some(dir) => dir,
                None if std::path::Path::new("crews").is_dir() => PathBuf::from("crews"),
                None => {
                    // An empty path: no crews, and no directory to create
                    // (a temporary one outlived a killed server).
                    eprintln!("cairn: no --crews and no ./crews directory: serving no crews");
                    PathBuf::new()
                }
            };
            let tokens = std::env::var("CAIRN_API_TOKENS")
                .unwrap_or_default()
                .split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect();
            cairn_server::serve(cairn_server::ServeOptions {
                db_url: db.to_owned(),
                crews_dir,
                listen: args.listen,
                tokens,
                concurrency: args.concurrency,
                compact,
                header_timeout: args.header_timeout,
                body_timeout: args.body_timeout,
                max_connections: args.max_connections,
                max_event_streams: args.max_event_streams,
                db_connections: args.db_connections,
                foreign_runs: args.foreign_runs,
                public_url: args.public_url,
                otel: crate::traces::config()?,
                prices: crate::config::prices()?,
                key_limits: crate::config::key_limits()?,
                notify: crate::config::notify()?,
                ..Default::default()
            })
            .await?;
            Ok(exit::OK)
        }
        Command::Demo { .. } if db_given => Err(usage(
            "`demo` keeps its own SQLite file (in --dir, or a temporary directory); \
             --db is not used: drop it",
        )),
        Command::Demo {
            agent: true, dir, ..
        } => demo::agent(dir).await.context("demo"),
        Command::Demo { steps, kill_at, .. } if kill_at >= steps => Err(usage(format!(
            "--kill-at ({kill_at}) must be below --steps ({steps})"
        ))),
        Command::Demo {
            steps,
            kill_at,
            dir,
            ..
        } => demo::run(steps, kill_at, dir).await.context("demo"),
        _ => Err(usage("not a command of the database's side")),
    }
}
