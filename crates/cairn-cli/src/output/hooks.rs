//! What `cairn hooks` prints.

use std::io::Write;

use cairn::{Hook, HookIssued};

use super::{json_or_text, print_deleted_as};

pub fn print_issued(issued: &HookIssued, json: bool) -> anyhow::Result<()> {
    json_or_text(issued, json, |out| {
        let h = &issued.hook;
        writeln!(
            out,
            "hook `{}` ({}): POST /v1/hooks/{}",
            h.name, h.scheme, h.name
        )?;
        writeln!(out, "secret (shown once): {}", issued.secret)?;
        Ok(())
    })
}

pub fn print_hooks(hooks: &[Hook], json: bool) -> anyhow::Result<()> {
    json_or_text(hooks, json, |out| {
        writeln!(out, "{:<24}  {:<8}  signal / target", "name", "scheme")?;
        for h in hooks {
            writeln!(
                out,
                "{:<24}  {:<8}  {} / {}",
                h.name, h.scheme, h.signal, h.target
            )?;
        }
        Ok(())
    })
}

pub fn print_deleted(name: &str, json: bool) -> anyhow::Result<()> {
    print_deleted_as(name, json, &format!("deleted hook `{name}`"))
}
