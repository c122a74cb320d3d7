//! Limits declared for provider keys before any operator sets them: by a
//! process's configuration (`CAIRN_LIMITS`, a [`LimitTable`]) and by a
//! crew's agent (`limits = { rpm = 60 }`), which overrides it. A step
//! brings its key's declared limits to each admission ([`Declared`] in
//! [`crate::KeyAsk`]); the store applies them to the key unless an
//! operator set the key's limits (`cairn limits set`), which win until
//! `cairn limits reset`. Every process should read the same file: the key
//! takes the limits of the last declaration that reached it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::KeyLimits;

/// Who set the limits a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitsFrom {
    /// `cairn limits set` (or the API): wins over declarations.
    Operator,
    /// An agent's `limits` in a crew file.
    Crew,
    /// A process's `CAIRN_LIMITS` file.
    Config,
}

impl LimitsFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitsFrom::Operator => "operator",
            LimitsFrom::Crew => "crew",
            LimitsFrom::Config => "config",
        }
    }

    pub fn parse(text: &str) -> Option<LimitsFrom> {
        match text {
            "operator" => Some(LimitsFrom::Operator),
            "crew" => Some(LimitsFrom::Crew),
            "config" => Some(LimitsFrom::Config),
            _ => None,
        }
    }
}

/// A key's limits as a step declares them, and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared {
    pub limits: KeyLimits,
    pub from: LimitsFrom,
}

impl Declared {
    /// What a step declares for `key`: its agent's own `limits`, else the
    /// process's table's entry for the key, else nothing.
    /// An agent's limits without a `max_pause_ms` take the table's for
    /// the key (its own, else the file's).
    pub fn of(agent: Option<&KeyLimits>, table: Option<&LimitTable>, key: &str) -> Option<Self> {
        match agent {
            Some(limits) => Some(Declared {
                limits: KeyLimits {
                    max_pause_ms: limits
                        .max_pause_ms
                        .or_else(|| table.and_then(|t| t.get(key)?.max_pause_ms)),
                    ..*limits
                },
                from: LimitsFrom::Crew,
            }),
            None => table.and_then(|t| t.get(key)).map(|limits| Declared {
                limits,
                from: LimitsFrom::Config,
            }),
        }
    }
}

impl Declared {
    /// Whether this declaration replaces a key's stored limits (`stored`,
    /// set by `from`): an operator's never, a crew's only by a crew's (a
    /// process's table is the default crews override); otherwise when
    /// they differ.
    pub fn replaces(&self, stored: KeyLimits, from: Option<LimitsFrom>) -> bool {
        match (from, self.from) {
            (Some(LimitsFrom::Operator), _) => false,
            (Some(LimitsFrom::Crew), LimitsFrom::Config) => false,
            _ => stored != self.limits || from != Some(self.from),
        }
    }
}

/// A process's limits per provider key, from a TOML file, and the longest
/// pause a provider's answer puts on any key without its own
/// (`max_pause_ms` at the top; `crate::DEFAULT_MAX_PAUSE` without it):
///
/// ```toml
/// max_pause_ms = 600000
/// [[key]]
/// key = "provider=openai,url=https://api.openai.com/v1,key=OPENAI_API_KEY"
/// in_flight = 16
/// rpm = 500
/// tpm = 200000
/// max_pause_ms = 60000
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitTable {
    keys: BTreeMap<String, KeyLimits>,
    max_pause_ms: Option<u64>,
}

/// A limits file that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the limits file {0}")]
pub struct BadLimitTable(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    key: Vec<Entry>,
    max_pause_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    key: String,
    in_flight: Option<u32>,
    rpm: Option<u32>,
    tpm: Option<u32>,
    max_pause_ms: Option<u64>,
}

impl LimitTable {
    pub fn parse(text: &str) -> Result<LimitTable, BadLimitTable> {
        let file: File = toml::from_str(text).map_err(|e| BadLimitTable(e.to_string()))?;
        let default = KeyLimits {
            max_pause_ms: file.max_pause_ms,
            ..KeyLimits::default()
        };
        default
            .check()
            .map_err(|err| BadLimitTable(err.to_string()))?;
        let mut keys = BTreeMap::new();
        for e in file.key {
            let limits = KeyLimits {
                in_flight: e.in_flight,
                rpm: e.rpm,
                tpm: e.tpm,
                max_pause_ms: e.max_pause_ms,
            };
            if e.key.trim().is_empty() {
                return Err(BadLimitTable("has a `[[key]]` with an empty key".into()));
            }
            crate::meter::keys::check_key(&e.key).map_err(|err| BadLimitTable(err.to_string()))?;
            limits
                .check()
                .map_err(|err| BadLimitTable(format!("key {}: {err}", e.key)))?;
            if !limits.any() {
                return Err(BadLimitTable(format!(
                    "key {} sets no limit: give in_flight, rpm, tpm or max_pause_ms",
                    e.key
                )));
            }
            if keys.insert(e.key.clone(), limits).is_some() {
                return Err(BadLimitTable(format!("names key {} twice", e.key)));
            }
        }
        Ok(LimitTable {
            keys,
            max_pause_ms: file.max_pause_ms,
        })
    }

    /// The limits the table declares for `key`: its `[[key]]` (with the
    /// file's `max_pause_ms` when it has none), else only the file's
    /// `max_pause_ms`, else none.
    pub fn get(&self, key: &str) -> Option<KeyLimits> {
        match self.keys.get(key) {
            Some(limits) => Some(KeyLimits {
                max_pause_ms: limits.max_pause_ms.or(self.max_pause_ms),
                ..*limits
            }),
            None => self.max_pause_ms.map(|ms| KeyLimits {
                max_pause_ms: Some(ms),
                ..KeyLimits::default()
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bad` is refused, saying `says`.
    #[track_caller]
    fn refused(bad: &str, says: &str) {
        let err = LimitTable::parse(bad).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains(says)),
            "{bad}: {err:?}"
        );
    }

    const KEY: &str = "provider=openai,url=http://x,key=K";

    #[test]
    fn a_limits_file_reads_per_key_and_a_bad_one_is_refused_saying_why() {
        let text = format!("[[key]]\nkey = \"{KEY}\"\nrpm = 60\ntpm = 20000\n");
        let table = LimitTable::parse(&text).unwrap_or_default();
        assert_eq!(
            table.get(KEY),
            Some(KeyLimits {
                in_flight: None,
                rpm: Some(60),
                tpm: Some(20000),
                max_pause_ms: None,
            })
        );
        assert_eq!(table.get("other"), None);
        for (bad, says) in [
            (
                format!("[[key]]\nkey = \"{KEY}\"\nrpm = 0\n"),
                "rpm must be between 1",
            ),
            (format!("[[key]]\nkey = \"{KEY}\"\n"), "sets no limit"),
            (
                format!("[[key]]\nkey = \"{KEY}\"\nrps = 3\n"),
                "unknown field `rps`",
            ),
            (
                format!("[[key]]\nkey = \"{KEY}\"\nrpm = 1\n[[key]]\nkey = \"{KEY}\"\ntpm = 5\n"),
                "twice",
            ),
            ("[[key]]\nkey = \"\"\nrpm = 1\n".to_owned(), "empty key"),
        ] {
            refused(&bad, says);
        }
    }

    #[test]
    fn a_limits_file_caps_pauses_for_every_key_or_one() {
        let text = format!("max_pause_ms = 60000\n[[key]]\nkey = \"{KEY}\"\nrpm = 60\n");
        let table = LimitTable::parse(&text).unwrap_or_default();
        let cap = |key: &str| table.get(key).and_then(|l| l.max_pause_ms);
        assert_eq!((cap(KEY), cap("other")), (Some(60_000), Some(60_000)));
        let own = format!("[[key]]\nkey = \"{KEY}\"\nmax_pause_ms = 5000\n");
        let table = LimitTable::parse(&own).unwrap_or_default();
        assert_eq!(table.get(KEY).and_then(|l| l.max_pause_ms), Some(5000));
        assert_eq!(table.get("other"), None);
        let rpm = KeyLimits {
            rpm: Some(1),
            ..KeyLimits::default()
        };
        let crew = Declared::of(Some(&rpm), Some(&table), KEY).map(|d| d.limits.max_pause_ms);
        assert_eq!(
            crew,
            Some(Some(5000)),
            "an agent without a cap takes the file's"
        );
        for (bad, says) in [
            (
                "max_pause_ms = 10\n".to_owned(),
                "max_pause_ms must be between 1000",
            ),
            (
                "[[key]]\nkey = \"a\\nb\"\nrpm = 1\n".to_owned(),
                "control character",
            ),
        ] {
            refused(&bad, says);
        }
    }

    #[test]
    fn an_agents_own_limits_win_over_the_processs_table() {
        let table = LimitTable::parse(&format!("[[key]]\nkey = \"{KEY}\"\nrpm = 60\n")).ok();
        let own = KeyLimits {
            in_flight: Some(2),
            ..KeyLimits::default()
        };
        let crew = Declared::of(Some(&own), table.as_ref(), KEY);
        assert_eq!(
            crew,
            Some(Declared {
                limits: own,
                from: LimitsFrom::Crew
            })
        );
        let config = Declared::of(None, table.as_ref(), KEY).map(|d| (d.limits.rpm, d.from));
        assert_eq!(config, Some((Some(60), LimitsFrom::Config)));
        assert_eq!(Declared::of(None, table.as_ref(), "elsewhere"), None);
        assert_eq!(Declared::of(None, None, KEY), None);
    }

    #[test]
    fn a_declaration_replaces_what_differs_but_never_an_operators_limits() {
        let rpm = |n| KeyLimits {
            rpm: Some(n),
            ..KeyLimits::default()
        };
        let crew = Declared {
            limits: rpm(60),
            from: LimitsFrom::Crew,
        };
        assert!(
            crew.replaces(KeyLimits::default(), None),
            "a key without limits"
        );
        assert!(
            crew.replaces(rpm(30), Some(LimitsFrom::Crew)),
            "a crew's other limits"
        );
        assert!(
            crew.replaces(rpm(60), Some(LimitsFrom::Config)),
            "the same from config"
        );
        assert!(
            !crew.replaces(rpm(60), Some(LimitsFrom::Crew)),
            "already so"
        );
        assert!(!crew.replaces(rpm(5), Some(LimitsFrom::Operator)));
        let config = Declared {
            limits: rpm(90),
            from: LimitsFrom::Config,
        };
        assert!(
            !config.replaces(rpm(60), Some(LimitsFrom::Crew)),
            "a crew overrides config"
        );
        assert!(
            config.replaces(rpm(60), Some(LimitsFrom::Config)),
            "a changed file"
        );
        assert!(!crew.replaces(KeyLimits::default(), Some(LimitsFrom::Operator)));
    }
}
