//! `rpm` as providers mean it: at most N requests in any 60-second window.
//! The store keeps one row per admitted request for a minute
//! (`key_requests`) and reads, under the key's lock, the N-th newest of
//! those still in the window; [`full_for`] is the rule it applies, written
//! once here. A bucket (full with a minute's worth, refilled continuously)
//! lets 2N through in the minute after it was set, or after a quiet
//! minute: the window never does.

use std::time::Duration;

/// How long a request stays in a key's window.
pub const REQUEST_WINDOW: Duration = Duration::from_secs(60);

/// How long until a key's window has room for one more request, given the
/// age of the `rpm`-th newest request it admitted (`None`: fewer than
/// `rpm` admitted, or that one already left the window): `None` is room
/// now.
pub fn full_for(nth_newest_age: Option<Duration>) -> Option<Duration> {
    nth_newest_age
        .and_then(|age| REQUEST_WINDOW.checked_sub(age))
        .filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller asking every 100 ms for ten minutes at `rpm = 30`, each
    /// admission decided by [`full_for`] over the requests admitted so far:
    /// no 60-second window (slid by 100 ms) holds more than 30, and the
    /// key still serves its 30 a minute (300 in ten minutes, less the
    /// window's own edge).
    #[test]
    fn no_sliding_minute_holds_more_than_rpm_and_rpm_is_served() {
        let rpm = 30usize;
        let tick = Duration::from_millis(100);
        let mut admitted: Vec<Duration> = vec![];
        let mut now = Duration::ZERO;
        while now < Duration::from_secs(600) {
            let nth = admitted
                .len()
                .checked_sub(rpm)
                .map(|i| now.saturating_sub(admitted[i]));
            if full_for(nth).is_none() {
                admitted.push(now);
            }
            now += tick;
        }
        let mut start = Duration::ZERO;
        while start < now {
            let end = start + REQUEST_WINDOW;
            let inside = admitted
                .iter()
                .filter(|t| **t >= start && **t < end)
                .count();
            assert!(
                inside <= rpm,
                "{inside} requests in the minute from {start:?}"
            );
            start += tick;
        }
        assert!(admitted.len() >= 10 * rpm, "served {}", admitted.len());
    }

    #[test]
    fn the_wait_is_until_the_nth_newest_leaves() {
        assert_eq!(full_for(None), None);
        assert_eq!(full_for(Some(Duration::from_secs(60))), None);
        assert_eq!(full_for(Some(Duration::from_secs(75))), None);
        assert_eq!(
            full_for(Some(Duration::from_secs(45))),
            Some(Duration::from_secs(15))
        );
    }
}
