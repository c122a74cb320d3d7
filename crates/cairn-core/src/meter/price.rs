//! What model calls cost: a price table (USD per million tokens per
//! provider and model, with cache-read and cache-write rates), versioned,
//! read from configuration, and the dollar amounts budgets count. A call's
//! cost is computed once, when its response finishes, by the process that
//! made it, and journaled with the table's version; sums are exact
//! (billionths of a dollar), so a total never drifts from its calls.

use serde::{Deserialize, Serialize};

/// US dollars, held as billionths (exact sums); dollars in JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(pub u64);

const NANOS: u64 = 1_000_000_000;

impl Usd {
    /// From dollars: `None` if negative, not finite or past ~18 billion.
    pub fn from_dollars(dollars: f64) -> Option<Usd> {
        let nanos = (dollars * NANOS as f64).round();
        (dollars.is_finite() && dollars >= 0.0 && nanos < u64::MAX as f64)
            .then_some(Usd(nanos as u64))
    }

    /// From a decimal text (`2`, `2.5`, `0.000001`), exactly.
    pub fn parse(text: &str) -> Option<Usd> {
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let dotted = text.contains('.');
        if !digits(whole) || (dotted && !digits(frac)) || frac.len() > 9 {
            return None;
        }
        let whole: u64 = whole.parse().ok()?;
        let frac: u64 = format!("{frac:0<9}").parse().ok()?;
        whole.checked_mul(NANOS)?.checked_add(frac).map(Usd)
    }

    pub fn dollars(self) -> f64 {
        self.0 as f64 / NANOS as f64
    }

    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }

    pub fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }
}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${:.6}", self.dollars())
    }
}

impl Serialize for Usd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usd, D::Error> {
        let dollars = f64::deserialize(d)?;
        Usd::from_dollars(dollars).ok_or_else(|| {
            serde::de::Error::custom(format!("{dollars} is not an amount of dollars"))
        })
    }
}

/// One model's rates, in USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub provider: String,
    pub model: String,
    pub input: f64,
    pub output: f64,
    /// Input read from the prompt cache; default: `input`.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache; default: `input`.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

/// The tokens of one call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Whether `input` already counts the cached tokens (OpenAI's
    /// `prompt_tokens` does; Anthropic's `input_tokens` does not).
    pub input_includes_cache: bool,
}

impl Price {
    /// What a call cost at these rates.
    pub fn cost(&self, t: CallTokens) -> Usd {
        let fresh = match t.input_includes_cache {
            true => t.input.saturating_sub(t.cache_read + t.cache_write),
            false => t.input,
        };
        let parts = [
            (fresh, self.input),
            (t.output, self.output),
            (t.cache_read, self.cache_read.unwrap_or(self.input)),
            (t.cache_write, self.cache_write.unwrap_or(self.input)),
        ];
        // Rates in billionths of a dollar per million tokens, summed
        // exactly, rounded once.
        let nanos: u128 = parts
            .iter()
            .map(|(n, rate)| u128::from(*n) * (rate * NANOS as f64).round() as u128)
            .sum();
        Usd(u64::try_from((nanos + 500_000) / 1_000_000).unwrap_or(u64::MAX))
    }
}

/// A price table (`--prices FILE`, `CAIRN_PRICES`):
///
/// ```toml
/// version = "2026-11-01"
/// [[prices]]
/// provider = "openai"
/// model = "gpt-4o-mini"
/// input = 0.15
/// output = 0.60
/// cache_read = 0.075
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// Journaled with each cost it prices: a new table gets a new version.
    pub version: String,
    #[serde(default)]
    pub prices: Vec<Price>,
}

/// A price table that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("price table: {0}")]
pub struct BadPrices(pub String);

impl PriceTable {
    pub fn parse(text: &str) -> Result<PriceTable, BadPrices> {
        let table: PriceTable = toml::from_str(text).map_err(|e| BadPrices(e.to_string()))?;
        if table.version.trim().is_empty() {
            return Err(BadPrices("`version` is empty".into()));
        }
        for p in &table.prices {
            let rates = [Some(p.input), Some(p.output), p.cache_read, p.cache_write];
            if rates.iter().flatten().any(|r| !r.is_finite() || *r < 0.0) {
                return Err(BadPrices(format!(
                    "{} {}: a rate is negative or not a number",
                    p.provider, p.model
                )));
            }
            let same = |q: &&Price| q.provider == p.provider && q.model == p.model;
            if table.prices.iter().filter(same).count() > 1 {
                return Err(BadPrices(format!(
                    "{} {} is priced twice",
                    p.provider, p.model
                )));
            }
        }
        Ok(table)
    }

    /// The rates of `provider`'s `model`, if the table has them.
    pub fn of(&self, provider: &str, model: &str) -> Option<&Price> {
        self.prices
            .iter()
            .find(|p| p.provider == provider && p.model == model)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
version = "v1"
[[prices]]
provider = "openai"
model = "gpt-4o-mini"
input = 0.15
output = 0.60
cache_read = 0.075
[[prices]]
provider = "anthropic"
model = "claude"
input = 3
output = 15
cache_read = 0.30
cache_write = 3.75
"#;

    #[test]
    fn a_calls_cost_matches_a_hand_computation_for_either_way_of_counting_cache() {
        let table = PriceTable::parse(TABLE).unwrap();
        // OpenAI: 10,000 prompt tokens of which 4,000 cached, 2,000 out:
        // 6,000 × 0.15 + 4,000 × 0.075 + 2,000 × 0.60 per million
        // = 0.0009 + 0.0003 + 0.0012 = $0.0024.
        let openai = CallTokens {
            input: 10_000,
            output: 2_000,
            cache_read: 4_000,
            cache_write: 0,
            input_includes_cache: true,
        };
        let cost = table.of("openai", "gpt-4o-mini").unwrap().cost(openai);
        assert_eq!(cost, Usd(2_400_000));
        // Anthropic: 1,000 input (uncached), 5,000 read, 2,000 written, 500
        // out: 0.003 + 0.0015 + 0.0075 + 0.0075 = $0.0195.
        let anthropic = CallTokens {
            input: 1_000,
            output: 500,
            cache_read: 5_000,
            cache_write: 2_000,
            input_includes_cache: false,
        };
        let cost = table.of("anthropic", "claude").unwrap().cost(anthropic);
        assert_eq!(cost, Usd(19_500_000));
        assert_eq!(table.of("openai", "gpt-5"), None);
    }

    #[test]
    fn a_bad_table_is_refused_naming_what_is_wrong() {
        for (text, says) in [
            ("version = \"\"", "version"),
            ("prices = []", "version"),
            (
                "version = \"1\"\n[[prices]]\nprovider = \"a\"\nmodel = \"m\"\ninput = -1\noutput = 1",
                "negative",
            ),
            (
                "version = \"1\"\n[[prices]]\nprovider = \"a\"\nmodel = \"m\"\ninput = 1\noutput = 1\n\
                 [[prices]]\nprovider = \"a\"\nmodel = \"m\"\ninput = 2\noutput = 2",
                "twice",
            ),
            ("version = \"1\"\ncurrency = \"eur\"", "currency"),
        ] {
            let e = PriceTable::parse(text).unwrap_err();
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn dollars_read_exactly_and_print_as_dollars() {
        assert_eq!(Usd::parse("2.5"), Some(Usd(2_500_000_000)));
        assert_eq!(Usd::parse("0.000000001"), Some(Usd(1)));
        assert_eq!(Usd::parse("3"), Some(Usd(3_000_000_000)));
        for bad in ["", ".5", "1.", "-1", "1e3", "0.0000000001", "lots"] {
            assert_eq!(Usd::parse(bad), None, "{bad}");
        }
        assert_eq!(serde_json::to_string(&Usd(2_500_000_000)).unwrap(), "2.5");
        let back: Usd = serde_json::from_str("0.0024").unwrap();
        assert_eq!(back, Usd(2_400_000));
        assert!(serde_json::from_str::<Usd>("-1").is_err());
        assert_eq!(Usd(19_500_000).to_string(), "$0.019500");
    }
}
