//! The accept loop: what `axum::serve` did, plus the bounds a server on a
//! network needs. hyper's header read timeout closes a connection whose
//! request headers (or, between keep-alive requests, the next request's)
//! do not arrive in time, so half-sent requests cannot pile up; and a
//! connection limit keeps the process below its file limit: a connection
//! beyond it is answered 503 `too_many_connections` at once and closed,
//! so `/healthz` and authenticated clients get a clear answer instead of
//! the kernel's silence. Each request carries its connection's peer
//! address (`ConnectInfo<SocketAddr>`), which the throttling of wrong
//! tokens counts by.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// The listener's bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
}

/// Refusals being written at once; beyond this a connection over the limit
/// is closed without an answer (each refusal holds a socket briefly).
const MAX_REFUSING: usize = 64;

/// Accepts connections until `stop` becomes true, then stops accepting
/// and waits for open connections to finish their requests (the caller
/// bounds that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Ok(refusal) = refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream, limits.max_connections).await;
                    drop(refusal);
                });
            }
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(with_peer(app.clone(), peer));
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                // A header timeout, a client that went away: not ours to fix.
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The app, each request of the connection marked with its peer address.
fn with_peer(
    app: Router,
    peer: SocketAddr,
) -> tower::util::MapRequest<
    Router,
    impl FnMut(hyper::Request<Incoming>) -> hyper::Request<Incoming> + Clone,
> {
    tower::ServiceExt::map_request(app, move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    })
}

/// Completes once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// An accept error: a client that gave up is nothing; anything else (out
/// of file descriptors) is logged and retried after a pause, as
/// `axum::serve` does, rather than ending the server.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "cannot accept a connection; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Answers a connection over the limit with a 503 and closes it, without
/// reading its request.
async fn refuse(mut stream: TcpStream, limit: usize) {
    let body = serde_json::json!({"error": {
        "code": "too_many_connections",
        "message": format!("the server has {limit} connections open, as many as it allows; try again later"),
    }})
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    if tokio::time::timeout(Duration::from_secs(1), write)
        .await
        .is_err()
    {
        tracing::debug!("could not send a refusal in time");
    }
    tracing::warn!(limit, "refused a connection: too many open");
}
