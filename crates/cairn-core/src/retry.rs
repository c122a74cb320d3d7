//! Retry policies: how many attempts a step gets and how long to wait
//! between them. The wait itself is durable (a `not_before` time stored with
//! the run); this module only computes it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Per-agent retry policy. The default is 3 attempts, waiting 200 ms, then
/// 400 ms (×2 each time, at most 10 s), each ±20 % jitter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, counting the first (1 = never retry).
    pub max_attempts: u32,
    pub initial_delay_ms: u64,
    pub multiplier: f64,
    pub max_delay_ms: u64,
    /// Fraction of the delay added or removed at random (0 ≤ jitter ≤ 1).
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_delay_ms: 200,
            multiplier: 2.0,
            max_delay_ms: 10_000,
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn never() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// Why this policy is unusable, if it is.
    pub fn problem(&self) -> Option<String> {
        if self.max_attempts == 0 {
            return Some("`max_attempts` must be at least 1".into());
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Some(format!(
                "`multiplier` must be ≥ 1 (got {})",
                self.multiplier
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Some(format!(
                "`jitter` must be between 0 and 1 (got {})",
                self.jitter
            ));
        }
        if self.max_delay_ms < self.initial_delay_ms {
            return Some("`max_delay_ms` is below `initial_delay_ms`".into());
        }
        None
    }

    /// Whether a step that just failed `attempt` (counting from 1) gets another.
    pub fn allows_another(&self, attempt: u32) -> bool {
        attempt < self.max_attempts
    }

    /// The wait after failed attempt `attempt`. `seed` picks the jitter, so
    /// the same (run, step, attempt) always waits the same time.
    pub fn delay_after(&self, attempt: u32, seed: u64) -> Duration {
        let exp = attempt.saturating_sub(1).min(64) as i32;
        let base = (self.initial_delay_ms as f64 * self.multiplier.powi(exp))
            .min(self.max_delay_ms as f64);
        // splitmix64 of the seed → a fraction in [-1, 1).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let unit = (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let ms = (base * (1.0 + self.jitter * unit)).clamp(0.0, self.max_delay_ms as f64);
        Duration::from_millis(ms.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_three_attempts_with_exponential_back_off() {
        let p = RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        assert!(p.allows_another(1) && p.allows_another(2) && !p.allows_another(3));
        let delays: Vec<u64> = (1..=8)
            .map(|a| p.delay_after(a, 7).as_millis() as u64)
            .collect();
        assert_eq!(delays, [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
    }

    #[test]
    fn jitter_stays_within_its_band_and_is_deterministic() {
        let p = RetryPolicy::default();
        for seed in 0..500u64 {
            let d = p.delay_after(2, seed).as_millis() as u64;
            assert!((320..=480).contains(&d), "seed {seed}: {d}");
            assert_eq!(p.delay_after(2, seed), p.delay_after(2, seed));
        }
        let spread: std::collections::HashSet<u128> = (0..50u64)
            .map(|s| p.delay_after(2, s).as_millis())
            .collect();
        assert!(spread.len() > 10, "jitter varies with the seed");
    }

    #[test]
    fn bad_policies_are_named() {
        let bad = |p: RetryPolicy| p.problem().unwrap_or_default();
        assert!(bad(RetryPolicy {
            max_attempts: 0,
            ..Default::default()
        })
        .contains("max_attempts"));
        assert!(bad(RetryPolicy {
            jitter: 2.0,
            ..Default::default()
        })
        .contains("jitter"));
        assert!(bad(RetryPolicy {
            multiplier: 0.5,
            ..Default::default()
        })
        .contains("multiplier"));
        assert!(RetryPolicy::default().problem().is_none());
    }
}
