//! A run's tenant: whose work it is, for fairness among submitters. Within
//! a priority, claims go round-robin across tenants: each tenant's queued
//! runs are spaced [`Tenant::SPACING_SECS`] apart in claim order (a virtual
//! clock per tenant, kept by the store), so one tenant's backlog of a
//! thousand runs does not hold back another tenant's run submitted after
//! it. A tenant may also narrow a provider key (`limit_key = ["tenant"]`).

use serde::{Deserialize, Serialize};

/// A tenant's name: 1 to [`Tenant::MAX_BYTES`] bytes, no control or
/// format character (invisible, or reordering text: two tenants must not
/// look the same), no `,` or `=` (it may be part of a provider key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tenant(String);

/// A tenant name that breaks the rule; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant {name:?} {problem}: a tenant is 1 to {max} bytes with no control or format character, `,` or `=`", max = Tenant::MAX_BYTES)]
pub struct BadTenant {
    pub name: String,
    pub problem: &'static str,
}

impl Tenant {
    pub const MAX_BYTES: usize = 128;
    /// Claim-order time between two queued runs of one tenant: a tenant's
    /// n-th queued run goes as if submitted n seconds after its first, so
    /// another tenant's run submitted a second later goes after one of
    /// them, not after all (a priority point is worth 60 of them).
    pub const SPACING_SECS: f64 = 1.0;

    pub fn new(name: impl Into<String>) -> Result<Tenant, BadTenant> {
        let name = name.into();
        let problem = if name.trim().is_empty() {
            Some("is empty")
        } else if name.len() > Self::MAX_BYTES {
            Some("is too long")
        } else if name.chars().any(|c| c.is_control() || c == ',' || c == '=') {
            Some("holds a control character, `,` or `=`")
        } else if name.chars().any(crate::text::is_format) {
            // U+202E and U+200B make two tenants look the same.
            Some("holds an invisible format character (such as U+200B or U+202E)")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(BadTenant { name, problem }),
            None => Ok(Tenant(name)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_is_a_short_plain_name_or_refused_saying_why() {
        for ok in ["acme", "team 7", "ü-corp"] {
            assert_eq!(
                Tenant::new(ok).map(|t| t.to_string()).ok().as_deref(),
                Some(ok)
            );
        }
        let long = "x".repeat(Tenant::MAX_BYTES + 1);
        for (bad, why) in [
            ("", "is empty"),
            ("  ", "is empty"),
            (long.as_str(), "is too long"),
            ("a,b", "holds a control character, `,` or `=`"),
            ("a=b", "holds a control character, `,` or `=`"),
            ("a\u{0}", "holds a control character, `,` or `=`"),
            (
                "ac\u{200B}me",
                "holds an invisible format character (such as U+200B or U+202E)",
            ),
            (
                "\u{202E}emca",
                "holds an invisible format character (such as U+200B or U+202E)",
            ),
        ] {
            assert_eq!(
                Tenant::new(bad).err().map(|e| e.problem),
                Some(why),
                "{bad:?}"
            );
        }
    }
}
