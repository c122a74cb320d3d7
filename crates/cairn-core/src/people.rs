//! People and services who act on Cairn: a [`Principal`] has a name, an
//! [`Access`] level, groups (which approver policies name) and optionally
//! the tenants it may submit as; an action records where it came from
//! ([`Origin`]: the channel, the token's public id, the client address).
//! Tokens themselves never reach this crate: storage keeps their digest.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::meter::tenant::Tenant;

pub mod approvers;

/// What a principal may do. Each level includes the ones below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Reads: runs, waits, events, the console's pages.
    Viewer,
    /// Run actions and submits; answers waits whose policy names no approvers.
    Operator,
    /// Principals, limits, compaction, upgrades.
    Admin,
}

impl Access {
    pub const ALL: [Access; 3] = [Access::Viewer, Access::Operator, Access::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Access::Viewer => "viewer",
            Access::Operator => "operator",
            Access::Admin => "admin",
        }
    }

    /// Whether this level may do what `needed` allows.
    pub fn covers(self, needed: Access) -> bool {
        self >= needed
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Access {
    type Err = BadPrincipal;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Access::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| BadPrincipal::new(s, "is not a role: use viewer, operator or admin"))
    }
}

/// A principal's (or a group's) name that breaks the rule; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} {problem}")]
pub struct BadPrincipal {
    pub name: String,
    pub problem: &'static str,
}

impl BadPrincipal {
    fn new(name: &str, problem: &'static str) -> Self {
        BadPrincipal {
            name: name.to_owned(),
            problem,
        }
    }
}

/// The longest principal or group name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// Checks a principal's or a group's name: 1 to [`MAX_NAME_BYTES`] bytes
/// of ASCII letters, digits, `.`, `_`, `-` and `@` (so `user:NAME` and
/// `group:NAME` in a policy, and a name in an audit line, are unambiguous).
pub fn check_name(name: &str) -> Result<(), BadPrincipal> {
    let problem = if name.is_empty() {
        Some("is empty: a name is 1 to 64 letters, digits, `.`, `_`, `-` or `@`")
    } else if name.len() > MAX_NAME_BYTES {
        Some("is longer than 64 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
    {
        Some("holds a character other than ASCII letters, digits, `.`, `_`, `-` or `@`")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(BadPrincipal::new(name, problem)),
        None => Ok(()),
    }
}

/// A principal to add: its name, level, groups and tenants (none: any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPrincipal {
    pub name: String,
    pub role: Access,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub tenants: Vec<Tenant>,
    /// Where its notices are mailed (with `CAIRN_SMTP_URL`), if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

/// The longest e-mail address, in bytes.
pub const MAX_EMAIL_BYTES: usize = 254;

/// Checks an e-mail address as far as a mail relay needs: one `@` with
/// text on both sides, no space, control character or angle bracket, at
/// most [`MAX_EMAIL_BYTES`] bytes (the relay says whether it exists).
pub fn check_email(email: &str) -> Result<(), BadPrincipal> {
    let shape = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && domain.contains('.') && !domain.contains('@')
    });
    let clean = !email
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || "<>\",;".contains(c));
    match shape && clean && email.len() <= MAX_EMAIL_BYTES {
        true => Ok(()),
        false => Err(BadPrincipal::new(
            email,
            "is not an e-mail address: one `@`, a domain with a dot, no space, `<`, `>`, `,` or `;`",
        )),
    }
}

impl NewPrincipal {
    /// Checks the name and every group's; groups are kept sorted, once each.
    pub fn checked(mut self) -> Result<NewPrincipal, BadPrincipal> {
        check_name(&self.name)?;
        for group in &self.groups {
            check_name(group)?;
        }
        if let Some(email) = &self.email {
            check_email(email)?;
        }
        self.groups.sort();
        self.groups.dedup();
        self.tenants.sort();
        self.tenants.dedup();
        Ok(self)
    }
}

/// A stored principal, as `cairn principals list` shows it (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub name: String,
    pub role: Access,
    pub groups: Vec<String>,
    /// The tenants it may submit as; empty: any.
    pub tenants: Vec<Tenant>,
    /// Where its notices are mailed, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The public part of its current token (`cairn_<token_id>_…`), which
    /// the audit names; the token's secret is stored only as a digest.
    pub token_id: String,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    /// When it was disabled; a disabled principal's token is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<DateTime<Utc>>,
}

impl Principal {
    pub fn is_disabled(&self) -> bool {
        self.disabled_at.is_some()
    }

    /// Whether it may submit as `tenant` (none named: only if it is bound
    /// to no tenant).
    pub fn may_submit_as(&self, tenant: Option<&Tenant>) -> bool {
        match tenant {
            _ if self.tenants.is_empty() => true,
            Some(t) => self.tenants.contains(t),
            None => false,
        }
    }
}

/// The channel an action came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// The HTTP API, with a bearer token.
    Api,
    /// The web console, signed in.
    Console,
    /// A signed link from a notification.
    Link,
    /// The CLI through a server (`--server`), as its `User-Agent` says
    /// (`cairn-cli/VERSION`): a channel for the audit, not a credential.
    Cli,
    /// Direct database access (`cairn` without `--server`): the operating
    /// system's user, which no policy binds.
    Local,
    /// An inbound webhook (`POST /v1/hooks/NAME`), checked by its own
    /// token or signature.
    Hook,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Api => "api",
            Via::Console => "console",
            Via::Link => "link",
            Via::Cli => "cli",
            Via::Local => "local",
            Via::Hook => "hook",
        }
    }
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an action came from, recorded beside its actor's name (each part
/// written only when known, so events from before principals read back
/// unchanged). An event whose actor has a `via` is also an audit entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// The token's public id (`Principal::token_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The client's address, as the server saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// What the request's body said in `by`: kept as a note, never as the actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Origin {
    pub fn is_empty(&self) -> bool {
        self == &Origin::default()
    }
}

/// One audit entry: a decision, a refusal or a change, who made it and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Counts up in the order entries were stored.
    pub id: i64,
    pub at: DateTime<Utc>,
    pub principal: String,
    pub via: Via,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// What happened: an event's kind (`run_retried`, `wait_answered`), or
    /// `principal_added`, `principal_disabled`, `token_rotated`, `refused`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<crate::RunId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_id: Option<crate::WaitId>,
    /// The event's payload, or the change's details.
    pub detail: serde_json::Value,
}

impl AuditEntry {
    /// An entry of `action` by `by`, from where its origin says (`local`
    /// when it does not), about nothing in particular yet: set `run_id` or
    /// `wait_id` with struct update. Its `id` and `at` are the store's.
    pub fn of(by: &crate::Actor, action: &str, detail: serde_json::Value) -> AuditEntry {
        AuditEntry {
            id: 0,
            at: Utc::now(),
            principal: by.by.clone(),
            via: by.origin.via.unwrap_or(Via::Local),
            token: by.origin.token.clone(),
            client: by.origin.client.clone(),
            action: action.to_owned(),
            run_id: None,
            wait_id: None,
            detail,
        }
    }
}

/// Which audit entries to list, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub principal: Option<String>,
    pub since: Option<DateTime<Utc>>,
    /// Entries after this id (a page's last).
    pub after: Option<i64>,
    pub limit: Option<u32>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn levels_include_the_ones_below() {
        assert!(Access::Admin.covers(Access::Operator));
        assert!(Access::Operator.covers(Access::Viewer));
        assert!(!Access::Viewer.covers(Access::Operator));
        assert!(!Access::Operator.covers(Access::Admin));
        assert_eq!("operator".parse::<Access>(), Ok(Access::Operator));
        assert!("root".parse::<Access>().is_err());
    }

    #[test]
    fn names_are_plain_ascii_without_separators() {
        for ok in ["ana", "ci-bot", "ana.b@example.com", "a_1"] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "ana b", "group:x", "ana\u{200b}", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_bound_principal_submits_only_as_its_tenants() {
        let acme = Tenant::new("acme").unwrap();
        let other = Tenant::new("other").unwrap();
        let mut p = Principal {
            name: "svc".into(),
            role: Access::Operator,
            groups: vec![],
            tenants: vec![],
            email: None,
            token_id: "t".into(),
            created_at: Utc::now(),
            created_by: "root".into(),
            disabled_at: None,
        };
        assert!(p.may_submit_as(None) && p.may_submit_as(Some(&other)));
        p.tenants = vec![acme.clone()];
        assert!(p.may_submit_as(Some(&acme)));
        assert!(!p.may_submit_as(Some(&other)));
        assert!(!p.may_submit_as(None));
    }

    #[test]
    fn an_email_is_checked_as_far_as_a_relay_needs() {
        for ok in ["ana@example.com", "a.b+c@mail.example.org"] {
            assert_eq!(check_email(ok), Ok(()), "{ok}");
        }
        for bad in [
            "ana",
            "@example.com",
            "ana@localhost",
            "a b@x.io",
            "a@x.io>",
            "a@b@c.io",
        ] {
            assert!(check_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_empty_origin_writes_nothing() {
        assert_eq!(
            serde_json::to_value(Origin::default()).unwrap(),
            serde_json::json!({})
        );
    }
}
