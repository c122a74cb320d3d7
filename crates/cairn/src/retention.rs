//! Retention at the facade: the age a person writes (`30d`, `12h`, `0s`)
//! and `Engine::compact`. The policy itself and what it may remove are the
//! store's (`cairn_checkpoint::CompactPolicy`).

use std::time::Duration;

/// An age that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not an age: write a whole number and a unit, as in 30d, 12h, 15m, 45s or 0s")]
pub struct BadAge {
    pub text: String,
}

/// Reads `30d`, `12h`, `15m`, `45s`, `250ms` (one whole number, one unit).
pub fn parse_age(text: &str) -> Result<Duration, BadAge> {
    let bad = || BadAge {
        text: text.to_owned(),
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = |k: u64| n.checked_mul(k).map(Duration::from_secs);
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3_600),
        "d" => secs(86_400),
        _ => None,
    }
    .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_write_them() {
        for (text, want) in [
            ("30d", 30 * 86_400),
            ("12h", 12 * 3_600),
            ("15m", 900),
            ("45s", 45),
            ("0s", 0),
        ] {
            assert_eq!(parse_age(text), Ok(Duration::from_secs(want)), "{text}");
        }
        assert_eq!(parse_age("250ms"), Ok(Duration::from_millis(250)));
        for bad in [
            "",
            "30",
            "d",
            "1.5h",
            "-1d",
            "3 days",
            "30D",
            "99999999999999999999d",
        ] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
