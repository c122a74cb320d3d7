//! Throttling of wrong tokens per client address, so a token cannot be
//! guessed at network speed: every wrong bearer token and every wrong
//! sign-in costs the client's address one try of a small budget
//! ([`BURST`] tries, one more every [`REFILL`]); with none left, requests
//! that present a token are answered 429 with `Retry-After`, the right
//! token included (else the 429s would still tell a guess from the token).
//!
//! A generic cell rate algorithm: each address keeps only the time its
//! budget is whole again. Written here rather than taken from a crate
//! (`governor` is not in the dependency tree): it is a few lines.
//!
//! The address is the TCP peer's (`ConnectInfo<SocketAddr>`, which the
//! listener sets); IPv6 addresses count by their /64, what one host
//! usually holds. The server has no notion of trusted proxies, so
//! `X-Forwarded-For` is not read: behind a reverse proxy every client
//! shares the proxy's budget. A request without a peer address (the
//! router called in-process, as tests and embedders do) is never
//! throttled.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

/// Wrong tokens an address may present in a row before it is throttled.
pub(crate) const BURST: u32 = 10;
/// How often an address gets one more try back.
pub(crate) const REFILL: Duration = Duration::from_secs(6);
/// Addresses tracked at once; beyond, the one closest to a whole budget
/// is forgotten (so a flood of addresses cannot exhaust memory).
const MAX_CLIENTS: usize = 10_000;

/// The client address of a request, if it came through a listener that
/// says (an extractor that never fails).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientIp(pub Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientIp(client_ip(&parts.extensions)))
    }
}

/// The peer address the listener recorded in a request's extensions.
pub(crate) fn client_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

/// What a budget is kept under: the address, an IPv6 one cut to its /64.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// One address's budget: whole again at `full` (in the past: whole).
#[derive(Debug, Clone, Copy)]
struct Budget {
    full: Instant,
    /// Whether its throttling was logged (once per episode: reset once
    /// the budget is whole again).
    warned: bool,
}

/// The budgets of the addresses that presented wrong tokens lately.
#[derive(Debug)]
pub(crate) struct Throttle {
    budgets: Mutex<HashMap<IpAddr, Budget>>,
    burst: u32,
    refill: Duration,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(BURST, REFILL)
    }
}

impl Throttle {
    pub(crate) fn new(burst: u32, refill: Duration) -> Throttle {
        Throttle {
            budgets: Mutex::default(),
            burst: burst.max(1),
            refill,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Budget>> {
        self.budgets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The time spent tries take to come back when none is left.
    fn slack(&self) -> Duration {
        self.refill.saturating_mul(self.burst - 1)
    }

    /// How long `ip` must wait before presenting a token again, if it
    /// has no try left; `None` to check the token.
    pub(crate) fn wait(&self, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        let budget = *self.lock().get(&key(ip?))?;
        let wait = budget
            .full
            .checked_duration_since(now)?
            .checked_sub(self.slack())?;
        (!wait.is_zero()).then_some(wait)
    }

    /// Records a wrong token from `ip`; logs once when it runs out of tries.
    pub(crate) fn failed(&self, ip: Option<IpAddr>, now: Instant) {
        let Some(ip) = ip else { return };
        let mut budgets = self.lock();
        if budgets.len() >= MAX_CLIENTS && !budgets.contains_key(&key(ip)) {
            make_room(&mut budgets, now);
        }
        let budget = budgets.entry(key(ip)).or_insert(Budget {
            full: now,
            warned: false,
        });
        if budget.full <= now {
            // Whole again: a new episode, logged anew.
            budget.warned = false;
        }
        budget.full = budget.full.max(now) + self.refill;
        let exhausted = budget.full.saturating_duration_since(now) > self.slack();
        if exhausted && !budget.warned {
            budget.warned = true;
            tracing::warn!(client = %ip, tries = self.burst, retry_secs = self.refill.as_secs(), "throttling a client: too many wrong API tokens; it gets one more try every few seconds");
        }
    }
}

/// Forgets the addresses whose budget is whole again, and if none is,
/// the one closest to whole.
fn make_room(budgets: &mut HashMap<IpAddr, Budget>, now: Instant) {
    budgets.retain(|_, b| b.full > now);
    if budgets.len() < MAX_CLIENTS {
        return;
    }
    let closest = budgets.iter().min_by_key(|(_, b)| b.full).map(|(k, _)| *k);
    if let Some(k) = closest {
        budgets.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        text.parse().ok()
    }

    #[test]
    fn a_burst_of_wrong_tokens_then_one_try_per_refill() {
        let throttle = Throttle::new(3, Duration::from_secs(6));
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..3 {
            assert_eq!(throttle.wait(a, t0), None);
            throttle.failed(a, t0);
        }
        assert_eq!(throttle.wait(a, t0), Some(Duration::from_secs(6)));
        assert_eq!(
            throttle.wait(a, t0 + Duration::from_secs(2)),
            Some(Duration::from_secs(4))
        );
        // Another address, and no address at all, are not affected.
        assert_eq!(throttle.wait(ip("192.0.2.2"), t0), None);
        throttle.failed(None, t0);
        assert_eq!(throttle.wait(None, t0), None);
        // One try back after a refill, none after it is spent.
        let t1 = t0 + Duration::from_secs(6);
        assert_eq!(throttle.wait(a, t1), None);
        throttle.failed(a, t1);
        assert_eq!(throttle.wait(a, t1), Some(Duration::from_secs(6)));
        // The whole budget back after a quiet while.
        let t2 = t1 + Duration::from_secs(18);
        for _ in 0..3 {
            assert_eq!(throttle.wait(a, t2), None);
            throttle.failed(a, t2);
        }
        assert!(throttle.wait(a, t2).is_some());
    }

    #[test]
    fn ipv6_addresses_share_their_64_and_mapped_ipv4_is_ipv4() {
        let throttle = Throttle::new(1, Duration::from_secs(60));
        let t0 = Instant::now();
        throttle.failed(ip("2001:db8:1:2::1"), t0);
        assert!(throttle.wait(ip("2001:db8:1:2::ffff"), t0).is_some());
        assert_eq!(throttle.wait(ip("2001:db8:1:3::1"), t0), None);
        throttle.failed(ip("::ffff:192.0.2.7"), t0);
        assert!(throttle.wait(ip("192.0.2.7"), t0).is_some());
    }

    #[test]
    fn the_number_of_addresses_tracked_is_bounded() {
        let throttle = Throttle::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        for n in 0..(MAX_CLIENTS as u32 + 50) {
            throttle.failed(Some(IpAddr::from(n.to_be_bytes())), t0);
        }
        assert!(throttle.lock().len() <= MAX_CLIENTS);
    }
}
