//! `cairn principals …` and `cairn audit`: people and services, and what
//! they did. Locally (direct database access) these are admin paths, and
//! what they change is audited as the operating system's user, `via: local`.

use cairn::{Access, AuditFilter, NewPrincipal};

use super::Connect;
use crate::api::Api;
use crate::args::{AuditArgs, PrincipalsCommand};
use crate::input::usage;
use crate::output::people::{print_audit, print_disabled, print_issued, print_principals};
use crate::report::exit;

pub async fn principals(
    to: &impl Connect,
    command: PrincipalsCommand,
    json: bool,
) -> anyhow::Result<u8> {
    match command {
        PrincipalsCommand::Add {
            name,
            role,
            groups,
            tenants,
            email,
        } => {
            let new = new_principal(name, &role, groups, tenants)?;
            let new = NewPrincipal { email, ..new };
            // A principal may be added before anything ran: the database
            // is created, as a submit would.
            let issued = to.connect(true).await?.add_principal(&new).await?;
            print_issued(&issued, "added", json)?;
        }
        PrincipalsCommand::List => {
            let list = to.connect(false).await?.principals().await?;
            print_principals(&list, json)?;
        }
        PrincipalsCommand::Disable { name } => {
            let p = to.connect(false).await?.disable_principal(&name).await?;
            print_disabled(&p, json)?;
        }
        PrincipalsCommand::Rotate { name } => {
            let issued = to.connect(false).await?.rotate_token(&name).await?;
            print_issued(&issued, "new token for", json)?;
        }
    }
    Ok(exit::OK)
}

/// The principal the flags describe; a role or tenant that does not read
/// is a usage error naming it.
fn new_principal(
    name: String,
    role: &str,
    groups: Vec<String>,
    tenants: Vec<String>,
) -> anyhow::Result<NewPrincipal> {
    let role = role
        .parse::<Access>()
        .map_err(|e| usage(format!("--role: {e}")))?;
    let tenants = tenants
        .into_iter()
        .map(cairn::Tenant::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| usage(format!("--tenant: {e}")))?;
    Ok(NewPrincipal {
        name,
        role,
        groups,
        tenants,
        email: None,
    })
}

pub async fn audit(to: &impl Connect, args: AuditArgs, json: bool) -> anyhow::Result<u8> {
    let since = args.since.as_deref().map(since).transpose()?;
    let filter = AuditFilter {
        principal: args.principal,
        since,
        after: None,
        limit: args.limit,
    };
    let entries = to.connect(false).await?.audit(&filter).await?;
    print_audit(&entries, json)?;
    Ok(exit::OK)
}

/// `--since`: an RFC 3339 time, or an age before now (`10m`, `7d`).
fn since(text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let age = cairn::parse_age(text).map_err(|e| {
        usage(format!(
            "--since: `{text}` is neither a time (2026-11-29T09:00:00Z) nor an age: {e}"
        ))
    })?;
    let age = chrono::Duration::from_std(age).map_err(|e| usage(format!("--since: {e}")))?;
    Ok(chrono::Utc::now() - age)
}
