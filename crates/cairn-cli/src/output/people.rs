//! What `cairn principals` and `cairn audit` print.

use std::io::Write;

use cairn::{AuditEntry, Issued, Principal};

use super::{chrono_secs, json_or_text, print_json, text_out};

pub fn print_issued(issued: &Issued, what: &str, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(issued);
    }
    let p = &issued.principal;
    let mut out = text_out();
    writeln!(out, "{what} {} ({})", p.name, describe(p))?;
    writeln!(out, "token: {}", issued.token)?;
    eprintln!(
        "The token is shown this once (only its digest is stored): give it to {} now. \
         `cairn principals rotate {}` issues another.",
        p.name, p.name
    );
    Ok(())
}

/// A principal's role, groups and tenants, in a few words.
fn describe(p: &Principal) -> String {
    let mut parts = vec![p.role.to_string()];
    if !p.groups.is_empty() {
        parts.push(format!("groups {}", p.groups.join(", ")));
    }
    if !p.tenants.is_empty() {
        let tenants: Vec<&str> = p.tenants.iter().map(cairn::Tenant::as_str).collect();
        parts.push(format!("tenants {}", tenants.join(", ")));
    }
    parts.join("; ")
}

/// `principals disable`: the principal as it now stands.
pub fn print_disabled(p: &Principal, json: bool) -> anyhow::Result<()> {
    match json {
        true => print_json(p),
        false => Ok(writeln!(text_out(), "disabled {}", p.name)?),
    }
}

pub fn print_principals(list: &[Principal], json: bool) -> anyhow::Result<()> {
    json_or_text(&list, json, |out| {
        writeln!(
            out,
            "{:<20}  {:<8}  {:<12}  {:<10}  groups / tenants",
            "name", "role", "token id", "state"
        )?;
        for p in list {
            let state = if p.is_disabled() {
                "disabled"
            } else {
                "active"
            };
            let rest = describe(p);
            let rest = rest.split_once("; ").map_or("", |(_, r)| r);
            writeln!(
                out,
                "{:<20}  {:<8}  {:<12}  {:<10}  {}",
                p.name,
                p.role.as_str(),
                p.token_id,
                state,
                rest
            )?;
        }
        Ok(())
    })
}

pub fn print_audit(entries: &[AuditEntry], json: bool) -> anyhow::Result<()> {
    json_or_text(&entries, json, |out| {
        for e in entries {
            let on = match (e.run_id, e.wait_id) {
                (_, Some(wait)) => format!(" wait {wait}"),
                (Some(run), None) => format!(" run {run}"),
                (None, None) => match e.detail.get("name").and_then(|n| n.as_str()) {
                    Some(name) => format!(" {}", cairn::text::printable_line(name)),
                    None => String::new(),
                },
            };
            let note = e.detail.get("note").and_then(|n| n.as_str());
            let note = note.map_or(String::new(), |n| {
                format!(" (said `by`: {})", cairn::text::printable_line(n))
            });
            writeln!(
                out,
                "{:>5}  {}  {} via {}  {}{on}{note}",
                e.id,
                e.at.to_rfc3339_opts(chrono_secs(), true),
                cairn::text::printable_line(&e.principal),
                e.via,
                e.action,
            )?;
        }
        Ok(())
    })
}
