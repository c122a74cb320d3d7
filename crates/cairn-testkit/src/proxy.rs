//! `CutProxy`: a TCP proxy between the processes of a test and a database
//! server that cuts one connection on cue, for the tests of commits that
//! survive a lost acknowledgement. Armed with a marker (bytes the request
//! to cut carries, such as a step output's text in its bind message), it
//! either forwards that request and then loses the server's answer
//! ([`Cut::Answer`]: the commit landed, the client never hears so), or
//! loses the request itself ([`Cut::Request`]: nothing landed); then it
//! closes both sides. It can also hold every request back (a partition),
//! to keep a retry waiting while the test changes the database behind it,
//! or forward nothing either way while keeping every socket open (a
//! blackhole: a standby streaming through it stops receiving).
//!
//! Plain threads, blocking sockets: a test's proxy carries a few
//! connections. Dropping it stops accepting; open connections end when
//! either side closes.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a cut loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The request reaches the server; its answer is lost.
    Answer,
    /// The request is lost.
    Request,
}

#[derive(Default)]
struct Shared {
    armed: Mutex<Option<(Vec<u8>, Cut)>>,
    hold: AtomicBool,
    blackhole: AtomicBool,
    stop: AtomicBool,
    cuts: AtomicUsize,
}

/// A proxy on `127.0.0.1:PORT` to one upstream address.
pub struct CutProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl CutProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> std::io::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let shared = Arc::clone(&accepting);
                std::thread::spawn(move || serve(client, upstream, shared));
            }
        });
        Ok(CutProxy { addr, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `url` with its `host:port` replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
        let (auth_host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = auth_host
            .rsplit_once('@')
            .map(|(u, _)| format!("{u}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}{}/{path}", self.addr)
    }

    /// Cuts the next connection whose client sends `marker`, once.
    pub fn arm(&self, marker: &[u8], cut: Cut) {
        *lock(&self.shared.armed) = Some((marker.to_vec(), cut));
    }

    /// While on, no request reaches the server: new connections wait
    /// before they connect, open ones before they forward (a partition).
    pub fn hold(&self, on: bool) {
        self.shared.hold.store(on, Ordering::SeqCst);
    }

    /// While on, nothing is forwarded either way; sockets stay open.
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// How many cuts happened.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.hold.store(false, Ordering::SeqCst);
        self.shared.blackhole.store(false, Ordering::SeqCst);
        // Wakes the accept loop so it sees `stop`.
        let _ = TcpStream::connect(self.addr);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn serve(client: TcpStream, upstream: SocketAddr, shared: Arc<Shared>) {
    while shared.hold.load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if shared.stop.load(Ordering::SeqCst) {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    // Set once the request to cut went out: the next answer is lost.
    let losing = Arc::new(AtomicBool::new(false));
    let answers = {
        let losing = Arc::clone(&losing);
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || answers(server2, client2, &losing, &shared))
    };
    requests(client, server, &losing, &shared);
    let _ = answers.join();
}

/// Client to server, watching for the armed marker.
fn requests(mut client: TcpStream, mut server: TcpStream, losing: &AtomicBool, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    // The end of the previous read, so a marker split across reads is seen.
    let mut tail: Vec<u8> = vec![];
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while (shared.hold.load(Ordering::SeqCst) || shared.blackhole.load(Ordering::SeqCst))
            && !shared.stop.load(Ordering::SeqCst)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let chunk = &buf[..n];
        let cut = {
            let mut armed = lock(&shared.armed);
            let hit = armed.as_ref().and_then(|(marker, cut)| {
                let mut seen = tail.clone();
                seen.extend_from_slice(chunk);
                seen.windows(marker.len())
                    .any(|w| w == marker.as_slice())
                    .then_some(*cut)
            });
            if let Some((marker, _)) = armed.as_ref() {
                let keep = marker.len().saturating_sub(1).min(chunk.len());
                tail = chunk[chunk.len() - keep..].to_vec();
            }
            if hit.is_some() {
                *armed = None;
            }
            hit
        };
        match cut {
            Some(Cut::Request) => {
                shared.cuts.fetch_add(1, Ordering::SeqCst);
                break;
            }
            Some(Cut::Answer) => {
                losing.store(true, Ordering::SeqCst);
                if server.write_all(chunk).is_err() {
                    break;
                }
                // The answer thread closes both sides when it arrives.
            }
            None => {
                if losing.load(Ordering::SeqCst) || server.write_all(chunk).is_err() {
                    break;
                }
            }
        }
    }
    let _ = server.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
}

/// Server to client, losing the answer to a cut request.
fn answers(mut server: TcpStream, mut client: TcpStream, losing: &AtomicBool, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if losing.load(Ordering::SeqCst) {
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        while shared.blackhole.load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
}
