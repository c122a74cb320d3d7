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
//! blackhole: a standby streaming through it stops receiving). For the
//! fault campaign it also delays every chunk either way, loses every
//! answer while told to (lost acknowledgements: each request still lands,
//! its connection is then closed), resets every open connection, and
//! redirects new connections to another server.
//!
//! Plain threads, blocking sockets: a test's proxy carries a few
//! connections. Dropping it stops accepting; open connections end when
//! either side closes.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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

struct Shared {
    upstream: Mutex<SocketAddr>,
    armed: Mutex<Option<(Vec<u8>, Cut)>>,
    hold: AtomicBool,
    blackhole: AtomicBool,
    lose_answers: AtomicBool,
    delay_ms: AtomicU64,
    stop: AtomicBool,
    cuts: AtomicUsize,
    /// Each open connection's two sockets, by a number of its own, so that
    /// [`CutProxy::reset`] can close them.
    open: Mutex<HashMap<u64, [TcpStream; 2]>>,
    opened: AtomicU64,
}

impl Shared {
    fn new(upstream: SocketAddr) -> Shared {
        Shared {
            upstream: Mutex::new(upstream),
            armed: Mutex::default(),
            hold: AtomicBool::default(),
            blackhole: AtomicBool::default(),
            lose_answers: AtomicBool::default(),
            delay_ms: AtomicU64::default(),
            stop: AtomicBool::default(),
            cuts: AtomicUsize::default(),
            open: Mutex::default(),
            opened: AtomicU64::default(),
        }
    }

    /// Waits out the delay in force, if any.
    fn delay(&self) {
        let ms = self.delay_ms.load(Ordering::SeqCst);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }
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
        let shared = Arc::new(Shared::new(upstream));
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let shared = Arc::clone(&accepting);
                std::thread::spawn(move || serve(client, shared));
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

    /// While on, every answer is lost and its connection closed: the
    /// requests land, their acknowledgements never arrive.
    pub fn lose_answers(&self, on: bool) {
        self.shared.lose_answers.store(on, Ordering::SeqCst);
    }

    /// Every chunk forwarded either way waits `delay` first (zero: none).
    pub fn delay(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.shared.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Closes every open connection, both sides, as a reset would.
    pub fn reset(&self) {
        let open = std::mem::take(&mut *lock(&self.shared.open));
        for [client, server] in open.into_values() {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }

    /// New connections go to `upstream` from now on; open ones are reset.
    pub fn redirect(&self, upstream: SocketAddr) {
        *lock(&self.shared.upstream) = upstream;
        self.reset();
    }

    /// How many cuts happened (armed cuts and answers lost).
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.hold.store(false, Ordering::SeqCst);
        self.shared.blackhole.store(false, Ordering::SeqCst);
        self.reset();
        // Wakes the accept loop so it sees `stop`.
        let _ = TcpStream::connect(self.addr);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn serve(client: TcpStream, shared: Arc<Shared>) {
    while shared.hold.load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if shared.stop.load(Ordering::SeqCst) {
        return;
    }
    let upstream = *lock(&shared.upstream);
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let id = shared.opened.fetch_add(1, Ordering::SeqCst);
    if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
        lock(&shared.open).insert(id, [c, s]);
    }
    // Set once the request to cut went out: the next answer is lost.
    let losing = Arc::new(AtomicBool::new(false));
    let answers = {
        let losing = Arc::clone(&losing);
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || answers(server2, client2, &losing, &shared))
    };
    requests(client, server, &losing, &shared);
    let _ = answers.join();
    lock(&shared.open).remove(&id);
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
                shared.delay();
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
        if losing.load(Ordering::SeqCst) || shared.lose_answers.load(Ordering::SeqCst) {
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            break;
        }
        shared.delay();
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
